"""Horovod: ranks of different simulated hosts talk through shared memory, not loopback TCP.

Open MPI picks the transport between two ranks from its node map: ranks on one node use
shared memory (the vader BTL), ranks on two nodes TCP. With one Open MPI node (daemon) per
simulated host, the default pipeline's layout (2 hosts x 1 rank) paid a TCP round trip per
Horovod cycle, and on a busy machine trained at 0.1-0.6x one process where the same two
ranks on one host held ~1x (``benchmarks/training/scaling/p1_local_scaling.py``, BENCHMARKS.md). So the
runner starts every rank on one node and preloads a small PMPI library into each
(``_mpi_split_shim.c``): MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), where Horovod and other
MPI programs learn who is "local", splits by simulated host instead, so
``hvd.local_rank()``/``local_size()``/``cross_rank()`` stay what SageMaker gives. Each rank
still enters its own host's namespaces (``/opt/ml``, hostname) in ``mpi.py``.

The library is built with ``mpicc`` the first time a job needs it (~0.2 s) and cached under
``~/.cache/trainpipe`` by source hash and MPI version. Where it cannot be built (no
``mpicc``: Open MPI's development package is missing) or ``TRAINPIPE_SHARED_MEMORY=0`` is
set, jobs fall back to one node per simulated host (TCP between hosts) with a one-line note.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from pipeline.local.hosts import rank_exec

SOURCE = Path(__file__).resolve().with_name("_mpi_split_shim.c")
SWITCH_ENV = "TRAINPIPE_SHARED_MEMORY"
# Read by the shim in every rank: the index of the rank's simulated host (rank_exec.py sets it).
HOST_INDEX_ENV = rank_exec.HOST_INDEX_ENV
LIBRARY_NAME = "libtrainpipe_mpi_split.so"


def cache_root(environ=os.environ) -> Path:
    """Where built artefacts are kept, as scripts/install.sh does it."""
    if environ.get("TRAINPIPE_CACHE"):
        return Path(environ["TRAINPIPE_CACHE"])
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainpipe"


def enabled_by_user(environ=os.environ) -> bool:
    return environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _mpicc_identity(mpicc: str) -> str:
    """What the library depends on: the compiler wrapper's command line (MPI's include and
    library paths) and Open MPI's version."""
    show = subprocess.run([mpicc, "--showme"], capture_output=True, text=True, timeout=30)
    version = subprocess.run([mpicc, "--version"], capture_output=True, text=True, timeout=30)
    return show.stdout.strip() + "\n" + version.stdout.strip()


def build(cache: Path | None = None, mpicc: str | None = None) -> Path:
    """The library's path, built into ``cache`` unless it is there. Raises RuntimeError with
    the reason when it cannot be built."""
    mpicc = mpicc or shutil.which("mpicc")
    if not mpicc:
        raise RuntimeError("mpicc not found (install Open MPI's development package, e.g. libopenmpi-dev)")
    try:
        identity = _mpicc_identity(mpicc)
    except (OSError, subprocess.SubprocessError) as error:
        raise RuntimeError(f"{mpicc} does not run: {error}") from None
    key = hashlib.sha256(SOURCE.read_bytes() + identity.encode()).hexdigest()[:16]
    target = (cache or cache_root()) / "native" / f"mpi-split-{key}" / LIBRARY_NAME
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed: concurrent jobs never load a half-written file.
    fd, partial = tempfile.mkstemp(prefix=".partial-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([mpicc, "-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-o", partial, str(SOURCE)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(f"mpicc failed: {lines[-1] if lines else f'exit {done.returncode}'}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


@lru_cache(maxsize=1)
def _library() -> tuple[Path | None, str | None]:
    try:
        return build(), None
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        return None, str(error)


def library(environ=os.environ) -> tuple[Path | None, str | None]:
    """(the shim, None) when jobs can put every simulated host on one MPI node, else (None,
    why not)."""
    if not enabled_by_user(environ):
        return None, f"{SWITCH_ENV}=0"
    return _library()


def fallback_notice(reason: str) -> str:
    return (f"note: ranks of different simulated hosts talk over loopback TCP ({reason}); "
            f"on a busy machine that slows every step")
