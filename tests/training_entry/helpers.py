"""Builders for the training tests: digits shards, per-host /opt/ml trees, Pipe feeders, mpirun.

The trees and the SM_* environment come from ``pipeline.local.jobs.contract`` (the same code the
local runner uses), so these runs see exactly what a SageMaker training container sees.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.local.jobs import contract as local
from training_entry.contract import (
    CHANNEL_INIT,
    CHANNEL_MANIFEST,
    CHANNEL_TRAIN,
    CHANNEL_VALIDATION,
)
from training_entry.input import records

REPO = Path(__file__).resolve().parents[2]
TRAIN_PY = REPO / "training_entry" / "train.py"
INSTANCE_TYPE = "ml.c5.xlarge"


# --- Data --------------------------------------------------------------------------------------
def make_splits(root: Path, shard_count: int, seed: int = 0) -> dict[str, Path]:
    """Run processing on scikit-learn's digits: {train, validation, test, manifest: dir}."""
    from sklearn.datasets import load_digits

    from processing import contract as processing
    from processing import preprocess

    digits = load_digits()
    base = root / "processing-ml"
    raw = Path(local.relocate(processing.RAW_DATA_DIR, base))
    raw.mkdir(parents=True, exist_ok=True)
    np.savez(raw / "digits.npz", x=digits.data.astype(np.float32), y=digits.target.astype(np.int64))
    previous = os.environ.get("SAGEMAKER_BASE_DIR")
    os.environ["SAGEMAKER_BASE_DIR"] = str(base)
    try:
        rc = preprocess.main(
            ["--instance-count", "1", "--processes-per-host", str(shard_count), "--seed", str(seed)]
        )
    finally:
        if previous is None:
            del os.environ["SAGEMAKER_BASE_DIR"]
        else:
            os.environ["SAGEMAKER_BASE_DIR"] = previous
    assert rc == 0, "processing failed"
    return {name: Path(local.relocate(path, base)) for name, path in processing.OUTPUT_DIRS.items()}


def shard_paths(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if records.is_shard_name(p.name))


# --- One training job: a tree per host -----------------------------------------------------
@dataclass
class Job:
    root: Path
    hosts: list[str]
    ranks_per_host: int
    mode: str
    distribution: str
    hyperparameters: dict[str, str]  # raw, as in hyperparameters.json
    splits: dict[str, Path]
    bases: dict[str, Path] = field(default_factory=dict)
    envs: dict[str, dict[str, str]] = field(default_factory=dict)
    from_bundle: bool = False  # run train.py from the training bundle unpacked in code/

    def base(self, host: str | None = None) -> Path:
        return self.bases[host or self.hosts[0]]

    def model_dir(self, host: str | None = None) -> Path:
        return self.base(host) / "model"

    def checkpoint_dir(self, host: str | None = None) -> Path:
        return self.base(host) / "checkpoints"

    def failure_file(self, host: str | None = None) -> Path:
        return self.base(host) / "output" / "failure"

    def fifo_dir(self, host: str) -> Path:
        return self.base(host) / "input" / "data"

    def host_objects(self, split: str, host: str) -> list[Path]:
        """What SageMaker gives ``host`` of a channel, in sorted key order."""
        shards = shard_paths(self.splits[split])
        if self.distribution == "ShardedByS3Key":
            names = records.host_objects([p.name for p in shards], self.hosts.index(host), len(self.hosts))
            return [self.splits[split] / n for n in names]
        return shards


def raw_hyperparameters(**values) -> dict[str, str]:
    """hyperparameters.json as the SDK writes it for our estimator (json.dumps of each)."""
    hps = {
        "epochs": 2,
        "batch-size": 32,
        "base-learning-rate": 0.002,
        "warmup-epochs": 1,
        "seed": 7,
        "mixed-precision": "off",
        "fp16-allreduce": False,
        "model_dir": "/opt/ml/model",
        "sagemaker_program": "train.py",
        "sagemaker_submit_directory": "/opt/ml/code",
        "sagemaker_mpi_enabled": True,
        "sagemaker_mpi_custom_mpi_options": "",
    }
    hps.update({k.replace("_", "-") if k not in ("model_dir",) else k: v for k, v in values.items()})
    return {k: json.dumps(v) for k, v in hps.items()}


