"""P6: what giving each simulated host its own /opt/ml and hostname costs a job.

The same small jobs run with each host in its own mount and UTS namespaces (the default,
``pipeline/local/hosts/namespaces.py``) and with the fallback that only relocates container paths
(``TRAINPIPE_NAMESPACES=0``), interleaved: a 2-host processing job of a trivial script (the
worst case: the launcher's extra Python start is all there is to see) and a 2-host x 1-rank
MPI training job of a trivial script (each host's Open MPI daemon is started in its
namespaces). Figures: the median wall time of each, the ratio namespaces / relocated, and
the difference in milliseconds.

    .venv/bin/python -m benchmarks.training.scaling.p6_namespaces [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import tarfile
import time

from benchmarks import harness as h
from pipeline.local.hosts import mpi, namespaces
from pipeline.local.jobs.processing import ProcessingJob
from pipeline.local.jobs.training import TrainingJob
from pipeline.local.store.storage import LocalStorage

BUCKET = "p6-bench"
SCRIPT = "import socket; print(socket.gethostname())\n"
ROLE = "arn:aws:iam::000000000000:role/bench"


def processing_request(bucket: str = BUCKET) -> dict:
    return {
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2,
                                                  "VolumeSizeInGB": 30}},
        "AppSpecification": {"ImageUri": "img", "ContainerEntrypoint": [
            "python3", "/opt/ml/processing/input/code/job.py"]},
        "RoleArn": ROLE,
        "ProcessingInputs": [{"InputName": "code", "S3Input": {
            "S3Uri": f"s3://{bucket}/code/job.py", "LocalPath": "/opt/ml/processing/input/code",
            "S3DataType": "S3Prefix", "S3InputMode": "File", "S3DataDistributionType": "FullyReplicated"}}],
        "ProcessingOutputConfig": {"Outputs": []},
    }


def training_request() -> dict:
    return {
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/out"},
        "ResourceConfig": {"InstanceCount": 2, "InstanceType": "ml.c5.xlarge", "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "RoleArn": ROLE,
        "InputDataConfig": [],
        "HyperParameters": {"sagemaker_program": '"job.py"',
                            "sagemaker_submit_directory": f'"s3://{BUCKET}/code/sourcedir.tar.gz"',
                            "sagemaker_mpi_enabled": "true",
                            "sagemaker_mpi_num_of_processes_per_host": "1"},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reason = namespaces.unavailable_reason()
    if reason is not None:
        h.say(f"namespaces are not available here ({reason}): nothing to compare")
        for name in ("p6_processing_ratio", "p6_training_ratio"):
            h.result(name, float("nan"), "<=1.1")
        return 0
    work = h.work_dir("p6")
    storage = LocalStorage(work / "store")
    storage.put_bytes(SCRIPT.encode(), f"s3://{BUCKET}/code/job.py")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("job.py")
        info.size = len(SCRIPT)
        tar.addfile(info, io.BytesIO(SCRIPT.encode()))
    storage.put_bytes(buffer.getvalue(), f"s3://{BUCKET}/code/sourcedir.tar.gz")
    counter = iter(range(10**6))

    def timed(job_class, request, isolated: bool):
        def call() -> float:
            os.environ[namespaces.SWITCH_ENV] = "1" if isolated else "0"
            job_dir = work / "jobs" / f"job-{next(counter)}"
            started = time.perf_counter()
            result = job_class(request, job_dir.name, storage, job_dir, echo=False).run()
            elapsed = time.perf_counter() - started
            assert result.status == "Completed", result.failure_reason
            shutil.rmtree(job_dir, ignore_errors=True)
            return elapsed
        return call

    candidates = {
        "processing namespaces": timed(ProcessingJob, processing_request(), True),
        "processing relocated": timed(ProcessingJob, processing_request(), False),
    }
    if mpi.mpirun_path() is not None:
        candidates["training namespaces"] = timed(TrainingJob, training_request(), True)
        candidates["training relocated"] = timed(TrainingJob, training_request(), False)
    times = h.interleave(candidates, args.repeats)
    os.environ.pop(namespaces.SWITCH_ENV, None)
    h.say(f"machine: {h.machine()}")
    for name, values in times.items():
        h.say(f"{name:24s} {h.spread(values)} s")
    for kind in ("processing", "training"):
        if f"{kind} namespaces" not in times:
            continue
        isolated, relocated = h.median(times[f"{kind} namespaces"]), h.median(times[f"{kind} relocated"])
        h.say(f"{kind}: namespaces cost {1000 * (isolated - relocated):+.0f} ms per 2-host job")
        h.result(f"p6_{kind}_ratio", isolated / relocated, "<=1.1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
