"""Hyperparameters reach the script's argv as SageMaker renders them, through ``trainpipe run
--local --definition``:

- SDK v2 (``sagemaker`` 2.257, estimator.py ``_json_encode_hyperparameters``) json.dumps each
  value (``True`` -> ``"true"``) and wraps a pipeline parameter in ``Join(on="", values=[p])``;
  the training toolkit json-decodes each value again (environment.py ``read_hyperparameters``)
  and renders argv with ``mapping.to_cmd_args`` (aws/sagemaker-training-toolkit@33839372):
  sorted keys, one dash for one-letter names, ``str()`` of the decoded value (``True``), a
  dict as ``k=v``, null as an empty argument. ``SM_HP_<NAME>`` holds compact JSON (``true``).
- SDK v3's ``ModelTrainer`` passes a pipeline parameter through untouched (``{"Get":
  "Parameters.Shuffle"}`` in HyperParameters) and its basic driver renders ``--key
  json.dumps(json.loads(value))`` (sagemaker-train container_drivers/common/utils.py
  ``hyperparameters_to_cli_args``): a Boolean parameter must arrive as ``true``, as its Join
  would spell it, not Python's ``True``.

Each job is one tiny script that writes what it saw into its model; a few seconds each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

from pipeline.local.store.storage import LocalStorage

from .sdk_pipelines import v3

REPO = Path(__file__).resolve().parents[3]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
SAW = """\
import json, os, sys

with open(os.path.join(os.environ["SM_MODEL_DIR"], "saw.json"), "w") as f:
    json.dump({"argv": sys.argv[1:],
               "hp": {k: v for k, v in os.environ.items() if k.startswith("SM_HP_")}}, f)