def make_job(
    root: Path,
    splits: dict[str, Path],
    *,
    hosts: int = 1,
    ranks_per_host: int = 2,
    mode: str = "File",
    distribution: str = "ShardedByS3Key",
    validation: bool = True,
    init: Path | None = None,
    from_bundle: bool = False,
    **hyperparameters,
) -> Job:
    """``init``: a directory whose files become the optional ``init`` channel.
    ``from_bundle``: unpack the training bundle (pipeline.definition.bundles) into each host's code/ and
    run ``python train.py`` there, as the SageMaker toolkit does."""
    channels = [CHANNEL_TRAIN] + ([CHANNEL_VALIDATION] if validation else [])
    config = {
        ch: {"TrainingInputMode": mode, "S3DistributionType": distribution, "RecordWrapperType": "None"}
        for ch in channels
    }
    file_replicated = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                       "RecordWrapperType": "None"}
    config[CHANNEL_MANIFEST] = file_replicated
    if init is not None:
        config[CHANNEL_INIT] = file_replicated
    job = Job(root, local.host_names(hosts), ranks_per_host, mode, distribution,
              raw_hyperparameters(**hyperparameters), splits, from_bundle=from_bundle)
    for host in job.hosts:
        base = root / host
        job.bases[host] = base
        spec = dict(current_host=host, hosts=job.hosts, instance_type=INSTANCE_TYPE,
                    hyperparameters=job.hyperparameters, input_data_config=config)
        local.write_training_tree(base, **spec)
        job.envs[host] = local.training_environment(base, job_name="test-job", **spec)
        if mode != "Pipe":
            for ch in channels:
                for shard in job.host_objects(ch, host):
                    shutil.copy(shard, base / "input" / "data" / ch / shard.name)
        for manifest in splits[CHANNEL_MANIFEST].iterdir():
            shutil.copy(manifest, base / "input" / "data" / CHANNEL_MANIFEST / manifest.name)
        if init is not None:
            shutil.copytree(init, base / "input" / "data" / CHANNEL_INIT, dirs_exist_ok=True)
        if from_bundle:
            from pipeline.definition.bundles import training_bundle

            with tarfile.open(fileobj=io.BytesIO(training_bundle().archive())) as tar:
                tar.extractall(base / "code")
    return job


# --- mpirun ------------------------------------------------------------------------------------
def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_", "TRAINPIPE_"))}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "TF_NUM_INTRAOP_THREADS": "1",
            "TF_NUM_INTEROP_THREADS": "1",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "HOROVOD_CYCLE_TIME": "1",
        }
    )
    env.update(extra or {})
    return env


def mpirun_command(job: Job, script: Path = TRAIN_PY, abort_on_failure: bool = True) -> list[str]:
    """One app context per simulated host, each with its own SM_* environment, launched the
    way SageMaker's toolkit does (``abort_on_failure``: stop the job when any rank exits
    non-zero, as SageMaker asks mpirun to)."""
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-bind-to", "none", "-map-by", "slot",
           "-mca", "btl_vader_single_copy_mechanism", "none", "--tag-output"]
    if abort_on_failure:
        cmd += ["-mca", "orte_abort_on_non_zero_status", "1"]
    for i, host in enumerate(job.hosts):
        if i:
            cmd.append(":")
        args = local.user_command(sys.executable, job.hyperparameters, job.base(host))[2:]
        env = [f"{k}={v}" for k, v in sorted(job.envs[host].items())]
        if job.from_bundle:  # SageMaker: `python train.py ...` in /opt/ml/code, nothing else on the path
            env.append("PYTHONPATH=")
            cmd += ["-np", str(job.ranks_per_host), "-wdir", str(job.base(host) / "code"), "env", *env,
                    sys.executable, "train.py", *args]
        else:
            cmd += ["-np", str(job.ranks_per_host), "env", *env, sys.executable, str(script), *args]
    return cmd


@dataclass
class Result:
    returncode: int
    output: str
    seconds: float

    def metric_lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if "trainpipe-metrics" in line]


def run_job(job: Job, timeout: float = 180, extra_env: dict[str, str] | None = None,
            abort_on_failure: bool = True) -> Result:
    started = time.monotonic()
    proc = subprocess.run(mpirun_command(job, abort_on_failure=abort_on_failure), env=base_env(extra_env), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, cwd=REPO)
    return Result(proc.returncode, proc.stdout, time.monotonic() - started)


