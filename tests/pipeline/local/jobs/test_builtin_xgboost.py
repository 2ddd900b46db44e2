"""SageMaker's built-in XGBoost algorithm run locally (pipeline/local/jobs/builtin_xgboost.py and
its job side, builtin_xgboost_train.py), as AWS's abalone pipeline example uses it: an SDK v2
``Estimator`` on the XGBoost image with no entry point, ``set_hyperparameters(objective=...,
num_round=...)``, CSV ``train``/``validation`` channels, then ``RegisterModel``; through
``trainpipe run --local --definition`` on the local store.

Slow: the first run on a machine makes the image's environment (the image's Python 3.9 with its
xgboost 1.7.4 and numpy 1.24.1 from the package index, ~/.cache/trainpipe/image-environments/,
shared with every later run and test); later runs reuse it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pipeline.local.jobs import builtin_xgboost_train as program
from pipeline.local.jobs.environments.environment import find_python

REPO = Path(__file__).resolve().parents[4]
ROLE = "arn:aws:iam::111122223333:role/SageMakerExecutionRole"
BUCKET = "abalone-bucket"


def abalone_csv(path: Path, rows: int, seed: int, libsvm: bool = False) -> Path:
    """Abalone-like rows as the example's preprocessing writes them: rings (the label) first,
    then the one-hot sex and the seven measurements; no header. ``libsvm``: the same rows as
    ``rings index:value ...`` (zeros left out)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(rows):
        sex = [0.0, 0.0, 0.0]
        sex[rng.randrange(3)] = 1.0
        length = rng.uniform(0.1, 0.8)
        measures = [length, length * 0.8, length * 0.3, length ** 3 * 2, length ** 3, length ** 3 * 0.4,
                    length ** 3 * 0.6]
        rings = round(3 + 20 * length + rng.gauss(0, 1))
        features = [*sex, *(round(m, 4) for m in measures)]
        lines.append(f"{rings} " + " ".join(f"{i}:{v}" for i, v in enumerate(features) if v) if libsvm
                     else ",".join(str(v) for v in [rings, *features]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def build(tmp_path: Path, hyperparameters: dict, content_type: str = "text/csv", version: str = "1.7-1",
          **estimator) -> Path:
    from sagemaker import image_uris
    from sagemaker.estimator import Estimator
    from sagemaker.inputs import TrainingInput
    from sagemaker.s3 import S3Uploader
    from sagemaker.workflow.pipeline import Pipeline
    from sagemaker.workflow.step_collections import RegisterModel
    from sagemaker.workflow.steps import TrainingStep

    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=tmp_path / "work", bucket=BUCKET)
    for channel, seed in (("train", 1), ("validation", 2)):
        S3Uploader.upload(str(abalone_csv(tmp_path / channel / f"{channel}.csv", 300, seed, "libsvm" in content_type)),
                          f"s3://{BUCKET}/abalone/{channel}", sagemaker_session=session)
    # AWS's abalone example: the XGBoost image as a built-in algorithm (no entry_point).
    image = image_uris.retrieve(framework="xgboost", region="us-east-1", version=version,
                                py_version="py3", instance_type="ml.m5.xlarge")
    xgb_train = Estimator(image_uri=image, instance_type="ml.m5.xlarge", instance_count=1,
                          output_path=f"s3://{BUCKET}/AbaloneTrain", role=ROLE, sagemaker_session=session,
                          **estimator)
    xgb_train.set_hyperparameters(**hyperparameters)
    step_train = TrainingStep(name="TrainAbaloneModel", step_args=xgb_train.fit(inputs={
        "train": TrainingInput(s3_data=f"s3://{BUCKET}/abalone/train", content_type=content_type),
        "validation": TrainingInput(s3_data=f"s3://{BUCKET}/abalone/validation", content_type=content_type)}))
    step_register = RegisterModel(
        name="RegisterAbaloneModel", estimator=xgb_train,
        model_data=step_train.properties.ModelArtifacts.S3ModelArtifacts,
        content_types=["text/csv"], response_types=["text/csv"],
        inference_instances=["ml.t2.medium", "ml.m5.large"], transform_instances=["ml.m5.large"],
        model_package_group_name="AbaloneModelPackageGroupName", approval_status="Approved")
    definition = tmp_path / "abalone.json"
    definition.write_text(Pipeline(name="abalone", steps=[step_train, step_register],
                                   sagemaker_session=session).definition())
    return definition


def trainpipe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=1800)


def run(tmp_path: Path, definition: Path) -> subprocess.CompletedProcess:
    return trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(tmp_path / "work"),
                     "--tracking-uri", "off")


