"""Training steps that are not a script of the user's (pipeline/local/dag/training_kinds.py):
an SDK v2 ``@step`` pipeline pickled under another Python, and a built-in XGBoost algorithm
step, built with the real SDK on ``LocalStoreSession``, are refused through the CLI before any
step runs, in one line naming what they are (not the sagemaker_program advice);
``--stub-unsupported`` applies to them. (@step pipelines that can run, run:
tests/pipeline/local/test_function_steps.py.)

No job runs: the CLI starts and refuses (a few seconds each)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import readme_record

REPO = Path(__file__).resolve().parents[4]
ROLE = "arn:aws:iam::111122223333:role/SageMaker"
SKLEARN_IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"


def run(definition: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir), "--tracking-uri", "off", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_an_at_step_pickled_under_another_python_is_refused_before_any_step(tmp_path):
    from sagemaker.workflow.function_step import step
    from sagemaker.workflow.pipeline import Pipeline

    from pipeline.local.store.session import LocalStoreSession

    # LocalStoreSession builds it: the SDK uploads the pickled function through s3_resource.Bucket.
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="fs-bucket")

    @step(name="Preprocess", role=ROLE, instance_type="ml.m5.xlarge", image_uri=SKLEARN_IMAGE)
    def preprocess(x):
        return x * 2

    @step(name="Train", role=ROLE, instance_type="ml.m5.xlarge", image_uri=SKLEARN_IMAGE)
    def train(y):
        return y + 1

    text = Pipeline(name="fsteps", steps=[train(preprocess(3))], sagemaker_session=session).definition()
    assert list((tmp_path / "work" / "store" / "fs-bucket" / "fsteps").rglob("*"))  # the function went up
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    # As the SDK writes it from a client on Python 3.9 (function_step.py: --client_python_version).
    definition = tmp_path / "fsteps.json"
    definition.write_text(text.replace(f'"--client_python_version", "{here}"', '"--client_python_version", "3.9"'))
    assert '"3.9"' in definition.read_text()

    done = run(definition, tmp_path / "work")
    refusal = done.stderr.strip().splitlines()[-1]
    readme_record.record(refusal)
    assert done.returncode == 2
    assert refusal.startswith(f"trainpipe run: error: the local runner cannot run step Preprocess (Type Training: "
                              f"an @step function pickled under Python 3.9; this runner's Python is {here} "
                              f"(build the pipeline with Python {here})), Train (Type Training: an @step function")
    assert "sagemaker_program" not in refusal and not (tmp_path / "work" / "runs").exists()


def abalone(tmp_path: Path, image: str, **fit) -> Path:
    """AWS's abalone example's shape: a processing step, then a built-in algorithm (no script)."""
    from sagemaker.estimator import Estimator
    from sagemaker.inputs import TrainingInput
    from sagemaker.processing import ProcessingOutput, ScriptProcessor
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import ProcessingStep, TrainingStep

    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=tmp_path / "work", bucket="xgb-bucket")
    code = tmp_path / "prep.py"
    code.write_text("print('never runs')\n")
    processor = ScriptProcessor(image_uri=SKLEARN_IMAGE, command=["python3"], role=ROLE, instance_count=1,
                                instance_type="ml.m5.xlarge", sagemaker_session=session)
    prep = ProcessingStep(name="Prep", step_args=processor.run(
        outputs=[ProcessingOutput(output_name="train", source="/opt/ml/processing/train")], code=str(code)))
    estimator = Estimator(image_uri=image, role=ROLE, instance_count=1, instance_type="ml.m5.xlarge",
                          output_path="s3://xgb-bucket/models", sagemaker_session=session)
    if "xgboost" in image:
        estimator.set_hyperparameters(objective="reg:linear", num_round=50)
    else:
        estimator.set_hyperparameters(predictor_type="regressor")
    train = TrainingStep(name="TrainAbaloneModel", step_args=estimator.fit({"train": TrainingInput(
        prep.properties.ProcessingOutputConfig.Outputs["train"].S3Output.S3Uri, content_type="text/csv", **fit)}))
    definition = tmp_path / "abalone.json"
    definition.write_text(Pipeline(name="abalone", steps=[prep, train], sagemaker_session=session).definition())
    return definition


def test_a_builtin_algorithm_other_than_xgboost_is_refused_before_any_step_naming_its_image(tmp_path):
    from sagemaker import image_uris

    image = image_uris.retrieve("linear-learner", "us-east-1")
    definition = abalone(tmp_path, image)

    done = run(definition, tmp_path / "work")
    refusal = done.stderr.strip().splitlines()[-1]
    readme_record.record(refusal)
    assert done.returncode == 2
    assert refusal.startswith(f"trainpipe run: error: the local runner cannot run step TrainAbaloneModel (Type Training: "
                              f"image {image} is SageMaker's built-in Linear Learner algorithm, which does not run "
                              f"locally (trainpipe runs only the built-in XGBoost); an estimator with an entry_point "
                              f"script does)")
    assert "sagemaker_program" not in refusal and not (tmp_path / "work" / "runs").exists()

    # Stubbed, the processing step runs and the algorithm's step is skipped: the run is Stopped.
    stubbed = run(definition, tmp_path / "work", "--stub-unsupported", "skip", "--quiet")
    assert stubbed.returncode == 130, stubbed.stdout[-2000:] + stubbed.stderr[-2000:]
    (record,) = (tmp_path / "work" / "runs").glob("*/execution.json")
    steps = {s["name"]: s["status"] for s in json.loads(record.read_text())["steps"]}
    assert steps == {"Prep": "Succeeded", "TrainAbaloneModel": "NotExecuted"}


def test_builtin_xgboost_with_what_the_local_run_lacks_is_refused_before_any_step(tmp_path):
    """XGBoost itself runs (tests/pipeline/local/jobs/test_builtin_xgboost.py); Pipe input and
    a ContentType it does not read are refused before the processing step, in one line."""
    from sagemaker import image_uris

    image = image_uris.retrieve("xgboost", "us-east-1", version="1.7-1")
    done = run(abalone(tmp_path, image, input_mode="Pipe"), tmp_path / "work")
    refusal = done.stderr.strip().splitlines()[-1]
    readme_record.record(refusal)
    assert done.returncode == 2
    assert refusal.startswith(f"trainpipe run: error: the local runner cannot run step TrainAbaloneModel (Type Training: "
                              f"image {image} is SageMaker's built-in XGBoost algorithm, with channel train in Pipe "
                              f"mode, which the local run does not read; use File input)")
    assert not (tmp_path / "work" / "runs").exists()

    parquet = tmp_path / "parquet"
    parquet.mkdir()
    definition = abalone(parquet, image)
    definition.write_text(definition.read_text().replace('"text/csv"', '"application/x-parquet"'))
    done = run(definition, parquet / "work")
    assert done.returncode == 2
    assert ("with channel train of ContentType application/x-parquet, which the local run does not read; use "
            "text/csv or text/libsvm)") in done.stderr.strip().splitlines()[-1]


def test_an_sdk_v3_function_step_is_told_apart_as_v2s_is():
    """SDK v3's remote function (sagemaker 3.27, written here as the v3 tests write its format)
    keeps v2's bootstrap channel and job driver; only the dependencies channel is renamed."""
    from pipeline.local.dag import training_kinds
    from pipeline.local.dag.interpreter import StepNode

    channel = {"ChannelName": "sagemaker_remote_function_bootstrap", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://b/fsteps/Train/bootstrap", "S3DataDistributionType": "FullyReplicated"}}}
    request = {"AlgorithmSpecification": {
        "TrainingImage": SKLEARN_IMAGE, "TrainingInputMode": "File",
        "ContainerEntrypoint": ["/bin/bash", "/opt/ml/input/data/sagemaker_remote_function_bootstrap/job_driver.sh"]},
        "InputDataConfig": [channel, {**channel, "ChannelName": "pre_exec_script_and_deps"}]}
    node = StepNode("Train", "Training", {"Arguments": request}, ())
    assert training_kinds.is_function_step(node)
    assert training_kinds.why_not_local(node) == ""  # it runs (its requirements are read before any step)
    script = StepNode("Fit", "Training", {"Arguments": {"AlgorithmSpecification": {"TrainingImage": SKLEARN_IMAGE},
                                                        "HyperParameters": {"sagemaker_program": "\"fit.py\""}}}, ())
    assert training_kinds.why_not_local(script) == ""


def test_an_at_step_needs_motos_server_where_it_is_not_installed(monkeypatch):
    """A plain install (no dev extra) lacks moto: the @step job's S3 server (jobs/function_step.py)."""
    import importlib.util

    from pipeline.local.dag import training_kinds

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "moto" else real(name, *a))
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    request = {"AlgorithmSpecification": {"ContainerArguments": ["--client_python_version", here]}}
    why = training_kinds.function_step_refusal(request, storage=None)
    readme_record.record(why)
    assert why == "an @step function, whose job needs moto's S3 server here (pip install 'moto[server]')"
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert training_kinds.function_step_refusal(request, storage=None) == ""


