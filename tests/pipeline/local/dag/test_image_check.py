"""The pre-run image check through ``trainpipe run --local --definition``, on pipelines built
with the plain SageMaker SDK v2 the way AWS's examples build them (``dag/image_check.py``,
``pipeline/images/``): a script importing what its image lacks is refused before any step,
in one line; the same pipeline with a requirements.txt runs; code the image's Python cannot
parse is refused the same way.

The refusals take no job time (seconds); the pipeline that runs is one small processing step.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.jobs.environments.environment import find_python
from tests import readme_record

REPO = Path(__file__).resolve().parents[4]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
SKLEARN_IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"

REPORT = """\
import os

import tpreport

out = "/opt/ml/processing/report"
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "report.txt"), "w") as f:
    f.write(tpreport.VERSION)
"""


def build(tmp_path: Path, files: dict[str, str], framework_version: str = "1.2-1") -> Path:
    """A one-step pipeline: AWS's SKLearn FrameworkProcessor running ``report.py`` from a
    source_dir (runproc.sh unpacks it and pip-installs its requirements.txt)."""
    from sagemaker.processing import FrameworkProcessor, ProcessingOutput
    from sagemaker.sklearn.estimator import SKLearn
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import ProcessingStep

    from pipeline.local.store.session import LocalStoreSession

    source = tmp_path / "code"
    source.mkdir()
    for name, text in files.items():
        (source / name).write_text(text)
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="images-bucket")
    processor = FrameworkProcessor(estimator_cls=SKLearn, framework_version=framework_version, role=ROLE,
                                   instance_type="ml.m5.xlarge", instance_count=1, base_job_name="report",
                                   sagemaker_session=session)
    step = ProcessingStep(name="Report", step_args=processor.run(
        outputs=[ProcessingOutput(output_name="report", source="/opt/ml/processing/report")],
        code="report.py", source_dir=str(source)))
    definition = tmp_path / "pipeline.json"
    definition.write_text(Pipeline(name="images", steps=[step], sagemaker_session=session).definition())
    return definition


def run(tmp_path: Path, definition: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(tmp_path / "work")],
                          cwd=REPO, capture_output=True, text=True, timeout=900)


def no_step_ran(tmp_path: Path) -> bool:
    return not list((tmp_path / "work").glob("runs/*/jobs/*"))


def test_an_import_the_image_lacks_is_refused_before_any_step_in_one_line(tmp_path):
    done = run(tmp_path, build(tmp_path, {"report.py": REPORT}))
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    readme_record.record(line)
    assert [x for x in done.stderr.splitlines() if "error" in x] == [line]  # one line, all of it
    assert line.endswith(
        "step Report: the code imports tpreport (report.py:3), which the image " + SKLEARN_IMAGE
        + " (Python 3.9, record aws-sklearn-1.2-1) does not have and no requirements.txt installs: it "
        "would fail there with ModuleNotFoundError; add a line tpreport to the requirements.txt next "
        "to the entry point, or name an image that has it")
    assert no_step_ran(tmp_path)


def test_code_the_images_python_cannot_parse_is_refused_before_any_step(tmp_path):
    script = "import sys\n\nmatch sys.argv[1:]:\n    case []:\n        print('no arguments')\n"
    done = run(tmp_path, build(tmp_path, {"report.py": script}))
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    readme_record.record(line)
    assert line.endswith(
        "step Report: report.py:5: Pattern matching is only supported in Python 3.10 and greater: the image "
        + SKLEARN_IMAGE + " (record aws-sklearn-1.2-1) has Python 3.9, which cannot parse this code; write it "
        "for Python 3.9, or run the step on an image with a newer Python")
    assert no_step_ran(tmp_path)


@pytest.mark.slow
def test_the_same_pipeline_with_a_requirements_txt_runs(tmp_path):
    from tests.pipeline.local.jobs.environments.test_environment import build_wheel

    # The package from a wheel folder of its own (no network): runproc.sh installs it, in the
    # image's Python (3.9) where this machine has it.
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "tpreport", "3.1")
    requirements = f"--no-index\n--find-links {wheels}\ntpreport==3.1\n"
    done = run(tmp_path, build(tmp_path, {"report.py": REPORT, "requirements.txt": requirements}))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "==> Report: Succeeded" in done.stdout
    (report,) = (tmp_path / "work").glob("store/**/report.txt")
    assert report.read_text() == "3.1"
    if find_python("3.9"):
        (log,) = (tmp_path / "work").glob("runs/*/jobs/*/job.log")
        assert "(Python 3.9: the image's Python, with its aws-sklearn-1.2-1 packages" in log.read_text()


def test_our_own_default_pipeline_passes_its_own_image_check(tmp_path):
    """trainpipe's definition, as `run --local` stores its code: every job's code is judged
    against the record of the image the definition names, and none is refused."""
    from pipeline.cli.local.commands import place_code_and_data
    from pipeline.definition.build import build_definition
    from pipeline.local.dag import image_check, interpreter
    from pipeline.local.store.storage import LocalStorage
    from pipeline.settings import Settings

    settings = Settings()
    definition = build_definition(settings)
    nodes = interpreter.plan(definition, allow_unsupported=True)
    parameters = interpreter.resolve_parameters(definition, {})
    storage = LocalStorage(tmp_path / "store")
    place_code_and_data(storage, settings, dict(parameters), lambda line: None)
    ctx = interpreter.Context(parameters=parameters, execution={"PipelineExecutionId": "x"})
    said: list[str] = []
    verdicts = image_check.check(nodes, ctx, storage, said.append)
    judged = {node.name for node in nodes if node.type in ("Processing", "Training")}
    assert len(verdicts) == len(judged) >= 3
    # Every image it names has a record; AWS's TF 2.14 (preprocessing, evaluation) is past its
    # end of patch: one line for both steps.
    assert len(said) == 1 and said[0].startswith(
        "warning: steps PreprocessData, EvaluateModel: the image 763104351884.dkr.ecr.us-east-1.amazonaws.com/"
        "tensorflow-training:2.14.1-cpu-py310 is past its end of patch: AWS's end of patch for tensorflow-training "
        "2.14 was 2024-09-26"), said
    assert all(v.record is not None and v.refusal is None for v in verdicts)
    # The training step runs Horovod: its image must be one that has it.
    train = next(n for n in nodes if n.type == "Training")
    image = train.body["Arguments"]["AlgorithmSpecification"]["TrainingImage"]
    from pipeline.images import catalog

    assert "horovod" in catalog.find(image).modules, image


@pytest.mark.parametrize("strategy", ["ddp", "zero3"])
def test_our_own_pytorch_pipeline_passes_its_own_image_check(tmp_path, strategy):
    """-p Framework=pytorch: the room's code on AWS's PyTorch 2.10 image (training, evaluation)
    imports only what the image holds, ZeRO's DeepSpeed through its requirements.txt."""
    from pipeline.cli.local.commands import place_code_and_data
    from pipeline.definition import parameters as P
    from pipeline.definition.build import build_definition
    from pipeline.local.dag import image_check, interpreter
    from pipeline.local.store.storage import LocalStorage
    from pipeline.settings import Settings

    settings = Settings()
    definition = build_definition(settings, {P.FRAMEWORK: "pytorch", P.PROCESSES_PER_HOST: "2", P.STRATEGY: strategy})
    nodes = interpreter.plan(definition, allow_unsupported=True)
    parameters = interpreter.resolve_parameters(definition, {})
    storage = LocalStorage(tmp_path / "store")
    place_code_and_data(storage, settings, dict(parameters), lambda line: None)
    ctx = interpreter.Context(parameters=parameters, execution={"PipelineExecutionId": "x"})
    verdicts = image_check.check(nodes, ctx, storage, lambda line: None)
    assert len(verdicts) == 3 and all(v.record is not None and v.refusal is None for v in verdicts), verdicts
    names = {v.record.name for v in verdicts}
    assert {"aws-pytorch-training-2.10-cpu", "aws-tensorflow-training-2.14"} <= names, names


