"""Processing jobs as local processes, with a small plain-Python script (no TensorFlow)."""

from __future__ import annotations

import json

import pytest

from pipeline.local.hosts import namespaces
from pipeline.local.jobs.processing import ProcessingJob
from tests import readme_record
from tests.pipeline.local.helpers import (
    BUCKET,
    processing_input,
    processing_output,
    processing_request,
    put_objects,
    put_script,
)

PROCESS = """
    import json, os, pathlib, sys
    base = os.environ["SAGEMAKER_BASE_DIR"]
    config = json.load(open(f"{base}/config/resourceconfig.json"))
    files = sorted(p.name for p in pathlib.Path(f"{base}/processing/input/data").iterdir())
    if "--fail" in sys.argv:
        pathlib.Path(f"{base}/output/message").write_text("no CSV file in the input")
        sys.exit(2)
    out = pathlib.Path(f"{base}/processing/output/result")
    (out / f"{config['current_host']}.json").write_text(json.dumps({"files": files, "argv": sys.argv[1:]}))
"""


NAMESPACES = namespaces.unavailable_reason() is None


@pytest.fixture(params=["namespaces", "relocated"])
def isolation(request, monkeypatch):
    """Both ways a host gets its /opt/ml: its own mount namespace, or relocated paths."""
    if request.param == "namespaces" and not NAMESPACES:
        pytest.skip(f"no namespaces here: {namespaces.unavailable_reason()}")
    if request.param == "relocated":
        monkeypatch.setenv(namespaces.SWITCH_ENV, "0")
    return request.param


def test_processing_job_per_host_inputs_and_outputs(local_storage, tmp_path, isolation):
    code = f"s3://{BUCKET}/code/proc/"
    put_script(local_storage, code, "process.py", PROCESS)
    put_objects(local_storage, f"s3://{BUCKET}/raw", 3)
    request = processing_request(
        code, "process.py", instances=2,
        inputs=[processing_input("raw", f"s3://{BUCKET}/raw", "/opt/ml/processing/input/data", "ShardedByS3Key")],
        outputs=[processing_output("result", f"s3://{BUCKET}/result", "/opt/ml/processing/output/result")],
        arguments=["--out", "/opt/ml/processing/output/result"])
    result = ProcessingJob(request, "proc", local_storage, tmp_path / "proc", echo=False).run()
    assert result.status == "Completed", result.failure_reason
    one = json.loads(local_storage.read_bytes(f"s3://{BUCKET}/result/algo-1.json"))
    two = json.loads(local_storage.read_bytes(f"s3://{BUCKET}/result/algo-2.json"))
    assert (one["files"], two["files"]) == (["part-000.txt", "part-002.txt"], ["part-001.txt"])
    if isolation == "namespaces":  # SageMaker: arguments arrive as written
        assert one["argv"] == ["--out", "/opt/ml/processing/output/result"]
    else:  # container paths given as arguments are moved under the host's tree
        assert one["argv"] == ["--out", str(tmp_path / "proc" / "hosts" / "algo-1" / "processing" / "output" / "result")]
        assert namespaces.fallback_notice(f"{namespaces.SWITCH_ENV}=0") in (tmp_path / "proc" / "job.log").read_text()
    assert result.description["ProcessingJobStatus"] == "Completed"


def test_processing_message_file_is_the_failure_reason(local_storage, tmp_path):
    code = f"s3://{BUCKET}/code/proc/"
    put_script(local_storage, code, "process.py", PROCESS)
    put_objects(local_storage, f"s3://{BUCKET}/raw", 1)
    request = processing_request(
        code, "process.py",
        inputs=[processing_input("raw", f"s3://{BUCKET}/raw", "/opt/ml/processing/input/data")],
        arguments=["--fail"])
    result = ProcessingJob(request, "proc", local_storage, tmp_path / "proc", echo=False).run()
    assert result.failure_reason == "AlgorithmError: algo-1 exited with code 2: no CSV file in the input"
    assert result.description["ExitMessage"] == "no CSV file in the input"


DIRECT = """
    import json, socket, sys
    config = json.load(open("/opt/ml/config/resourceconfig.json"))
    rows = open("/opt/ml/processing/input/data/part-000.txt").read()
    with open(f"/opt/ml/processing/output/result/{config['current_host']}.json", "w") as f:
        json.dump({"hostname": socket.gethostname(), "rows": rows,
                   "peers": [socket.gethostbyname(h) for h in config["hosts"]]}, f)
"""


def test_processing_script_opening_opt_ml_directly(local_storage, tmp_path, isolation):
    """The way scripts in the wild are written: no SAGEMAKER_BASE_DIR, no SM_* variables."""
    code = f"s3://{BUCKET}/code/direct/"
    put_script(local_storage, code, "process.py", DIRECT)
    put_objects(local_storage, f"s3://{BUCKET}/raw", 1)
    request = processing_request(
        code, "process.py", instances=2,
        inputs=[processing_input("raw", f"s3://{BUCKET}/raw", "/opt/ml/processing/input/data")],
        outputs=[processing_output("result", f"s3://{BUCKET}/result", "/opt/ml/processing/output/result")])
    result = ProcessingJob(request, "direct", local_storage, tmp_path / "direct", echo=False).run()
    if isolation == "namespaces":
        assert result.status == "Completed", result.failure_reason
        for host in ("algo-1", "algo-2"):
            report = json.loads(local_storage.read_bytes(f"s3://{BUCKET}/result/{host}.json"))
            assert report["hostname"] == host
            assert report["peers"] == ["127.0.0.1", "127.0.0.1"]  # every host's name resolves
            assert report["rows"] == "object 0\n"
    else:
        # Without a private /opt/ml the hosts (and later jobs) would share the machine's: the
        # job is refused before any process starts, naming the line and the fix.
        assert (result.status, result.failure_type) == ("Failed", "ClientError")
        readme_record.record(result.failure_reason)
        code_file = tmp_path / "direct" / "hosts" / "algo-1" / "processing" / "input" / "code" / "process.py"
        assert result.failure_reason.startswith(
            f"{code_file}:3 names /opt/ml itself, and this machine gives no job a private one "
            f"({namespaces.SWITCH_ENV}=0)")
        assert "SAGEMAKER_BASE_DIR" in result.failure_reason and "TRAINPIPE_OPT_ML_CHECK=0" in result.failure_reason
        assert not list((tmp_path / "direct" / "logs").glob("algo-*.log")), "a process started"