def test_a_tuning_step_on_builtin_xgboost_is_refused_before_any_step_naming_its_image(tmp_path):
    """AWS's XGBoost tuning examples: a HyperparameterTuner over the algorithm's image. Its trials
    are not the local built-in XGBoost jobs: refused before any step, not with the
    sagemaker_program advice."""
    from sagemaker import image_uris
    from sagemaker.estimator import Estimator
    from sagemaker.inputs import TrainingInput
    from sagemaker.tuner import ContinuousParameter, HyperparameterTuner
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TuningStep

    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=tmp_path / "work", bucket="xgb-bucket")
    for channel in ("train", "validation"):  # the inputs are there: only the launch is judged
        data = tmp_path / "work" / "store" / "xgb-bucket" / "abalone" / channel / "data.csv"
        data.parent.mkdir(parents=True)
        data.write_text("10,0.5,0.4\n")
    image = image_uris.retrieve("xgboost", "us-east-1", version="1.7-1")
    estimator = Estimator(image_uri=image, role=ROLE, instance_count=1, instance_type="ml.m5.xlarge",
                          output_path="s3://xgb-bucket/models", sagemaker_session=session)
    estimator.set_hyperparameters(objective="reg:linear", num_round=50)
    tuner = HyperparameterTuner(estimator, "validation:rmse", {"eta": ContinuousParameter(0.1, 0.5)},
                                objective_type="Minimize", max_jobs=2, max_parallel_jobs=1)
    tune = TuningStep(name="TuneAbalone", step_args=tuner.fit({
        "train": TrainingInput("s3://xgb-bucket/abalone/train", content_type="text/csv"),
        "validation": TrainingInput("s3://xgb-bucket/abalone/validation", content_type="text/csv")}))
    definition = tmp_path / "tune.json"
    definition.write_text(Pipeline(name="abalone", steps=[tune], sagemaker_session=session).definition())

    done = run(definition, tmp_path / "work")
    refusal = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert refusal == (f"trainpipe run: error: the local runner cannot run step TuneAbalone (Type Tuning: image {image} "
                       f"is SageMaker's built-in XGBoost algorithm, whose tuning trials do not run locally (a Training "
                       f"step of it does); tune an estimator with an entry_point script)")
    assert not (tmp_path / "work" / "runs").exists()