TF_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14.1-cpu-py310-ubuntu20.04-sagemaker"
# What issue 47 found refused that SageMaker runs: a package a pinned package pulls in
# (matplotlib through tf-models-official), a tomllib import the image's Python 3.10 never
# reaches, and AWS's own pip idiom installing a package (from a wheel folder: no network).
TF_SCRIPT = """\
import subprocess
import sys

import matplotlib

if sys.version_info >= (3, 11):
    import tomllib
else:
    tomllib = None

subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-index", "--find-links",
                       "/opt/ml/processing/input/wheels", "tpidiom==1.0"])
import tpidiom

print("ran with", tpidiom.VERSION, matplotlib.__name__, tomllib)
"""


def build_script_processor(tmp_path: Path, script: str) -> Path:
    """A one-step pipeline: SDK v2's ScriptProcessor on AWS's TF 2.14 training image, a wheel
    folder as an input."""
    from sagemaker.processing import ProcessingInput, ScriptProcessor
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import ProcessingStep

    from pipeline.local.store.session import LocalStoreSession
    from tests.pipeline.local.jobs.environments.test_environment import build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "tpidiom", "1.0")
    (tmp_path / "job.py").write_text(script)
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="images-bucket")
    processor = ScriptProcessor(image_uri=TF_IMAGE, command=["python3"], role=ROLE, instance_type="ml.m5.xlarge",
                                instance_count=1, base_job_name="idiom", sagemaker_session=session)
    step = ProcessingStep(name="Idiom", step_args=processor.run(
        code=str(tmp_path / "job.py"),
        inputs=[ProcessingInput(source=str(wheels), destination="/opt/ml/processing/input/wheels")]))
    definition = tmp_path / "pipeline.json"
    definition.write_text(Pipeline(name="idiom", steps=[step], sagemaker_session=session).definition())
    return definition


