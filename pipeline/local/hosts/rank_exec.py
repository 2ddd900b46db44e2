"""The first thing every MPI rank runs: become a process of its simulated SageMaker host.

``mpirun`` starts one daemon per simulated host (see ``mpi.py``); the daemon's environment
names the host (``HOST_ENV``). In a shared-memory launch (one daemon for all hosts) the
launch dir's ``ranks.json`` gives each global rank its host instead, and this script sets
what Open MPI would have set for a rank of that host (``OMPI_COMM_WORLD_LOCAL_RANK``, ...)
and the host's index for the PMPI shim. This script loads that host's launch spec (the ``SM_*``
environment, working directory and command the toolkit would use on that host), sends the
rank's output to its own log file, and execs the user's command in its place.

Standard library only, and run by file path: it must work in any Python that can run the
user's script, whatever is importable there.

    python rank_exec.py <launch dir>     # reads <launch dir>/<host>.json
"""

from __future__ import annotations

import json
import os
import sys

# Set by the rsh agent for each simulated host's MPI daemon; inherited by that host's ranks.
HOST_ENV = "TRAINPIPE_SIMULATED_HOST"
# Open MPI's global rank of this process.
RANK_ENV = "OMPI_COMM_WORLD_RANK"
# Shared-memory launch: global rank -> {"host", "host_index", "local_rank", "local_size"}.
RANKS_FILE = "ranks.json"
# Read by pipeline/local/hosts/_mpi_split_shim.c (shared_memory.HOST_INDEX_ENV names it too).
HOST_INDEX_ENV = "TRAINPIPE_HOST_INDEX"
# pytorchddp: torch.distributed's variables -> Open MPI's for the same rank.
TORCH_FROM_MPI = {"RANK": RANK_ENV, "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
                  "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_WORLD_SIZE": "OMPI_COMM_WORLD_LOCAL_SIZE"}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: rank_exec.py LAUNCH_DIR", file=sys.stderr)
        return 2
    rank = os.environ.get(RANK_ENV, "0")
    ranks_file = os.path.join(argv[1], RANKS_FILE)
    if os.path.exists(ranks_file):
        with open(ranks_file) as f:
            mine = json.load(f)[rank]
        os.environ[HOST_ENV] = mine["host"]
        # What Open MPI sets for a rank of its own node; informational for MPI itself
        # (it reads PMIx), read by scripts that pick a GPU from them.
        os.environ["OMPI_COMM_WORLD_LOCAL_RANK"] = str(mine["local_rank"])
        os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"] = str(mine["local_size"])
        os.environ["OMPI_COMM_WORLD_NODE_RANK"] = str(mine["host_index"])
        os.environ[HOST_INDEX_ENV] = str(mine["host_index"])
    host = os.environ.get(HOST_ENV)
    if not host:
        print(f"rank_exec.py: {HOST_ENV} is not set (not started by the trainpipe rsh agent)",
              file=sys.stderr)
        return 2
    with open(os.path.join(argv[1], f"{host}.json")) as f:
        spec = json.load(f)
    os.environ.update(spec["env"])
    if spec.get("torch_variables"):
        # pytorchddp: what torch.distributed's env:// initialisation reads, from this MPI rank
        # (SageMaker's docs: the launcher "sets up environment variables needed for running
        # PyTorch distributed training"); MASTER_ADDR and MASTER_PORT come with the spec.
        for name, source in TORCH_FROM_MPI.items():
            if source in os.environ:
                os.environ[name] = os.environ[source]
    log = os.open(spec["log"].format(rank=rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(spec["cwd"])
    try:
        os.execvp(spec["argv"][0], spec["argv"])
    except OSError as error:
        print(f"cannot run {spec['argv'][0]}: {error}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
