"""Distribution strategies: Horovod, MultiWorkerMirrored and parameter servers on 2 hosts x 1
process, against one process, on the digits MLP and the small CNN (issue 25).

Every job is what ``trainpipe train --local --distribution <s>`` runs
(``pipeline.local.jobs.train_local.run_training_job``: the training bundle, the runner's
launch: mpirun for Horovod, TF_CONFIG per host and a parameter server per host for the
others), on File channels:

- ``one_process``: Horovod's entrypoint, 1 host x 1 rank, batch ``2B`` (the baseline: the
  same global batch, so the same updates as two synchronous workers at ``B``);
- ``horovod``: 2 hosts x 1 rank, ``B`` each, ShardedByS3Key;
- ``mirrored``: 2 hosts, MultiWorkerMirroredStrategy, ``B`` each, ShardedByS3Key;
- ``parameter_server``: 2 hosts (the chief coordinates, one worker trains), ``B`` per
  update, FullyReplicated (ShardedByS3Key is refused for it: the chief reads no data).
- ``--explore`` adds ``mirrored_keras_step``: mirrored with Keras's own training step
  (``TRAINPIPE_MIRRORED_LEAN_STEP=0``: before ``strategies.lean_steps``), and
  ``mirrored_before``: that and TensorFlow's default threads in every process
  (``TRAINPIPE_RANK_THREADS=default``: before ``tf_tasks.local_launch``).

Figures, per workload: samples/s (the entrypoint's metric line, median of the epochs after
the first; best-of-n over ``--repeats`` interleaved repetitions, ``harness.best``); test
accuracy after every epoch, the same epochs for all (every epoch's checkpoint is kept by a
wrapper around train.py and scored afterwards on the test split by one process, the same
code for every strategy); seconds to the accuracy threshold: the training seconds (from the
metric lines: start-up, checkpoint writes and export excluded) of the epochs up to the first
whose test accuracy reaches ``--threshold`` (``THRESHOLDS``: the pipeline's
AccuracyThreshold default for the CNN, 0.98 for the MLP), fewest over the repetitions. The
job's wall time is printed beside them.

The digits MLP's data are the digits tiled ``--replicate`` times before the split, so its
test split repeats training images: its accuracies are optimistic and only comparable with
each other. The CNN's PNG tree has each image once.

    .venv/bin/python -m benchmarks.training.strategies [--workloads mlp cnn] [--repeats 2] [--explore]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import harness as h
from training_entry import contract

WORKLOADS = {
    "mlp": {},
    "cnn": {contract.HP_MODEL_ARCHITECTURE: contract.ARCH_SMALL_CNN, contract.HP_IMAGE_SIZE: 32,
            contract.HP_AUGMENTATION: "crop"},
}
STRATEGY_OF = {"one_process": contract.STRATEGY_HOROVOD, "horovod": contract.STRATEGY_HOROVOD,
               "mirrored": contract.STRATEGY_MIRRORED, "parameter_server": contract.STRATEGY_PARAMETER_SERVER,
               "mirrored_keras_step": contract.STRATEGY_MIRRORED, "mirrored_before": contract.STRATEGY_MIRRORED}
# --explore: mirrored as it was before this benchmark's fixes, one fix at a time.
BEFORE_ENV = {"mirrored_keras_step": {"TRAINPIPE_MIRRORED_LEAN_STEP": "0"},
              "mirrored_before": {"TRAINPIPE_MIRRORED_LEAN_STEP": "0", "TRAINPIPE_RANK_THREADS": "default"}}
# Per workload: epochs, and the test accuracy timed to. The CNN's is the pipeline's
# AccuracyThreshold default (synchronous pairs reached it at epoch 7 of 10, one process at 9);
# the MLP passes 0.9 within its first epoch in every layout (that would time only the first
# epoch's graph tracing), 0.98 at epoch 2-3.
EPOCHS = {"mlp": 4, "cnn": 10}
THRESHOLDS = {"mlp": 0.98, "cnn": 0.9}
SHORT = {"parameter_server": "ps"}  # RESULT names: strategies_ps_vs_horovod
ENTRY = "keep_checkpoints.py"
# train.py with every epoch's checkpoint kept (checkpoints.save prunes to the newest two).
ENTRY_SOURCE = '''"""benchmarks/training/strategies.py: train.py keeping every epoch's checkpoint, to score each."""
import os, runpy, sys
from training_entry.run import checkpoints
_prune = checkpoints.prune
checkpoints.prune = lambda root, keep=0: _prune(root, 1 << 30)
sys.argv[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")
runpy.run_path(sys.argv[0], run_name="__main__")
'''


@dataclass
class Job:
    """One finished job: per-epoch samples/s, the chief's checkpoints, wall seconds."""

    layout: str
    wall: float
    samples_per_sec: dict[int, float]
    checkpoints: Path  # epoch-NNNNNN directories, scored later
    accuracy: dict[int, float] = field(default_factory=dict)

    def steady(self) -> float:
        values = [v for e, v in sorted(self.samples_per_sec.items()) if e > 1]
        return h.median(values)

    def seconds_to(self, threshold: float, records: int) -> float:
        """Training seconds of the epochs up to the first at ``threshold`` (inf: never)."""
        total = 0.0
        for epoch in sorted(self.samples_per_sec):
            total += records / self.samples_per_sec[epoch]
            if self.accuracy.get(epoch, 0.0) >= threshold:
                return total
        return float("inf")


def layouts(explore: bool) -> list[str]:
    names = ["one_process", "horovod", "mirrored", "parameter_server"]
    return names + (list(BEFORE_ENV) if explore else [])


def job_spec(layout: str, splits: dict[str, Path], code: Path, batch: int, epochs: int,
             workload: str, name: str):
    """The ``train --local`` request of one layout (what its flags would be)."""
    from pipeline.local.jobs.train_local import TrainSpec
    from training_entry.contract import CHANNEL_MANIFEST, CHANNEL_TRAIN

    strategy = STRATEGY_OF[layout]
    one = layout == "one_process"
    sharding = "FullyReplicated" if strategy == contract.STRATEGY_PARAMETER_SERVER else "ShardedByS3Key"
    hyperparameters = {contract.HP_EPOCHS: epochs, contract.HP_BATCH_SIZE: 2 * batch if one else batch,
                       contract.HP_WARMUP_EPOCHS: 1, contract.HP_SEED: 42, **WORKLOADS[workload]}
    env = dict(BEFORE_ENV.get(layout, {}))
    return TrainSpec(
        entry_point=ENTRY, source_dir=str(code), instances=1 if one else 2,
        processes_per_host=1 if strategy == contract.STRATEGY_HOROVOD else None,
        channels=[f"{CHANNEL_TRAIN}={splits[CHANNEL_TRAIN]}:File:{sharding}",
                  f"{CHANNEL_MANIFEST}={splits[CHANNEL_MANIFEST]}:File:FullyReplicated"],
        hyperparameters={k: json.dumps(v) for k, v in hyperparameters.items()}, env=env, job_name=name)


def write_code(work: Path) -> Path:
    """The pipeline's training bundle (``bundles.training_bundle``) as files, plus ENTRY."""
    from pipeline.definition.bundles import training_bundle

    code = work / "code"
    shutil.rmtree(code, ignore_errors=True)
    for path, content in training_bundle().files.items():
        (code / path).parent.mkdir(parents=True, exist_ok=True)
        (code / path).write_bytes(content)
    (code / ENTRY).write_text(ENTRY_SOURCE)
    return code


def run_job(layout: str, work: Path, splits: dict[str, Path], code: Path, args, workload: str) -> Job:
    from pipeline.local.jobs.train_local import run_training_job
    from pipeline.local.store.storage import LocalStorage
    from pipeline.settings import Settings

    name = f"{workload}-{layout.replace('_', '-')}-{time.monotonic_ns()}"
    spec = job_spec(layout, splits, code, args.batch, args.epochs, workload, name)
    result = run_training_job(spec, Settings(distribution=STRATEGY_OF[layout]), LocalStorage(work / "store"),
                              work, echo=False)
    chief = result.job_dir / "hosts" / "algo-1"
    logs = sorted((result.job_dir / "logs").glob("algo-1*.log"))
    text = "".join(p.read_text(errors="replace") for p in logs)
    if result.status != "Completed":
        raise RuntimeError(f"{name}: {result.status}: {result.failure_reason}")
    rates = {int(e): float(v) for e, v in re.findall(r"trainpipe-metrics epoch=(\d+) .*?samples_per_sec=(\S+)", text)}
    kept = work / "checkpoints" / name
    shutil.copytree(chief / "checkpoints", kept)
    shutil.rmtree(result.job_dir, ignore_errors=True)
    return Job(layout, result.duration, rates, kept)


# --- Scoring every kept checkpoint on the test split (one process, after the jobs) -------------
def score(request: dict) -> dict:
    """{checkpoint dir: {epoch: test accuracy}}: each epoch's weights restored into the model
    the entrypoint builds, evaluated on the test split as the entrypoint reads an evaluation
    channel. ``request``: test, manifest, hyperparameters, checkpoints."""
    import dataclasses
    import tempfile

    import tensorflow as tf

    from training_entry import config
    from training_entry.input import datasets, records
    from training_entry.input.context import InputContext
    from training_entry.input.plan import Layout, load_manifest, plan_channel
    from training_entry.model import architectures
    from training_entry.run import checkpoints

    hp = config.Hyperparameters(**request["hyperparameters"])
    test = config.Channel("test", "File", "FullyReplicated", request["test"])
    manifest = load_manifest(config.Channel(contract.CHANNEL_MANIFEST, "File", "FullyReplicated",
                                            request["manifest"]), "test")
    image_size = hp.image_size if manifest.kind == records.KIND_IMAGE else None
    plan = plan_channel(test, manifest, Layout(0, 1, 0, 1), 256)
    ctx = InputContext(hosts=config.Hosts("algo-1", ("algo-1",)), fifo_dir="", config_dir="",
                       private_dir=tempfile.mkdtemp(), num_features=manifest.num_features, seed=0,
                       image_size=image_size, augmentation=hp.augmentation)
    model = architectures.build(
        architectures.resolve(hp.model_architecture, manifest.kind, None), num_classes=manifest.num_classes,
        image_size=image_size, num_features=manifest.num_features, feature_mean=manifest.feature_mean,
        feature_std=manifest.feature_std, hyperparameters=dataclasses.asdict(hp))
    predict = tf.function(lambda x: tf.argmax(model(x, training=False), axis=-1))
    out = {}
    for directory in request["checkpoints"]:
        out[directory] = {}
        for found in checkpoints.complete(directory):
            # The model's weights only (the optimizer's slots and the epoch count stay unread).
            tf.train.Checkpoint(model=model).read(found.prefix).expect_partial()
            correct = total = 0
            for x, y in datasets.validation_dataset(plan, ctx).take(plan.steps):
                correct += int(tf.reduce_sum(tf.cast(predict(x) == tf.cast(y, tf.int64), tf.int64)))
                total += int(tf.size(y))
            out[directory][found.epoch] = correct / max(total, 1)
    ctx.cleanup()
    return out


def score_jobs(jobs: list[Job], splits: dict[str, Path], workload: str) -> None:
    """``score`` in a process of its own (TensorFlow stays out of this one)."""
    hps = {k.replace("-", "_"): v for k, v in WORKLOADS[workload].items()}
    request = {"test": str(splits["test"]), "manifest": str(splits["manifest"]), "hyperparameters": hps,
               "checkpoints": [str(job.checkpoints) for job in jobs]}
    proc = subprocess.run([h.PYTHON, "-m", "benchmarks.training.strategies", "--score", json.dumps(request)],
                          cwd=h.REPO, env=h.quiet_env(), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"scoring failed:\n{proc.stderr[-3000:]}")
    scores = json.loads(proc.stdout.strip().splitlines()[-1])
    for job in jobs:
        job.accuracy = {int(e): a for e, a in scores[str(job.checkpoints)].items()}


# --- The runs and the report ---------------------------------------------------------------------
def measure(workload: str, args) -> tuple[dict[str, list[Job]], int]:
    work = h.work_dir("strategies")
    splits = h.preprocess_images(work, 2) if workload == "cnn" else h.preprocess(work, args.replicate, 2)
    code = write_code(work)
    records = h.records_of(splits["manifest"], "train")
    names = layouts(args.explore)
    h.say(f"strategies, {workload}: {records} training records, {args.epochs} epochs, batch {args.batch} "
          f"per worker ({2 * args.batch} for one_process); {args.repeats} interleaved repetitions of "
          f"{', '.join(names)}")
    jobs: dict[str, list[Job]] = {name: [] for name in names}

    def candidate(name: str):
        def run() -> float:
            try:
                job = run_job(name, work, splits, code, args, workload)
            except Exception as error:  # one failed layout must not lose the others
                h.say(f"  {name}: FAILED {str(error).splitlines()[0]}")
                return float("nan")
            jobs[name].append(job)
            per_epoch = " ".join(f"{v:.0f}" for _, v in sorted(job.samples_per_sec.items()))
            h.say(f"  {name:20s} steady {job.steady():8.0f} samples/s   wall {job.wall:5.1f}s   per epoch: {per_epoch}")
            return job.steady()
        return run

    h.interleave({name: candidate(name) for name in names}, args.repeats)
    score_jobs([j for runs in jobs.values() for j in runs], splits, workload)
    return jobs, records


def report(workload: str, jobs: dict[str, list[Job]], records: int, args) -> None:
    rate = {name: h.best(j.steady() for j in runs) for name, runs in jobs.items()}
    h.say("")
    h.say(f"  {'layout':20s} {'samples/s median [min..max]':34s} {'best':>8s} {'/1 proc':>7s} {'/horovod':>8s} "
          f"{'wall s':>6s}  test accuracy per epoch (median)   s to {args.threshold:g}")
    accuracy, seconds = {}, {}
    for name, runs in jobs.items():
        if not runs:
            h.say(f"  {name:20s} failed")
            continue
        epochs = sorted({e for j in runs for e in j.accuracy})
        curve = [h.median(j.accuracy[e] for j in runs if e in j.accuracy) for e in epochs]
        accuracy[name] = curve[-1] if curve else float("nan")
        seconds[name] = min(j.seconds_to(args.threshold, records) for j in runs)
        h.say(f"  {name:20s} {h.spread([j.steady() for j in runs]):34s} {rate[name]:8.0f} "
              f"{rate[name] / rate['one_process']:7.2f} {rate[name] / rate['horovod']:8.2f} "
              f"{h.median(j.wall for j in runs):6.1f}  {' '.join(f'{a:.3f}' for a in curve):32s} "
              f"{seconds[name]:.2f}")
    h.say("  (best: fastest repetition; seconds to the threshold: training time of the epochs up to the "
          "first at it, inf = not reached)")
    h.result(f"strategies_mirrored_vs_horovod_{workload}", rate["mirrored"] / rate["horovod"], 0.9)
    h.result(f"strategies_ps_vs_horovod_{workload}", rate["parameter_server"] / rate["horovod"], "-")
    for name in BEFORE_ENV:
        if name in rate:
            h.result(f"strategies_{name}_vs_horovod_{workload}", rate[name] / rate["horovod"], "-")
    for name in ("one_process", "horovod", "mirrored", "parameter_server"):
        short = SHORT.get(name, name)
        h.result(f"strategies_{short}_samples_per_s_{workload}", rate[name], "-")
        if name in accuracy:
            h.result(f"strategies_{short}_accuracy_{workload}", accuracy[name], "-")
            h.result(f"strategies_{short}_seconds_to_threshold_{workload}", seconds[name], "-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.training.strategies", description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=["mlp", "cnn"])
    parser.add_argument("--replicate", type=int, default=4, help="digits copies for the MLP (1797 records each)")
    parser.add_argument("--epochs", type=int, help=f"default per workload: {EPOCHS}")
    parser.add_argument("--batch", type=int, default=32, help="per worker (one_process: twice this)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repetitions of every layout")
    parser.add_argument("--threshold", type=float, help=f"test accuracy; default per workload: {THRESHOLDS}")
    parser.add_argument("--explore", action="store_true", help="also mirrored with Keras's own training step")
    parser.add_argument("--score", help=argparse.SUPPRESS)  # internal: score_jobs' child process
    args = parser.parse_args(argv)
    if args.score:
        print(json.dumps(score(json.loads(args.score))))
        return 0
    started = time.perf_counter()
    for workload in args.workloads:
        chosen = argparse.Namespace(**{**vars(args), "epochs": args.epochs or EPOCHS[workload],
                                       "threshold": args.threshold or THRESHOLDS[workload]})
        jobs, records = measure(workload, chosen)
        report(workload, jobs, records, chosen)
    shutil.rmtree(h.work_dir("strategies") / "checkpoints", ignore_errors=True)
    h.say(f"  ({time.perf_counter() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
