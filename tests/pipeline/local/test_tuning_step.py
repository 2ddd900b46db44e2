"""A TuningStep, built with the plain SDK v2 (``sdk_pipelines/tuning.py``), run unchanged by
``trainpipe run --local --definition``: trials as training jobs, side by side on their share
of the cores, the best trial's properties and ``get_top_model_s3_uri`` feeding an evaluation
and a ModelStep; each bad request refused in one line before any trial; our own pipeline's
``run --local --tune 3`` on the digits; SDK v3's tuner's request run the same way.

Slow: the SDK pipeline (about 15 s: four numpy trials of six short epochs, an evaluation), the
v3 request (two numpy trials) and ``--tune 3`` (three TensorFlow trials of one epoch). The refusals run the CLI on
definitions that never start a job (a couple of seconds each); the rest are unit tests.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.definition.build import STEP_TUNE, build_definition
from pipeline.local import tuning_step
from pipeline.local.dag import interpreter
from pipeline.local.hosts import namespaces
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr
from pipeline.local.jobs.tuning import hyperparameter_tuning as ht
from pipeline.settings import Settings

from .helpers import leftover_processes
from .jobs.tuning.test_hyperparameter_ranges import REQUEST, changed

REPO = Path(__file__).resolve().parents[3]
BUCKET = "sdk-bucket"
needs_namespaces = pytest.mark.skipif(
    namespaces.unavailable_reason() is not None,
    reason=f"scripts that open /opt/ml need namespaces: {namespaces.unavailable_reason()}")


def trainpipe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def digits_split(folder: Path) -> tuple[Path, Path]:
    import pandas as pd
    from sklearn.datasets import load_digits

    digits = load_digits()
    frame = pd.DataFrame(digits.data.astype(int), columns=[f"f{i}" for i in range(digits.data.shape[1])])
    frame["label"] = digits.target
    train, test = folder / "train", folder / "test"
    train.mkdir(parents=True)
    test.mkdir()
    frame.iloc[:1400].to_csv(train / "train.csv", index=False)
    frame.iloc[1400:].to_csv(test / "test.csv", index=False)
    return train, test


def sdk_definition(tmp_path: Path, **tuner_args) -> tuple[Path, Path, dict]:
    """(workdir, definition file, definition) of the SDK-built tuning pipeline."""
    from pipeline.local.store.session import LocalStoreSession

    from .sdk_pipelines.tuning import tuner_of, tuning_pipeline

    workdir = tmp_path / "work"
    session = LocalStoreSession(workdir=workdir, bucket=BUCKET)
    text = tuning_pipeline(session, BUCKET, tuner=tuner_of(session, BUCKET, **tuner_args)).definition()
    path = tmp_path / "tuning.json"
    path.write_text(text)
    return workdir, path, json.loads(text)


def execution_of(workdir: Path) -> dict:
    (execution,) = (workdir / "runs").glob("*/execution.json")  # the only execution
    return json.loads(execution.read_text())


@pytest.mark.slow
@needs_namespaces
def test_an_sdk_tuning_pipeline_runs_unchanged(tmp_path):
    # A seeded Random search (RandomSeed, as the SDK passes it): unseeded, all four trials can
    # draw learning rates near 0.001 (~6% of runs), and the best then misses 0.8 (seen at 0.786).
    # Seed 4 draws three of the four above 0.1, so an early-stopped trial cannot take the best.
    workdir, definition, _ = sdk_definition(tmp_path, random_seed=4)
    train, test = digits_split(tmp_path / "data")

    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                     "-p", f"TrainData={train}", "-p", f"TestData={test}")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    steps = {s["name"]: s for s in execution_of(workdir)["steps"]}
    tuning = steps["TuneModel"]
    assert tuning["status"] == "Succeeded"
    described = tuning["properties"]
    summaries = described["TrainingJobSummaries"]
    assert len(summaries) == 4 and described["HyperParameterTuningJobStatus"] == "Completed"
    best = described["BestTrainingJob"]
    # Best first, as get_top_model_s3_uri(top_k=0) reads it; every scored trial in order.
    assert summaries[0]["TrainingJobName"] == best["TrainingJobName"]
    values = [s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] for s in summaries
              if "FinalHyperParameterTuningJobObjectiveMetric" in s]
    assert values == sorted(values, reverse=True) and len(values) == 4, [s.get("FailureReason") for s in summaries]
    assert best["FinalHyperParameterTuningJobObjectiveMetric"]["MetricName"] == "validation:accuracy"
    counters = described["TrainingJobStatusCounters"]
    assert counters["Completed"] + counters["Stopped"] == 4
    assert leftover_processes(str(workdir)) == []  # stopped trials left no process behind
    # Each trial: a training job of its own, its values within the ranges, the static ones and
    # the objective's name beside them (as the service passes them).
    for summary in summaries:
        tuned = summary["TunedHyperParameters"]
        assert 0.001 <= float(tuned["learning_rate"]) <= 1.0
        assert 16 <= int(tuned["batch_size"]) <= 128
        assert json.loads(tuned["optimizer"]) in ("sgd", "momentum")
        request = json.loads(next((workdir / "runs").glob(f"*/jobs/{summary['TrainingJobName']}/request.json"))
                             .read_text())
        assert request["HyperParameters"]["epochs"] == "6"
        assert request["HyperParameters"]["_tuning_objective_metric"] == "validation:accuracy"
        assert request["HyperParameters"]["learning_rate"] == tuned["learning_rate"]
    # Two slots, each its own core where there are two: said in the job log, and seen by the
    # trials' processes. The step's summary names the best trial.
    cores = sorted(os.sched_getaffinity(0))
    seen = {json.dumps(sorted(json.loads(line.split("cpus ", 1)[1])))
            for log in (workdir / "runs").glob("*/jobs/TuneModel-*/job.log")
            for line in log.read_text().splitlines() if "] cpus [" in line}
    if len(cores) >= 2:
        assert "trials side by side: up to 2, " in done.stdout
        first, second = (set(json.loads(s)) for s in sorted(seen))  # two slots, neither shared
        assert not first & second and first | second <= set(cores), seen
    assert f"best of 4 trials: {best['TrainingJobName']}" in tuning["detail"]
    # The top model fed the evaluation and the registered package.
    top_model = f"s3://{BUCKET}/models/{best['TrainingJobName']}/output/model.tar.gz"
    evaluation = steps["EvaluateTopModel"]["properties"]["ProcessingInputs"]
    assert any(i["S3Input"]["S3Uri"] == top_model for i in evaluation)
    assert steps["CheckBestObjective"]["detail"].endswith("is true -> if branch")
    listed = trainpipe("models", "--workdir", str(workdir), "--json")
    (package,) = json.loads(listed.stdout)
    assert package["ModelDataUrl"] == top_model
    assert package["Metrics"]["metrics"]["accuracy"]["value"] > 0.8
    # The cost counts every trial's instance-time.
    assert f"{len(summaries)} trial(s): " in done.stdout
    # What DescribeHyperParameterTuningJob shows, and with --training-jobs its trials.
    shown = trainpipe("describe-hyper-parameter-tuning-job", "--workdir", str(workdir))
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["HyperParameterTuningJobName"] == described["HyperParameterTuningJobName"]
    assert document["BestTrainingJob"] == best and "TrainingJobSummaries" not in document
    listed = trainpipe("describe-hyper-parameter-tuning-job", document["HyperParameterTuningJobName"],
                       "--training-jobs", "--workdir", str(workdir))
    assert json.loads(listed.stdout)["TrainingJobSummaries"] == summaries


@pytest.mark.slow
def test_the_summary_counts_the_trials_that_failed(tmp_path):
    """Issue 49: with 2 of 4 trials failed, the step's summary still said "best of 4 trials".
    A Grid over batch sizes 32 and 0 (the script's loop cannot step by 0: that trial fails):
    the summary the run prints says one failed."""
    from sagemaker.parameter import CategoricalParameter

    workdir, definition, _ = sdk_definition(tmp_path, strategy="Grid", max_jobs=2, early_stopping_type="Off",
                                            ranges={"batch_size": CategoricalParameter(["32", "0"])})
    train, test = digits_split(tmp_path / "data")
    done = trainpipe("run", "--local", "--definition", str(definition), "--workdir", str(workdir),
                     "-p", f"TrainData={train}", "-p", f"TestData={test}", "-p", "ObjectiveThreshold=0")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    tuning = {s["name"]: s for s in execution_of(workdir)["steps"]}["TuneModel"]
    statuses = {json.loads(s["TunedHyperParameters"]["batch_size"]): s["TrainingJobStatus"]
                for s in tuning["properties"]["TrainingJobSummaries"]}
    assert statuses == {"32": "Completed", "0": "Failed"}, statuses
    best = tuning["properties"]["BestTrainingJob"]["TrainingJobName"]
    assert tuning["detail"].startswith(f"best of 2 trials (1 failed): {best} "), tuning["detail"]
    assert f"best of 2 trials (1 failed): {best} " in done.stdout


def test_the_legacy_form_writes_the_same_request(tmp_path):
    """``TuningStep(tuner=..., inputs=...)`` (deprecated, still in AWS's older examples) gives
    the runner the request ``step_args=tuner.fit(...)`` gives."""
    from pipeline.local.store.session import LocalStoreSession

    from .sdk_pipelines.tuning import tuning_pipeline

    session = LocalStoreSession(workdir=tmp_path / "work", bucket=BUCKET)
    with pytest.warns(DeprecationWarning):
        legacy = json.loads(tuning_pipeline(session, BUCKET, legacy=True).definition())
    modern = json.loads(tuning_pipeline(session, BUCKET).definition())
    (old,), (new,) = ([s for s in d["Steps"] if s["Type"] == "Tuning"] for d in (legacy, modern))
    for definition in (old, new):  # the code's upload and the job names carry timestamps
        static = definition["Arguments"]["TrainingJobDefinition"]["StaticHyperParameters"]
        for key in ("sagemaker_submit_directory", "sagemaker_job_name", "model_dir"):
            static.pop(key, None)
    assert old["Arguments"] == new["Arguments"]


# --- Bad input: one line, before any trial -----------------------------------------------------
def _tuning(definition: dict) -> dict:
    return next(s for s in definition["Steps"] if s["Type"] == "Tuning")["Arguments"]


def _empty_range(d):
    _tuning(d)["HyperParameterTuningJobConfig"]["ParameterRanges"]["ContinuousParameterRanges"][0].update(
        MinValue="0.5", MaxValue="0.1")


def _one_categorical(d):
    _tuning(d)["HyperParameterTuningJobConfig"]["ParameterRanges"]["CategoricalParameterRanges"][0]["Values"] = ['"sgd"']


def _uncaptured_objective(d):
    _tuning(d)["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["MetricName"] = "val:loss"


def _too_parallel(d):
    _tuning(d)["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxParallelTrainingJobs"] = 5


BAD = {
    "empty range": (_empty_range, "hyperparameter range learning_rate: the range [0.5, 0.1] is empty"),
    "one categorical value": (_one_categorical, "hyperparameter range optimizer: a categorical range needs "
                                                "at least two different values"),
    "objective not captured": (_uncaptured_objective, "the objective metric 'val:loss' is captured by no metric "
                                                      "definition"),
    "max_parallel_jobs above max_jobs": (_too_parallel, "MaxParallelTrainingJobs=5 is more than "
                                                        "MaxNumberOfTrainingJobs=4"),
}


@pytest.fixture(scope="module")
def good_definition(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("good")
    workdir, _, definition = sdk_definition(tmp)
    return workdir, definition


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_request_is_refused_before_any_trial(case, good_definition, tmp_path):
    break_it, expected = BAD[case]
    workdir, definition = good_definition  # its store holds the code the SDK uploaded
    definition = copy.deepcopy(definition)
    break_it(definition)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(definition))
    data = tmp_path / "train.csv"
    data.write_text("f0,label\n1,0\n")

    done = trainpipe("run", "--local", "--definition", str(path), "--workdir", str(workdir),
                     "-p", f"TrainData={data}", "-p", f"TestData={data}")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "Tuning step TuneModel: " in last and expected in last, done.stderr[-2000:]
    assert not list(workdir.glob("runs/*"))  # no execution started: no trial, no job of any kind


# --- Our own pipeline: --tune N ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_our_pipeline_tunes_on_the_digits(tmp_path):
    """``trainpipe run --local --tune 3`` on the bundled digits: three TensorFlow trials, two at
    a time (one process each, one epoch: the point is the wiring, not the search), the best
    one's model evaluated, gated and registered; ``status`` lists the trials; a second run
    reuses the tuning job (CacheConfig). The gate's threshold is 0: one epoch's accuracy is not
    the question here."""
    workdir = tmp_path / "work"
    args = ("--tune", "3", "--tune-parallel", "2", "--workdir", str(workdir), "-p", "Epochs=1",
            "-p", "TrainingInstanceCount=1", "-p", "AccuracyThreshold=0")
    done = trainpipe("run", "--local", *args)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    steps = {s["name"]: s for s in execution_of(workdir)["steps"]}
    described = steps["TuneModel"]["properties"]
    summaries = described["TrainingJobSummaries"]
    assert len(summaries) == 3 and "TrainModel" not in steps
    best = described["BestTrainingJob"]["TrainingJobName"]
    assert summaries[0]["TrainingJobName"] == best
    assert set(summaries[0]["TunedHyperParameters"]) == {"base-learning-rate", "batch-size", "warmup-epochs"}
    # The evaluation and the registry took the best trial's model; the summary names it.
    model_input = next(i for i in steps["EvaluateModel"]["properties"]["ProcessingInputs"]
                       if i["InputName"] == "model")
    assert model_input["S3Input"]["S3Uri"].endswith(f"/training/{best}/output/model.tar.gz")
    listed = trainpipe("models", "--workdir", str(workdir), "--json")
    (package,) = json.loads(listed.stdout)
    assert package["ModelDataUrl"] == model_input["S3Input"]["S3Uri"]
    assert f"best of 3 trials: {best}" in done.stdout
    assert "3 trial(s): " in done.stdout  # the cost counts every trial
    status = trainpipe("status", "--local", "--workdir", str(workdir))
    assert status.returncode == 0, status.stderr
    table = status.stdout.split("TuneModel: 3 trials\n", 1)[1].splitlines()
    assert table[0].split() == ["TRIAL", "base-learning-rate", "batch-size", "warmup-epochs", "val_accuracy",
                                "STOPPED", "EARLY", "STATUS"]
    assert sum("(best)" in row for row in table) == 1 and len(table) >= 1 + 3
    # Run again: the Tuning step's CacheConfig reuses this tuning job, no trial runs.
    again = trainpipe("run", "--local", *args)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    runs = sorted((workdir / "runs").glob("*/execution.json"))
    cached = next(s for s in json.loads(runs[-1].read_text())["steps"] if s["name"] == "TuneModel")
    assert cached["detail"].startswith(f"cache hit: reused {described['HyperParameterTuningJobName']}")
    assert cached["properties"]["BestTrainingJob"]["TrainingJobName"] == best


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_a_small_table_clips_the_batch_size_range_and_mlflow_shows_what_trained(tmp_path):
    """Issue 49, items 1 and 2, as the user met them: on a small table (penguins: 120 rows per
    worker) the fixed 16-256 batch-size range failed trials on every run, and MLflow's
    execution run showed the default BatchSize and learning rate while the model had trained
    with the best trial's. ``run --local --tune 2`` on 200 digits rows: the range is clipped to
    the one rank's train records before the first trial, the job log says so, no trial fails,
    and the execution's MLflow run, tagged tuned, carries the best trial's three values."""
    import re

    import pandas as pd
    from mlflow import MlflowClient
    from sklearn.datasets import load_digits

    from pipeline.definition.parameters import TUNED_PARAMETERS
    from pipeline.tracking import records as R
    from pipeline.tracking import target as T

    digits = load_digits()
    frame = pd.DataFrame(digits.data[:200].astype(int), columns=[f"f{i}" for i in range(digits.data.shape[1])])
    frame["label"] = digits.target[:200]
    data = tmp_path / "small"
    data.mkdir()
    frame.to_csv(data / "digits.csv", index=False)
    workdir = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if k not in (T.SWITCH_ENV_VAR, T.ENV_VAR)}  # the embedded store
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(workdir), "--tune", "2",
         "--tune-strategy", "Random", "-p", f"InputDataUri={data}", "-p", "Epochs=1",
         "-p", "TrainingInstanceCount=1", "-p", "AccuracyThreshold=0"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    steps = {s["name"]: s for s in execution_of(workdir)["steps"]}
    log = (Path(steps[STEP_TUNE]["job_dir"]) / "tuning-job.log").read_text()
    clipped = re.search(r"range batch-size \[16, 256\] clipped to \[16, (\d+)\]: rank 0 of 1 reads (\d+) train "
                        r"records per epoch", log)
    assert clipped and clipped.group(1) == clipped.group(2), log[-3000:]
    fewest = int(clipped.group(1))
    assert 16 < fewest < 200
    described = steps[STEP_TUNE]["properties"]
    summaries = described["TrainingJobSummaries"]
    assert [s["TrainingJobStatus"] for s in summaries] == ["Completed", "Completed"], summaries
    assert all(16 <= int(s["TunedHyperParameters"]["batch-size"]) <= fewest for s in summaries)
    assert "best of 2 trials: " in done.stdout and "failed)" not in done.stdout

    best = described["BestTrainingJob"]
    client = MlflowClient(T.embedded(workdir).uri)
    experiment = client.get_experiment_by_name(Settings().pipeline_name)
    (execution,) = client.search_runs([experiment.experiment_id], filter_string=f"tags.`{R.TAG_TUNED}` = 'true'")
    assert {name: execution.data.params[name] for name in TUNED_PARAMETERS} == {
        name: best["TunedHyperParameters"][hyperparameter] for name, hyperparameter in TUNED_PARAMETERS.items()}
    assert execution.data.tags[R.TAG_BEST_TRIAL] == best["TrainingJobName"]


# --- The request checked before the run; what the job log says -----------------------------------

@pytest.fixture(scope="module")
def tuned_definition():
    return build_definition(Settings(tune_jobs=4))


def _check(definition):
    nodes = interpreter.plan(definition)
    ctx = interpreter.Context(parameters=interpreter.resolve_parameters(definition), execution={})
    tuning_step.check(nodes, ctx)


def test_our_tuning_definition_passes_though_its_channels_read_an_earlier_step(tuned_definition):
    _check(tuned_definition)


def test_a_bad_range_is_refused_before_the_run_though_its_channels_read_an_earlier_step(tuned_definition):
    definition = copy.deepcopy(tuned_definition)
    step = next(s for s in definition["Steps"] if s["Name"] == STEP_TUNE)
    step["Arguments"]["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxParallelTrainingJobs"] = 9
    with pytest.raises(hr.TuningRequestError, match=f"^Tuning step {STEP_TUNE}: ResourceLimits.MaxParallel"):
        _check(definition)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("WarmStartConfig", {"ParentHyperParameterTuningJobs": []}, "WarmStartConfig (tuning from earlier tuning jobs)"),
    ("Autotune", {"Mode": "Enabled"}, "Autotune (ranges chosen by the service) does not run locally"),
    ("TrainingJobDefinitions", [{}], "TrainingJobDefinitions (a tuner over several estimators)"),
])
def test_what_does_not_run_locally_is_refused(key, value, expected):
    with pytest.raises(hr.TuningRequestError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        hr.parse({**REQUEST, key: value})


def test_the_job_log_says_what_stands_in_for_the_service():
    bayesian = ht.strategy_line(hr.parse(changed(HyperParameterTuningJobConfig__Strategy="Bayesian")))
    assert "Optuna's TPESampler (tree-structured Parzen estimator) stands in for SageMaker's Bayesian" in bayesian
    assert "early stopping Auto" in bayesian and "ScalingType Auto searched Linear: batch" in bayesian


# --- SDK v3: HyperparameterTuner(model_trainer=...) ----------------------------------------------
@pytest.mark.slow
@needs_namespaces
def test_a_v3_tuning_step_runs_unchanged(tmp_path):
    """The request v3's tuner emits (``sdk_pipelines/v3.py``: its source file and commit): v2's
    script-mode hyperparameters as plain strings, the source as a sourcedir.tar.gz it uploaded,
    no sm_drivers. Two numpy trials of two epochs (a few seconds)."""
    from pipeline.local.store.storage import LocalStorage

    from .helpers import sourcedir
    from .sdk_pipelines import v3

    workdir = tmp_path / "work"
    storage = LocalStorage(workdir / "store")
    code = REPO / "tests/pipeline/local/sdk_pipelines/tuning_code/train.py"
    submit = f"s3://{BUCKET}/source/source-1764201600/sourcedir.tar.gz"
    storage.put_bytes(sourcedir({"train.py": code.read_text()}), submit)
    train, _ = digits_split(tmp_path / "data")
    arguments = v3.tuning_arguments(
        submit_directory=submit, entry_script="train.py", output=f"s3://{BUCKET}/models",
        train_uri={"Get": "Parameters.TrainData"}, hyperparameters={"epochs": 2, "epoch_seconds": 0.0},
        ranges={"Continuous": [{"Name": "learning_rate", "MinValue": "0.01", "MaxValue": "1.0",
                                "ScalingType": "Logarithmic"}],
                "Categorical": [{"Name": "optimizer", "Values": ["sgd", "momentum"]}]},
        objective="validation:accuracy", metric_regex=r"val_accuracy=([0-9.]+)", strategy="Random",
        max_jobs=2, max_parallel_jobs=2)
    definition = {"Version": "2020-12-01", "Metadata": {},
                  "Parameters": [{"Name": "TrainData", "Type": "String", "DefaultValue": f"s3://{BUCKET}/train"}],
                  "Steps": [{"Name": "Tune", "Type": "Tuning", "Arguments": arguments}]}
    path = tmp_path / "v3-tuning.json"
    path.write_text(json.dumps(definition))

    done = trainpipe("run", "--local", "--definition", str(path), "--workdir", str(workdir),
                     "-p", f"TrainData={train}")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    described = {s["name"]: s for s in execution_of(workdir)["steps"]}["Tune"]["properties"]
    assert described["HyperParameterTuningJobStatus"] == "Completed"
    summaries = described["TrainingJobSummaries"]
    assert len(summaries) == 2 and all(s["TrainingJobStatus"] == "Completed" for s in summaries)
    assert {s["TunedHyperParameters"]["optimizer"] for s in summaries} <= {"sgd", "momentum"}  # plain, as v3 sends
    best = described["BestTrainingJob"]["TrainingJobName"]
    assert storage.exists(f"s3://{BUCKET}/models/{best}/output/model.tar.gz")
    request = json.loads(next((workdir / "runs").glob(f"*/jobs/{best}/request.json")).read_text())
    assert request["HyperParameters"]["sagemaker_program"] == "train.py"


@pytest.mark.slow
def test_ctrl_c_during_tuning_leaves_the_job_stopped_with_its_trials(tmp_path):
    """Issue 49: after Ctrl-C during tuning, `describe-hyper-parameter-tuning-job` said "no
    tuning job" and `status` showed no trials. Ctrl-C (SIGINT) once a trial has completed: the
    tuning job is Stopped and both commands show its trials (the SDK pipeline: trials of six
    0.4 s epochs, two at a time)."""
    import signal
    import time

    workdir, definition, _ = sdk_definition(tmp_path)
    train, test = digits_split(tmp_path / "data")
    env = {**os.environ, "TRAINPIPE_TRACKING": "off"}
    run = subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                            "--workdir", str(workdir), "-p", f"TrainData={train}", "-p", f"TestData={test}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 240
    while not any('"TrainingJobStatus": "Completed"' in p.read_text()
                  for p in workdir.glob("runs/*/jobs/*/description.json")):
        assert time.monotonic() < deadline and run.poll() is None, "no trial completed"
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    out, _ = run.communicate(timeout=120)
    assert run.returncode != 0, out[-3000:]
    described = trainpipe("describe-hyper-parameter-tuning-job", "--training-jobs", "--workdir", str(workdir))
    assert described.returncode == 0, described.stderr
    job = json.loads(described.stdout)
    assert job["HyperParameterTuningJobStatus"] == "Stopped"
    statuses = [s["TrainingJobStatus"] for s in job["TrainingJobSummaries"]]
    assert "Completed" in statuses and set(statuses) <= {"Completed", "Stopped"}, statuses
    status = trainpipe("status", "--local", "--workdir", str(workdir))
    assert status.returncode == 0, status.stderr
    assert f"TuneModel: {len(statuses)} trials" in status.stdout, status.stdout
