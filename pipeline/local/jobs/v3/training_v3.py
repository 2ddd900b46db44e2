"""A training job built with SageMaker Python SDK v3's ``ModelTrainer``, run as v3's drivers
run it: the launch its sm_drivers files describe (``sdk_v3.py``), v3's environment, the code
channel as the working folder, and MPI ranks through the runner's one mpirun over the
simulated hosts (``hosts/mpi.py``), as many as v3's MPI driver would start.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

from pipeline.definition.instances import gpus_per_instance
from pipeline.images import catalog
from pipeline.local.hosts import mpi
from pipeline.local.jobs import contract, launchers, requirement_paths
from pipeline.local.jobs.failures import CLIENT_ERROR, JobFailure
from pipeline.local.jobs.lifecycle import arn, base_environment
from pipeline.local.jobs.training import TrainingJob, extract_sourcedir
from pipeline.local.jobs.v3.sdk_v3 import (
    CODE_CHANNEL,
    COMMAND,
    DRIVERS_CHANNEL,
    MPI,
    SAID_BEFORE_RUN,
    TORCHRUN,
    Launch,
    LaunchUndetermined,
    basic_command,
    command_line,
    drivers_uri,
    environment,
    from_store,
    is_v3,
    mpi_command,
    rank_warning,
    script_arguments,
    torchrun_command,
)
from training_entry.contract import BASE_DIR_ENV


def mpi4py_importable(python: str) -> bool:
    # The job's Python runs what its installed requirements put at its start (a .pth file):
    # never with the runner's environment, only what every job gets.
    done = subprocess.run([python, "-c", "import importlib.util, sys; "
                           "sys.exit(importlib.util.find_spec('mpi4py') is None)"],
                          capture_output=True, timeout=120, env=base_environment(dict(os.environ)))
    return done.returncode == 0


def mpi4py_missing(launch: Launch, image_uri: str, python: str) -> str:
    """The one line for an MPI job whose Python has no mpi4py: whether the image has it (its
    record, ``pipeline/images``) says whose to fix."""
    record = catalog.find(image_uri)
    head = (f"distributed=MPI(...) runs every rank as `python -m mpi4py {launch.entry_script}`, and "
            f"mpi4py is not importable in this job's Python ({python})")
    if record is not None and record.provides("mpi4py"):
        return (f"{head}, though the image {image_uri} has it (record {record.name}): install mpi4py "
                f"where trainpipe runs (pip install mpi4py), or add it to SourceCode(requirements=...)")
    return (f"{head}, and the image {image_uri or '(none)'} has none either: add mpi4py to "
            f"SourceCode(requirements=...)")


class TrainingJobV3(TrainingJob):
    """A ModelTrainer job: the code is the ``code`` channel, the launch is what
    sourcecode.json and distributed.json say (``read_launch``), the environment is v3's
    (``environment``). MPI ranks start through the runner's one mpirun over the simulated
    hosts (``hosts/mpi.py``), as many as v3's driver would start."""

    v3: Launch | None = None

    def check_launch(self) -> None:
        uri = drivers_uri(self.request)
        where = f"training job {self.name}"
        if uri is None:
            raise JobFailure(f"{where}: no {DRIVERS_CHANNEL} channel: nothing says which script to "
                             f"run; keep the channels SDK v3's ModelTrainer adds", CLIENT_ERROR)
        try:
            self.v3 = from_store(self.storage, uri, where)
        except LaunchUndetermined as error:
            raise JobFailure(str(error), CLIENT_ERROR) from None
        self.note(f"SDK v3 ModelTrainer job: {self.v3.kind}"
                  + (f" {self.v3.entry_script}" if self.v3.kind != COMMAND else f": {self.v3.command}")
                  + (f" (requirements {self.v3.requirements})" if self.v3.requirements else ""))
        if self.v3.kind == TORCHRUN:
            # torchrun_driver.py: torchrun on every host, as SDK v2's torch_distributed (training.py).
            self.launcher = launchers.TORCHRUN
            self.processes_per_host = self.v3.processes_per_host(gpus_per_instance(self.instance_type) or 0)
        if self.v3.kind == MPI:
            # SageMaker v3: no process_count_per_node means one rank per GPU of the instance
            # type (SM_NUM_GPUS there); this machine's own GPUs do not count.
            gpus = gpus_per_instance(self.instance_type) or 0
            per_host = self.v3.processes_per_host(gpus)
            self.mpi_enabled = True
            self.processes_per_host = per_host
            self.num_processes = self.v3.mpi_ranks(gpus)
            if self.num_processes > per_host * len(self.hosts):
                raise JobFailure(
                    f"{where}: mpi_additional_options ask for -np {self.num_processes}, more than the "
                    f"{per_host * len(self.hosts)} slots v3's mpirun lists ({len(self.hosts)} instances x "
                    f"process_count_per_node={per_host}); Open MPI refuses that on SageMaker: give at most "
                    f"-np {per_host * len(self.hosts)}", CLIENT_ERROR)
            self.rank_count = self.num_processes
            self.rank_to_host = mpi.rank_hosts(self.hosts, per_host, self.rank_count)
            warning = rank_warning(self.v3, len(self.hosts), gpus)
            if warning in SAID_BEFORE_RUN:
                self.sink.line(f"[{self.name}] warning: {warning}", echo=False)
            elif warning:
                self.warn(warning)

    def custom_mpi_options(self) -> str:
        return shlex.join(self.v3.mpi_options) if self.v3 is not None else ""

    def code_paths(self) -> list[Path]:
        return [self.code_dir(self.hosts[0])]

    def code_dir(self, host: str) -> Path:
        return self.host_dir(host) / "input" / "data" / CODE_CHANNEL

    def code_cwd(self, host: str) -> Path:
        # SageMaker v3: sm_train.sh cds into the code channel before the driver runs.
        return self.container_base(host) / "input" / "data" / CODE_CHANNEL

    def unpack_code(self, base: Path) -> None:
        code = base / "input" / "data" / CODE_CHANNEL
        code.mkdir(parents=True, exist_ok=True)
        if self.v3 is not None and self.v3.source_archive:
            # SageMaker v3: source_dir given as a .tar.gz is unpacked in place (tar -xzf).
            archive = code / self.v3.source_archive
            if not archive.is_file():
                raise JobFailure(f"sourcecode.json's source_dir {self.v3.source_archive}: not in the "
                                 f"{CODE_CHANNEL} channel", CLIENT_ERROR)
            extract_sourcedir(archive, code)

    def requirements(self) -> bytes | None:
        if self.v3 is None or not self.v3.requirements:
            return None
        path = self.code_dir(self.hosts[0]) / self.v3.requirements
        if not path.is_file():
            raise JobFailure(f"sourcecode.json's requirements {self.v3.requirements}: no such file in "
                             f"the {CODE_CHANNEL} channel (SageMaker's install would fail the same way)",
                             CLIENT_ERROR)
        # pip installs it from the runner, outside the namespaces: only files of the code.
        return requirement_paths.checked_bytes(path, self.code_dir(self.hosts[0]))

    def mpi4py_ranks(self) -> bool:
        return self.v3 is not None and self.v3.kind == MPI

    def ready(self) -> None:
        super(TrainingJob, self).ready()  # the job's Python; v2's requirements.txt rule is not v3's
        if self.v3 is not None and self.v3.requirements:
            # SageMaker v3: sm_train.sh installs SourceCode.requirements before the driver.
            self.python_env.install_requirements(self.code_dir(self.hosts[0]) / self.v3.requirements,
                                                 self.logs_dir / "requirements.log")
        if self.v3 is not None and self.v3.kind == TORCHRUN:
            # Checked before any step too (sdk_v3.check_launch); here against the job's own Python.
            missing = launchers.torch_missing("distributed=Torchrun(...)", self.image_uri,
                                              catalog.find(self.image_uri),
                                              launchers.installs_torch(self.requirements()), self.python)
            if missing:
                raise JobFailure(missing, CLIENT_ERROR)
        if self.v3 is not None and self.v3.kind == MPI and not mpi4py_importable(self.python):
            raise JobFailure(mpi4py_missing(self.v3, self.image_uri, self.python), CLIENT_ERROR)

    def host_environment(self, host: str) -> dict:
        base = self.container_base(host)
        env = self.environment(host)
        # SageMaker: the platform sets the request's Environment map in the container.
        env.update({k: str(v) for k, v in (self.request.get("Environment") or {}).items()})
        env.update(environment(
            str(base), current_host=host, hosts=self.hosts, instance_type=self.instance_type,
            hyperparameters=self.ordered_hyperparameters(),
            input_data_config={c.name: c.input_data_config() for c in self.channels},
            resource_config=contract.resource_config(host, self.hosts, self.instance_type),
            launch=self.v3, job_name=self.name,
            **({"master_port": self.rendezvous_port()} if self.v3 is not None and self.v3.kind == TORCHRUN else {})))
        env.update({
            "TRAINING_JOB_NAME": self.name,
            "TRAINING_JOB_ARN": arn(self.region, self.account, "training-job", self.name),
            BASE_DIR_ENV: str(base),
            "PYTHONUNBUFFERED": "1",  # lines reach the log (and the metric regexes) as printed
            "HOROVOD_HOSTNAME": host,  # Horovod: the host grouping Gloo would use
        })
        return env

    def ordered_hyperparameters(self) -> dict[str, str]:
        """hyperparameters.json as this runner writes it (sorted), container paths moved
        where this machine gives no private /opt/ml."""
        base = self.container_base(self.hosts[0])
        return {k: contract.relocate(v, base) for k, v in sorted(self.hyperparameters.items())}

    def command(self, host: str) -> list[str]:
        args = script_arguments(self.ordered_hyperparameters())
        if self.v3.kind == COMMAND:
            return command_line(self.v3)
        if self.v3.kind == TORCHRUN:
            # torchrun_driver.py: torchrun on every host, as SDK v2's torch_distributed (training.py).
            self.launcher = launchers.TORCHRUN
            self.processes_per_host = self.v3.processes_per_host(gpus_per_instance(self.instance_type) or 0)
        if self.v3.kind == MPI:
            return mpi_command(self.python, self.v3, args)
        if self.v3.kind == TORCHRUN:
            return torchrun_command(self.python, self.v3, self.hosts, host, args,
                                    gpus_per_instance(self.instance_type) or 0,
                                    port=self.rendezvous_port(), master_addr=self.master_addr(),
                                    log_dir=str(self.torchrun_logs(host)))
        return basic_command(self.python, self.v3, args)


def job_class(request: Mapping) -> type[TrainingJob]:
    """The job that runs a training request: SDK v3's ModelTrainer jobs have their own."""
    return TrainingJobV3 if is_v3(request) else TrainingJob
