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

import socket

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
            entry: str, args: list[str], *, master_addr: str | None = None) -> list[str]:
    """The torchrun command for ``current_host``. The master's address and port are given
    even for one host (the toolkit leaves them out there, and torchrun then takes port 29500:
    two single-host jobs at once on this machine would collide)."""
    ordered = sorted(hosts)
    return [python, "-m", "torch.distributed.run",
            f"--nnodes={len(ordered)}", f"--nproc_per_node={processes_per_host}",
            f"--master_addr={master_addr or master_host(hosts)}", f"--master_port={port}",
            f"--node_rank={ordered.index(current_host)}",
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
