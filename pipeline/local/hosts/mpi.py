"""Horovod: launch a training job's ranks with one ``mpirun``, as SageMaker does, on this machine.

SageMaker runs ``mpirun --host algo-1:P,algo-2:P ...`` on algo-1 and reaches the other hosts
over SSH. Here every simulated host is an Open MPI *node* of its own: a hostfile lists
``algo-1 slots=P`` ...; the "remote shell" (``plm_rsh_agent``) is a small script that starts
each node's daemon on this machine with the host's name in its environment. Because each
host has its own daemon, Open MPI (and so Horovod, which takes its local communicator from
``MPI_COMM_TYPE_SHARED``) groups ranks by simulated host: ``hvd.local_rank()``,
``hvd.local_size()`` and ``hvd.cross_rank()`` are what they would be on SageMaker.
``HOROVOD_HOSTNAME`` is not enough for that: Horovod reads it only under Gloo.

Each rank then runs ``rank_exec.py``, which loads its host's environment and execs the user's
command. All traffic stays on the loopback interface.

Shared memory (``shared_memory.py``): Open MPI sends messages between nodes over TCP, so
with a node per host the ranks of different simulated hosts paid loopback TCP on every
Horovod cycle. When the PMPI shim is available, every rank of every simulated host is
started on ONE node instead (``SHARED_NODE``); ``rank_exec.py`` gives each rank its host by
rank (``ranks.json``), the shim makes Horovod's local communicator split by that host, and
each rank enters its host's namespaces itself (not through its daemon).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.local.hosts import namespaces, rank_exec

RANK_EXEC = Path(rank_exec.__file__).resolve()
# The one Open MPI node of a shared-memory launch (a name, never resolved: the rsh agent runs
# its daemon here).
SHARED_NODE = "trainpipe-node"

# What SageMaker's toolkit passes (mpi.py in sagemaker-training-toolkit), adapted: loopback
# instead of eth0, our rsh agent instead of ssh; -bind-to none -map-by slot fill the hosts in
# order, so ranks 0..P-1 are on algo-1 as on SageMaker.
BASE_OPTIONS = (
    "--allow-run-as-root", "--oversubscribe",
    "-bind-to", "none", "-map-by", "slot", "--tag-output",
    "-mca", "orte_abort_on_non_zero_status", "1",  # one failed rank ends the job, no hang
    "-mca", "btl", "self,vader,tcp",
    "-mca", "btl_vader_single_copy_mechanism", "none",
    "-mca", "btl_tcp_if_include", "lo", "-mca", "oob_tcp_if_include", "lo",
    "-mca", "plm_rsh_no_tree_spawn", "1",
)

_RSH_AGENT = """#!/bin/sh
# Open MPI's rsh launcher runs: <agent> <host> <daemon command>. Every host is simulated on
# this machine: run the daemon here, with the host's name in its environment (its ranks
# inherit it, see rank_exec.py) and a scratch directory of its own for the daemon's session
# directory and the shared-memory segments. Open MPI names both after the real hostname:
# two daemons sharing them race on mkdir (one fails orte_init and mpirun waits forever) and
# collide on the vader segment of the same local rank (a segfault).
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host="$1"; shift
export {host_env}="$host"
mkdir -p {scratch}/"$host"
export OMPI_MCA_orte_tmpdir_base={scratch}/"$host"
export OMPI_MCA_btl_vader_backing_directory={scratch}/"$host"
{exec_line}
"""


@dataclass(frozen=True)
class MpiLaunch:
    command: list[str]
    launch_dir: Path
    # Per-host session and shared-memory directories, short and under /tmp; whoever runs
    # the command removes it afterwards (TrainingJob does).
    scratch: Path
    num_processes: int


def mpirun_path() -> str | None:
    return shutil.which("mpirun")


def custom_options(raw: str) -> list[str]:
    """SageMaker: ``sagemaker_mpi_custom_mpi_options`` is appended verbatim, except
    ``--NCCL_DEBUG X``, which becomes ``-x NCCL_DEBUG=X``."""
    words = shlex.split(raw or "")
    out = []
    i = 0
    while i < len(words):
        if words[i] == "--NCCL_DEBUG" and i + 1 < len(words):
            out += ["-x", f"NCCL_DEBUG={words[i + 1]}"]
            i += 2
            continue
        out.append(words[i])
        i += 1
    return out


def prepare(
    mpi_dir: Path,
    hosts: list[str],
    processes_per_host: int,
    host_specs: dict[str, dict],
    *,
    num_processes: int | None = None,
    local_options: Sequence[str] = (),
    extra_options: str = "",
    python: str = sys.executable,
    host_trees: dict[str, Path] | None = None,
    hosts_file: str | None = None,
    shared_memory_shim: Path | None = None,
) -> MpiLaunch:
    """Write the hostfile, rsh agent and per-host launch specs; return the mpirun command.

    ``host_specs[host]`` = {"env": {...}, "cwd": str, "argv": [...], "log": "...{rank}..."}.
    ``local_options`` (this machine's launch defaults) come before ``extra_options`` (the
    job's custom_mpi_options), so the job's own options win. With ``host_trees`` (host ->
    its /opt/ml tree), each host's daemon, and so its ranks, runs in namespaces where that
    tree is /opt/ml and the hostname is the host's (``namespaces.py``). With
    ``shared_memory_shim`` (``shared_memory.library()``) and several hosts, all ranks run on
    one node and each rank enters its host's namespaces itself (see the module docstring).
    """
    mpi_dir = Path(mpi_dir)
    launch_dir = mpi_dir / "launch"
    # The specs hold each host's environment: private to this user, and removed as soon as
    # every rank has read its own (``remove_specs``).
    launch_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    launch_dir.chmod(0o700)
    np = num_processes or processes_per_host * len(hosts)
    shared = shared_memory_shim is not None and len(hosts) > 1
    hostfile = mpi_dir / "hostfile"
    if shared:
        hostfile.write_text(f"{SHARED_NODE} slots={np}\n")
        ranks = rank_hosts(hosts, processes_per_host, np)
        local = {r: sum(1 for q in range(r) if ranks[q] == h) for r, h in ranks.items()}
        sizes = {h: sum(1 for q in ranks.values() if q == h) for h in hosts}
        _write_private(launch_dir / rank_exec.RANKS_FILE, {
            str(r): {"host": h, "host_index": hosts.index(h), "local_rank": local[r], "local_size": sizes[h]}
            for r, h in ranks.items()})
        host_specs = {h: _per_rank_spec(h, spec, shared_memory_shim, (host_trees or {}).get(h), hosts_file, python)
                      for h, spec in host_specs.items()}
        host_trees = None  # the daemon stays outside: each rank enters its own host's
    else:
        hostfile.write_text("".join(f"{h} slots={processes_per_host}\n" for h in hosts))
    # Short, under /tmp: Open MPI puts Unix sockets in the session directory (108-byte limit).
    scratch = Path(tempfile.mkdtemp(prefix="trainpipe-mpi-"))
    agent = mpi_dir / "rsh-agent"
    exec_line = 'exec /bin/sh -c "$*"'
    if shared:  # one daemon for every host: one PID namespace for all its ranks (namespaces.py)
        exec_line = f'exec {shlex.join(namespaces.pid_only_command(["/bin/sh", "-c"], python))} "$*"'
    if host_trees:
        # The daemon is started in its host's namespaces: ranks inherit them. Hosts not
        # listed (none, in practice) run without.
        cases = "".join(
            f'  {shlex.quote(h)}) exec {shlex.join(namespaces.command(h, t, "/", ["/bin/sh", "-c"], python, hosts_file, daemon=True))} "$*" ;;\n'
            for h, t in host_trees.items())
        exec_line = f'case "$host" in\n{cases}  *) exec /bin/sh -c "$*" ;;\nesac'
    agent.write_text(_RSH_AGENT.format(host_env=rank_exec.HOST_ENV, scratch=shlex.quote(str(scratch)),
                                       exec_line=exec_line))
    agent.chmod(0o755)
    for host, spec in host_specs.items():
        _write_private(launch_dir / f"{host}.json", spec)
    command = [
        mpirun_path() or "mpirun", *BASE_OPTIONS,
        "-mca", "plm_rsh_agent", str(agent),
        "--hostfile", str(hostfile), "-np", str(np),
        *local_options,
        *custom_options(extra_options),
        python, str(RANK_EXEC), str(launch_dir),
    ]
    return MpiLaunch(command, launch_dir, scratch, np)


def _write_private(path: Path, content: dict) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(content, indent=2, sort_keys=True))


def _per_rank_spec(host: str, spec: dict, shim: Path, tree: Path | None, hosts_file: str | None,
                   python: str) -> dict:
    """A host's launch spec for a shared-memory launch: the command runs with the shim
    preloaded (set last, so that only the user's program and what it execs load it), inside
    the host's namespaces when it has a tree."""
    preload = " ".join(filter(None, [str(shim), spec.get("env", {}).get("LD_PRELOAD", "")]))
    argv = ["env", f"LD_PRELOAD={preload}", *spec["argv"]]
    if tree is None:
        return {**spec, "argv": argv}
    return {**spec, "cwd": "/", "argv": namespaces.command(host, tree, spec["cwd"], argv, python, hosts_file,
                                                          env=spec.get("env"), pid=False)}  # the daemon's


def remove_specs(launch: MpiLaunch) -> None:
    """Delete the launch specs: once every rank has started (each read its host's spec before
    opening its log), and in any case at the end of the job."""
    shutil.rmtree(launch.launch_dir, ignore_errors=True)


@dataclass(frozen=True)
class RankExit:
    """What mpirun reported about the first rank that ended the job."""

    rank: int
    host: str | None
    exit_code: int | None
    signal: int | None


_FIRST_PROCESS_RE = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+)")
_SIGNAL_RE = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")


def first_failure(mpirun_output: str, rank_hosts: dict[int, str]) -> RankExit | None:
    """Parse mpirun's report ("The first process to do so was: ... Exit code: N" or "process
    rank R ... on node algo-K exited on signal S")."""
    match = _SIGNAL_RE.search(mpirun_output)
    if match:
        rank = int(match.group(1))
        # The node is the host, except in a shared-memory launch (one node for all hosts).
        return RankExit(rank, rank_hosts.get(rank, match.group(2)), None, int(match.group(3)))
    match = _FIRST_PROCESS_RE.search(mpirun_output)
    if match:
        rank = int(match.group(1))
        return RankExit(rank, rank_hosts.get(rank), int(match.group(2)), None)
    return None


def rank_hosts(hosts: list[str], processes_per_host: int, num_processes: int) -> dict[int, str]:
    """-map-by slot: ranks fill algo-1's slots first, then algo-2's, ..."""
    return {r: hosts[min(r // processes_per_host, len(hosts) - 1)] for r in range(num_processes)}
