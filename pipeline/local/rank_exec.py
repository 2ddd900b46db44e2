"""The first thing every MPI rank runs: become a process of its simulated SageMaker host.

``mpirun`` starts one daemon per simulated host (see ``mpi.py``); the daemon's environment
names the host (``HOST_ENV``). This script loads that host's launch spec (the ``SM_*``
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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: rank_exec.py LAUNCH_DIR", file=sys.stderr)
        return 2
    host = os.environ.get(HOST_ENV)
    if not host:
        print(f"rank_exec.py: {HOST_ENV} is not set (not started by the trainpipe rsh agent)",
              file=sys.stderr)
        return 2
    rank = os.environ.get(RANK_ENV, "0")
    with open(os.path.join(argv[1], f"{host}.json")) as f:
        spec = json.load(f)
    os.environ.update(spec["env"])
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
