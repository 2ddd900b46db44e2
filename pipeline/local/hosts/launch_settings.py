"""Fast launch settings for Horovod ranks that share one machine's CPUs (local runs only).

SageMaker gives every host its own instance, and on GPU hosts each rank spends its time on
its GPU. The local runner puts every rank of every simulated host on this machine's cores,
where the runner's plain ``mpirun -np 2`` of our training entrypoint ran at 0.24-0.37x the
samples/s of one process (benchmarks/training/scaling/p1_local_scaling.py; BENCHMARKS.md has the figures).
The settings below took it to 0.93-1.10x. They only work together; each one's share, as
"tuned without it" (2 ranks on 2 cores, ratio to one process, --explore sweep):

1. ``-mca mpi_yield_when_idle 1`` (without: 0.44). Horovod's background thread negotiates
   with the other ranks every cycle and, waiting inside MPI, spins on the core its own
   rank's Python thread needs; with yield it calls sched_yield() instead.
2. Rank r pinned to core r (without: 0.69). Unpinned ranks migrate, and two ranks' spinning
   threads land on one core. Done per *global* rank by ``pin_from_environment`` (in the
   rank's launcher) rather than by ``mpirun -bind-to core``, which measured the same on one
   simulated host but is wrong on several when each simulated host has its own Open MPI
   daemon (the fallback of ``shared_memory.py``): every daemon would bind its first rank to
   core 0.
3. ``HOROVOD_CYCLE_TIME=0.1`` ms (1 ms, Horovod's default: 0.80; 5 ms: 0.25). A step's
   allreduce waits for the next cycle, and a step of a small model takes ~1 ms.
4. Threads per rank from the cores it has (``rank_threads``; one rank too): intra-op and
   OpenMP threads = cores / ranks, inter-op threads 1, tf.data's private pool = cores / ranks
   (``training_entry.contract.TF_DATA_THREADS_ENV``). TensorFlow, OpenMP and tf.data each
   default to one thread per core *per process*, so a rank alone ran up to three pools of
   ``cores`` threads on ``cores`` cores. With several ranks, cores / ranks is what keeps
   unpinned ranks (more ranks than cores) from oversubscribing (the plain launch: 0.37 ->
   0.48); pinned, it changes nothing measurable. With one rank the inter-op pool is what goes:
   a Keras step is a chain of ops with little to run side by side, and a second inter-op
   thread only competes for the cores the intra-op pool and tf.data use
   (benchmarks/notes.md, P1: "Threads per rank"). ``RANK_THREADS_ENV`` overrides the choice;
   TF_NUM_*/OMP_NUM_THREADS the user sets still win name by name.
5. Except for a model whose steps are too small to split (``contract.SMALL_STEP_ARCHITECTURES``:
   the MLPs): one intra-op and tf.data thread, whatever the share. A step of the digits MLP
   is ~0.3 ms of small ops; handing each across threads costs more than it saves, and one
   thread trained it 1.26-1.66x faster than two on 2 cores (benchmarks/notes.md, P1: "Threads
   for one rank"), while the small CNN's convolutions gain from two. The runner does not know
   the model (``auto`` resolves from the data), so it only allows it
   (``contract.SMALL_STEP_THREADS_ENV``, never where the user chose threads) and the
   entrypoint decides before TensorFlow starts (``runtime.set_threads_from_env``).

Measured and not adopted (within the noise of the tuned run): tensor fusion off, Horovod's
response cache off, MPI_THREAD_SINGLE, oneDNN off, a 0.05 ms cycle, ``-mca btl self,vader``.
``HOROVOD_CONTROLLER=gloo`` under mpirun is worse than useless: each rank silently runs as
a job of size 1.

None of this reaches SageMaker: only the local runner calls these functions, and what the
user sets wins (the runner's own environment, the request's ``Environment``, and any
``-x NAME`` in ``sagemaker_mpi_custom_mpi_options``).

Standard library only (no TensorFlow, Horovod or SDK imports), so this file also runs by
path as the per-rank pinning shim:

    python launch_settings.py exec -- python train.py --epochs 3     # pins, then execs the command
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Horovod: how often the background thread negotiates (milliseconds).
# = training_entry.contract.HOROVOD_CYCLE_TIME_ENV; not imported, since this file also runs by
# path as the pinning shim (tests/pipeline/local/hosts/test_launch_settings.py keeps the two equal).
CYCLE_TIME_ENV = "HOROVOD_CYCLE_TIME"
LOCAL_CYCLE_TIME_MS = "0.1"
THREAD_ENVS = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
# The user's choice of every rank's threads, over ``rank_threads``' rule: "N" (intra-op N,
# inter-op 1, tf.data N), "INTRA,INTER,DATA", or "default" (TensorFlow's own, nothing set).
# Read from the request's Environment, else the runner's.
RANK_THREADS_ENV = "TRAINPIPE_RANK_THREADS"
INTER_OP_THREADS = 1  # per rank, whatever its cores: see 4. above
# Intra-op and tf.data threads for a model whose steps are too small to split: see 5. above.
SMALL_STEP_THREADS = 1
# "cpu,cpu,...": rank r runs on the r-th entry (global rank, modulo the list's length).
AFFINITY_ENV = "TRAINPIPE_RANK_CPUS"
# Open MPI's global rank of this process (set for every rank mpirun starts).
RANK_ENV = "OMPI_COMM_WORLD_RANK"
# Open MPI: sched_yield() while waiting instead of spinning on a core another thread needs.
YIELD_OPTIONS = ("-mca", "mpi_yield_when_idle", "1")
SHIM = os.path.abspath(__file__)


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (a container's cpuset, taskset), else all of them."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


@dataclass(frozen=True)
class LocalLaunch:
    """What the local runner adds to one training job's MPI launch."""

    env: dict[str, str] = field(default_factory=dict)  # every rank's environment (defaults)
    mpirun_options: tuple[str, ...] = ()  # before the job's custom_mpi_options
    pin: bool = False  # wrap each rank's command with ``shim_argv`` (or rank_exec pins)
    threads: str = ""  # the job log's line on each rank's threads (RankThreads.describe)

    def apply_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with these settings added where it has no value of its own (the runner's
        environment, exported by the user, wins)."""
        for key, value in self.env.items():
            env.setdefault(key, value)
        return env


def exported_names(custom_mpi_options: str) -> set[str]:
    """Names a job's ``custom_mpi_options`` exports with ``-x NAME[=VALUE]``: those are the
    user's, and a per-rank default must not override them (rank_exec applies the spec's
    environment after mpirun has applied ``-x``)."""
    words = shlex.split(custom_mpi_options or "")
    names = set()
    for i, word in enumerate(words):
        if word == "-x" and i + 1 < len(words):
            names.add(words[i + 1].split("=", 1)[0])
    return names


def mca_names(custom_mpi_options: str) -> set[str]:
    """MCA parameters a job's ``custom_mpi_options`` sets (``-mca NAME VALUE``): Open MPI
    refuses a parameter given twice on one command line, so a default must step aside."""
    words = shlex.split(custom_mpi_options or "")
    return {words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-mca", "--mca")}


@dataclass(frozen=True)
class RankThreads:
    """Each rank's thread counts and where they come from (0 = TensorFlow's default)."""

    intra: int
    inter: int
    data: int
    cores: int
    ranks: int
    overridden: bool = False

    def env(self) -> dict[str, str]:
        from training_entry.contract import (  # the runner only; not the shim
            SMALL_STEP_THREADS_ENV,
            TF_DATA_THREADS_ENV,
        )

        if not self.intra:
            return {}
        env = {"TF_NUM_INTRAOP_THREADS": str(self.intra), "OMP_NUM_THREADS": str(self.intra),
               "TF_NUM_INTEROP_THREADS": str(self.inter), TF_DATA_THREADS_ENV: str(self.data)}
        if self.small_step_applies:
            env[SMALL_STEP_THREADS_ENV] = str(SMALL_STEP_THREADS)
        return env

    @property
    def small_step_applies(self) -> bool:
        """Our rule, more than one thread: a small-step model (an MLP) may take fewer, which
        the entrypoint decides once it knows the model (runtime.set_threads_from_env)."""
        return not self.overridden and self.intra > SMALL_STEP_THREADS

    def describe(self, kept: Sequence[str] = ()) -> str:
        """The job log's one line. ``kept``: thread variables the user set, which win."""
        rank = "rank" if self.ranks == 1 else "ranks"
        if not self.intra:
            choice = f"threads per rank: TensorFlow's defaults ({RANK_THREADS_ENV}=default)"
        else:
            why = (f"{RANK_THREADS_ENV} set" if self.overridden
                   else f"{self.cores} cores / {self.ranks} {rank}; {RANK_THREADS_ENV} overrides")
            small = f", {SMALL_STEP_THREADS} for an MLP" if self.small_step_applies and not kept else ""
            choice = (f"threads per rank: intra {self.intra}, inter {self.inter}, "
                      f"tf.data {self.data} ({why}{small})")
        return choice + (f"; the job's own {', '.join(sorted(kept))} win" if kept else "")