def test_transitive_optional_and_pip_idiom_imports_are_not_refused_only_what_nothing_provides(tmp_path):
    done = run(tmp_path, build_script_processor(tmp_path, TF_SCRIPT + "import optuna\n"))
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    # Only optuna: not matplotlib, tomllib or tpidiom (issue 47 items 3 and 4).
    assert "step Idiom: the code imports optuna (job.py:16), which the image " + TF_IMAGE in line, line
    assert "matplotlib" not in line and "tomllib" not in line and "tpidiom" not in line
    assert no_step_ran(tmp_path)


@pytest.mark.slow
def test_transitive_optional_and_pip_idiom_imports_run(tmp_path):
    done = run(tmp_path, build_script_processor(tmp_path, TF_SCRIPT))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "==> Idiom: Succeeded" in done.stdout
    assert "warning" not in done.stderr.lower(), done.stderr


RUNPROC_V3 = """\
#!/bin/bash
set -e
cd /opt/ml/processing/input/code/
tar -xzf sourcedir.tar.gz
if [[ -f 'requirements.txt' ]]; then
    pip uninstall --yes typing
    python3 /opt/ml/processing/input/code/install_requirements.py requirements.txt
fi
python3 report.py "$@"
"""
# A stand-in for the SDK's helper (sagemaker-core, utils/install_requirements.py), shaped as
# it is: the pip command built in a variable, then run.
INSTALL_REQUIREMENTS = """\
import subprocess
import sys


def install_requirements(requirements_file, python_executable=sys.executable):
    pip_cmd = [python_executable, "-m", "pip", "install", "-r", requirements_file]
    subprocess.check_call(pip_cmd)


if __name__ == "__main__":
    install_requirements(sys.argv[1])
"""


