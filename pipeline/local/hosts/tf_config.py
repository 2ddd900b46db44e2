"""TF_CONFIG for each process of a parameter-server or MultiWorkerMirroredStrategy job, as
the SageMaker TensorFlow training toolkit writes it, with the ports this machine can give.

SageMaker: ``sagemaker_tensorflow_container/training.py`` (aws/sagemaker-tensorflow-training-
toolkit at 18813ea, lines 41-113 and 159-221) decides, per host:

- ``sagemaker_parameter_server_enabled`` and more than one host: the first host is
  ``master`` (index 0), the others ``worker`` (their index among hosts[1:]), all on port
  2222; every host also runs a parameter server, ``ps`` on port 2223 (index: the host's
  position). The toolkit starts that server itself, beside the script, on every host; the
  script runs once per host. One host: no parameter servers and no TF_CONFIG at all.
- ``sagemaker_multi_worker_mirrored_strategy_enabled``: every host is a ``worker`` on port
  8890, index its position; the script runs once per host.

Both carry ``"environment": "cloud"``. Standard library only (tests compare it with the
toolkit's own functions, tests/pipeline/local/hosts/toolkit_training.py).

Here all simulated hosts share this machine's network: the toolkit's fixed ports would
collide, so every (host, toolkit port) pair gets a free loopback port of its own
(``PortMap``); the host names stay (they resolve to 127.0.0.1 in each host's namespace).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping

# SageMaker: the hyperparameters the SDK sets from the estimator's ``distribution``.
PARAMETER_SERVER_ENABLED = "sagemaker_parameter_server_enabled"
MULTI_WORKER_MIRRORED_ENABLED = "sagemaker_multi_worker_mirrored_strategy_enabled"
MPI_ENABLED = "sagemaker_mpi_enabled"

# SageMaker: the toolkit's ports (training.py lines 62, 68, 106).
WORKER_PORT = 2222  # master and worker tasks of a parameter-server job
PS_PORT = 2223
MWMS_PORT = 8890
ENVIRONMENT = "cloud"

TF_CONFIG_ENV = "TF_CONFIG"

# (host, the toolkit's port) -> "address:port" as the processes of this job dial it.
Address = Callable[[str, int], str]


def toolkit_address(host: str, port: int) -> str:
    """The toolkit's own: the host name and its fixed port."""
    return f"{host}:{port}"


def parameter_server_enabled(framework: Mapping, hosts: list[str]) -> bool:
    """SageMaker: the toolkit runs parameter servers only with more than one host."""
    return _truthy(framework.get(PARAMETER_SERVER_ENABLED)) and len(hosts) > 1


def mirrored_enabled(framework: Mapping) -> bool:
    return _truthy(framework.get(MULTI_WORKER_MIRRORED_ENABLED))


def _truthy(value) -> bool:
    # Hyperparameters arrive JSON-decoded (True) or as the strings the request holds.
    return value is True or str(value).strip().lower() == "true"


def for_parameter_server(hosts: list[str], current_host: str, ps_task: bool = False,
                         address: Address = toolkit_address) -> dict:
    """The toolkit's ``_build_tf_config_for_ps``: for the script on ``current_host``, or
    (``ps_task``) for the parameter server the toolkit runs beside it."""
    masters, workers = hosts[:1], hosts[1:]
    ps = hosts if len(hosts) > 1 else None
    cluster = {"master": [address(h, WORKER_PORT) for h in masters]}
    if ps:
        cluster["ps"] = [address(h, PS_PORT) for h in ps]
    if workers:
        cluster["worker"] = [address(h, WORKER_PORT) for h in workers]
    if ps_task:
        if ps is None:
            raise ValueError("Cannot have a ps task if there are no parameter servers in the cluster")
        task = {"index": ps.index(current_host), "type": "ps"}
    elif current_host == hosts[0]:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": workers.index(current_host), "type": "worker"}
    return {"cluster": cluster, "environment": ENVIRONMENT, "task": task}


def for_mirrored(hosts: list[str], current_host: str, address: Address = toolkit_address) -> dict:
    """The toolkit's ``_build_tf_config_for_mwms``."""
    return {
        "cluster": {"worker": [address(h, MWMS_PORT) for h in hosts]},
        "environment": ENVIRONMENT,
        "task": {"index": hosts.index(current_host), "type": "worker"},
    }


def encode(tf_config: dict) -> str:
    """As the toolkit puts it in the environment (``json.dumps``)."""
    return json.dumps(tf_config)


class PortMap:
    """A free loopback port for every (host, toolkit port) of one job, chosen once.

    The ports are found free by binding port 0 and are released before TensorFlow binds
    them; another program could take one in between, and the task then fails at start
    with "address already in use" (its reason ends the job at once)."""

    def __init__(self, hosts: list[str], toolkit_ports: list[int], names_resolve: bool = True):
        # Without the hosts' namespaces the names algo-N do not resolve: loopback instead.
        self.names_resolve = names_resolve
        self.ports = {}
        sockets = []
        try:
            for host in hosts:
                for port in toolkit_ports:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.bind(("127.0.0.1", 0))
                    sockets.append(s)  # held until all are chosen: no two the same
                    self.ports[(host, port)] = s.getsockname()[1]
        finally:
            for s in sockets:
                s.close()

    def address(self, host: str, port: int) -> str:
        return f"{host if self.names_resolve else '127.0.0.1'}:{self.ports[(host, port)]}"

    def describe(self) -> str:
        return ", ".join(f"{host}:{port}->{mapped}" for (host, port), mapped in self.ports.items())
