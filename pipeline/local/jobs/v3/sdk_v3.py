"""SageMaker Python SDK v3's training contract: what a ``ModelTrainer`` job says it runs.

A v3 training job has no ``sagemaker_*`` hyperparameters. ``ModelTrainer`` uploads two
channels beside the data channels and makes the container run a script from one of them:

- ``AlgorithmSpecification.ContainerEntrypoint`` ``["/bin/bash"]``, ``ContainerArguments``
  ``["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && .../sm_train.sh"]``;
- channel ``code``: the user's ``source_dir`` (a folder, or a ``.tar.gz`` unpacked in place);
- channel ``sm_drivers``: the SDK's drivers, ``sm_train.sh``, and two files that say what to
  launch: ``sourcecode.json`` (``SourceCode.model_dump()``: ``entry_script``, ``command``,
  ``args`` (3.27: words appended to the command), ``requirements``, ``source_dir``,
  ``ignore_patterns``) and ``distributed.json``
  (``MPI(...)``/``Torchrun(...)``'s ``model_dump()``, ``{}`` when not distributed).

``sm_train.sh`` runs ``scripts/environment.py`` (the ``SM_*`` variables below), cds into the
code, installs the requirements, then: the ``command`` through bash when there is one; else
the distributed driver (``mpi_driver.py``: ``mpirun --host algo-1:P,algo-2:P -np P ...
python -m mpi4py <entry_script> <args>`` on algo-1, over SSH; ``torchrun_driver.py``:
``torchrun --nnodes N --nproc_per_node P ...`` on every host); else
``basic_script_driver.py`` (``python <entry_script> <args>``, or a ``.sh`` through sh).

The local runner reads those two files itself (here, before any step runs too) and
``training_v3.py`` launches the same processes; it runs none of AWS's driver code (no sshd,
no paramiko, nothing written to the machine's /etc/environment). Read from sagemaker-python-sdk's ``sagemaker-train`` (``model_trainer.py``,
``templates.py``, ``container_drivers/``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pipeline.definition.instances import gpus_per_instance
from pipeline.errors import UserError
from pipeline.local.hosts import torchrun
from pipeline.local.jobs import contract, launchers
from pipeline.local.jobs.failures import missing_program
from pipeline.local.store.storage import Storage, StorageError

# SageMaker v3: the channels ModelTrainer adds, and the files it writes into sm_drivers.
CODE_CHANNEL = "code"
DRIVERS_CHANNEL = "sm_drivers"
SOURCE_CODE_JSON = "sourcecode.json"
DISTRIBUTED_JSON = "distributed.json"
TRAIN_SCRIPT = "sm_train.sh"
# SageMaker v3 (environment.py): the master is algo-1, port 7777 (torchrun's rendezvous).
MASTER_ADDR = "algo-1"
MASTER_PORT = 7777
LOG_LEVEL = 20

# Which driver a distributed.json is the model_dump() of: MPI and Torchrun's fields.
MPI_FIELDS = frozenset({"process_count_per_node", "mpi_additional_options"})
TORCHRUN_FIELDS = frozenset({"process_count_per_node", "smp"})
BASIC, COMMAND, MPI, TORCHRUN = "basic script", "command", "MPI", "Torchrun"
# sm_train.sh names the driver it runs: .../sm_drivers/distributed_drivers/<name>.py
_DRIVER_RE = re.compile(r"distributed_drivers/([A-Za-z0-9_]+\.py)")
_KNOWN_DRIVERS = {"mpi_driver.py": MPI, "torchrun_driver.py": TORCHRUN, "basic_script_driver.py": BASIC}
# mpirun's options for the total process count (Open MPI 4): the last one given wins.
_NP_OPTIONS = ("-np", "--np", "-n", "-c")
# Rank warnings the runner said before any step (check_launch's ``say``): the job writes them
# once more in its own log only, not again on the console and in its result (issue 47: the
# same line was printed five times).
SAID_BEFORE_RUN: set[str] = set()


class LaunchUndetermined(UserError):
    """A v3 training job whose sm_drivers files do not say what to launch."""


def is_v3(request: Mapping) -> bool:
    """A training request ModelTrainer made: it runs sm_train.sh, or carries an sm_drivers
    channel (and no ``sagemaker_program``, the v2 estimators' way of naming the script)."""
    spec = request.get("AlgorithmSpecification") or {}
    if any(TRAIN_SCRIPT in str(a) for a in spec.get("ContainerArguments") or []):
        return True
    hyperparameters = request.get("HyperParameters") or {}
    channels = [c.get("ChannelName") for c in request.get("InputDataConfig") or []]
    return DRIVERS_CHANNEL in channels and "sagemaker_program" not in hyperparameters


def drivers_uri(request: Mapping) -> str | None:
    """The S3 URI of the request's sm_drivers channel (None when it has none, or the value
    is not known yet)."""
    for channel in request.get("InputDataConfig") or []:
        if channel.get("ChannelName") == DRIVERS_CHANNEL:
            uri = ((channel.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
            return uri if isinstance(uri, str) else None
    return None


@dataclass(frozen=True)
class Launch:
    """What sm_train.sh would run, read from sourcecode.json and distributed.json."""

    kind: str  # BASIC | COMMAND | MPI | TORCHRUN
    entry_script: str | None = None
    command: str | None = None
    command_args: list = field(default_factory=list)  # SourceCode.args: only with a command
    requirements: str | None = None
    source_archive: str | None = None  # source_dir's basename when it is a .tar.gz
    process_count_per_node: int | None = None
    mpi_options: list[str] = field(default_factory=list)  # mpi_additional_options, -np removed
    np_option: int | None = None  # a -np in mpi_additional_options (the last wins, as in mpirun)
    distributed: dict = field(default_factory=dict)  # distributed.json as read

    def processes_per_host(self, num_gpus: int = 0) -> int:
        """SageMaker v3 (common/utils.get_process_count): the setting, else the GPUs, else 1."""
        return int(self.process_count_per_node or 0) or num_gpus or 1

    def mpi_ranks(self, num_gpus: int = 0) -> int:
        """The ranks v3's MPI driver starts: ``-np`` is the processes *per node*
        (mpi_driver.py passes process_count as num_processes), unless the user's
        mpi_additional_options give another -np, which mpirun takes over the first."""
        return self.np_option or self.processes_per_host(num_gpus)


def _np_of(options: list[str], where: str) -> tuple[int | None, list[str]]:
    rest, found = [], None
    i = 0
    while i < len(options):
        word = options[i]
        if word in _NP_OPTIONS and i + 1 < len(options):
            try:
                found = int(options[i + 1])
            except ValueError:
                raise LaunchUndetermined(f"{where}: mpi_additional_options {word} {options[i + 1]!r} "
                                         f"is not a number of processes; give -np N") from None
            i += 2
            continue
        rest.append(word)
        i += 1
    return found, rest


def read_launch(source_code: Mapping | None, distributed: Mapping | None, train_script: str | None,
                where: str) -> Launch:
    """The launch sm_train.sh would make, or LaunchUndetermined naming what is missing.

    ``where`` names the step (or job) and the sm_drivers location for the message."""
    fix = ("build the step with sagemaker.train.ModelTrainer(source_code=SourceCode(source_dir=..., "
           "entry_script=... or command=...), distributed=MPI(...)|Torchrun(...)|None) so that "
           f"{DRIVERS_CHANNEL}/{SOURCE_CODE_JSON} and {DISTRIBUTED_JSON} are uploaded with it")
    source_code = dict(source_code or {})
    distributed = dict(distributed or {})
    if not source_code:
        raise LaunchUndetermined(f"{where}: no {SOURCE_CODE_JSON} (or an empty one) in the "
                                 f"{DRIVERS_CHANNEL} channel: nothing says which script to run; {fix}")
    entry, command = source_code.get("entry_script"), source_code.get("command")
    source_dir = str(source_code.get("source_dir") or "")
    requirements = source_code.get("requirements")
    if requirements and (PurePosixPath(str(requirements)).is_absolute() or ".." in PurePosixPath(str(requirements)).parts):
        # sm_train.sh installs it from the code folder: a path out of it would read a file of
        # this machine (and pip would echo its lines into the job's log).
        raise LaunchUndetermined(f"{where}: {SOURCE_CODE_JSON}'s requirements {requirements!r} is not a file of "
                                 f"the code: give SourceCode(requirements=...) a path inside source_dir, "
                                 f"without a leading / or '..'")
    common = {"entry_script": entry or None, "command": command or None,
              "command_args": list(source_code.get("args") or []),
              "requirements": source_code.get("requirements") or None,
              "source_archive": PurePosixPath(source_dir).name if source_dir.endswith(".tar.gz") else None,
              "distributed": distributed}
    named = None
    if train_script is not None:
        drivers = _DRIVER_RE.findall(train_script)
        named = drivers[-1] if drivers else None
        if named is not None and named not in _KNOWN_DRIVERS:
            raise LaunchUndetermined(
                f"{where}: {TRAIN_SCRIPT} runs the driver {named}, which is not one of the SDK's "
                f"({', '.join(sorted(_KNOWN_DRIVERS))}); its launch cannot be known here: use "
                f"distributed=MPI(...) or Torchrun(...), or SourceCode(command=...)")
    if command:
        # SageMaker v3 (_prepare_train_script): a command wins over the entry script and the
        # distributed driver; it runs through bash in the code folder, with no arguments.
        return Launch(COMMAND, **common)
    if not entry:
        raise LaunchUndetermined(f"{where}: {SOURCE_CODE_JSON} names neither entry_script nor "
                                 f"command; {fix}")
    if distributed:
        keys = frozenset(distributed)
        if keys == MPI_FIELDS:
            count, options = _np_of([str(o) for o in distributed.get("mpi_additional_options") or []], where)
            return Launch(MPI, process_count_per_node=distributed.get("process_count_per_node"),
                          mpi_options=options, np_option=count, **common)
        if keys == TORCHRUN_FIELDS:
            return Launch(TORCHRUN, process_count_per_node=distributed.get("process_count_per_node"), **common)
        raise LaunchUndetermined(
            f"{where}: {DISTRIBUTED_JSON} has the fields {sorted(keys)}, which are neither "
            f"MPI's {sorted(MPI_FIELDS)} nor Torchrun's {sorted(TORCHRUN_FIELDS)} (a DistributedConfig "
            f"of your own runs a driver this runner cannot know): use MPI(...) or Torchrun(...)")
    if named is not None and _KNOWN_DRIVERS[named] != BASIC:
        raise LaunchUndetermined(f"{where}: {TRAIN_SCRIPT} runs {named} but {DISTRIBUTED_JSON} is "
                                 f"empty; upload the files one ModelTrainer wrote together")
    if not str(entry).endswith((".py", ".sh")):
        raise LaunchUndetermined(f"{where}: entry_script {entry!r} is neither .py nor .sh, which "
                                 f"v3's basic script driver refuses; name a .py or .sh script or "
                                 f"use SourceCode(command=...)")
    return Launch(BASIC, **common)


def parse_json_file(data: bytes | None, name: str, where: str) -> dict | None:
    if data is None:
        return None
    try:
        value = json.loads(data or b"null") or {}
    except ValueError as error:
        raise LaunchUndetermined(f"{where}: {DRIVERS_CHANNEL}/{name} is not JSON ({error}); "
                                 f"upload the file ModelTrainer wrote") from None
    if not isinstance(value, dict):
        raise LaunchUndetermined(f"{where}: {DRIVERS_CHANNEL}/{name} holds a {type(value).__name__}, "
                                 f"not an object; upload the file ModelTrainer wrote")
    return value


# --- What the job's processes see ------------------------------------------------------------
def safe_deserialize(value):
    """v3's common/utils.safe_deserialize: a JSON string decoded, anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def safe_serialize(value) -> str:
    """v3's common/utils.safe_serialize: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def script_arguments(hyperparameters: Mapping[str, object]) -> list[str]:
    """v3's hyperparameters_to_cli_args: ``--key value`` in the order of hyperparameters.json
    (SM_HPS holds them decoded once; the driver decodes each value again)."""
    args = []
    for key, value in hyperparameters.items():
        args += [f"--{key}", safe_serialize(safe_deserialize(value))]
    return args


def environment(base: str, *, current_host: str, hosts: list[str], instance_type: str,
                hyperparameters: Mapping[str, str], input_data_config: Mapping[str, Mapping],
                resource_config: Mapping, launch: Launch, job_name: str,
                num_gpus: int = 0, num_cpus: int | None = None,
                master_port: int = MASTER_PORT) -> dict[str, str]:
    """The variables v3's scripts/environment.py writes to sm_training.env, which sm_train.sh
    sources before the driver runs: paths under ``base`` (the host's /opt/ml), the channels,
    the hyperparameters (``SM_HP_*``, ``SM_HPS``), the hosts, the driver's settings."""
    base = base.rstrip("/")
    hps = {k: safe_deserialize(v) for k, v in hyperparameters.items()}
    channels = list(input_data_config)
    sorted_hosts = sorted(hosts)
    env: dict[str, object] = {
        "SM_MODEL_DIR": f"{base}/model",
        "SM_INPUT_DIR": f"{base}/input",
        "SM_INPUT_DATA_DIR": f"{base}/input/data",
        "SM_INPUT_CONFIG_DIR": f"{base}/input/config",
        "SM_OUTPUT_DIR": f"{base}/output",
        "SM_OUTPUT_FAILURE": f"{base}/output/failure",
        "SM_OUTPUT_DATA_DIR": f"{base}/output/data",
        "SM_LOG_LEVEL": LOG_LEVEL,
        "SM_MASTER_ADDR": MASTER_ADDR,
        "SM_MASTER_PORT": master_port,
        "SM_SOURCE_DIR": f"{base}/input/data/{CODE_CHANNEL}",
        "SM_ENTRY_SCRIPT": launch.entry_script or "",
    }
    if launch.distributed:
        env["SM_DISTRIBUTED_DRIVER_DIR"] = f"{base}/input/data/{DRIVERS_CHANNEL}/distributed_drivers"
        env["SM_DISTRIBUTED_CONFIG"] = launch.distributed
    for channel in channels:
        env[f"SM_CHANNEL_{channel.upper()}"] = f"{base}/input/data/{channel}"
    env["SM_CHANNELS"] = channels
    for key, value in hps.items():
        env[f"SM_HP_{key.replace('-', '_').upper()}"] = value
    env["SM_HPS"] = hps
    env.update({
        "SM_CURRENT_HOST": current_host,
        "SM_CURRENT_INSTANCE_TYPE": instance_type,
        "SM_HOSTS": sorted_hosts,
        "SM_NETWORK_INTERFACE_NAME": resource_config.get("network_interface_name", "eth0"),
        "SM_HOST_COUNT": len(sorted_hosts),
        "SM_CURRENT_HOST_RANK": sorted_hosts.index(current_host),
        "SM_NUM_CPUS": num_cpus if num_cpus is not None else (os.cpu_count() or 1),
        "SM_NUM_GPUS": num_gpus,
        "SM_NUM_NEURONS": 0,
        "SM_RESOURCE_CONFIG": dict(resource_config),
        "SM_INPUT_DATA_CONFIG": {k: dict(v) for k, v in input_data_config.items()},
    })
    env["SM_TRAINING_ENV"] = {
        "channel_input_dirs": {c: env[f"SM_CHANNEL_{c.upper()}"] for c in channels},
        "current_host": current_host, "current_instance_type": instance_type,
        "hosts": sorted_hosts, "master_addr": MASTER_ADDR, "master_port": master_port,
        "hyperparameters": hps, "input_data_config": env["SM_INPUT_DATA_CONFIG"],
        "input_config_dir": env["SM_INPUT_CONFIG_DIR"], "input_data_dir": env["SM_INPUT_DATA_DIR"],
        "input_dir": env["SM_INPUT_DIR"], "job_name": job_name, "log_level": LOG_LEVEL,
        "model_dir": env["SM_MODEL_DIR"], "network_interface_name": env["SM_NETWORK_INTERFACE_NAME"],
        "num_cpus": env["SM_NUM_CPUS"], "num_gpus": num_gpus, "num_neurons": 0,
        "output_data_dir": env["SM_OUTPUT_DATA_DIR"], "resource_config": env["SM_RESOURCE_CONFIG"],
    }
    return {k: safe_serialize(v) for k, v in env.items()}


def basic_command(python: str, launch: Launch, args: list[str]) -> list[str]:
    """basic_script_driver.py: ``python <entry> args``; a .sh made executable and run by sh."""
    entry = str(launch.entry_script)
    if entry.endswith(".py"):
        return [python, entry, *args]
    return ["/bin/sh", "-c", f"chmod +x {entry} && ./{entry} {shlex.join(args)}"]


def command_line(launch: Launch) -> list[str]:
    """SourceCode(command=...): sm_train.sh's ``CMD="..."; eval $CMD`` in bash: the command's
    words joined by single spaces, each of SourceCode.args shell-quoted after them, as
    _prepare_train_script does (hyperparameters are not arguments here: SM_HPS has them)."""
    words = str(launch.command).split() + [shlex.quote(str(a)) for a in launch.command_args]
    return ["/bin/bash", "-c", " ".join(words)]


def mpi_command(python: str, launch: Launch, args: list[str]) -> list[str]:
    """What every rank of mpi_driver.py's mpirun runs."""
    return [python, "-m", "mpi4py", str(launch.entry_script), *args]


def torchrun_command(python: str, launch: Launch, hosts: list[str], current_host: str, args: list[str],
                     num_gpus: int = 0, port: int = MASTER_PORT, master_addr: str = MASTER_ADDR,
                     log_dir: str | None = None) -> list[str]:
    """torchrun_driver.py's command on one host (PyTorch >= 1.9: ``torchrun``), as
    ``hosts/torchrun.py`` runs it for SDK v2's torch_distributed too."""
    return torchrun.command(python, hosts, current_host, launch.processes_per_host(num_gpus), port,
                            str(launch.entry_script), args, master_addr=master_addr, log_dir=log_dir)


def rank_warning(launch: Launch, hosts: int, num_gpus: int = 0) -> str | None:
    """The line said before an MPI job whose ranks SageMaker would start fewer of than asked.

    v3's mpi_driver.py runs ``mpirun --host algo-1:P,algo-2:P -np P``: -np is the processes
    per node, so Open MPI fills algo-1's P slots and the other hosts run nothing. A later
    ``-np`` in mpi_additional_options wins (tried with Open MPI 4.1: ``mpirun --host
    algo-1:2,algo-2:2 -np 2 ... -np 4 --display-map`` maps ranks 0-1 on algo-1, 2-3 on algo-2)."""
    per_host = launch.processes_per_host(num_gpus)
    asked, started = per_host * hosts, launch.mpi_ranks(num_gpus)
    if hosts < 2 or started >= asked:
        return None
    each = (f"process_count_per_node={per_host}" if launch.process_count_per_node
            else f"{per_host} per instance, its GPUs")
    return (f"SageMaker would start {started} MPI rank(s), not the {asked} asked for ({hosts} instances x "
            f"{each}): v3's MPI driver passes process_count_per_node as "
            f"mpirun's -np, so every rank runs on algo-1 and the other instances idle; running the "
            f"{started} SageMaker would run. To start {asked}, add -np to the MPI settings: "
            f"MPI(process_count_per_node={per_host}, mpi_additional_options=['-np', '{asked}'])")


# --- Before anything runs -----------------------------------------------------------------------
def from_store(storage: Storage, uri: str, where: str) -> Launch:
    """The launch the sm_drivers channel at ``uri`` describes (its three files read from the
    store), or LaunchUndetermined."""
    base = uri.rstrip("/")
    where = f"{where} ({DRIVERS_CHANNEL} channel {uri})"

    def read(name: str) -> bytes | None:
        key = f"{base}/{name}"
        try:
            return storage.read_bytes(key) if storage.exists(key) else None
        except StorageError as error:
            raise UserError(f"cannot use the {storage.describe()}: {error}") from None

    script = read(TRAIN_SCRIPT)
    return read_launch(parse_json_file(read(SOURCE_CODE_JSON), SOURCE_CODE_JSON, where),
                       parse_json_file(read(DISTRIBUTED_JSON), DISTRIBUTED_JSON, where),
                       script.decode(errors="replace") if script is not None else None, where)


def check_launch(request: Mapping, storage: Storage, where: str, say=None) -> Launch | None:
    """Refuse a training request whose launch cannot be determined (a UserError naming the
    step and the fix); the v3 launch where the request is ModelTrainer's and its sm_drivers
    location is known, else None. ``request`` may hold None for what is not known yet (the
    pre-run check passes the values an earlier step makes as None). ``say`` is told the rank
    warning where the instance count is known: before any step, not only before the job."""
    bad_names = contract.bad_hyperparameter_names(request.get("HyperParameters"))
    if bad_names:
        raise LaunchUndetermined(f"{where}: {bad_names}")
    if is_v3(request):
        uri = drivers_uri(request)
        if uri is None:
            if any(c.get("ChannelName") == DRIVERS_CHANNEL for c in request.get("InputDataConfig") or []):
                return None  # an earlier step makes it: read when the job starts
            raise LaunchUndetermined(f"{where}: its ContainerArguments run {TRAIN_SCRIPT} (SDK v3's "
                                     f"ModelTrainer) but it has no {DRIVERS_CHANNEL} channel to read it "
                                     f"from; keep the channels ModelTrainer adds")
        launch = from_store(storage, uri, where)
        if launch.kind == TORCHRUN:
            code = code_for_image_check(request, storage, where)
            missing = launchers.check_before_run(request, storage, where, code.requirements if code else None,
                                                 what="distributed=Torchrun(...)")
            if missing:
                raise LaunchUndetermined(missing)
        resources = request.get("ResourceConfig") or {}
        count, kind = resources.get("InstanceCount"), resources.get("InstanceType")
        if say is not None and launch.kind == MPI and isinstance(count, int):
            gpus = (gpus_per_instance(kind) or 0) if isinstance(kind, str) else 0
            warning = rank_warning(launch, count, gpus)
            if warning:
                say(f"warning: {where}: {warning}")
                SAID_BEFORE_RUN.add(warning)
        return launch
    hyperparameters = request.get("HyperParameters")
    if isinstance(hyperparameters, Mapping) and "sagemaker_program" not in hyperparameters:
        entry = (request.get("AlgorithmSpecification") or {}).get("ContainerEntrypoint")
        raise LaunchUndetermined(
            f"{where}: its launch cannot be determined: " + (
                f"ContainerEntrypoint {entry} is not SDK v3's sm_train.sh, and " if entry else "")
            + missing_program())
    refused = launchers.check_before_run(request, storage, where)
    if refused:
        raise LaunchUndetermined(refused)
    return None


@dataclass(frozen=True)
class CodeForCheck:
    """What the pre-run image check reads of a v3 job (``dag/image_check.py``'s JobCode)."""

    image_uri: str
    files: dict[str, str]  # path under the code channel -> text
    entry_points: list[str] | None  # None: every .py file
    requirements: str | None
    requirements_name: str


_TEXT_SUFFIXES = (".py", ".sh", ".txt")
_PYTHON_WORD = re.compile(r"^python(3(\.\d+)?)?$")


def code_for_image_check(request: Mapping, storage: Storage, where: str) -> CodeForCheck | None:
    """The code channel's text files, the script v3 would run and sourcecode.json's
    requirements, for a v3 job whose image and channels are known before the run; None for
    any other (a launch that cannot be determined is check_launch's to refuse; a source_dir
    given as a .tar.gz is judged when the job runs)."""
    if not is_v3(request):
        return None
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
    code_uri = next((((c.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
                     for c in request.get("InputDataConfig") or [] if c.get("ChannelName") == CODE_CHANNEL), None)
    uri = drivers_uri(request)
    if not (isinstance(image, str) and isinstance(code_uri, str) and uri):
        return None
    try:
        launch = from_store(storage, uri, where)
    except LaunchUndetermined:
        return None
    if launch.source_archive:
        return None
    base = code_uri.rstrip("/") + "/"
    files = {}
    try:
        for key in storage.list(base)[:2000]:
            if key.endswith(_TEXT_SUFFIXES):
                files[key[len(base):]] = storage.read_bytes(key).decode("utf-8", errors="replace")
    except StorageError:
        return None
    if launch.kind == COMMAND:
        words = str(launch.command).split()
        entry = words[1] if len(words) > 1 and _PYTHON_WORD.match(PurePosixPath(words[0]).name) else None
    else:
        entry = launch.entry_script
    entry_points = [entry] if entry and entry.endswith(".py") else None
    name = launch.requirements or "requirements.txt"
    return CodeForCheck(image, files, entry_points, files.get(name) if launch.requirements else None, name)