def start_job(job: Job, log_path: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    log = open(log_path, "w")  # noqa: SIM115 - the caller's Popen owns it until it exits
    return subprocess.Popen(mpirun_command(job), env=base_env(extra_env), stdout=log,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, start_new_session=True)


def model_accuracy(model_dir: Path, test_dir: Path) -> float:
    """Accuracy of the saved model (``model_dir/1``) on the test split's shards."""
    import tensorflow as tf

    from training_entry.input import examples

    model = tf.keras.models.load_model(str(model_dir / "1"), compile=False)
    serialized = [r for shard in shard_paths(test_dir) for r in records.read_file_records(str(shard))]
    x, y = examples.parse_batch(tf.constant(serialized), model.input_shape[1])
    predicted = np.argmax(model.predict(x, verbose=0), axis=1)
    return float(np.mean(predicted == y.numpy()))


# --- SageMaker's side of Pipe mode ------------------------------------------------------------
class PipeFeeder:
    """For pass n = 0, 1, ...: mkfifo ``<dir>/<channel>_<n>``, wait for a reader, stream
    ``objects`` back to back, close; then the next. Stops after ``passes`` passes or when
    ``stop()`` is called (a reader that never comes must not hang the test)."""

    def __init__(self, fifo_dir: Path, channel: str, objects: list[Path], passes: int,
                 chunk: int = 65536):
        self.fifo_dir = Path(fifo_dir)
        self.channel = channel
        self.objects = objects
        self.passes = passes
        self.chunk = chunk
        self.fed = 0  # passes written to EOF
        self.closed_early = 0  # passes whose reader closed before EOF
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"feeder-{channel}")

    def start(self) -> PipeFeeder:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _open_writer(self, path: Path) -> int | None:
        while not self._stop.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                    raise
                time.sleep(0.005)
                continue
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
            return fd
        return None

    def _run(self) -> None:
        try:
            for n in range(self.passes):
                path = self.fifo_dir / f"{self.channel}_{n}"
                os.mkfifo(path)
                fd = self._open_writer(path)
                if fd is None:
                    return
                try:
                    for obj in self.objects:
                        with open(obj, "rb") as f:
                            while chunk := f.read(self.chunk):
                                view = memoryview(chunk)
                                while view:
                                    view = view[os.write(fd, view):]
                    self.fed += 1
                except BrokenPipeError:
                    self.closed_early += 1
                finally:
                    os.close(fd)
        except BaseException as e:  # surfaced by the test
            self.errors.append(e)


def start_feeders(job: Job, passes: int, channels=(CHANNEL_TRAIN, CHANNEL_VALIDATION)) -> list[PipeFeeder]:
    return [
        PipeFeeder(job.fifo_dir(host), ch, job.host_objects(ch, host), passes).start()
        for host in job.hosts
        for ch in channels
    ]


def make_image_splits(root: Path, shard_count: int, per_split: dict[str, int] | None = None,
                      seed: int = 0) -> dict[str, Path]:
    """The digits as PNG image records (pipeline.data.default's image tree), written straight
    into shards and manifests as processing writes them: {train, validation, test, manifest}.
    ``per_split``: records per split (default: every digit, 70/15/15)."""
    from pipeline.data.default import DIGITS_IMAGE_SIZE, digits_images
    from training_entry.input import examples

    items = sorted(digits_images().items())
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(items))
    n = len(items)
    counts = per_split or {"train": int(n * 0.7), "validation": int(n * 0.15)}
    counts = {**counts, "test": counts.get("test", n - counts["train"] - counts["validation"])}
    class_names = tuple(sorted({key.split("/")[0] for key, _ in items}))
    out = {name: root / name for name in ("train", "validation", "test", CHANNEL_MANIFEST)}
    for path in out.values():
        path.mkdir(parents=True, exist_ok=True)
    start = 0
    for split in ("train", "validation", "test"):
        chosen = order[start:start + counts[split]]
        start += counts[split]
        serialized = []
        for i in chosen:
            key, png = items[i]
            name = key.split("/")[0]
            serialized.append(examples.serialize_image(
                png, class_names.index(name), name, DIGITS_IMAGE_SIZE, DIGITS_IMAGE_SIZE))
        shards = {}
        for index in range(shard_count):
            part = serialized[index::shard_count]
            shard = records.shard_name(split, index, shard_count)
            records.write_records(str(out[split] / shard), part)
            shards[shard] = len(part)
        manifest = records.Manifest(split=split, num_features=0, num_classes=len(class_names),
                                    shards=shards, kind=records.KIND_IMAGE, class_names=class_names)
        (out[CHANNEL_MANIFEST] / records.manifest_name(split)).write_text(manifest.to_json())
    return out
