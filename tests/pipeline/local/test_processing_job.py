"""Processing jobs as local processes, with a small plain-Python script (no TensorFlow)."""

from __future__ import annotations

import json

from pipeline.local.processing_job import ProcessingJob

from .helpers import (
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


def test_processing_job_per_host_inputs_and_outputs(local_storage, tmp_path):
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
    # Container paths given as arguments are moved under the host's tree.
    assert one["argv"] == ["--out", str(tmp_path / "proc" / "hosts" / "algo-1" / "processing" / "output" / "result")]
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
