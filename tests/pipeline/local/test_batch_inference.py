"""End to end: our pipeline's batch inference (pipeline/definition/steps/batch.py) under
`trainpipe run --local`, on 2 instances, with the bundled digits. Slow (TensorFlow, a model
server per instance): about a minute on 2 cores.

    .venv/bin/pytest tests/pipeline/local/test_batch_inference.py -m slow
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.data.default import DIGITS_CLASSES, digits_csv
from pipeline.definition import build as D
from pipeline.local.hosts import mpi
from pipeline.local.store.storage import LocalStorage
from pipeline.settings import Settings

from .test_end_to_end import execution, steps, trainpipe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed"),
]
# Small: one host, two epochs; the gate is lowered so that a short run still registers.
SMALL = ["-p", "Epochs=2", "-p", "WarmupEpochs=1", "-p", "BaseLearningRate=0.01",
         "-p", "TrainingInstanceCount=1", "-p", "ProcessesPerHost=1", "-p", "AccuracyThreshold=0.5"]
FILES = {"a.csv": 5, "b.csv": 4, "more/c.csv": 3}  # input object -> rows


def put_new_data(store: LocalStorage, prefix: str) -> None:
    """CSV files of digits feature rows (no label), the first with the training header."""
    lines = digits_csv().decode().splitlines()
    header, rows = lines[0].rsplit(",", 1)[0], [line.rsplit(",", 1)[0] for line in lines[1:]]
    start = 0
    for index, (name, count) in enumerate(FILES.items()):
        text = "\n".join(([header] if index == 0 else []) + rows[start:start + count]) + "\n"
        store.put_bytes(text.encode(), prefix + name)
        start += count


def test_batch_inference_on_2_instances_writes_one_output_per_input_file_with_class_names(tmp_path):
    store = LocalStorage(tmp_path / "store")
    prefix = f"s3://{Settings().bucket}/new-data/"
    put_new_data(store, prefix)
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), *SMALL,
                       "-p", f"BatchInputUri={prefix}", "-p", "BatchInstanceCount=2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    by_name = steps(execution(tmp_path))
    assert by_name[D.STEP_BATCH_CONDITION]["properties"] == {"Outcome": True}
    assert by_name[f"{D.STEP_BATCH_MODEL}-CreateModel"]["status"] == "Succeeded"
    assert by_name[D.STEP_TRANSFORM_IMAGES]["status"] == "NotExecuted"  # the digits are a table
    transform = by_name[D.STEP_TRANSFORM_TABLE]
    assert transform["status"] == "Succeeded"
    assert "3 object(s) on 2 instance(s): [2, 1]" in (Path(transform["job_dir"]) / "job.log").read_text()

    output = transform["properties"]["TransformOutput"]["S3OutputPath"].rstrip("/") + "/"
    written = sorted(uri[len(output):] for uri in store.list(output))
    assert written == sorted(f"{name}.out" for name in FILES)
    for name, rows in FILES.items():
        # MultiRecord: each request's answer is one line of TF Serving's {"predictions": [...]}.
        answers = [json.loads(line) for line in store.read_bytes(output + name + ".out").splitlines()]
        predictions = [p for answer in answers for p in answer["predictions"]]
        assert len(predictions) == rows, name  # the header line of a.csv is no record
        for prediction in predictions:
            assert prediction["classes"] in {str(c) for c in range(DIGITS_CLASSES)}
            assert len(prediction["probabilities"]) == DIGITS_CLASSES

    # The summary names the model, evaluation.json and the predictions, and their local paths.
    out = result.stdout
    for what in ("model:", "evaluation:", "predictions:"):
        (line,) = [i for i, text in enumerate(out.splitlines()) if text.startswith(what)]
        local = out.splitlines()[line + 1].strip()
        assert local.startswith(str(tmp_path / "store")) and Path(local).exists(), (what, local)
    assert f"trainpipe predict --workdir {tmp_path} --run " in out
