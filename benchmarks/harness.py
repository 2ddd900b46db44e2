"""What every benchmark shares: data, training trees launched the runner's way, timing, RESULT lines.

Benchmarks run on a shared, noisy machine, so a figure is only worth something next to a
baseline measured in the same run: every script interleaves baseline and candidate
repetitions (A B A B ...). Where noise only slows a run down (a rate on a busy machine), a
headline figure is best-of-n (``best``: the fastest repetition, the minimum time), the
spread (median [min..max]) printed beside it; each script's docstring says which it
reports. Nothing here asserts on a time.

The training runs use the project's own pieces, not copies: ``processing.preprocess`` writes
the shards, ``pipeline.local.jobs.contract`` builds each simulated host's ``/opt/ml`` tree and
``SM_*`` environment, ``pipeline.local.hosts.mpi.prepare`` writes the hostfile / rsh agent and the
``mpirun`` command line exactly as the local runner does, and every rank runs
``training_entry/train.py``.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN_PY = REPO / "training_entry" / "train.py"
PYTHON = sys.executable
RESULT_PREFIX = "RESULT"


# --- Output -------------------------------------------------------------------------------------
def result(name: str, value: float, target: str | float) -> str:
    """The one machine-readable line per headline figure: ``RESULT <name> <value> target <t>``."""
    line = f"{RESULT_PREFIX} {name} {value:.4g} target {target}"
    print(line, flush=True)
    return line


def say(text: str = "") -> None:
    print(text, flush=True)


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def best(values: Iterable[float]) -> float:
    """Best-of-n: the largest finite rate of a figure's repetitions (nan if none).

    On a shared machine noise only ever slows a run down (another process takes a core, a
    scheduler slice, the page cache): no repetition runs faster than the layout can, so the
    fastest is the closest to what the layout does on a quiet machine. It needs one
    undisturbed repetition, where the median needs a majority; and since a synchronous
    multi-rank run loses more to a disturbance (either rank's stall stalls both at the next
    allreduce) than one process does, a ratio of medians mixes the layout's speed with how
    busy the machine was. Taken over the same number of interleaved repetitions for every
    layout compared (more tries would favour one)."""
    finite = [v for v in values if v == v and v not in (float("inf"), float("-inf"))]
    return max(finite) if finite else float("nan")


def best_layout(rates: dict[str, Sequence[float]]) -> tuple[str, float]:
    """The fastest of several layouts by their best-of-n rates (``best``): (name, rate).
    A layout with no finite rate (every run failed) is left out; none at all -> ("", nan)."""
    scored = {name: best(values) for name, values in rates.items()}
    scored = {name: rate for name, rate in scored.items() if rate == rate}
    if not scored:
        return "", float("nan")
    name = max(scored, key=lambda n: scored[n])
    return name, scored[name]


def spread(values: Sequence[float]) -> str:
    """``median [min..max] (n=)`` for a figure's repetitions."""
    if not values:
        return "n/a"
    return f"{median(values):.4g} [{min(values):.4g}..{max(values):.4g}] (n={len(values)})"


def interleave(candidates: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run each candidate ``repeats`` times in rotation (A B C A B C ...): load from the other
    users of the machine then falls on every candidate alike, instead of on whichever ran
    during a busy minute. Returns name -> the values each call returned."""
    out: dict[str, list[float]] = {name: [] for name in candidates}
    for rep in range(repeats):
        # Rotate the starting candidate so none is always first (warm caches, page cache).
        names = list(candidates)
        names = names[rep % len(names):] + names[: rep % len(names)]
        for name in names:
            out[name].append(candidates[name]())
    return out


# --- Machine --------------------------------------------------------------------------------------
def _first_line(argv: list[str]) -> str:
    try:
        text = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        return text.strip().splitlines()[0] if text.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine() -> dict[str, str]:
    """nproc, CPU model, memory, load and the versions every figure depends on."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    versions = subprocess.run(
        [PYTHON, "-c", "import tensorflow as tf, horovod, numpy; "
         "print(tf.__version__, horovod.__version__, numpy.__version__)"],
        capture_output=True, text=True, env=quiet_env(),
    ).stdout.split()
    tf_version, hvd_version, np_version = (versions + ["?", "?", "?"])[:3]
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": memory,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "os": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tf_version,
        "horovod": hvd_version,
        "numpy": np_version,
        "openmpi": _first_line(["mpirun", "--version"]).replace("mpirun (Open MPI) ", ""),
    }


