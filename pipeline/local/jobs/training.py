"""A TrainingJob: the request's channels staged per host, then one ``mpirun`` for all ranks
(``sagemaker_mpi_enabled``; ``mpi.py``) or one process per host.

Channels are staged per host (``channels.py``), checkpoints restored from
``CheckpointConfig.S3Uri``, the code unpacked from ``sagemaker_submit_directory``. At the end:
``model/`` of algo-1 (where rank 0 runs) -> ``<S3OutputPath>/<job>/output/model.tar.gz``,
``output/data`` -> ``output.tar.gz`` beside it, every host's checkpoints -> the checkpoint URI.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tarfile
import time
from pathlib import Path

from evaluation.report import MODEL_ARCHIVE
from pipeline.definition.bundles import SOURCEDIR_ARCHIVE
from pipeline.local.hosts import mpi, shared_memory, tuning
from pipeline.local.hosts.processes import describe_exit
from pipeline.local.jobs import contract
from pipeline.local.jobs.failures import (
    ALGORITHM_ERROR,
    CLIENT_ERROR,
    INTERNAL_ERROR,
    FailureWatch,
    JobFailure,
    exit_failure,
)
from pipeline.local.jobs.lifecycle import LocalJob, arn, base_environment
from pipeline.local.jobs.logs import Metrics, now_iso
from pipeline.local.store import channels as ch
from pipeline.local.store.storage import S3Uri, StorageError, join_uri
from training_entry import archives
from training_entry.contract import CHECKPOINT_DIR, FAILURE_FILE

# SageMaker: the container's failure reason file.
TRAINING_FAILURE_FILE = FAILURE_FILE
OUTPUT_ARCHIVE = "output.tar.gz"
# Every rank must have started (its log file exists) this long after mpirun started; a
# daemon that never came up would otherwise leave mpirun waiting forever.
MPI_LAUNCH_TIMEOUT = 120.0


def extract_sourcedir(archive: Path, target: Path) -> None:
    """SageMaker: sourcedir.tar.gz is unpacked into /opt/ml/code (the one safe extractor)."""
    try:
        archives.extract(str(archive), str(target))
    except archives.UnsafeArchiveError as error:
        raise JobFailure(str(error), CLIENT_ERROR) from None
    except (tarfile.TarError, EOFError, OSError) as error:
        raise JobFailure(f"sagemaker_submit_directory {archive}: not a readable tar.gz "
                         f"({error})", CLIENT_ERROR) from None


def pack_directory(directory: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(Path(directory).rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)



class TrainingJob(LocalJob):
    kind = "Training"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        req = self.request
        self.metrics = Metrics((req.get("AlgorithmSpecification") or {}).get("MetricDefinitions", []))
        resources = req.get("ResourceConfig") or {}
        self.instance_type = str(resources.get("InstanceType", "local"))
        self.hosts = contract.host_names(int(resources.get("InstanceCount", 1)))
        self.hyperparameters = {k: str(v) for k, v in (req.get("HyperParameters") or {}).items()}
        _, self.framework = contract.split_hyperparameters(
            contract.decode_hyperparameters(self.hyperparameters))
        self.mpi_enabled = bool(self.framework.get("sagemaker_mpi_enabled"))
        # SageMaker: processes per host default to the GPUs; there are none here.
        self.processes_per_host = int(self.framework.get("sagemaker_mpi_num_of_processes_per_host") or 1)
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
        self.launched_at = 0.0
        self.all_ranks_started = False
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
        if not self.framework.get("sagemaker_program"):
            raise JobFailure("hyperparameter sagemaker_program is missing: nothing says which "
                             "script to run; the Training step's HyperParameters must name it "
                             "(the SDK's estimators set it from entry_point)", CLIENT_ERROR)
        if self.mpi_enabled and mpi.mpirun_path() is None:
            raise JobFailure("sagemaker_mpi_enabled is set but mpirun is not on PATH; install "
                             "Open MPI (apt-get install openmpi-bin)", CLIENT_ERROR)
        shares = {}
        for channel in self.channels:
            objects = ch.list_objects(self.storage, channel.uri, channel.label)
            shares[channel.name] = ch.assign(objects, channel.distribution, len(self.hosts),
                                             channel.label, channel.uri)
        return shares

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

    def host_environment(self, host: str) -> dict:
        base = self.container_base(host)
        env = base_environment(dict(os.environ))
        # SageMaker: the platform sets the request's Environment map in the container.
        env.update({k: str(v) for k, v in (self.request.get("Environment") or {}).items()})
        env.update(contract.training_environment(
            base, current_host=host, hosts=self.hosts, instance_type=self.instance_type,
            hyperparameters=self.hyperparameters,
            input_data_config={c.name: c.input_data_config() for c in self.channels},
            job_name=self.name, region=self.region))
        env.update({
            "TRAINING_JOB_ARN": arn(self.region, self.account, "training-job", self.name),
            # SageMaker: the toolkit puts the code directory on PYTHONPATH.
            "PYTHONPATH": str(base / "code"),
            "PYTHONUNBUFFERED": "1",  # lines reach the log (and the metric regexes) as printed
            "HOROVOD_HOSTNAME": host,  # Horovod: the host grouping Gloo would use
        })
        return env

    def command(self, host: str) -> list[str]:
        argv = contract.user_command(sys.executable, self.hyperparameters, self.container_base(host))
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
        if (base / "code" / "setup.py").exists() or (base / "code" / "requirements.txt").exists():
            self.note(f"{host}: setup.py/requirements.txt in the code are not installed locally")
        return argv

    # -- running --
    def launch(self) -> None:
        if self.mpi_enabled:
            custom = str(self.framework.get("sagemaker_mpi_custom_mpi_options") or "")
            # Horovod: every rank of every simulated host shares this machine's cores; the
            # runner's launch defaults (threads per rank, MPI yielding, pinning; see
            # tuning.py) keep them from fighting. What the user set wins.
            fast = tuning.local_launch(
                int(self.rank_count), custom_mpi_options=custom,
                request_env=self.request.get("Environment") or {})
            specs = {}
            for host in self.hosts:
                argv = self.command(host)
                specs[host] = {
                    "env": fast.apply_env(self.host_environment(host)),
                    "cwd": str(self.container_base(host) / "code"),
                    "argv": tuning.shim_argv(argv) if fast.pin else argv,
                    "log": str(self.logs_dir / f"{host}.rank-{{rank}}.log"),
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
            env = base_environment(dict(os.environ))
            self.spawn("mpirun", launch.command, env, self.job_dir, self.logs_dir / "mpirun.log")
        else:
            for host in self.hosts:
                argv, cwd = self.as_host(host, self.command(host), self.container_base(host) / "code")
                self.spawn(host, argv, self.host_environment(host), cwd, self.logs_dir / f"{host}.log")

    def log_prefix(self, stem: str) -> str | None:
        match = re.fullmatch(r"(.+)\.rank-(\d+)", stem)
        if match:
            return f"{match.group(1)} rank {match.group(2)}"
        return stem

    def poll_hook(self) -> None:
        self.watch.poll()
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
            who = f"rank {exit_info.rank} on {exit_info.host or '?'}"
            stem = f"{exit_info.host}.rank-{exit_info.rank}"
            signum, code = exit_info.signal, exit_info.exit_code
        else:
            child = self.first_failed
            who, stem = child.label, child.label
            returncode = child.process.returncode
            signum, code = (-returncode, None) if returncode < 0 else (None, returncode)
        self.raise_failure(who, stem, signum, code, first_file)

    def raise_failure(self, who, stem, signum, code, first_file) -> None:
        message = first_file[1] if first_file else (self.tailer.last_line(stem) if self.tailer else None)
        raise exit_failure(who, signum, code, message, reported=first_file is not None)

    # -- results --
    def finish(self) -> None:
        master = self.host_dir(self.hosts[0])
        archive = self.job_dir / "artifacts" / MODEL_ARCHIVE
        pack_directory(master / "model", archive)
        self.storage.put_file(archive, self.model_uri)
        self.note(f"model: {self.model_uri}")
        output_data = master / "output" / "data"
        if output_data.is_dir() and any(output_data.iterdir()):
            out = self.job_dir / "artifacts" / OUTPUT_ARCHIVE
            pack_directory(output_data, out)
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

