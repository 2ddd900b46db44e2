"""Transform (batch transform) records/s on 1 and 2 instances, as a ratio in one run.

    .venv/bin/python -m benchmarks.serving.transform                       # what make bench runs
    .venv/bin/python -m benchmarks.serving.transform --replicate 4 --repeats 1   # a quick look

The job is the local runner's own (``pipeline.local.jobs.transform.TransformJob``, what a
Transform step runs): the digits MLP (64 features, 10 named classes, fitted one epoch) as a
SageMaker TensorFlow Serving ``model.tar.gz`` in a local object store, and digits x
``--replicate`` as CSV rows without a header or label, in ``--objects`` objects under one
prefix. The request is what the SDK's ``Transformer`` sends for a CSV folder:
``ContentType text/csv``, ``SplitType Line``, ``BatchStrategy MultiRecord`` with
``MaxPayloadInMB`` ``--max-payload``, ``Accept application/json``, ``AssembleWith Line``.
Each instance is a ``python -m serving.server`` process; the objects are split across them
whole (``InstanceCount`` 2: half the objects each).

Two figures per run, each records / seconds:
- ``job``: the whole ``TransformJob.run()``, server start-up (importing TensorFlow, loading the
  model) included: what a user waits for;
- ``records phase``: from the moment every instance answers ``/ping`` to the end: the
  instances' throughput alone.
1 and 2 instances alternate (``harness.interleave``), ``--repeats`` each; the headline is the
ratio of medians, ``RESULT transform_2_vs_1_instances``. Every run's outputs must be
byte-identical to the first's (the split changes where a record is scored, not its answer),
and hold one prediction per record.

What to expect on the 2-core reference machine: the two instances share those two cores
(and the benchmark process, which reads and writes the objects, a third claimant), and most
of an instance's time is CPU (parsing CSV text into floats, the model, JSON out). So 2
instances cannot be twice as fast here: a ratio near 1 says the job is CPU-bound on this
machine, not that splitting is broken; the start-up of two TensorFlow servers at once also
costs more than one. On SageMaker each instance is a machine of its own, and records/s grows
with ``InstanceCount`` up to the number of input objects.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tarfile
import time
from pathlib import Path

from benchmarks import harness as h

BUCKET = "transform-bench"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.14-cpu"
MODEL_URI = f"s3://{BUCKET}/model/model.tar.gz"
INPUT_PREFIX = f"s3://{BUCKET}/in/"
READY_LINE = "instance(s):"  # TransformJob says "<n> object(s) on <m> instance(s): ..." once all answer /ping


def save_model(work: Path) -> Path:
    """The digits MLP as training saves it, packed as model.tar.gz (``1/saved_model.pb``)."""
    from benchmarks.serving.serve_load import save_digits_mlp

    folder = work / "mlp"
    shutil.rmtree(folder, ignore_errors=True)
    save_digits_mlp(folder)
    archive = work / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "1", "1")
    return archive


def write_input(storage, replicate: int, objects: int) -> int:
    """digits x ``replicate`` as CSV rows in ``objects`` objects; returns the record count."""
    x, _ = h.digits_arrays(replicate)
    lines = [",".join(f"{v:g}" for v in row) for row in x]
    per = -(-len(lines) // objects)
    for index in range(objects):
        part = lines[index * per:(index + 1) * per]
        storage.put_bytes(("\n".join(part) + "\n").encode(), f"{INPUT_PREFIX}part-{index:03d}.csv")
    return len(lines)


def request(instances: int, output: str, max_payload: int) -> dict:
    return {
        "ModelName": "bench",
        "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": INPUT_PREFIX}},
                           "ContentType": "text/csv", "SplitType": "Line"},
        "TransformOutput": {"S3OutputPath": output, "Accept": "application/json", "AssembleWith": "Line"},
        "TransformResources": {"InstanceCount": instances, "InstanceType": "ml.m5.large"},
        "BatchStrategy": "MultiRecord", "MaxPayloadInMB": max_payload,
    }


class Bench:
    """One Transform job per call, on ``instances`` instances; keeps what each run measured."""

    def __init__(self, work: Path, storage, records: int, max_payload: int):
        self.work, self.storage, self.records, self.max_payload = work, storage, records, max_payload
        self.phase: dict[int, list[float]] = {}
        self.reference: dict[str, bytes] | None = None
        self.runs = 0

    def __call__(self, instances: int) -> float:
        from pipeline.local.jobs.transform import TransformJob

        self.runs += 1
        output = f"s3://{BUCKET}/out/run-{self.runs}"
        ready: list[float] = []

        def echo(line: str) -> None:
            if READY_LINE in line and not ready:
                ready.append(time.perf_counter())

        job_dir = self.work / f"job-{self.runs}"
        job = TransformJob(request(instances, output, self.max_payload), f"bench-{self.runs}", self.storage,
                           job_dir, model={"kind": "tfs", "Image": IMAGE, "ModelDataUrl": MODEL_URI},
                           region="us-east-1", account="111122223333", echo=echo,
                           # The servers' job environment, made by the first run and kept, as
                           # the runner keeps it under the workdir.
                           environments=self.work / "job-environments")
        started = time.perf_counter()
        result = job.run()
        ended = time.perf_counter()
        if result.status != "Completed":
            raise RuntimeError(f"{instances} instance(s): {result.status}: {result.failure_reason}")
        self._check(output)
        shutil.rmtree(job_dir, ignore_errors=True)
        phase = self.records / (ended - ready[0])
        self.phase.setdefault(instances, []).append(phase)
        rate = self.records / (ended - started)
        h.say(f"  {instances} instance(s): job {ended - started:.1f} s ({rate:.0f} records/s), "
              f"start-up {ready[0] - started:.1f} s, records phase {ended - ready[0]:.1f} s ({phase:.0f} records/s)")
        return rate

    def _check(self, output: str) -> None:
        """One prediction line per record, and the same bytes as the first run's."""
        outputs = {uri.removeprefix(output): self.storage.read_bytes(uri)
                   for uri in self.storage.list(output + "/")}
        if self.reference is None:
            self.reference = outputs
        if outputs != self.reference:
            raise RuntimeError(f"{output}: the outputs differ from the first run's")
        if not all(body.startswith(b'{"predictions":[{"probabilities":') for body in outputs.values()):
            raise RuntimeError(f"{output}: an output is not TF Serving's predictions")
        predictions = sum(body.count(b'"classes"') for body in outputs.values())
        if predictions != self.records:
            raise RuntimeError(f"{output}: {predictions} predictions for {self.records} records")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.serving.transform", description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=32, help="digits copies (1797 records each)")
    parser.add_argument("--objects", type=int, default=8, help="input objects (split whole across instances)")
    parser.add_argument("--max-payload", type=int, default=1, help="MaxPayloadInMB of each request")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from pipeline.local.store.storage import LocalStorage

    work = h.work_dir("transform")
    shutil.rmtree(work / "store", ignore_errors=True)
    storage = LocalStorage(work / "store")
    storage.put_file(save_model(work), MODEL_URI)
    records = write_input(storage, args.replicate, args.objects)
    h.say(f"{records} records (digits x {args.replicate}, 64 features) in {args.objects} CSV objects; "
          f"MultiRecord, MaxPayloadInMB {args.max_payload}; {args.repeats} interleaved runs each")
    bench = Bench(work, storage, records, args.max_payload)
    rates = h.interleave({"1": lambda: bench(1), "2": lambda: bench(2)}, args.repeats)
    for n in ("1", "2"):
        h.say(f"{n} instance(s): job {h.spread(rates[n])} records/s; records phase "
              f"{h.spread(bench.phase[int(n)])} records/s")
    h.result("transform_1_instance_records_per_s", h.median(rates["1"]), "-")
    h.result("transform_2_instances_records_per_s", h.median(rates["2"]), "-")
    h.result("transform_2_vs_1_instances", h.median(rates["2"]) / h.median(rates["1"]), "-")
    h.result("transform_2_vs_1_instances_records_phase",
             h.median(bench.phase[2]) / h.median(bench.phase[1]), "-")
    shutil.rmtree(work / "store", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