def build_v3_framework_processor(tmp_path: Path, requirements: str | None) -> Path:
    """SDK v3's FrameworkProcessor(..., requirements="requirements.txt") as it uploads its job
    (aws/sagemaker-python-sdk acdcb6e, sagemaker-core/src/sagemaker/core/processing.py:
    sourcedir.tar.gz, install_requirements.py and runproc.sh under the code prefix, mounted at
    /opt/ml/processing/input/code/, the job run as ``/bin/bash .../runproc.sh``)."""
    import io
    import json
    import tarfile

    from pipeline.local.store.storage import LocalStorage

    storage = LocalStorage(tmp_path / "work" / "store")
    prefix = "s3://images-bucket/report-v3/source"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in {"report.py": REPORT, **({"requirements.txt": requirements} if requirements else {})}.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            archive.addfile(info, io.BytesIO(text.encode()))
    storage.put_bytes(buffer.getvalue(), f"{prefix}/sourcedir.tar.gz")
    storage.put_bytes(INSTALL_REQUIREMENTS.encode(), f"{prefix}/install_requirements.py")
    storage.put_bytes(RUNPROC_V3.encode(), f"{prefix}/runproc.sh")
    step = {"Name": "Report", "Type": "Processing", "Arguments": {
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1,
                                                  "VolumeSizeInGB": 30}},
        "AppSpecification": {"ImageUri": SKLEARN_IMAGE, "ContainerEntrypoint": [
            "/bin/bash", "/opt/ml/processing/input/code/runproc.sh"]},
        "RoleArn": ROLE,
        "ProcessingInputs": [{"InputName": "code", "AppManaged": False, "S3Input": {
            "S3Uri": prefix + "/", "LocalPath": "/opt/ml/processing/input/code/", "S3DataType": "S3Prefix",
            "S3InputMode": "File", "S3DataDistributionType": "FullyReplicated", "S3CompressionType": "None"}}],
        "ProcessingOutputConfig": {"Outputs": [{"OutputName": "report", "AppManaged": False, "S3Output": {
            "S3Uri": "s3://images-bucket/report-v3/out", "LocalPath": "/opt/ml/processing/report",
            "S3UploadMode": "EndOfJob"}}]}}}
    definition = tmp_path / "pipeline.json"
    definition.write_text(json.dumps({"Version": "2020-12-01", "Metadata": {}, "Parameters": [], "Steps": [step]}))
    return definition