def quiet_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONPATH"] = str(REPO)
    env.update(extra or {})
    return env


# --- Data -------------------------------------------------------------------------------------------
def digits_arrays(replicate: int = 1):
    """scikit-learn's digits (1797 x 64), repeated ``replicate`` times: a bigger data set
    with the same per-record cost, for the growth curves."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = np.tile(digits.data.astype(np.float32), (replicate, 1))
    y = np.tile(digits.target.astype(np.int64), replicate)
    return x, y


def preprocess(root: Path, replicate: int, shard_count: int, seed: int = 42) -> dict[str, Path]:
    """Run the PreprocessData entrypoint (``python -m processing.preprocess``) on digits x
    ``replicate``; returns {train, validation, test, manifest: directory}. Cached in ``root``."""

    def write_raw(raw: Path) -> None:
        import numpy as np

        raw.mkdir(parents=True)
        x, y = digits_arrays(replicate)
        np.savez(raw / "digits.npz", x=x, y=y)

    return _preprocessed(Path(root) / f"digits-x{replicate}-shards{shard_count}", write_raw, shard_count, seed)


def preprocess_images(root: Path, shard_count: int, seed: int = 42) -> dict[str, Path]:
    """The PreprocessData entrypoint on the digits as a PNG tree (``pipeline.data.default``:
    1,797 images, 32x32); returns {train, validation, test, manifest: directory}. Cached."""
    from pipeline.data.default import export_digits_images

    return _preprocessed(Path(root) / f"digits-images-shards{shard_count}", export_digits_images,
                         shard_count, seed)


def _preprocessed(base: Path, write_raw, shard_count: int, seed: int) -> dict[str, Path]:
    """PreprocessData over what ``write_raw(raw_dir)`` writes, once per ``base`` (a ``done``
    file marks a finished run; anything else there is thrown away and made again)."""
    from pipeline.local.jobs import contract as local
    from processing import contract as processing

    dirs = {name: Path(local.relocate(path, base)) for name, path in processing.OUTPUT_DIRS.items()}
    done = base / "done"
    if done.exists():
        return dirs
    if base.exists():
        shutil.rmtree(base)
    write_raw(Path(local.relocate(processing.RAW_DATA_DIR, base)))
    subprocess.run(
        [PYTHON, "-m", "processing.preprocess", "--instance-count", "1",
         "--processes-per-host", str(shard_count), "--seed", str(seed)],
        check=True, cwd=REPO, env=quiet_env({"SAGEMAKER_BASE_DIR": str(base)}),
        stdout=subprocess.DEVNULL,
    )
    done.write_text("ok")
    return dirs


# --- One training job, launched the way the local runner launches it --------------------------------
METRIC_RE = re.compile(r"trainpipe-metrics epoch=(\d+) .*samples_per_sec=([0-9.eE+-]+)")


@dataclass
class TrainingRun:
    """What one job measured: per-epoch training samples/s (from the entrypoint's metric line,
    which times only the training steps of the epoch) and the wall time of the whole mpirun."""

    label: str
    returncode: int
    wall_seconds: float
    samples_per_sec: dict[int, float] = field(default_factory=dict)
    samples: int = 0  # training samples over all epochs and ranks
    log: str = ""

    def train_seconds(self, records_per_epoch: int, skip: int = 1) -> float:
        """Time spent in the training steps of the epochs after the first ``skip`` (start-up,
        validation, checkpoints and the model save excluded): what should grow in proportion
        to the data. The first epoch is left out: it traces the graph, a fixed cost of
        0.5-1.5 s that moves by tenths of a second between launches, more than a small data
        set's whole steady epoch (a growth fit through it had R^2 0.03 and 0.39)."""
        return sum(records_per_epoch / v for e, v in self.samples_per_sec.items() if e > skip and v > 0)

    def steady(self, skip: int = 1) -> float:
        """Median samples/s of the epochs after the first ``skip`` (graph tracing, warm-up)."""
        values = [v for e, v in sorted(self.samples_per_sec.items()) if e > skip]
        return median(values) if values else float("nan")