def test_a_model_trainer_on_the_xgboost_image_without_source_code_is_the_builtin_algorithm():
    """ModelTrainer(training_image=..., hyperparameters=...) with no source_code adds no sm_drivers
    channel and no ContainerEntrypoint (sagemaker/modules/train/model_trainer.py): the request is the
    algorithm's, as the Estimator's is, and runs as the local built-in XGBoost."""
    from pipeline.local.dag import training_kinds
    from pipeline.local.dag.interpreter import StepNode

    image = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"
    arguments = {
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
        "HyperParameters": {"objective": "reg:linear", "num_round": "20", "eta": "0.2"},  # safe_serialize
        "InputDataConfig": [{"ChannelName": "train", "ContentType": "text/csv", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://b/train", "S3DataDistributionType": "FullyReplicated"}}}],
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    }
    node = StepNode("Train", "Training", {"Name": "Train", "Type": "Training", "Arguments": arguments}, ())
    assert training_kinds.builtin_algorithm(node) == ("XGBoost", image)
    assert training_kinds.why_not_local(node) == ""
    arguments["ResourceConfig"]["InstanceCount"] = 2
    assert training_kinds.why_not_local(node) == (
        f"image {image} is SageMaker's built-in XGBoost algorithm, on 2 instances (distributed XGBoost), which the "
        f"local run does not do; use instance_count=1")