HYPERPARAMETERS = dict(objective="reg:linear", num_round=20, max_depth=5, eta=0.2, gamma=4, min_child_weight=6,
                       subsample=0.7)


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_the_abalone_examples_builtin_xgboost_trains_and_registers(tmp_path):
    done = run(tmp_path, build(tmp_path, HYPERPARAMETERS))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # xgboost-model is no model trainpipe predict answers: it is not offered.
    assert "try it:" not in done.stdout and "model:" in done.stdout

    (log,) = (tmp_path / "work").glob("runs/*/jobs/*TrainAbaloneModel*/job.log")
    text = log.read_text()
    assert "built-in XGBoost algorithm: xgboost 1.7.4 (the image's)" in text
    # One evaluation line per round, as CloudWatch shows the container's (read by the algorithm's regexes).
    rounds = [line for line in text.splitlines() if "#011train-rmse:" in line]
    assert len(rounds) == 20 and "[0]#011train-rmse:" in rounds[0] and "#011validation-rmse:" in rounds[0]
    assert "[19]#011train-rmse:" in rounds[-1]

    (description,) = (tmp_path / "work").glob("runs/*/jobs/*TrainAbaloneModel*/description.json")
    final = {m["MetricName"]: m["Value"] for m in json.loads(description.read_text())["FinalMetricDataList"]}
    assert 0 < final["validation:rmse"] < 3  # rings ~ 3 + 20 * length + N(0, 1)

    listed = trainpipe("models", "--workdir", str(tmp_path / "work"), "--json")
    (package,) = json.loads(listed.stdout)
    assert package["ModelPackageGroupName"] == "AbaloneModelPackageGroupName"
    model_tar = package["ModelDataUrl"]
    assert model_tar.startswith(f"s3://{BUCKET}/AbaloneTrain/") and model_tar.endswith("/output/model.tar.gz")
    local = tmp_path / "work" / "store" / model_tar.removeprefix("s3://")
    with tarfile.open(local) as archive:
        assert archive.getnames() == ["xgboost-model"]
        archive.extractall(tmp_path / "model", filter="data")

    # The model loads with the image's xgboost (the job's environment) and predicts rings.
    (python,) = (tmp_path / "work").glob("runs/*/jobs/*TrainAbaloneModel*/python-env/bin/python")
    check = ("import sys, xgboost, numpy; b = xgboost.Booster(); b.load_model(sys.argv[1]); "
             "print(xgboost.__version__, b.num_boosted_rounds(), "
             "float(b.predict(xgboost.DMatrix(numpy.array([[1, 0, 0, .5, .4, .15, .25, .125, .05, .075]])))[0]))")
    loaded = subprocess.run([str(python), "-c", check, str(tmp_path / "model" / "xgboost-model")],
                            capture_output=True, text=True, timeout=300)
    version, rounds_kept, rings = loaded.stdout.splitlines()[-1].split()  # after xgboost's own warnings
    assert (version, rounds_kept) == ("1.7.4", "20"), loaded.stderr
    assert 9 < float(rings) < 17  # 3 + 20 * 0.5 = 13


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
@pytest.mark.parametrize("hyperparameters, reason", [
    ({"objective": "reg:linear", "max_depth": 5}, "ClientError: Missing required hyperparameter: num_round"),
    # Rings are no probabilities: xgboost's own check, which the container reports as the user's.
    ({"objective": "binary:logistic", "num_round": 2}, "ClientError: "),
], ids=["no-num_round", "labels-out-of-range"])
def test_a_builtin_xgboost_job_fails_as_the_container_does(tmp_path, hyperparameters, reason):
    done = run(tmp_path, build(tmp_path, hyperparameters))
    assert done.returncode != 0
    (description,) = (tmp_path / "work").glob("runs/*/jobs/*TrainAbaloneModel*/description.json")
    failure = json.loads(description.read_text())["FailureReason"]
    # SageMaker: the algorithm's own reason, as its container wrote it.
    assert failure.startswith(reason), failure
    if hyperparameters["objective"] == "binary:logistic":
        assert failure.endswith("label must be in [0,1] for logistic regression"), failure


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.9") is None, reason="the image's Python (3.9) is not on this machine")
def test_builtin_xgboost_reads_libsvm_channels_and_checkpoints_each_round(tmp_path):
    checkpoints = f"s3://{BUCKET}/checkpoints/abalone"
    done = run(tmp_path, build(tmp_path, dict(HYPERPARAMETERS, num_round=5), content_type="text/libsvm",
                               checkpoint_s3_uri=checkpoints))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = (tmp_path / "work").glob("runs/*/jobs/*TrainAbaloneModel*/job.log")
    text = log.read_text()
    assert "Train matrix has 300 rows and 10 columns" in text
    assert "[4]#011train-rmse:" in text and "#011validation-rmse:" in text
    # SageMaker: a checkpoint per round in the checkpoint folder, synced to CheckpointConfig.S3Uri.
    saved = sorted(p.name for p in (tmp_path / "work" / "store" / checkpoints.removeprefix("s3://")).iterdir())
    assert saved == [f"xgboost-checkpoint.{n}" for n in range(5)]