@dataclass
class Launch:
    """How to launch: ``hosts`` simulated hosts x ``ranks`` each, plus what differs between
    the settings compared."""

    ranks: int  # per host
    batch_size: int  # per rank
    hosts: int = 1
    mpirun_options: Sequence[str] = ()  # passed like custom_mpi_options
    env: dict[str, str] = field(default_factory=dict)  # added to every rank's environment
    pin: bool = False  # run each rank through pipeline.local.hosts.launch_settings's pinning shim
    base_options: Sequence[str] | None = None  # replace mpi.BASE_OPTIONS (only to test them)
    entry: Path = TRAIN_PY  # the script every rank runs
    # Several hosts: all ranks on one Open MPI node with the PMPI shim, as the runner does
    # (pipeline.local.hosts.shared_memory); False = one node per host (TCP between hosts).
    shared_memory: bool = True
    # Hyperparameters of this setting (e.g. another steps-per-execution), over the workload's.
    hyperparameters: dict = field(default_factory=dict)

    @property
    def world(self) -> int:
        return self.ranks * self.hosts


def tuned(ranks: int, batch_size: int, hosts: int = 1, **env: str) -> Launch:
    """The local runner's fast defaults (``pipeline.local.hosts.launch_settings.local_launch``)."""
    from pipeline.local.hosts import launch_settings

    fast = launch_settings.local_launch(ranks * hosts)
    return Launch(ranks, batch_size, hosts, fast.mpirun_options, {**fast.env, **env}, fast.pin)


