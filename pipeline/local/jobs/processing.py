"""A ProcessingJob: inputs staged into each host's ``LocalPath`` per distribution, then
``ContainerEntrypoint + ContainerArguments`` per host; outputs uploaded on success."""

from __future__ import annotations

from pathlib import Path

from pipeline.local.jobs import contract
from pipeline.local.jobs.failures import CLIENT_ERROR, JobFailure, exit_failure, read_reason
from pipeline.local.jobs.lifecycle import LocalJob, arn, local_python
from pipeline.local.jobs.logs import now_iso
from pipeline.local.store import channels as ch
from pipeline.local.store.storage import S3Uri
from training_entry.contract import CONTAINER_BASE_DIR, EXIT_MESSAGE_FILE


class ProcessingJob(LocalJob):
    kind = "Processing"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cluster = ((self.request.get("ProcessingResources") or {}).get("ClusterConfig") or {})
        self.hosts = contract.host_names(int(cluster.get("InstanceCount", 1)))
        self.instance_type = str(cluster.get("InstanceType", "local"))
        app = self.request.get("AppSpecification") or {}
        self.image_uri = str(app.get("ImageUri") or "")
        self.argv = [*(app.get("ContainerEntrypoint") or []), *(app.get("ContainerArguments") or [])]
        self.exit_message: str | None = None
        self.outputs = ((self.request.get("ProcessingOutputConfig") or {}).get("Outputs") or [])

    def job_config(self) -> dict:
        config = dict(self.request)
        config["ProcessingJobName"] = self.name
        config["ProcessingJobArn"] = arn(self.region, self.account, "processing-job", self.name)
        return config

    def prepare(self) -> None:
        if not self.argv:
            raise JobFailure("AppSpecification has no ContainerEntrypoint: the local runner has no "
                             "image to take a default command from", CLIENT_ERROR)
        shares = []
        for item in self.request.get("ProcessingInputs") or []:
            name = item.get("InputName", "?")
            label = f"processing input {name!r}"
            s3 = item.get("S3Input")
            if s3 is None:
                raise ch.ChannelError(f"{label}: only S3Input is supported locally "
                                      "(DatasetDefinition inputs are not)")
            if s3.get("S3InputMode", "File") != ch.FILE:
                raise ch.ChannelError(f"{label}: S3InputMode {s3.get('S3InputMode')} is not "
                                      "supported locally for processing; use File")
            if s3.get("S3DataType", "S3Prefix") != "S3Prefix":
                raise ch.ChannelError(f"{label}: S3DataType {s3.get('S3DataType')} is not supported locally")
            if s3.get("S3CompressionType", "None") not in ("None", None):
                raise ch.ChannelError(f"{label}: S3CompressionType needs Pipe mode")
            distribution = s3.get("S3DataDistributionType", ch.FULLY_REPLICATED)
            objects = ch.list_objects(self.storage, s3["S3Uri"], label)
            shares.append((s3, ch.assign(objects, distribution, len(self.hosts), label, s3["S3Uri"])))
        for output in self.outputs:
            uri = (output.get("S3Output") or {}).get("S3Uri")
            S3Uri.parse(uri, f"processing output {output.get('OutputName')!r} S3Uri")
        config = self.job_config()
        for index, host in enumerate(self.hosts):
            base = self.host_dir(host)
            contract.write_processing_tree(base, current_host=host, hosts=self.hosts, job_config=config)
            for s3, per_host in shares:
                target = Path(contract.relocate(s3["LocalPath"], base))
                ch.stage_files(self.storage, per_host[index], target, ch.FILE)

    def code_paths(self) -> list[Path]:
        """What the command names (its script) and every input of the first host: where
        FrameworkProcessor's runproc.sh and the code it unpacks are."""
        base = self.host_dir(self.hosts[0])
        named = [Path(contract.relocate(str(a), base)) for a in self.argv
                 if str(a).startswith(CONTAINER_BASE_DIR + "/")]
        inputs = [Path(contract.relocate(item["S3Input"]["LocalPath"], base))
                  for item in self.request.get("ProcessingInputs") or [] if (item.get("S3Input") or {}).get("LocalPath")]
        return [p for p in named if p.is_file()] + [p for p in inputs if p.is_dir()]

    def launch(self) -> None:
        for host in self.hosts:
            base = self.container_base(host)
            env = self.environment(host)
            env.update(contract.processing_environment(base, self.request.get("Environment")))
            env["PYTHONUNBUFFERED"] = "1"
            argv = local_python([str(contract.relocate(str(a), base)) for a in self.argv], self.python)
            argv, cwd = self.as_host(host, argv, base, env)
            self.spawn(host, argv, env, cwd, self.logs_dir / f"{host}.log")

    def outcome(self) -> None:
        child = self.first_failed
        if child is None:
            return
        message = read_reason(Path(contract.relocate(EXIT_MESSAGE_FILE, self.host_dir(child.label))))
        self.exit_message = message
        returncode = child.process.returncode
        signum, code = (-returncode, None) if returncode < 0 else (None, returncode)
        detail = message or (self.tailer.last_line(child.label) if self.tailer else None)
        raise exit_failure(child.label, signum, code, detail, reported=bool(message))

    def finish(self) -> None:
        for output in self.outputs:
            s3 = output.get("S3Output") or {}
            written = 0
            for host in self.hosts:
                local = Path(contract.relocate(s3["LocalPath"], self.host_dir(host)))
                if local.is_dir():
                    written += sum(1 for p in local.rglob("*") if p.is_file())
                    self.storage.put_tree(local, s3["S3Uri"])
            self.note(f"output {output.get('OutputName')}: {s3['S3Uri']}")
            if not written:
                # SageMaker uploads nothing either; here it is most often a script that wrote
                # somewhere else (a path of its own instead of the output's LocalPath).
                self.warn(f"output {output.get('OutputName')}: nothing was written to "
                          f"{s3['LocalPath']} on any host, nothing uploaded")

    def describe(self, status, reason, start, end) -> dict:
        doc = self.job_config()
        doc.update({
            "ProcessingJobStatus": status,
            "ProcessingStartTime": now_iso(start),
            "ProcessingEndTime": now_iso(end),
        })
        if self.exit_message:
            doc["ExitMessage"] = self.exit_message
        if reason:
            doc["FailureReason"] = reason
        return doc