"""


def trainpipe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


def what_the_script_saw(workdir: Path) -> dict:
    (model,) = (workdir / "store").glob("**/output/model.tar.gz")
    with tarfile.open(model) as tar:
        return json.load(tar.extractfile("saw.json"))


def test_an_sdk_v2_estimators_booleans_reach_argv_as_the_training_toolkit_renders_them(tmp_path):
    from sagemaker.sklearn.estimator import SKLearn
    from sagemaker.workflow.parameters import ParameterBoolean
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TrainingStep

    from pipeline.local.store.session import LocalStoreSession

    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(SAW)
    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket="hyper-bucket")
    shuffle = ParameterBoolean(name="Shuffle", default_value=True)
    estimator = SKLearn(entry_point="train.py", source_dir=str(source), framework_version="1.2-1", role=ROLE,
                        instance_type="ml.m5.large", instance_count=1, sagemaker_session=session,
                        hyperparameters={"flag": True, "off": False, "shuffle": shuffle, "n": 3, "s": "x y",
                                         "d": {"a": 1}, "l": [1, "b"], "none": None, "f": 0.5})
    pipeline = Pipeline(name="hyper", parameters=[shuffle], sagemaker_session=session,
                        steps=[TrainingStep(name="Train", step_args=estimator.fit())])
    request = json.loads(pipeline.definition())["Steps"][0]["Arguments"]["HyperParameters"]
    assert (request["flag"], request["off"]) == ("true", "false")  # the SDK's json.dumps
    definition = tmp_path / "pipeline.json"
    definition.write_text(pipeline.definition())

    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                     "-p", "Shuffle=false")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    saw = what_the_script_saw(workdir)
    # to_cmd_args over the decoded values: sorted, -x for one letter, str() of each.
    assert saw["argv"] == ["-d", "a=1", "-f", "0.5", "--flag", "True", "-l", "[1, 'b']", "-n", "3",
                           "--none", "", "--off", "False", "-s", "x y", "--shuffle", "False"]
    assert {k: saw["hp"][k] for k in ("SM_HP_FLAG", "SM_HP_OFF", "SM_HP_SHUFFLE", "SM_HP_NONE", "SM_HP_D")} == {
        "SM_HP_FLAG": "true", "SM_HP_OFF": "false", "SM_HP_SHUFFLE": "false", "SM_HP_NONE": "", "SM_HP_D": '{"a":1}'}


def test_a_v3_boolean_parameter_in_hyperparameters_arrives_as_its_join_spells_it(tmp_path):
    workdir = tmp_path / "work"
    bucket = "hyper-v3-bucket"
    storage = LocalStorage(workdir / "store")
    code_uri, drivers_uri = v3.put_job_files(storage, f"s3://{bucket}/hyper/hyper-20261128000000",
                                             {"train.py": textwrap.dedent(SAW)}, v3.source_code("train.py"), {})
    training = v3.training_arguments(code_uri, drivers_uri, output=f"s3://{bucket}/hyper",
                                     hyperparameters={"epochs": 2})
    # What ModelTrainer(hyperparameters={"shuffle": ParameterBoolean("Shuffle")}) writes.
    training["HyperParameters"]["shuffle"] = {"Get": "Parameters.Shuffle"}
    definition = tmp_path / "pipeline.json"
    definition.write_text(json.dumps({
        "Version": "2020-12-01",
        "Parameters": [{"Name": "Shuffle", "Type": "Boolean", "DefaultValue": True}],
        "Steps": [{"Name": "Train", "Type": "Training", "Arguments": training}]}))

    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    saw = what_the_script_saw(workdir)
    assert saw["argv"] == ["--epochs", "2", "--shuffle", "true"]
    assert saw["hp"]["SM_HP_SHUFFLE"] == "true"


def test_each_sdk_path_writes_the_strings_its_source_says_and_the_runner_keeps_them(tmp_path):
    """What ``contract.request_string`` cites, held against the installed SDK: a framework
    estimator json.dumps (``true``), a generic ``Estimator`` without source_dir str()s
    (``True``), a pipeline parameter becomes a Join; strings reach the job as written."""
    from sagemaker.estimator import Estimator
    from sagemaker.sklearn.estimator import SKLearn
    from sagemaker.workflow.parameters import ParameterBoolean
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.steps import TrainingStep

    from pipeline.local.jobs.contract import request_hyperparameters
    from pipeline.local.store.session import LocalStoreSession

    (tmp_path / "train.py").write_text(SAW)
    session = LocalStoreSession(workdir=tmp_path / "work", bucket="hyper-bucket")
    shuffle = ParameterBoolean(name="Shuffle", default_value=True)
    common = dict(role=ROLE, instance_type="ml.m5.large", instance_count=1, sagemaker_session=session)
    generic = Estimator(image_uri=SKLEARN_URI, hyperparameters={"flag": True, "d": {"a": 1}, "shuffle": shuffle},
                        **common)
    framework = SKLearn(entry_point="train.py", source_dir=str(tmp_path), framework_version="1.2-1",
                        hyperparameters={"flag": True, "d": {"a": 1}}, **common)
    pipeline = Pipeline(name="hyper", parameters=[shuffle], sagemaker_session=session,
                        steps=[TrainingStep(name="Generic", step_args=generic.fit()),
                               TrainingStep(name="Framework", step_args=framework.fit())])
    generic_hp, framework_hp = (step["Arguments"]["HyperParameters"]
                                for step in json.loads(pipeline.definition())["Steps"])
    assert (generic_hp["flag"], generic_hp["d"]) == ("True", "{'a': 1}")  # utils.to_string: str()
    assert generic_hp["shuffle"] == {"Std:Join": {"On": "", "Values": [{"Get": "Parameters.Shuffle"}]}}
    assert (framework_hp["flag"], framework_hp["d"]) == ("true", '{"a": 1}')  # json.dumps
    kept = {k: v for k, v in generic_hp.items() if isinstance(v, str)}
    assert request_hyperparameters(kept) == kept
    assert request_hyperparameters({"shuffle": True, "n": 3, "none": None}) == {
        "shuffle": "true", "n": "3", "none": ""}


SKLEARN_URI = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
