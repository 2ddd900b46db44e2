"""A TrainingJob: the request's channels staged per host, then one ``mpirun`` for all ranks
(``sagemaker_mpi_enabled``; ``mpi.py``) or one process per host.

Channels are staged per host (``channels.py``), checkpoints restored from
``CheckpointConfig.S3Uri``, the code unpacked from ``sagemaker_submit_directory``. At the end:
``model/`` of algo-1 (where rank 0 runs) -> ``<S3OutputPath>/<job>/output/model.tar.gz``,
``output/data`` -> ``output.tar.gz`` beside it, every host's checkpoints -> the checkpoint URI.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import time
from pathlib import Path

from evaluation.report import MODEL_ARCHIVE
from pipeline.definition.bundles import SOURCEDIR_ARCHIVE
from pipeline.images import catalog
from pipeline.local.hosts import launch_settings, mpi, shared_memory, tf_tasks, torchrun
from pipeline.local.hosts.processes import describe_exit, signal_group
from pipeline.local.jobs import contract, launchers, requirement_paths
from pipeline.local.jobs.failures import (
    ALGORITHM_ERROR,
    CLIENT_ERROR,
    INTERNAL_ERROR,
    FailureWatch,
    JobFailure,
    empty_model_warning,
    first_failure,
    missing_program,
)
from pipeline.local.jobs.lifecycle import LocalJob, arn
from pipeline.local.jobs.logs import Metrics, now_iso
from pipeline.local.jobs.packing import extract_sourcedir, pack_directory
from pipeline.local.store import channels as ch
from pipeline.local.store.storage import S3Uri, StorageError, join_uri
from training_entry.contract import CHECKPOINT_DIR, FAILURE_FILE
from training_entry.failure import split_where

# SageMaker: the container's failure reason file.
TRAINING_FAILURE_FILE = FAILURE_FILE
OUTPUT_ARCHIVE = "output.tar.gz"
# SageMaker: the toolkit pip-installs this file of the code before running the script.
REQUIREMENTS = "requirements.txt"
# Every rank must have started (its log file exists) this long after mpirun started; a
# daemon that never came up would otherwise leave mpirun waiting forever.
MPI_LAUNCH_TIMEOUT = 120.0


class TrainingJob(LocalJob):
    kind = "Training"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        req = self.request
        self.image_uri = str((req.get("AlgorithmSpecification") or {}).get("TrainingImage") or "")
        self.metrics = Metrics((req.get("AlgorithmSpecification") or {}).get("MetricDefinitions", []))
        resources = req.get("ResourceConfig") or {}
        self.instance_type = str(resources.get("InstanceType", "local"))
        self.hosts = contract.host_names(int(resources.get("InstanceCount", 1)))
        self.hyperparameters = contract.request_hyperparameters(req.get("HyperParameters"))
        _, self.framework = contract.split_hyperparameters(
            contract.decode_hyperparameters(self.hyperparameters))
        # SageMaker: mpirun, pytorchddp's mpirun, torchrun on every host, or the script per host.
        self.launcher = launchers.launcher(self.framework)
        self.mpi_enabled = self.launcher in (launchers.MPIRUN, launchers.PYTORCHDDP)
        self.processes_per_host = launchers.processes_per_host(self.framework, self.instance_type,
                                                               self.launcher)
        self.master_port: int | None = None  # torchrun: the rendezvous port, picked at launch
        self.num_processes = self.framework.get("sagemaker_mpi_num_processes")
        self.default_input_mode = (req.get("AlgorithmSpecification") or {}).get("TrainingInputMode", ch.FILE)
        self.channels: list[ch.Channel] = []
        checkpoint = req.get("CheckpointConfig") or {}
        self.checkpoint_uri = checkpoint.get("S3Uri")
        self.checkpoint_local = checkpoint.get("LocalPath") or CHECKPOINT_DIR
        self.output_path = (req.get("OutputDataConfig") or {}).get("S3OutputPath") or ""
        # SageMaker: <S3OutputPath>/<job name>/output/model.tar.gz
        self.output_prefix = join_uri(self.output_path, self.name, "output")
        self.model_uri = join_uri(self.output_prefix, MODEL_ARCHIVE)
        self.rank_count = int(self.num_processes or self.processes_per_host * len(self.hosts))
        self.rank_to_host = mpi.rank_hosts(self.hosts, self.processes_per_host, self.rank_count)
        self.mpi_launch: mpi.MpiLaunch | None = None
        self.tf_tasks: tf_tasks.TfTasks | None = None  # parameter_server / mirrored (launch)
        self.launched_at = 0.0
        self.all_ranks_started = False
        self.quieted = False  # said once: the terminal shows only the failing rank (shown)
        self.watch = FailureWatch({
            h: Path(contract.relocate(TRAINING_FAILURE_FILE, self.host_dir(h))) for h in self.hosts})

    # -- staging --
    def check(self) -> dict[str, list[list[ch.StoredObject]]]:
        """Everything about the request that can be refused before anything starts (bad
        URIs, empty channels, too few objects to shard); each channel's objects per host."""
        self.channels = [ch.Channel.from_training_request(e, self.default_input_mode)
                         for e in self.request.get("InputDataConfig") or []]
        for channel in self.channels:
            channel.check()
        if self.checkpoint_uri:
            S3Uri.parse(self.checkpoint_uri, "CheckpointConfig.S3Uri")
        S3Uri.parse(self.output_path, "OutputDataConfig.S3OutputPath")
        refused = launchers.refusal(self.framework, f"training job {self.name}")
        if refused:
            raise JobFailure(refused, CLIENT_ERROR)
        self.check_launch()
        if self.mpi_enabled and mpi.mpirun_path() is None:
            raise JobFailure("sagemaker_mpi_enabled is set but mpirun is not on PATH; install "
                             "Open MPI (apt-get install openmpi-bin)", CLIENT_ERROR)
        if self.mpi_enabled:
            try:  # a bad thread override fails here, before any rank starts
                launch_settings.rank_threads(1, 1, launch_settings.override_from(self.request.get("Environment")))
            except ValueError as error:
                raise JobFailure(str(error), CLIENT_ERROR) from None
        shares = {}
        for channel in self.channels:
            objects = ch.list_objects(self.storage, channel.uri, channel.label)
            shares[channel.name] = ch.assign(objects, channel.distribution, len(self.hosts),
                                             channel.label, channel.uri)
        return shares

    def check_launch(self) -> None:
        """What to run is known (SDK v2's estimators: ``sagemaker_program``; v3's ModelTrainer
        jobs are ``training_v3.TrainingJobV3``'s)."""
        if not self.framework.get("sagemaker_program"):
            raise JobFailure(missing_program(), CLIENT_ERROR)

    def prepare(self) -> None:
        shares = self.check()
        config = {c.name: c.input_data_config() for c in self.channels}
        for index, host in enumerate(self.hosts):
            base = self.host_dir(host)
            contract.write_training_tree(
                base, current_host=host, hosts=self.hosts, instance_type=self.instance_type,
                hyperparameters=self.hyperparameters, input_data_config=config)
            data_dir = base / "input" / "data"
            for channel in self.channels:
                objects = shares[channel.name][index]
                if channel.input_mode == ch.PIPE:
                    files = ch.local_sources(self.storage, objects, self.job_dir / "pipe-cache" / channel.name)
                    self.feeders.add(data_dir, channel, files)
                else:
                    ch.stage_files(self.storage, objects, data_dir / channel.name, channel.input_mode)
                self.note(f"{host}: channel {channel.name} ({channel.input_mode}, "
                          f"{channel.distribution}): {len(objects)} object(s)")
            if self.checkpoint_uri:
                restored = self.storage.get_tree(
                    self.checkpoint_uri, Path(contract.relocate(self.checkpoint_local, base)))
                if restored:
                    self.note(f"{host}: restored {len(restored)} checkpoint file(s) from {self.checkpoint_uri}")
            self.unpack_code(base)

    def unpack_code(self, base: Path) -> None:
        submit = self.framework.get("sagemaker_submit_directory")
        code = base / "code"
        if not submit:
            raise JobFailure("hyperparameter sagemaker_submit_directory is missing: nothing says "
                             "where the code is", CLIENT_ERROR)
        submit = str(submit)
        if submit.startswith("s3://"):
            archive = self.job_dir / "source" / SOURCEDIR_ARCHIVE
            if not archive.exists():
                self.storage.get_file(submit, archive)
            extract_sourcedir(archive, code)
            return
        # SageMaker with network isolation: the code arrives as the `code` channel and the
        # submit directory is a container path inside it.
        local = Path(contract.relocate(submit.removeprefix("file://"), base))
        if local.is_dir():
            ch.copy_tree(local, code)
        elif local.is_file():
            extract_sourcedir(local, code)
        else:
            raise JobFailure(f"sagemaker_submit_directory {submit}: not found "
                             f"(looked at {local})", CLIENT_ERROR)

    def code_paths(self) -> list[Path]:
        return [self.host_dir(self.hosts[0]) / "code"]

    def code_cwd(self, host: str) -> Path:
        """Where ``host``'s script starts, as its processes see it (SageMaker: /opt/ml/code)."""
        return self.container_base(host) / "code"

    def custom_mpi_options(self) -> str:
        """SageMaker: the words appended to mpirun's options (``sagemaker_mpi_custom_mpi_options``)."""
        return str(self.framework.get("sagemaker_mpi_custom_mpi_options") or "")

    def requirements(self) -> bytes | None:
        path = self.host_dir(self.hosts[0]) / "code" / REQUIREMENTS
        # pip installs it from the runner, outside the namespaces: only files of the code.
        return requirement_paths.checked_bytes(path, path.parent) if path.is_file() else None

    def launcher_imports(self) -> frozenset[str]:
        # SageMaker: torchrun is torch's; SMDataParallel's ranks run `python -m mpi4py` over torch.
        return frozenset({launchers.TORCHRUN: {"torch"}, launchers.PYTORCHDDP: {"torch", "mpi4py"}}
                         .get(self.launcher, set()) | ({"mpi4py"} if self.mpi4py_ranks() else set()))

    def mpi4py_ranks(self) -> bool:
        """Whether each rank runs ``python -m mpi4py`` (SDK v3's MPI driver: training_v3.py)."""
        return False

    def ready(self) -> None:
        super().ready()
        path = self.host_dir(self.hosts[0]) / "code" / REQUIREMENTS
        if path.is_file():
            # SageMaker: the toolkit pip-installs requirements.txt before the script; here
            # into the job environment (cached with them), never the runner's venv.
            self.python_env.install_requirements(path, self.logs_dir / "requirements.log")
        if self.launcher == launchers.TORCHRUN:
            # Checked before any step too (sdk_v3.check_launch); here against the job's own Python.
            missing = launchers.torch_missing(
                'distribution={"torch_distributed": {"enabled": True}}', self.image_uri,
                catalog.find(self.image_uri), launchers.installs_torch(self.requirements()), self.python)
            if missing:
                raise JobFailure(missing, CLIENT_ERROR)

    def container_environment(self, host: str) -> dict:
        """What every training container gets (SageMaker: the platform's and the toolkit's)."""
        env = self.environment(host)
        # SageMaker: the platform sets the request's Environment map in the container.
        env.update(contract.request_environment(self.request.get("Environment")))
        env.update(contract.training_environment(
            self.container_base(host), current_host=host, hosts=self.hosts, instance_type=self.instance_type,
            hyperparameters=self.hyperparameters,
            input_data_config={c.name: c.input_data_config() for c in self.channels},
            job_name=self.name, region=self.region))
        env["TRAINING_JOB_ARN"] = arn(self.region, self.account, "training-job", self.name)
        return env

    def host_environment(self, host: str) -> dict:
        env = self.container_environment(host)
        env.update({
            # SageMaker: the toolkit puts the code directory on PYTHONPATH.
            "PYTHONPATH": str(self.container_base(host) / "code"),
            "PYTHONUNBUFFERED": "1",  # lines reach the log (and the metric regexes) as printed
            "HOROVOD_HOSTNAME": host,  # Horovod: the host grouping Gloo would use
        })
        return env

    def command(self, host: str) -> list[str]:
        argv = contract.user_command(self.python, self.hyperparameters, self.container_base(host))
        entry = argv[1]
        if not entry.endswith(".py"):
            # SageMaker: the toolkit makes a command entry point executable (chmod 0777 in
            # entry_point.install; 0755 here: nobody else needs to write it)...
            script = self.host_dir(host) / "code" / entry
            if script.is_file():
                script.chmod(script.stat().st_mode | 0o755)
            # ...and runs anything that is not a .py file through the shell. Every
            # word quoted: a hyperparameter with a space or ';' is one argument, never code.
            return ["/bin/sh", "-c", shlex.join(["./" + entry, *argv[2:]])]
        base = self.host_dir(host)
        if (base / "code" / "setup.py").exists():
            self.note(f"{host}: setup.py in the code is not installed locally")
        if self.launcher == launchers.PYTORCHDDP:
            # SageMaker: the SMDataParallel runner's ranks run `python -m mpi4py script.py`.
            return [argv[0], "-m", "mpi4py", *argv[1:]]
        if self.launcher == launchers.TORCHRUN:
            return self.torchrun_command(host, argv[1], argv[2:])
        return argv

    def torchrun_command(self, host: str, entry: str, args: list[str]) -> list[str]:
        """torch_distributed: this host's torchrun (``hosts/torchrun.py``)."""
        return torchrun.command(self.python, self.hosts, host, self.processes_per_host,
                                self.rendezvous_port(), entry, args, master_addr=self.master_addr(),
                                log_dir=str(self.torchrun_logs(host)))

    def torchrun_logs(self, host: str) -> Path:
        """Where ``host``'s torchrun keeps each worker's output (runner-side: outside /opt/ml)."""
        return self.logs_dir / f"torchrun-{host}"

    def rendezvous_port(self) -> int:
        if self.master_port is None:
            self.master_port = torchrun.free_port()
        return self.master_port

    def master_addr(self) -> str:
        """algo-1 where the hosts' namespaces resolve it; loopback where there are none."""
        return torchrun.master_host(self.hosts) if self.no_namespaces is None else torchrun.LOOPBACK

    def torch_environment(self) -> dict[str, str]:
        """What the PyTorch toolkit sets for every launcher (MASTER_ADDR and MASTER_PORT)."""
        return torchrun.environment(self.hosts, self.rendezvous_port(), master_addr=self.master_addr())

    # -- running --
    def launch(self) -> None:
        if self.mpi_enabled:
            custom = self.custom_mpi_options()
            # Horovod: every rank of every simulated host shares this machine's cores; the
            # runner's launch defaults (threads per rank, MPI yielding, pinning; see
            # launch_settings.py) keep them from fighting. What the user set wins.
            fast = launch_settings.local_launch(
                int(self.rank_count), custom_mpi_options=custom,
                request_env=self.request.get("Environment") or {})
            self.note(fast.threads)
            specs = {}
            for host in self.hosts:
                argv = self.command(host)
                env = fast.apply_env(self.host_environment(host))
                if self.launcher == launchers.PYTORCHDDP or launchers.pytorch_image(self.image_uri):
                    env.update(self.torch_environment())
                specs[host] = {
                    "env": env,
                    "cwd": str(self.code_cwd(host)),
                    "argv": launch_settings.shim_argv(argv) if fast.pin else argv,
                    "log": str(self.logs_dir / f"{host}.rank-{{rank}}.log"),
                    # pytorchddp: each rank gets RANK, WORLD_SIZE, LOCAL_RANK... from its MPI rank.
                    "torch_variables": self.launcher == launchers.PYTORCHDDP,
                }
            shim = None
            if len(self.hosts) > 1:
                # Horovod: the simulated hosts' ranks share memory, not loopback TCP.
                shim, why_not = shared_memory.library()
                self.note(f"mpirun: the {len(self.hosts)} simulated hosts' ranks on one Open MPI node "
                          f"(shared memory; hvd.local_*() per host through {shim.name})" if shim
                          else shared_memory.fallback_notice(why_not or "unknown"))
            launch = mpi.prepare(
                self.job_dir / "mpi", self.hosts, self.processes_per_host, specs,
                num_processes=int(self.num_processes) if self.num_processes else None,
                local_options=fast.mpirun_options, extra_options=custom,
                host_trees=None if self.no_namespaces else {h: self.host_dir(h) for h in self.hosts},
                hosts_file=None if self.no_namespaces else self.hosts_file(),
                shared_memory_shim=shim)
            self.note("mpirun: " + " ".join(launch.command))
            self.mpi_launch = launch
            self.launched_at = time.monotonic()
            env = self.environment(self.hosts[0])
            self.spawn("mpirun", launch.command, env, self.job_dir, self.logs_dir / "mpirun.log")
        else:
            # SageMaker: parameter_server / multi_worker_mirrored_strategy: TF_CONFIG per
            # process, and a parameter server of its own on every host (tf_tasks.py).
            self.tf_tasks = tf_tasks.plan(self.framework, self.hosts, self.no_namespaces is None)
            if self.tf_tasks is not None:
                self.note(self.tf_tasks.describe())
                # Each host's script its share of this machine's cores (tf_tasks.local_launch).
                fast = self.tf_tasks.local_launch(request_env=self.request.get("Environment") or {})
                self.note(fast.threads)
            if self.launcher == launchers.TORCHRUN:
                self.note(f"torchrun on each of the {len(self.hosts)} host(s): {self.processes_per_host} "
                          f"process(es) per host, rendezvous at {self.master_addr()}:{self.rendezvous_port()}")
            for host in self.hosts:
                env = self.host_environment(host)
                if self.launcher == launchers.TORCHRUN:
                    env.update(self.torch_environment())
                if self.tf_tasks is not None:
                    env = fast.apply_env(env)
                    env[tf_tasks.tf_config.TF_CONFIG_ENV] = self.tf_tasks.script_config(host)
                argv, cwd = self.as_host(host, self.command(host), self.code_cwd(host), env)
                self.spawn(host, argv, env, cwd, self.logs_dir / f"{host}.log")
                if self.tf_tasks is not None and self.tf_tasks.has_ps:
                    ps_env = dict(env, **{tf_tasks.tf_config.TF_CONFIG_ENV: self.tf_tasks.ps_config(host)})
                    argv, cwd = self.as_host(host, self.tf_tasks.ps_argv(self.python),
                                             self.container_base(host), ps_env)
                    label = host + tf_tasks.PS_SUFFIX
                    self.spawn(label, argv, ps_env, cwd, self.logs_dir / f"{label}.log")

    def shown(self, stem: str) -> bool:
        """Once a rank has written its failure file, only that rank's log still reaches the
        terminal: the other ranks' tracebacks (echoes of it) and mpirun's report go to their
        logs and job.log only, and the last line the user sees is the reason."""
        first = self.watch.first
        if first is None:
            return True
        _, rank, host = split_where(first[1])
        host = host or first[0]
        if not self.quieted:
            self.quieted = True
            self.note(f"{host if rank is None else f'rank {rank} on {host}'} failed; the other "
                      f"processes' output from here on is in {self.logs_dir} and job.log")
        if rank is not None:
            return stem == f"{host}.rank-{rank}"
        return stem == host or stem.startswith(f"{host}.rank-")

    def log_prefix(self, stem: str) -> str | None:
        match = re.fullmatch(r"(.+)\.rank-(\d+)", stem)
        if match:
            return f"{match.group(1)} rank {match.group(2)}"
        return stem

    def poll_hook(self) -> None:
        self.watch.poll()
        if self.tf_tasks is not None and self.tf_tasks.has_ps:
            self.watch_parameter_servers()
        launch = self.mpi_launch
        if launch is not None and not self.all_ranks_started:
            started = len(list(self.logs_dir.glob("*.rank-*.log")))
            self.all_ranks_started = started >= launch.num_processes
            if self.all_ranks_started:
                mpi.remove_specs(launch)  # every rank has read its spec: keep no copy
            if not self.all_ranks_started and time.monotonic() - self.launched_at > MPI_LAUNCH_TIMEOUT:
                raise JobFailure(
                    f"InternalServerError: mpirun started {started} of {launch.num_processes} "
                    f"ranks in {MPI_LAUNCH_TIMEOUT:.0f}s (see {self.logs_dir / 'mpirun.log'})",
                    INTERNAL_ERROR)

    def watch_parameter_servers(self) -> None:
        """ParameterServer: a parameter server that ends while a script runs ends the job,
        with its reason; once every script has ended well the servers are stopped."""
        servers = [c for c in self.processes.children if c.label.endswith(tf_tasks.PS_SUFFIX)]
        scripts = [c for c in self.processes.children if c not in servers]
        if any(c.process.returncode is None for c in scripts):
            for server in servers:
                code = server.process.returncode
                if code is not None:
                    signum, code = (-code, None) if code < 0 else (None, code)
                    last = self.tailer.last_line(server.label) if self.tailer else None
                    raise first_failure(None, f"parameter server {server.label}", signum, code, None, last)
        elif all(c.process.returncode == 0 for c in scripts):
            for server in servers:
                if server.process.returncode is None:
                    # PS_PROGRAM exits 0 on SIGTERM; the group's (its namespace launcher passes none on).
                    signal_group(server.process.pid, signal.SIGTERM)

    def outcome(self) -> None:
        self.watch.poll()
        if self.first_failed is None:
            return
        first_file = self.watch.first
        if self.mpi_enabled:
            output = (self.logs_dir / "mpirun.log").read_text(errors="replace")
            exit_info = mpi.first_failure(output, self.rank_to_host)
            if exit_info is None:
                code = self.first_failed.process.returncode
                detail = first_file[1] if first_file else (
                    self.tailer.last_line("mpirun") if self.tailer else None)
                raise JobFailure(
                    f"InternalServerError: mpirun {describe_exit(code)}"
                    + (f": {detail}" if detail else ""), INTERNAL_ERROR if first_file is None else ALGORITHM_ERROR)
            rank, host = exit_info.rank, exit_info.host or "?"
            stem = f"{exit_info.host}.rank-{exit_info.rank}"
            signum, code = exit_info.signal, exit_info.exit_code
        else:
            child = self.first_failed
            rank, host, stem = None, child.label, child.label
            returncode = child.process.returncode
            signum, code = (-returncode, None) if returncode < 0 else (None, returncode)
            cause = torchrun.root_cause(self.log_text(stem), self.torchrun_logs(stem)) \
                if self.launcher == launchers.TORCHRUN else None
            if cause is not None:
                # torchrun: the job is named after the worker its summary names, with that worker's last line.
                rank = cause.rank
                signum, code = (-cause.exit_code, None) if cause.exit_code < 0 else (None, cause.exit_code)
                raise first_failure(rank, host, signum, code, first_file, cause.last_line)
        # Named after the rank that failed first, with its own reason (failures.first_failure).
        last = self.tailer.last_line(stem) if self.tailer else None
        raise first_failure(rank, host, signum, code, first_file, last)

    def log_text(self, stem: str) -> str:
        path = self.logs_dir / f"{stem}.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    # -- results --
    def finish(self) -> None:
        master = self.host_dir(self.hosts[0])
        archive = self.job_dir / "artifacts" / MODEL_ARCHIVE
        pack_directory(master / "model", archive)
        self.storage.put_file(archive, self.model_uri)
        self.note(f"model: {self.model_uri}")
        if not any(p.is_file() for p in (master / "model").rglob("*")):
            self.warn(empty_model_warning(self.hosts[0], self.no_namespaces))
        output_data = master / "output" / "data"
        if output_data.is_dir() and any(output_data.iterdir()):
            out = self.job_dir / "artifacts" / OUTPUT_ARCHIVE
            pack_directory(output_data, out, "output/data")
            self.storage.put_file(out, join_uri(self.output_prefix, OUTPUT_ARCHIVE))

    def always(self) -> None:
        if self.mpi_launch is not None:
            shutil.rmtree(self.mpi_launch.scratch, ignore_errors=True)
            mpi.remove_specs(self.mpi_launch)
        # SageMaker: checkpoints are synced to S3 during the job, so they survive a failure
        # and a retried or re-run job resumes from them.
        if not self.checkpoint_uri:
            return
        for host in self.hosts:
            local = Path(contract.relocate(self.checkpoint_local, self.host_dir(host)))
            if local.is_dir():
                try:
                    self.storage.put_tree(local, self.checkpoint_uri)
                except StorageError as error:
                    self.note(f"{host}: checkpoint upload failed: {error}")

    def describe(self, status, reason, start, end) -> dict:
        doc = dict(self.request)
        doc.update({
            "TrainingJobName": self.name,
            "TrainingJobArn": arn(self.region, self.account, "training-job", self.name),
            "TrainingJobStatus": status,
            "SecondaryStatus": status,
            "TrainingStartTime": now_iso(start),
            "TrainingEndTime": now_iso(end),
            "TrainingTimeInSeconds": int(round(end - start)),
            "FinalMetricDataList": self.metrics.final(),
        })
        if status == "Completed":
            doc["ModelArtifacts"] = {"S3ModelArtifacts": self.model_uri}
        if reason:
            doc["FailureReason"] = reason
        return doc
