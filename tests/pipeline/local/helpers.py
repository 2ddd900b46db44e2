"""Builders for the local-runner tests: job requests and definitions of the shapes the SDK
emits, and small plain-Python "user scripts" (no TensorFlow, so they start in milliseconds)."""

from __future__ import annotations

import io
import json
import os
import tarfile
import textwrap
from pathlib import Path

BUCKET = "test-bucket"
ROLE = "arn:aws:iam::123456789012:role/test"


def sourcedir(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def put_code(storage, uri: str, files: dict[str, str]) -> str:
    storage.put_bytes(sourcedir(files), uri)
    return uri


def put_objects(storage, prefix: str, count: int, name: str = "part-{i:03d}.txt") -> list[str]:
    uris = []
    for i in range(count):
        uri = f"{prefix.rstrip('/')}/{name.format(i=i)}"
        storage.put_bytes(f"object {i}\n".encode(), uri)
        uris.append(uri)
    return uris


def channel(name: str, uri, mode="File", distribution="FullyReplicated") -> dict:
    entry = {"ChannelName": name,
             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                             "S3DataDistributionType": distribution}}}
    if mode is not None:
        entry["InputMode"] = mode
    return entry


def training_request(code_uri: str, *, program: str = "user.py", instances=1, channels=(),
                     hyperparameters=None, mpi_processes: int | None = None, checkpoint_uri=None,
                     metrics=(), output=f"s3://{BUCKET}/out", max_run=600, mpi_options="") -> dict:
    hps = {k: json.dumps(v) for k, v in (hyperparameters or {}).items()}
    hps.update({"sagemaker_program": json.dumps(program),
                "sagemaker_submit_directory": json.dumps(code_uri)})
    if mpi_processes is not None:
        hps.update({"sagemaker_mpi_enabled": "true",
                    "sagemaker_mpi_num_of_processes_per_host": str(mpi_processes),
                    "sagemaker_mpi_custom_mpi_options": json.dumps(mpi_options)})
    request = {
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img",
                                   "MetricDefinitions": list(metrics)},
        "OutputDataConfig": {"S3OutputPath": output},
        "ResourceConfig": {"InstanceCount": instances, "InstanceType": "ml.c5.xlarge", "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_run},
        "RoleArn": ROLE,
        "InputDataConfig": list(channels),
        "HyperParameters": hps,
    }
    if checkpoint_uri is not None:
        request["CheckpointConfig"] = {"S3Uri": checkpoint_uri, "LocalPath": "/opt/ml/checkpoints"}
    return request


def processing_request(code_prefix: str, script: str, *, instances=1, inputs=(), outputs=(),
                       arguments=()) -> dict:
    return {
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge",
                                                  "InstanceCount": instances, "VolumeSizeInGB": 30}},
        "AppSpecification": {"ImageUri": "img",
                             "ContainerEntrypoint": ["python3", f"/opt/ml/processing/input/code/{script}"],
                             "ContainerArguments": list(arguments)},
        "RoleArn": ROLE,
        "ProcessingInputs": [
            {"InputName": "code", "AppManaged": False,
             "S3Input": {"S3Uri": code_prefix, "LocalPath": "/opt/ml/processing/input/code",
                         "S3DataType": "S3Prefix", "S3InputMode": "File",
                         "S3DataDistributionType": "FullyReplicated", "S3CompressionType": "None"}},
            *inputs,
        ],
        "ProcessingOutputConfig": {"Outputs": list(outputs)},
        "Environment": {"PYTHONPATH": "/opt/ml/processing/input/code"},
    }


def processing_input(name: str, uri, local: str, distribution="FullyReplicated") -> dict:
    return {"InputName": name, "AppManaged": False,
            "S3Input": {"S3Uri": uri, "LocalPath": local, "S3DataType": "S3Prefix",
                        "S3InputMode": "File", "S3DataDistributionType": distribution,
                        "S3CompressionType": "None"}}


def processing_output(name: str, uri, local: str) -> dict:
    return {"OutputName": name, "AppManaged": False,
            "S3Output": {"S3Uri": uri, "LocalPath": local, "S3UploadMode": "EndOfJob"}}


def put_script(storage, prefix: str, name: str, text: str) -> None:
    storage.put_bytes(textwrap.dedent(text).encode(), f"{prefix.rstrip('/')}/{name}")


def leftover_processes(needle: str) -> list[int]:
    """Live processes whose command line or working directory mentions ``needle`` (a test's
    unique path): the user scripts run in <job>/hosts/<host>/code, mpirun's daemons name
    the job's rsh agent."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
            cwd = os.readlink(entry / "cwd")
        except (OSError, IndexError):
            continue
        if (needle in cmdline or cwd.startswith(needle)) and state != "Z":
            found.append(int(entry.name))
    return found


# A user script that reports what the container contract gave it, as JSON, in its model dir
# (and, for the chosen channel, what it read through Pipe FIFOs or files).
REPORT_SCRIPT = """
    import json, os, sys, pathlib, socket
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    config = json.loads(os.environ["SM_INPUT_DATA_CONFIG"])
    seen = {}
    for name in json.loads(os.environ["SM_CHANNELS"]):
        path = os.environ["SM_CHANNEL_" + name.upper()]
        if config[name]["TrainingInputMode"] == "Pipe":
            if local_rank == 0:   # SageMaker: one set of pipes per host; one reader per host
                epochs = []
                for epoch in range(int(os.environ.get("SM_HP_EPOCHS", "1"))):
                    with open(f"{path}_{epoch}", "rb") as f:
                        epochs.append(f.read().decode())
                seen[name] = epochs
        else:
            seen[name] = sorted(str(p.relative_to(path)) for p in pathlib.Path(path).rglob("*") if p.is_file())
    report = {
        "argv": sys.argv[1:], "host": os.environ["SM_CURRENT_HOST"], "hosts": json.loads(os.environ["SM_HOSTS"]),
        "rank": rank, "local_rank": local_rank,
        "local_size": int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")),
        "size": int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")),
        "cwd": os.getcwd(), "seen": seen, "hostname": socket.gethostname(),
        "opt_ml_current_host": json.load(open("/opt/ml/input/config/resourceconfig.json"))["current_host"]
        if os.path.exists("/opt/ml/input/config/resourceconfig.json") else None,
        "resourceconfig": json.load(open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "resourceconfig.json"))),
    }
    out = pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"]) / f"report-{rank}.json"
    out.write_text(json.dumps(report))
    pathlib.Path(os.environ["SM_MODEL_DIR"], f"model-{os.environ['SM_CURRENT_HOST']}-{rank}.txt").write_text("weights")
    print(f"metric-line epoch=1 score={0.5 + rank}")
"""


def reports(job_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(Path(job_dir).glob("hosts/*/output/data/report-*.json"))]
