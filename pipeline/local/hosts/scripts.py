"""Which of a job's processes are its scripts: each rank's (or task's) Python, found by the
job's token; not the launchers (mpirun, its daemons, torchrun's agent shell), nor a
parameter-server job's servers (``tf_tasks.PS_PROGRAM``), which SageMaker's toolkit runs beside
the script and the chief needs to finish its last epoch.

A stopped job's SIGTERM goes to these (``jobs/lifecycle.py``, ``jobs/tuning/trials.py``), not to
the launchers: Open MPI's mpirun aborts on SIGTERM and kills its ranks a second later
(odls_base_sigkill_timeout), before a script has saved what it trained."""

from __future__ import annotations

from pathlib import Path

from pipeline.local.hosts import tf_tasks
from pipeline.local.hosts.processes import tagged_pids

LAUNCHERS = ("mpirun", "orterun", "orted", "prterun", "prted", "sh", "bash")
_PS_ARGV = tf_tasks.PS_PROGRAM.encode()  # a parameter server's ``python -c PS_PROGRAM``


def script_pids(token: str) -> list[int]:
    pids = []
    for pid in tagged_pids(token):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if name not in LAUNCHERS and _PS_ARGV not in argv:
            pids.append(pid)
    return pids
