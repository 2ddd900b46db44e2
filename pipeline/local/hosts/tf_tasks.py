"""The processes a parameter-server or MultiWorkerMirroredStrategy job starts on each host,
as the SageMaker TensorFlow toolkit starts them, with their TF_CONFIG (``tf_config.py``).

SageMaker (training.py ``train``): the script runs once per host (no mpirun); with
parameter servers the toolkit also runs a ``ps`` server on every host. Here that server is a
process of its own (``PS_PROGRAM``, run by the job's Python), so its death is seen and
reported like any task's. Every process gets its TF_CONFIG set explicitly: nothing of the
caller's environment reaches it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.local.hosts import launch_settings, tf_config

# SageMaker: the toolkit's _run_ps, as a process: the cluster as the toolkit builds it (with
# "master"), no GPU, until stopped. SIGTERM is how the job ends it after the scripts finish:
# exit 0 then. The main thread waits in signal.pause(), not server.join(): a Python handler
# runs only when the main thread is back in the interpreter, which join() never returns to.
PS_PROGRAM = """\
import json, os, signal
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
import tensorflow as tf
config = json.loads(os.environ["TF_CONFIG"])
server = tf.distribute.Server(
    tf.train.ClusterSpec(config["cluster"]), job_name="ps", task_index=config["task"]["index"],
    protocol="grpc", config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}))
print(f"parameter server ps:{config['task']['index']} serving at {server.target}", flush=True)
while True:
    signal.pause()
"""

PS_SUFFIX = ".ps"  # a host's parameter server's label: algo-2.ps


@dataclass
class TfTasks:
    strategy: str  # "parameter_server" or "mirrored"
    hosts: list[str]
    ports: tf_config.PortMap

    @property
    def has_ps(self) -> bool:
        return self.strategy == "parameter_server"

    def script_config(self, host: str) -> str:
        """TF_CONFIG of the script on ``host``."""
        if self.has_ps:
            return tf_config.encode(tf_config.for_parameter_server(self.hosts, host, address=self.ports.address))
        return tf_config.encode(tf_config.for_mirrored(self.hosts, host, address=self.ports.address))

    def ps_config(self, host: str) -> str:
        return tf_config.encode(
            tf_config.for_parameter_server(self.hosts, host, ps_task=True, address=self.ports.address))

    def ps_argv(self, python: str) -> list[str]:
        return [python, "-c", PS_PROGRAM]

    def local_launch(self, request_env: Mapping[str, str] | None = None,
                     environ: Mapping[str, str] | None = None) -> launch_settings.LocalLaunch:
        """Local runs only: each host's script gets its share of this machine's cores, the
        threads ``launch_settings.py`` gives a Horovod rank (cores / hosts intra-op and tf.data, one
        inter-op), as the parameter servers beside it. With TensorFlow's defaults every
        process of every simulated host ran a pool per core: on 2 cores, mirrored's digits
        MLP measured 1.5x faster with them (benchmarks/notes.md, strategies). No pinning, no
        Horovod cycle: neither applies without mpirun. What the user sets wins.
        Parameter servers: TensorFlow's defaults. With one inter-op thread a job's worker
        hung at its first step (the task serves the chief's RPCs and runs its steps on that
        pool), and two measured no faster than the defaults."""
        if self.has_ps:
            return launch_settings.LocalLaunch(threads="threads per process: TensorFlow's defaults (parameter-server tasks)")
        launch = launch_settings.local_launch(len(self.hosts), request_env=request_env, environ=environ)
        threads = {k: v for k, v in launch.env.items() if k not in (launch_settings.CYCLE_TIME_ENV, launch_settings.AFFINITY_ENV)}
        return dataclasses.replace(launch, env=threads, mpirun_options=(), pin=False)

    def describe(self) -> str:
        what = ("one script and one parameter server per host" if self.has_ps
                else "one script per host (MultiWorkerMirroredStrategy)")
        return f"TF_CONFIG as the SageMaker TensorFlow toolkit writes it, {what}; ports {self.ports.describe()}"


def plan(framework: Mapping, hosts: list[str], names_resolve: bool = True) -> TfTasks | None:
    """The job's TensorFlow tasks, or None (Horovod, or a one-host parameter-server job,
    which the toolkit runs as the bare script)."""
    if tf_config.parameter_server_enabled(framework, hosts):
        ports = tf_config.PortMap(hosts, [tf_config.WORKER_PORT, tf_config.PS_PORT], names_resolve)
        return TfTasks("parameter_server", list(hosts), ports)
    if tf_config.mirrored_enabled(framework):
        return TfTasks("mirrored", list(hosts), tf_config.PortMap(hosts, [tf_config.MWMS_PORT], names_resolve))
    return None