def rank_threads(total_ranks: int, cores: int, override: str | None = None) -> RankThreads:
    """Intra-op (and OpenMP) threads and tf.data's private pool = the rank's share of the
    cores, at least 1; one inter-op thread. ``override``: ``RANK_THREADS_ENV``'s value."""
    share = max(1, cores // max(total_ranks, 1))
    raw = (override or "").strip()
    if not raw:
        return RankThreads(share, INTER_OP_THREADS, share, cores, total_ranks)
    if raw.lower() == "default":
        return RankThreads(0, 0, 0, cores, total_ranks, overridden=True)
    try:
        values = [int(word) for word in raw.split(",")]
    except ValueError:
        values = []
    if len(values) == 1:
        values = [values[0], INTER_OP_THREADS, values[0]]
    if len(values) != 3 or min(values) < 1:
        raise ValueError(f"{RANK_THREADS_ENV}={raw!r}: give N (intra-op and tf.data threads per "
                         "rank), INTRA,INTER,DATA (whole numbers >= 1), or 'default'")
    return RankThreads(*values, cores, total_ranks, overridden=True)


def override_from(request_env: Mapping[str, str] | None, environ: Mapping[str, str] | None = None) -> str | None:
    """``RANK_THREADS_ENV`` as the job sees it: its request's Environment, else the runner's."""
    for source in (request_env or {}, os.environ if environ is None else environ):
        if source.get(RANK_THREADS_ENV):
            return source[RANK_THREADS_ENV]
    return None


def local_launch(
    total_ranks: int,
    *,
    cpus: Sequence[int] | None = None,
    gpus: int = 0,
    custom_mpi_options: str = "",
    request_env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LocalLaunch:
    """The fast defaults for ``total_ranks`` ranks (all simulated hosts together) on this
    machine. ``gpus``: GPUs the ranks will use; with any, nothing changes (each rank's work
    is on its GPU, and SageMaker's launch is what we mirror). Names set by the request's
    ``Environment``, exported by ``custom_mpi_options`` or set in ``environ`` (the runner's
    environment, which ``apply_env`` lets win) are left to them; ``threads`` says so."""
    if gpus > 0 or total_ranks < 1:
        return LocalLaunch()
    environ = os.environ if environ is None else environ
    cpus = list(cpus) if cpus is not None else usable_cpus()
    threads = rank_threads(total_ranks, len(cpus), override_from(request_env, environ))
    env = threads.env()
    if total_ranks > 1:
        env[CYCLE_TIME_ENV] = LOCAL_CYCLE_TIME_MS
    # else: no allreduce to wait for, so nothing but the threads applies.
    pin = 1 < total_ranks <= len(cpus)
    if pin:
        env[AFFINITY_ENV] = ",".join(str(c) for c in cpus[:total_ranks])
    taken = exported_names(custom_mpi_options) | set(request_env or {})
    kept = [name for name in threads.env() if name in taken or name in environ]
    env = {k: v for k, v in env.items() if k not in taken}
    if kept:
        # The user chose some of the threads: the entrypoint must not lower them.
        from training_entry.contract import SMALL_STEP_THREADS_ENV

        env.pop(SMALL_STEP_THREADS_ENV, None)
    options = YIELD_OPTIONS if total_ranks > 1 and YIELD_OPTIONS[1] not in mca_names(custom_mpi_options) else ()
    return LocalLaunch(env=env, mpirun_options=tuple(options), pin=pin and AFFINITY_ENV in env,
                       threads=threads.describe(kept))


# --- Pinning one rank --------------------------------------------------------------------------
def cpu_for_rank(environ: Mapping[str, str]) -> int | None:
    """The CPU ``AFFINITY_ENV`` assigns to this rank (None: leave it to the kernel)."""
    raw = environ.get(AFFINITY_ENV, "").strip()
    if not raw:
        return None
    try:
        cpus = [int(c) for c in raw.split(",") if c.strip()]
        rank = int(environ.get(RANK_ENV, "0"))
    except ValueError:
        return None
    return cpus[rank % len(cpus)] if cpus else None


def pin_from_environment(environ: Mapping[str, str] | None = None) -> int | None:
    """Pin this process (and every thread it starts later) to its rank's CPU. Must run
    before TensorFlow or Horovod start threads: affinity is per thread and inherited, so
    the place is the rank's launcher, just before exec. Returns the CPU, or None."""
    cpu = cpu_for_rank(os.environ if environ is None else environ)
    if cpu is None:
        return None
    try:
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError):  # not Linux, or a CPU outside this cpuset: run unpinned
        return None
    return cpu


def shim_argv(argv: Sequence[str], python: str = sys.executable) -> list[str]:
    """``argv`` run through this file's pinning shim (exec, so no process stays behind)."""
    return [python, SHIM, "exec", "--", *argv]


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[1] != "exec" or argv[2] != "--":
        print("usage: launch_settings.py exec -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    pin_from_environment()
    command = argv[3:]
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"cannot run {command[0]}: {error}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
