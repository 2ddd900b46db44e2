"""`trainpipe definition|upsert --tracking-uri`: what the SageMaker training, preprocessing and
evaluation jobs get to log to MLflow themselves, and the URIs they could not log to, refused in
one line before anything is built."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pipeline.definition import build as D
from pipeline.definition.build import build_definition
from pipeline.definition.bundles import SOURCEDIR_ARCHIVE, all_bundles
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.tracking import jobs
from tests import readme_record

REPO = Path(__file__).resolve().parents[3]
ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"


def training_step(definition: dict) -> dict:
    return next(s for s in definition["Steps"] if s["Type"] == "Training")


@pytest.mark.parametrize("uri, plugin", [(ARN, True), ("https://mlflow.example.com", False)])
def test_the_training_job_gets_the_uri_the_experiment_the_execution_and_its_requirements(uri, plugin):
    settings = Settings(tracking_uri=uri, network_isolation=False)
    step = training_step(build_definition(settings, {}))
    assert step["Arguments"]["Environment"] == {
        "MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": settings.pipeline_name,
        "TRAINPIPE_EXECUTION_ID": {"Get": "Execution.PipelineExecutionId"}}
    # The code the definition points to is the code upsert uploads, requirements.txt in it.
    bundle = all_bundles(settings.model_file, settings.tracking_uri)["training"]
    assert bundle.key_prefix(settings.prefix) in step["Arguments"]["HyperParameters"]["sagemaker_submit_directory"]
    with tarfile.open(fileobj=io.BytesIO(bundle.objects()[SOURCEDIR_ARCHIVE])) as tar:
        wanted = tar.extractfile(jobs.REQUIREMENTS_FILE).read().decode().split()
    assert wanted == ["mlflow-skinny", "sagemaker-mlflow"] if plugin else wanted == ["mlflow-skinny"]


def test_the_processing_jobs_get_the_variables_their_step_and_their_requirements():
    settings = Settings(tracking_uri=ARN, network_isolation=False)
    definition = build_definition(settings, {})
    bundles = all_bundles(settings.model_file, settings.tracking_uri)
    for name, bundle in ((D.STEP_PREPROCESS, "processing"), (D.STEP_EVALUATE, "evaluation")):
        (step,) = [s for s in definition["Steps"] if s["Name"] == name]
        environment = step["Arguments"]["Environment"]
        assert environment == {
            "PYTHONPATH": "/opt/ml/processing/input/code", "MLFLOW_TRACKING_URI": ARN,
            "MLFLOW_EXPERIMENT_NAME": settings.pipeline_name, "TRAINPIPE_STEP_NAME": name,
            "TRAINPIPE_EXECUTION_ID": {"Get": "Execution.PipelineExecutionId"}}
        # requirements.txt at the code's root (/opt/ml/processing/input/code), where
        # training_entry/tracking.ensure_mlflow looks: the folder above its package.
        assert bundles[bundle].files[jobs.REQUIREMENTS_FILE].decode().split() == ["mlflow-skinny", "sagemaker-mlflow"]
        assert "training_entry/tracking.py" in bundles[bundle].files


def test_without_tracking_the_definition_and_code_are_unchanged():
    definition = build_definition(Settings(), {})
    step = training_step(definition)
    assert "Environment" not in step["Arguments"] or not step["Arguments"]["Environment"]
    for step in definition["Steps"]:
        assert not {"MLFLOW_TRACKING_URI", "TRAINPIPE_EXECUTION_ID"} & set(step["Arguments"].get("Environment") or {})
    assert not any(jobs.REQUIREMENTS_FILE in b.files for b in all_bundles().values())


def test_a_store_on_this_machine_or_network_isolation_is_refused_in_one_line():
    with pytest.raises(UserError, match="cannot reach a store on this machine"):
        jobs.check("sqlite:////tmp/mlflow.db", network_isolation=False)
    done = subprocess.run([sys.executable, "-m", "pipeline", "definition", "--tracking-uri", ARN],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"trainpipe definition: error: --tracking-uri {ARN}: the jobs run with "
                           "network isolation") and "--no-network-isolation" in line


def test_a_tracking_uri_with_credentials_is_refused_before_it_reaches_a_definition():
    done = subprocess.run([sys.executable, "-m", "pipeline", "definition", "--no-network-isolation",
                           "--tracking-uri", "https://trainer:hunter2@mlflow.example.com"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and "hunter2" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    readme_record.record(line)
    assert line == ("trainpipe definition: error: --tracking-uri https://***@mlflow.example.com: the URI carries "
                    "credentials, and the definition (where the jobs' MLFLOW_TRACKING_URI is written) is readable "
                    "by anyone who may describe the pipeline; give the URI without them, e.g. a SageMaker MLflow "
                    "tracking server ARN, whose requests the jobs sign with their role")


def test_the_jobs_code_passes_the_pre_run_image_check_with_tracking():
    """The image check (pipeline/images/imports.py) finds nothing the images lack, for each
    job's own image: the training toolkit installs requirements.txt before the script, but no
    one does for a processing image, so the processing entrypoints are judged without it (they
    import MLflow only after installing it, training_entry/tracking.ensure_mlflow)."""
    from pipeline.images.imports import check_code

    settings = Settings(tracking_uri=ARN, network_isolation=False)
    steps = {s["Name"]: s["Arguments"] for s in build_definition(settings, {})["Steps"]}
    images = {"processing": steps[D.STEP_PREPROCESS]["AppSpecification"]["ImageUri"],
              "evaluation": steps[D.STEP_EVALUATE]["AppSpecification"]["ImageUri"],
              "training": steps[D.STEP_TRAIN]["AlgorithmSpecification"]["TrainingImage"]}
    for name, bundle in all_bundles(settings.model_file, settings.tracking_uri).items():
        files = {path: data.decode() for path, data in bundle.files.items() if path.endswith(".py")}
        entry = [bundle.module.replace(".", "/") + ".py"] if bundle.module else ["train.py"]
        installed = bundle.files[jobs.REQUIREMENTS_FILE].decode() if name == "training" else None
        verdict = check_code(files, images[name], installed, step=name, entry_points=entry)
        assert verdict.record is not None and (verdict.refusal, verdict.warning) == (None, None), name