@pytest.mark.slow
@pytest.mark.skipif(find_python("3.7") is None, reason="the image's Python (3.7) is not on this machine")
def test_the_abalone_examples_own_version_1_0_1_pickles_its_model(tmp_path):
    """AWS's abalone example names XGBoost 1.0-1: xgboost 1.0.0 on Python 3.7, whose container
    pickles the Booster (train.py, pkl.dump) where 1.3-1 on call save_model."""
    done = run(tmp_path, build(tmp_path, dict(HYPERPARAMETERS, num_round=5), version="1.0-1"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (job,) = (tmp_path / "work").glob("runs/*/jobs/*TrainAbaloneModel*")
    text = (job / "job.log").read_text()
    assert "built-in XGBoost algorithm: xgboost 1.0.0 (the image's)" in text and "[4]#011train-rmse:" in text
    model = job / "hosts" / "algo-1" / "model" / "xgboost-model"
    check = "import pickle, sys; b = pickle.load(open(sys.argv[1], 'rb')); print(type(b).__name__)"
    loaded = subprocess.run([str(job / "python-env" / "bin" / "python"), "-c", check, str(model)],
                            capture_output=True, text=True, timeout=300)
    assert loaded.stdout.split()[-1:] == ["Booster"], loaded.stderr


# --- The job side, without xgboost: what it refuses ---------------------------------------------
def test_hyperparameters_are_validated_as_the_algorithm_toolkit_does():
    assert program.validate({"num_round": "5", "learning_rate": "0.3", "objective": "reg:linear"}) == \
        {"num_round": 5, "eta": 0.3, "objective": "reg:linear"}
    cases = {
        (("max_depth", "5"),): "Missing required hyperparameter: num_round",
        (("num_round", "5"), ("num_rounds", "5")): "Extraneous hyperparameter found: num_rounds",
        (("num_round", "five"),): "Hyperparameter num_round: could not parse value",
        (("num_round", "0"),): "Hyperparameter num_round: 0 is not in [1, +inf)",
        (("num_round", "5"), ("subsample", "0")): "Hyperparameter subsample: 0.0 is not in (0, 1]",
        (("num_round", "5"), ("objective", "multi:softmax")):
            "Require input for parameter 'num_class' for multi-classification",
    }
    for given, message in cases.items():
        with pytest.raises(program.ClientError, match=message.replace("(", r"\(").replace("[", r"\[")
                           .replace(")", r"\)").replace("+", r"\+")):
            program.validate(dict(given))


def test_content_types_read_as_the_container_reads_them():
    assert program.content_type("text/csv") == "csv"
    assert program.content_type("text/csv; label_size=1") == "csv"
    assert program.content_type(None) == "libsvm"  # SageMaker: libsvm when the channel names none
    assert program.content_type("text/x-libsvm") == "libsvm"
    with pytest.raises(program.ClientError, match="label_size must be equal to 1"):
        program.content_type("text/csv;label_size=2")


def test_evaluation_lines_match_the_algorithms_metric_regexes():
    import re

    from pipeline.local.jobs.builtin_xgboost import algorithm_metrics

    line = program.evaluation_line(3, [("train-rmse", 1.5), ("validation-rmse", 2.25)])
    assert line == "[3]#011train-rmse:1.50000#011validation-rmse:2.25000"
    (regex,) = [d["Regex"] for d in algorithm_metrics() if d["Name"] == "validation:rmse"]
    assert re.match(regex, line).group(1) == "2.25000"


def test_the_program_runs_on_the_oldest_images_python():
    """The job side runs under the image's Python (3.6 for 0.90-2, 3.7 for 1.0-1), where a
    signature's annotations are evaluated when the function is defined: ``list[str]`` or
    ``X | None`` there fails the job at import (it did on 1.0-1's Python 3.7), so none is used."""
    import ast

    tree = ast.parse(Path(program.__file__).read_text())
    annotations = [(node.lineno, a) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                   for a in (node.returns, *(x.annotation for x in node.args.args)) if a is not None]
    newer = [line for line, a in annotations if isinstance(a, (ast.Subscript, ast.BinOp))]
    assert newer == [], f"builtin_xgboost_train.py: annotations Python 3.6-3.8 cannot evaluate at lines {newer}"
    assert not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in ast.walk(tree))
