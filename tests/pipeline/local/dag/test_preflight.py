"""The pre-run checks of ``dag/preflight.py`` through ``trainpipe run --local --definition``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import readme_record
from tests.pipeline.local.sdk_pipelines import v3

REPO = Path(__file__).resolve().parents[4]
BUCKET = "tune-bucket"


def test_tuning_over_a_v3_command_job_is_refused_before_any_step(tmp_path):
    """SDK v3's HyperparameterTuner over ModelTrainer(source_code=SourceCode(command=...)): the
    tuner sets sagemaker_program only from entry_script (aws/sagemaker-python-sdk 64c3591,
    sagemaker-train/src/sagemaker/train/tuner.py, _prepare_model_trainer_for_tuning), so its
    trials name no script. The same training step alone is refused before any step; so is this
    one now, not after the preprocessing step ran (issue 47)."""
    arguments = v3.tuning_arguments(
        submit_directory="unused", entry_script="unused", output=f"s3://{BUCKET}/models",
        train_uri={"Get": "Steps.Preprocess.ProcessingOutputConfig.Outputs['train'].S3Output.S3Uri"},
        hyperparameters={"epochs": 2}, ranges={"Categorical": [{"Name": "optimizer", "Values": ["sgd", "adam"]}]},
        objective="validation:accuracy", metric_regex=r"val_accuracy=([0-9.]+)")
    static = arguments["TrainingJobDefinition"]["StaticHyperParameters"]
    del static["sagemaker_program"], static["sagemaker_submit_directory"]  # command=: neither is set
    preprocess = v3._processing_step("Preprocess", f"s3://{BUCKET}/code/preprocess.py", [],
                                     ("train", f"s3://{BUCKET}/train", "/opt/ml/processing/train"))
    definition = {"Version": "2020-12-01", "Metadata": {}, "Parameters": [],
                  "Steps": [preprocess, {"Name": "Tune", "Type": "Tuning", "Arguments": arguments}]}
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(definition))
    store = tmp_path / "work" / "store"
    from pipeline.local.store.storage import LocalStorage

    LocalStorage(store).put_bytes(b"print('preprocess')\n", f"s3://{BUCKET}/code/preprocess.py")
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(path),
                           "--workdir", str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    readme_record.record(line)
    assert ("step Tune (each trial of its TrainingJobDefinition; SDK v3's HyperparameterTuner names the script "
            "only from SourceCode(entry_script=...), not command=): its launch cannot be determined: "
            "hyperparameter sagemaker_program is missing") in line, line
    assert not list((tmp_path / "work").glob("runs/*/jobs/*")), "a step ran"
