"""torchrun on every simulated host, as SageMaker's training toolkit runs it.

SageMaker: with ``distribution={"torch_distributed": {"enabled": True}}`` (SDK v2) or
``distributed=Torchrun(...)`` (SDK v3) every instance runs

    torchrun --nnodes N --nproc_per_node P --master_addr algo-1 --master_port 7777 --node_rank I script.py ARGS

(sagemaker-training-toolkit ``torch_distributed.TorchDistributedRunner._create_command``; v3's
``torchrun_driver.py`` likewise), and torchrun gives each worker ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``. The
rendezvous goes through algo-1: inside the hosts' namespaces ``algo-1`` resolves through the
job's hosts file (``namespaces.py``) to this machine's loopback address.

Two differences, both for this one machine:
- the port is a free one picked per job, not 7777 (every simulated host shares this machine's
  loopback, and two jobs at once, tuning trials for instance, would take the same port); the
  script sees it as ``MASTER_PORT`` as it would see 7777;
- where the hosts have no namespaces, algo-1 does not resolve, so the address is 127.0.0.1.

``python -m torch.distributed.run`` is what the ``torchrun`` script runs: the job's own Python's
torch, wherever that interpreter's scripts are.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path

# SageMaker: the rendezvous host is the first host in sorted order (the toolkit's master_hostname).
LOOPBACK = "127.0.0.1"
# SageMaker: the toolkit's port (torch_distributed.MASTER_PORT and v3's environment.py).
SAGEMAKER_MASTER_PORT = 7777


def master_host(hosts: list[str]) -> str:
    return sorted(hosts)[0]


def free_port() -> int:
    """A TCP port free on the loopback interface now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def command(python: str, hosts: list[str], current_host: str, processes_per_host: int, port: int,
            entry: str, args: list[str], *, master_addr: str | None = None,
            log_dir: str | None = None) -> list[str]:
    """The torchrun command for ``current_host``. The master's address and port are given
    even for one host (the toolkit leaves them out there, and torchrun then takes port 29500:
    two single-host jobs at once on this machine would collide). With ``log_dir``, torchrun
    also copies each worker's output to a file of its own there (``--tee 3``; the terminal and
    the host's log still get it), so that a failure names the failed worker's own last line."""
    ordered = sorted(hosts)
    logs = [f"--log-dir={log_dir}", "--tee=3"] if log_dir else []
    return [python, "-m", "torch.distributed.run",
            f"--nnodes={len(ordered)}", f"--nproc_per_node={processes_per_host}",
            f"--master_addr={master_addr or master_host(hosts)}", f"--master_port={port}",
            f"--node_rank={ordered.index(current_host)}", *logs,
            entry, *args]


def environment(hosts: list[str], port: int, *, master_addr: str | None = None) -> dict[str, str]:
    """What the PyTorch toolkit sets before it starts the launcher (sagemaker-pytorch-training-
    toolkit ``training._set_distributed_environment`` and ``_set_nccl_environment``): the
    master, and NCCL's settings (read only on GPUs; the interface is loopback here, eth0 there)."""
    return {
        "MASTER_ADDR": master_addr or master_host(hosts),
        "MASTER_PORT": str(port),
        "NCCL_SOCKET_IFNAME": "lo",
        "NCCL_IB_DISABLE": "1",
        "NCCL_DEBUG": "WARN",
    }


@dataclass(frozen=True)
class RootCause:
    """What a host's torchrun reported of the worker that failed first."""

    rank: int | None
    exit_code: int | None
    last_line: str | None  # the last line the workers printed before torchrun took over


# torchrun's summary (torch.distributed.elastic's ChildFailedError) and its own log lines.
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)"
                         r".*?exitcode\s*:\s*(-?\d+)", re.DOTALL)
_ELASTIC_LOG = re.compile(r"^[WEI]\d{4} [\d:.]+ \d+ torch/distributed/elastic/")


def root_cause(log_text: str, log_dir: Path | None = None) -> RootCause | None:
    """The failed worker's global rank, exit code and last line, from a host's torchrun log
    (and the worker's own stderr file under ``log_dir``, where ``command`` had torchrun keep
    one); None when torchrun printed no summary (it was killed, or no worker failed)."""
    match = _ROOT_CAUSE.search(log_text)
    if match is None:
        return None
    rank, local_rank, code = (int(g) for g in match.groups())
    if log_dir is not None:
        # torch.distributed.elastic: <log dir>/<run id>_<suffix>/attempt_<n>/<local rank>/stderr.log
        for path in sorted(Path(log_dir).glob(f"*/attempt_*/{local_rank}/stderr.log"), reverse=True):
            own = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
            if own:
                return RootCause(rank, code, own[-1])
    lines = log_text.splitlines()
    first_elastic = next((i for i, line in enumerate(lines) if _ELASTIC_LOG.match(line)), len(lines))
    last = next((line.strip() for line in reversed(lines[:first_elastic])
                 if line.strip() and not line.startswith("*")), None)
    return RootCause(rank, code, last)