def training_job(
    work: Path,
    splits: dict[str, Path],
    launch: Launch,
    *,
    epochs: int,
    label: str,
    mode: str = "File",
    distribution: str = "ShardedByS3Key",
    validation: bool = True,
    timeout: float = 300,
    hyperparameters: dict | None = None,
) -> TrainingRun:
    """Stage each host's tree (File mode: its shards linked in, as the runner's stager copies
    them), build the rank environment as ``TrainingJob.host_environment`` does, and run the
    command ``pipeline.local.hosts.mpi.prepare`` returns."""
    from pipeline.local.hosts import launch_settings, mpi
    from pipeline.local.jobs import contract as local
    from pipeline.local.jobs import lifecycle as jobs
    from training_entry.contract import CHANNEL_MANIFEST, CHANNEL_TRAIN, CHANNEL_VALIDATION
    from training_entry.input import records

    job_dir = Path(work) / f"job-{label}-{time.monotonic_ns()}"
    hosts = local.host_names(launch.hosts)
    channels = [CHANNEL_TRAIN] + ([CHANNEL_VALIDATION] if validation else [])
    config = {
        ch: {"TrainingInputMode": mode, "S3DistributionType": distribution, "RecordWrapperType": "None"}
        for ch in channels
    }
    config[CHANNEL_MANIFEST] = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                                "RecordWrapperType": "None"}
    hps = {
        "epochs": epochs, "batch-size": launch.batch_size, "base-learning-rate": 0.001,
        "warmup-epochs": 1, "seed": 42, "mixed-precision": "off", "fp16-allreduce": False,
        "model_dir": "/opt/ml/model", "sagemaker_program": "train.py",
        "sagemaker_submit_directory": "/opt/ml/code", "sagemaker_mpi_enabled": True,
        "sagemaker_mpi_num_of_processes_per_host": launch.ranks,
        "sagemaker_mpi_custom_mpi_options": "",
        **(hyperparameters or {}),  # e.g. another model architecture
        **launch.hyperparameters,
    }
    raw_hps = {k: json.dumps(v) for k, v in hps.items()}
    logs = job_dir / "logs"
    logs.mkdir(parents=True)
    specs = {}
    for index, host in enumerate(hosts):
        base = job_dir / "hosts" / host
        spec = dict(current_host=host, hosts=hosts, instance_type="ml.c5.xlarge",
                    hyperparameters=raw_hps, input_data_config=config)
        local.write_training_tree(base, **spec)
        for ch in channels:
            names = sorted(p.name for p in splits[ch].iterdir() if records.is_shard_name(p.name))
            if distribution == "ShardedByS3Key":
                names = records.host_objects(names, index, len(hosts))
            for name in names:
                # A hard link is the runner's copy without the copy's cost in the timing.
                _link_or_copy(splits[ch] / name, base / "input" / "data" / ch / name)
        for manifest in sorted(splits[CHANNEL_MANIFEST].iterdir()):
            _link_or_copy(manifest, base / "input" / "data" / CHANNEL_MANIFEST / manifest.name)
        env = jobs.base_environment(quiet_env())
        env.update(local.training_environment(base, job_name=f"bench-{label}", **spec))
        env.update({"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "HOROVOD_HOSTNAME": host})
        env.update(launch.env)
        argv = local.user_command(PYTHON, raw_hps, base)
        argv[1] = str(launch.entry)
        if launch.pin:
            argv = launch_settings.shim_argv(argv)
        specs[host] = {"env": env, "cwd": str(REPO), "argv": argv,
                       "log": str(logs / f"{host}.rank-{{rank}}.log")}
    saved = mpi.BASE_OPTIONS
    if launch.base_options is not None:
        mpi.BASE_OPTIONS = tuple(launch.base_options)
    try:
        # As TrainingJob.launch: the machine's launch defaults go before the job's custom
        # options (older mpi.prepare without local_options: appended as custom options).
        parameters = inspect.signature(mpi.prepare).parameters
        shared = {}
        if "shared_memory_shim" in parameters and launch.hosts > 1 and launch.shared_memory:
            from pipeline.local.hosts import shared_memory

            shared["shared_memory_shim"], _ = shared_memory.library()
        if "local_options" in parameters:
            prepared = mpi.prepare(job_dir / "mpi", hosts, launch.ranks, specs,
                                   local_options=tuple(launch.mpirun_options), **shared)
        else:
            prepared = mpi.prepare(job_dir / "mpi", hosts, launch.ranks, specs,
                                   extra_options=" ".join(launch.mpirun_options))
    finally:
        mpi.BASE_OPTIONS = saved
    command = prepared.command
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, env=jobs.base_environment(quiet_env()), cwd=job_dir,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    finally:
        scratch = getattr(prepared, "scratch", None)  # the daemons' session directories
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    wall = time.perf_counter() - started
    rank0 = logs / f"{hosts[0]}.rank-0.log"
    text = rank0.read_text(errors="replace") if rank0.exists() else ""
    run = TrainingRun(label, proc.returncode, wall, log=text + proc.stdout)
    for match in METRIC_RE.finditer(text):
        run.samples_per_sec[int(match.group(1))] = float(match.group(2))
    if proc.returncode != 0 or not run.samples_per_sec:
        tail = "\n".join((text + proc.stdout).splitlines()[-30:])
        raise RuntimeError(f"{label}: mpirun exited {proc.returncode}:\n{tail}\n{' '.join(command)}")
    shutil.rmtree(job_dir, ignore_errors=True)
    return run


def torch_entrypoint(splits: dict[str, Path], model_dir: Path, ranks: int, *args: str,
                     timeout: float = 900) -> subprocess.CompletedProcess:
    """One torchrun job of the PyTorch entrypoint (``training_torch/train.py``) on 1 host x
    ``ranks``, over ``splits`` (ShardedByS3Key: each rank reads its own shards), as the local
    runner's torchrun jobs see their channels; ``args`` are its hyperparameters."""
    from pipeline.local.hosts.torchrun import free_port

    env = quiet_env({
        "SM_CHANNEL_TRAIN": str(splits["train"]), "SM_CHANNEL_VALIDATION": str(splits["validation"]),
        "SM_CHANNEL_MANIFEST": str(splits["manifest"]), "SM_MODEL_DIR": str(model_dir),
        "SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1",
        "SM_INPUT_DATA_CONFIG": json.dumps({c: {"S3DistributionType": "ShardedByS3Key"} for c in ("train", "validation")}),
    })
    command = [PYTHON, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={ranks}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(REPO / "training_torch" / "train.py"),
               *args]
    return subprocess.run(command, cwd=REPO, env=env, text=True, capture_output=True, timeout=timeout)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy(source, target)


def records_of(manifest_dir: Path, split: str) -> int:
    doc = json.loads((Path(manifest_dir) / f"{split}.json").read_text())
    return int(doc["total_records"])


def bytes_of(directory: Path) -> int:
    return sum(p.stat().st_size for p in Path(directory).iterdir() if p.is_file())


def work_dir(name: str) -> Path:
    """A scratch directory for one benchmark (``TRAINPIPE_BENCH_WORK`` moves the root)."""
    root = Path(os.environ.get("TRAINPIPE_BENCH_WORK", "/tmp/trainpipe-bench"))
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- Figures shared between scripts (growth.py reuses what the main runs measured) ------------
def save_figures(name: str, figures: dict) -> None:
    (work_dir("figures") / f"{name}.json").write_text(json.dumps(figures, indent=2))


def load_figures(name: str) -> dict | None:
    path = work_dir("figures") / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None