def test_a_v3_framework_processor_without_requirements_is_refused(tmp_path):
    done = run(tmp_path, build_v3_framework_processor(tmp_path, None))
    assert done.returncode != 0
    assert "step Report: the code imports tpreport (report.py:3)" in done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_v3_framework_processor_with_requirements_runs(tmp_path):
    from tests.pipeline.local.jobs.environments.test_environment import build_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "tpreport", "3.1")
    done = run(tmp_path, build_v3_framework_processor(tmp_path, f"--no-index\n--find-links {wheels}\ntpreport==3.1\n"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "==> Report: Succeeded" in done.stdout
    (report,) = (tmp_path / "work").glob("store/**/report.txt")
    assert report.read_text() == "3.1"


ML_OPS_TRAIN = """\
import argparse
import os

import lightgbm
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args, _ = parser.parse_known_args()
print(tf.__version__, lightgbm.__version__, os.environ.get("SM_MODEL_DIR"))
"""


def test_aws_ml_ops_example_with_lightgbm_is_refused_by_its_images_record_before_any_step(tmp_path):
    """AWS's ml_ops example (amazon-sagemaker-examples, ml_ops): a SKLearn processing step, then
    SDK v2's TensorFlow estimator on framework_version 2.4.1, py37, with ``import lightgbm``
    added. TF 2.4's record (aws-tensorflow-training-2.4-cpu, issue 47: Python 3.7) has no
    lightgbm; refused before the processing step runs, after one line for each image past its
    end of patch. (An image with no record, judged by its tag against the nearest record:
    tests/pipeline/images/test_imports.py.)"""
    from sagemaker.inputs import TrainingInput
    from sagemaker.processing import ProcessingOutput
    from sagemaker.sklearn.processing import SKLearnProcessor
    from sagemaker.tensorflow import TensorFlow
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import ProcessingStep, TrainingStep

    from pipeline.local.store.session import LocalStoreSession

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(ML_OPS_TRAIN)
    (tmp_path / "prepare.py").write_text("import pandas\n")
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="images-bucket")
    processor = SKLearnProcessor(framework_version="0.23-1", role=ROLE, instance_type="ml.m5.xlarge",
                                 instance_count=1, sagemaker_session=session)
    prepare = ProcessingStep(name="Prepare", step_args=processor.run(
        code=str(tmp_path / "prepare.py"),
        outputs=[ProcessingOutput(output_name="train", source="/opt/ml/processing/train")]))
    estimator = TensorFlow(entry_point="train.py", source_dir=str(tmp_path / "code"), role=ROLE,
                           framework_version="2.4.1", py_version="py37", instance_type="ml.c5.xlarge",
                           instance_count=1, hyperparameters={"epochs": 1}, sagemaker_session=session)
    train = TrainingStep(name="Train", step_args=estimator.fit(inputs={"train": TrainingInput(
        s3_data=prepare.properties.ProcessingOutputConfig.Outputs["train"].S3Output.S3Uri)}))
    definition = tmp_path / "pipeline.json"
    definition.write_text(Pipeline(name="ml-ops", steps=[prepare, train], sagemaker_session=session).definition())
    done = run(tmp_path, definition)
    assert done.returncode != 0
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.4.1-cpu-py37"
    line = done.stderr.strip().splitlines()[-1]
    readme_record.record(line)
    assert line.endswith(
        "step Train: the code imports lightgbm (train.py:4), which the image " + image + " (Python 3.7, record "
        "aws-tensorflow-training-2.4-cpu) does not have and no "
        "requirements.txt installs: it would fail there with ModuleNotFoundError; add a line lightgbm to the "
        "requirements.txt next to the entry point, or name an image that has it"), line
    said = done.stdout + done.stderr
    # Which image AWS still patches depends on the day: the line up to it.
    eop = ("warning: step Train: the image " + image + " is past its end of patch: tensorflow-training 2.4 is "
           "older than every version in AWS's support data (2.14's end of patch was 2024-09-26), so it gets no "
           "security fixes; ")
    (line,) = [x for x in said.splitlines() if x.startswith(eop)]
    readme_record.record(line)
    assert said.count("past its end of patch") == 1, said  # SKLearn's images are not in AWS's DLC data
    assert no_step_ran(tmp_path)


def test_a_sklearn_14_2_job_is_judged_by_its_record_under_its_dockerfiles_python(tmp_path):
    """SKLearn 1.4-2 (the SDK names it): its tag says only py3; its record (issue 47, from AWS's
    Dockerfile and requirements.txt) says Python 3.10 (a match statement parses) and has no
    lightgbm: refused before any step (on the old tag parsing it ran unchecked). Judged against the
    nearest record when none holds the version: tests/pipeline/images/test_support.py."""
    script = "import sys\n\nimport lightgbm\n\nmatch sys.argv[1:]:\n    case []:\n        print(lightgbm)\n"
    done = run(tmp_path, build(tmp_path, {"report.py": script}, framework_version="1.4-2"))
    assert done.returncode != 0
    image = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.4-2-cpu-py3"
    line = done.stderr.strip().splitlines()[-1]
    assert line.endswith(
        "step Report: the code imports lightgbm (report.py:3), which the image " + image + " (Python 3.10, "
        "record aws-sklearn-1.4-2) does not have and no "
        "requirements.txt installs: it would fail there with ModuleNotFoundError; add a line lightgbm to the "
        "requirements.txt next to the entry point, or name an image that has it"), line
    assert no_step_ran(tmp_path)


def test_a_pytorch_29_job_may_import_torch_and_torchvision_and_not_what_the_image_lacks(tmp_path):
    """SDK v2's PyTorch estimator on AWS's PyTorch 2.9 training image (its record from AWS's
    Dockerfile, issue 44): torch and torchvision are the image's; lightgbm is refused before any step."""
    from sagemaker.inputs import TrainingInput
    from sagemaker.pytorch import PyTorch
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TrainingStep

    from pipeline.local.store.session import LocalStoreSession

    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.9.0-cpu-py312-ubuntu22.04-sagemaker"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("import torch\nimport torchvision\nimport torch.distributed as dist\n"
                                                "import lightgbm\n")
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="images-bucket")
    estimator = PyTorch(entry_point="train.py", source_dir=str(tmp_path / "code"), role=ROLE, image_uri=image,
                        instance_count=1, instance_type="ml.c5.xlarge", sagemaker_session=session)
    step = TrainingStep(name="Train", step_args=estimator.fit(
        inputs={"train": TrainingInput(s3_data="s3://images-bucket/train")}))
    definition = tmp_path / "pipeline.json"
    definition.write_text(Pipeline(name="pt29", steps=[step], sagemaker_session=session).definition())
    done = run(tmp_path, definition)
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    assert line.endswith(f"step Train: the code imports lightgbm (train.py:4), which the image {image} (Python 3.12, "
                         "record aws-pytorch-training-2.9-cpu) does not have and no requirements.txt installs: it "
                         "would fail there with ModuleNotFoundError; add a line lightgbm to the requirements.txt next "
                         "to the entry point, or name an image that has it"), line
    assert no_step_ran(tmp_path)
