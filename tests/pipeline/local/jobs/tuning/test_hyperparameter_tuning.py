"""The tuning job's parts that need no process: the cores per parallel trial, SageMaker's
median rule for early stopping, and the Optuna study each strategy makes (unit tests); small
tuning jobs of short scripts (seconds); and one of real TensorFlow trials on the digits, whose
early-stopped trial's model and epoch are checked (slow: 25-80 s on 2 busy cores)."""

from __future__ import annotations

import time

import optuna
import pytest

from pipeline.local.hosts import namespaces
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr
from pipeline.local.jobs.tuning import hyperparameter_tuning as ht

from .test_hyperparameter_ranges import changed


def test_each_parallel_trial_gets_its_own_cores():
    assert ht.cpu_slots([0, 1], 2) == [[0], [1]]
    assert ht.cpu_slots([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert ht.cpu_slots([0, 1], 1) == [[0, 1]]
    # More trials than cores: they share, and the job log says so.
    assert ht.cpu_slots([0, 1], 3) == [[0], [1], [0]]
    assert "more trials than cores" in ht.describe_slots(ht.cpu_slots([0, 1], 3), 2)
    assert ht.describe_slots([[0], [1]], 2).startswith("trials side by side: up to 2, 1 core(s) each")


def test_tuning_job_names_fit_the_service_limit():
    name = ht.tuning_job_name("A-Very-Long-Tuning-Step-Name-Indeed", "20240131-235959-123456-1f2e3d4c")
    assert len(name) <= ht.TUNING_JOB_NAME_LIMIT and name.endswith("-1f2e3d4c")


def _finished(number: int, values: list[float]):
    """A trial that reported ``values`` at epochs 1, 2, ..."""
    return optuna.trial.FrozenTrial(
        number=number, state=optuna.trial.TrialState.COMPLETE, value=values[-1], datetime_start=None,
        datetime_complete=None, params={}, distributions={}, user_attrs={}, system_attrs={},
        intermediate_values=dict(enumerate(values, 1)), trial_id=number)


def test_the_median_rule_compares_with_earlier_trials_running_averages():
    earlier = [_finished(0, [0.5, 0.7, 0.9]), _finished(1, [0.6, 0.8, 0.8]), _finished(2, [0.2, 0.3, 0.4])]
    # At epoch 2 the running averages are 0.6, 0.7 and 0.25: median 0.6.
    assert ht.median_rule_verdict(_finished(3, [0.4, 0.55]), earlier, maximize=True) == (
        "at epoch 2 its 0.55 is below the median 0.6 of 3 earlier trials' running averages")
    assert ht.median_rule_verdict(_finished(3, [0.4, 0.65]), earlier, maximize=True) is None
    # Minimising, the same numbers the other way.
    assert ht.median_rule_verdict(_finished(3, [0.4, 0.65]), earlier, maximize=False).startswith(
        "at epoch 2 its 0.65 is above the median 0.6")
    # Too few earlier trials at that epoch: no verdict.
    assert ht.median_rule_verdict(_finished(3, [0.1, 0.1, 0.1, 0.1]), earlier, maximize=True) is None


def _request(**paths) -> hr.TuningRequest:
    return hr.parse(changed(**paths))


def test_grid_asks_for_every_combination_once_even_in_parallel():
    ranges = {"CategoricalParameterRanges": [{"Name": "a", "Values": ["1", "2", "3"]},
                                             {"Name": "b", "Values": ["x", "y"]}]}
    request = _request(HyperParameterTuningJobConfig__Strategy="Grid",
                       HyperParameterTuningJobConfig__ParameterRanges=ranges)
    study = ht.make_study(request)
    distributions = ht._distributions(request)
    asked = [study.ask(distributions) for _ in range(request.max_jobs)]  # all running at once
    points = {tuple(sorted(ht.trial_values(request, t.params).items())) for t in asked}
    assert len(points) == 6 == request.max_jobs


@pytest.mark.parametrize("strategy", ["Random", "Bayesian"])
def test_values_stay_in_their_ranges_and_scales(strategy):
    ranges = {"ContinuousParameterRanges": [
        {"Name": "lr", "MinValue": "0.0001", "MaxValue": "0.1", "ScalingType": "Logarithmic"},
        {"Name": "momentum", "MinValue": "0.9", "MaxValue": "0.999", "ScalingType": "ReverseLogarithmic"}],
        "IntegerParameterRanges": [{"Name": "batch", "MinValue": "16", "MaxValue": "256", "ScalingType": "Linear"}]}
    request = _request(HyperParameterTuningJobConfig__Strategy=strategy,
                       HyperParameterTuningJobConfig__ParameterRanges=ranges,
                       HyperParameterTuningJobConfig__ResourceLimits={"MaxNumberOfTrainingJobs": 40,
                                                                      "MaxParallelTrainingJobs": 1},
                       HyperParameterTuningJobConfig__RandomSeed=7)
    study = ht.make_study(request)
    lrs = []
    for _ in range(40):
        trial = study.ask(ht._distributions(request))
        values = ht.trial_values(request, trial.params)
        assert 0.0001 <= float(values["lr"]) <= 0.1
        assert 0.9 <= float(values["momentum"]) <= 0.999
        assert 16 <= int(values["batch"]) <= 256 and values["batch"].isdigit()
        lrs.append(float(values["lr"]))
        study.tell(trial, -abs(float(values["lr"]) - 0.01))
    if strategy == "Random":
        # Log scale: about a third of the draws below 0.001 (uniform would put 0.9% there).
        assert sum(v < 0.001 for v in lrs) >= 5
    else:
        # The model learns where the objective peaks (lr = 0.01): the last draws are nearer.
        distance = [abs(v - 0.01) for v in lrs]
        assert sorted(distance[-10:])[5] < sorted(distance[:10])[5]


def test_hyperband_stops_trials_on_the_epoch_stream():
    request = _request(HyperParameterTuningJobConfig__Strategy="Hyperband",
                       HyperParameterTuningJobConfig__TrainingJobEarlyStoppingType="Off",
                       HyperParameterTuningJobConfig__StrategyConfig={
                           "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 9}},
                       HyperParameterTuningJobConfig__ResourceLimits={"MaxNumberOfTrainingJobs": 30,
                                                                      "MaxParallelTrainingJobs": 1},
                       HyperParameterTuningJobConfig__RandomSeed=3)
    study = ht.make_study(request)
    pruned = 0
    for _ in range(30):
        trial = study.ask(ht._distributions(request))
        lr = float(ht.trial_values(request, trial.params)["lr"])
        for epoch in range(1, 10):
            trial.report(epoch / 9 - abs(lr - 0.01) * 10, epoch)
            if trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                pruned += 1
                break
        else:
            study.tell(trial, 1 - abs(lr - 0.01) * 10)
    assert pruned > 0


def test_a_trial_is_stopped_only_while_its_processes_run(tmp_path):
    """SageMaker stops running jobs only: a trial whose processes have all ended finishes."""
    import os
    import threading

    from pipeline.local.store.storage import LocalStorage

    from .test_hyperparameter_ranges import REQUEST

    stop = threading.Event()
    request = hr.parse(REQUEST).trial_request({"lr": "0.01", "batch": "32", "opt": '"sgd"'})
    job = ht.TrialJob(request, "t-001", LocalStorage(tmp_path / "store"), tmp_path / "job", echo=False,
                      stop_event=stop)
    job.stop_reason = "stopped early by the test"
    stop.set()
    job.poll_hook()  # no process: nothing to stop
    job.spawn("algo-1", ["sleep", "30"], dict(os.environ), tmp_path, tmp_path / "sleep.log")
    try:
        with pytest.raises(ht.EarlyStop, match="stopped early by the test"):
            job.poll_hook()
    finally:
        job.stop_children()


# A trial script as AWS's examples write one, with what a stopped job needs: SageMaker sends
# SIGTERM and uploads /opt/ml/model, so it saves its model there when told to stop. The first
# run of lr=0.01 is killed from outside (SIGKILL, as the OOM killer would): the platform's
# fault, which RetryStrategy retries. Weak trials run slowly: they are the ones still running
# when a strong one reaches the target.
TRIAL_SCRIPT = """
import argparse, os, signal, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--epochs", type=int)
parser.add_argument("--marker")
args, _ = parser.parse_known_args()
if args.lr == 0.01 and not os.path.exists(args.marker):
    open(args.marker, "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
model = os.path.join(os.environ["SM_MODEL_DIR"], "model.txt")

def save(*_):
    with open(model, "w") as f:
        f.write(f"lr={args.lr}")
    sys.exit(0)

signal.signal(signal.SIGTERM, save)
for epoch in range(1, args.epochs + 1):
    print(f"acc={args.lr * 10 * epoch / args.epochs:.4f}", flush=True)
    time.sleep(1.0 if args.lr > 0.05 else 30.0)  # a weak trial never ends before a strong one's 4 s
save()
"""


def test_a_trial_is_retried_the_target_ends_the_job_and_a_stopped_trial_keeps_its_model(tmp_path):
    """One small tuning job of real processes (seconds): Grid over lr, two at a time. Trial 1
    (lr=0.01) is killed on its first run and retried under its name; trial 2 (lr=0.09) reaches
    TargetObjectiveMetricValue=0.8, so the job ends Completed: trial 1, still running, is
    stopped and keeps the model it saved on SIGTERM; trials 3 and 4 never start."""
    import json
    import tarfile

    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    storage = LocalStorage(tmp_path / "store")
    code = put_code(storage, f"s3://{BUCKET}/code/sourcedir.tar.gz", {"train.py": TRIAL_SCRIPT})
    definition = training_request(code, program="train.py", output=f"s3://{BUCKET}/models",
                                  metrics=[{"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"}],
                                  hyperparameters={"epochs": 4, "marker": str(tmp_path / "killed-once")})
    definition["StaticHyperParameters"] = definition.pop("HyperParameters")
    definition["RetryStrategy"] = {"MaximumRetryAttempts": 1}
    request = {
        "HyperParameterTuningJobConfig": {
            "Strategy": "Grid", "ResourceLimits": {"MaxParallelTrainingJobs": 2},
            "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "validation:accuracy"},
            "ParameterRanges": {"CategoricalParameterRanges": [
                {"Name": "lr", "Values": ["0.01", "0.09", "0.02", "0.03"]}]},
            "TuningJobCompletionCriteria": {"TargetObjectiveMetricValue": 0.8}},
        "TrainingJobDefinition": definition,
    }
    job = ht.HyperparameterTuningJob(request, "tune-1", storage, tmp_path / "jobs", echo=False)
    result = job.run()

    described = result.description
    assert result.status == described["HyperParameterTuningJobStatus"] == "Completed"
    assert result.ended_early == "TargetObjectiveMetricValue 0.8 reached (validation:accuracy=0.9)"
    summaries = {s["TunedHyperParameters"]["lr"]: s for s in described["TrainingJobSummaries"]}
    assert set(summaries) == {"0.01", "0.09"}  # the job ended before trials 3 and 4
    assert described["BestTrainingJob"]["TrainingJobName"] == summaries["0.09"]["TrainingJobName"]
    stopped = summaries["0.01"]
    assert stopped["TrainingJobStatus"] == "Stopped"
    assert stopped["FailureReason"].startswith("stopped by tune-1: TargetObjectiveMetricValue 0.8 reached")
    assert described["TrainingJobStatusCounters"] == {"Completed": 1, "InProgress": 0, "RetryableError": 0,
                                                      "NonRetryableError": 0, "Stopped": 1}
    # The stopped trial scored its last epoch's value (0.1), which did not improve on 0.9.
    assert described["TuningJobCompletionDetails"] == {"NumberOfTrainingJobsObjectiveNotImproving": 1}
    log = (job.log_dir / "tuning-job.log").read_text()
    assert "trial 1 failed (InternalServerError: " in log and "retry 1 of 1 (RetryStrategy" in log
    (trial,) = [t for t in result.trials if t.name == stopped["TrainingJobName"]]
    assert trial.attempts == 2 and trial.job.job_dir.name.endswith("-attempt-2")
    # The stopped trial's model: what its script saved on SIGTERM, uploaded where SageMaker puts it.
    model_uri = trial.result.description["ModelArtifacts"]["S3ModelArtifacts"]
    assert model_uri == f"s3://{BUCKET}/models/{trial.name}/output/model.tar.gz"
    local = tmp_path / "model.tar.gz"
    storage.get_file(model_uri, local)
    with tarfile.open(local) as tar:
        assert tar.extractfile("model.txt").read() == b"lr=0.01"
    assert json.loads((trial.job.job_dir / "description.json").read_text())["ModelArtifacts"]


def test_a_job_whose_first_five_trials_fail_fails_as_sagemakers_does(tmp_path):
    """A failed trial does not fail the job while another may succeed; five failed first
    trials do (SageMaker's reason, word for word), and no further trial starts."""
    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    storage = LocalStorage(tmp_path / "store")
    code = put_code(storage, f"s3://{BUCKET}/code/sourcedir.tar.gz",
                    {"train.py": "import sys\nsys.exit('no data in the train channel')\n"})
    definition = training_request(code, program="train.py", output=f"s3://{BUCKET}/models",
                                  metrics=[{"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"}])
    definition["StaticHyperParameters"] = definition.pop("HyperParameters")
    request = changed(HyperParameterTuningJobConfig__ResourceLimits={"MaxNumberOfTrainingJobs": 8,
                                                                     "MaxParallelTrainingJobs": 1},
                      HyperParameterTuningJobConfig__TrainingJobEarlyStoppingType="Off",
                      TrainingJobDefinition=definition)
    result = ht.HyperparameterTuningJob(request, "tune-2", storage, tmp_path / "jobs", echo=False).run()
    assert result.status == "Failed" and len(result.trials) == 5
    assert result.failure_reason.startswith(
        "No training job succeeded after 5 attempts. Please take a look at the training job failures to get "
        "more details.; the first trial's failure: AlgorithmError: ")
    assert "BestTrainingJob" not in result.description
    assert result.description["TrainingJobStatusCounters"]["NonRetryableError"] == 5


def test_an_objective_regex_that_never_matches_says_so_not_no_reason_given(tmp_path):
    """Two trials that complete and print their metric as the regex does not expect: the job
    fails saying that no log line matched the regex (it said 'no reason given')."""
    from pipeline.local.store.storage import LocalStorage
    from tests import readme_record
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    storage = LocalStorage(tmp_path / "store")
    code = put_code(storage, f"s3://{BUCKET}/code/sourcedir.tar.gz", {"train.py": "print('accuracy: 0.9')\n"})
    definition = training_request(code, program="train.py", output=f"s3://{BUCKET}/models",
                                  metrics=[{"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"}])
    definition["StaticHyperParameters"] = definition.pop("HyperParameters")
    request = changed(HyperParameterTuningJobConfig__ResourceLimits={"MaxNumberOfTrainingJobs": 2,
                                                                     "MaxParallelTrainingJobs": 1},
                      HyperParameterTuningJobConfig__TrainingJobEarlyStoppingType="Off",
                      TrainingJobDefinition=definition)
    result = ht.HyperparameterTuningJob(request, "tune-3", storage, tmp_path / "jobs", echo=False).run()
    readme_record.record(result.failure_reason)
    assert result.status == "Failed" and len(result.trials) == 2
    assert result.failure_reason == (
        "no trial of tune-3 completed with the objective 'validation:accuracy' (2 ran); the first trial's failure: "
        "none: 2 completed, but no line of their logs matched the objective's regex 'acc=([0-9.]+)'; print "
        "validation:accuracy as the regex expects, or fix the regex (metric_definitions)")


def test_ctrl_c_leaves_a_stopped_tuning_job_with_its_finished_trials(tmp_path, capsys):
    """Issue 49: after Ctrl-C during tuning, describe-hyper-parameter-tuning-job said "no tuning
    job" and status showed no trials. The job is Stopped now, listing the trial that completed
    and the one that was stopped, as DescribeHyperParameterTuningJob shows a stopped job."""
    import _thread
    import json
    import threading
    import time

    from pipeline.cli.main import main
    from pipeline.local import tuning_step
    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    storage = LocalStorage(tmp_path / "store")
    code = put_code(storage, f"s3://{BUCKET}/code/sourcedir.tar.gz", {"train.py": TRIAL_SCRIPT})
    marker = tmp_path / "killed-once"
    marker.touch()  # no trial is killed from outside here
    definition = training_request(code, program="train.py", output=f"s3://{BUCKET}/models",
                                  metrics=[{"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"}],
                                  hyperparameters={"epochs": 4, "marker": str(marker)})
    definition["StaticHyperParameters"] = definition.pop("HyperParameters")
    request = {
        "HyperParameterTuningJobConfig": {
            "Strategy": "Grid", "ResourceLimits": {"MaxParallelTrainingJobs": 2},
            "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "validation:accuracy"},
            "ParameterRanges": {"CategoricalParameterRanges": [{"Name": "lr", "Values": ["0.09", "0.01"]}]}},
        "TrainingJobDefinition": definition,
    }
    job = ht.HyperparameterTuningJob(request, "tune-3", storage, tmp_path / "w" / "runs" / "e-1" / "jobs",
                                     echo=False)

    def press_ctrl_c_once_the_fast_trial_completed():
        deadline = time.time() + 120
        while time.time() < deadline and not any(t.result is not None and t.status == "Completed"
                                                  for t in list(job.trials)):
            time.sleep(0.1)
        _thread.interrupt_main()

    threading.Thread(target=press_ctrl_c_once_the_fast_trial_completed, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        job.run()

    described = job.interrupted.description
    assert described["HyperParameterTuningJobStatus"] == "Stopped"
    statuses = {s["TunedHyperParameters"]["lr"]: s["TrainingJobStatus"] for s in described["TrainingJobSummaries"]}
    assert statuses == {"0.09": "Completed", "0.01": "Stopped"}
    header, rows = tuning_step.trials_table(described)  # what `trainpipe status --local` shows
    assert len(rows) == 2 and header[-1] == "STATUS"
    capsys.readouterr()
    assert main(["describe-hyper-parameter-tuning-job", "--workdir", str(tmp_path / "w"), "--training-jobs"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["HyperParameterTuningJobName"] == "tune-3" and shown["HyperParameterTuningJobStatus"] == "Stopped"
    assert len(shown["TrainingJobSummaries"]) == 2


# Short epochs (0.05 s, under the runner's 0.2 s poll): a stopped trial trains on for a few
# epochs between the verdict and its processes' stop. A weak trial, stopped early, has 400 of
# them (20 s), so that a loaded 2-core machine's verdict still lands before its last.
FAST_SCRIPT = """
import argparse, os, signal, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
args, _ = parser.parse_known_args()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
for epoch in range(1, 41 if args.lr >= 0.01 else 401):
    print(f"acc={args.lr * epoch:.4f}", flush=True)
    time.sleep(0.05)
"""


def test_an_early_stopped_trial_says_the_epoch_it_stopped_at_and_the_verdicts(tmp_path):
    """Issue 49: a trial said "at epoch 1" when judged, then "Stopped after 3 epoch(s)". Its
    last line now names the epoch it stopped at and, where it differs, the verdict's."""
    import re

    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, put_code, training_request

    storage = LocalStorage(tmp_path / "store")
    code = put_code(storage, f"s3://{BUCKET}/code/sourcedir.tar.gz", {"train.py": FAST_SCRIPT})
    definition = training_request(code, program="train.py", output=f"s3://{BUCKET}/models",
                                  metrics=[{"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"}])
    definition["StaticHyperParameters"] = definition.pop("HyperParameters")
    request = {
        "HyperParameterTuningJobConfig": {
            "Strategy": "Grid", "ResourceLimits": {"MaxParallelTrainingJobs": 1},
            "TrainingJobEarlyStoppingType": "Auto",
            "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "validation:accuracy"},
            "ParameterRanges": {"CategoricalParameterRanges": [
                {"Name": "lr", "Values": ["0.02", "0.021", "0.001"]}]}},
        "TrainingJobDefinition": definition,
    }
    job = ht.HyperparameterTuningJob(request, "tune-4", storage, tmp_path / "jobs", echo=False)
    result = job.run()
    log = (job.log_dir / "tuning-job.log").read_text()
    (judged,) = re.findall(r"trial 3 stopping early: early stopping \(Auto\): at epoch (\d+) ", log)
    (stopped, rest) = re.findall(r"trial 3 Stopped at epoch (\d+)(.*)", log)[0]
    third = next(t for t in result.trials if t.number == 3)
    assert int(stopped) == third.reported and int(judged) == third.verdict_epoch <= int(stopped)
    assert rest.startswith(f" (stopping was decided at epoch {judged}; it trained on until its processes "
                           "stopped); no model kept") if judged != stopped else rest.startswith("; no model kept")
    # Its script saved nothing: no empty archive passes for its model (issue 49).
    assert "ModelArtifacts" not in third.result.description and not third.kept_model


# --- A real trial stopped early: the request `run --local --tune` runs, on the digits ----------
def _tune_request(storage, tmp_path, settings=None, **parameters) -> tuple[dict, dict]:
    """TuneModel's request as the runner evaluates it for ``run --local --tune 3
    --tune-parallel 1``: the definition built by the CLI's own builder, its code bundles in the
    store where the definition points, and PreprocessData's outputs (the bundled digits through
    processing, 2 shards a split) where the step's properties name them."""
    from pipeline.definition.build import STEP_TUNE, build_definition
    from pipeline.definition.bundles import all_bundles
    from pipeline.local.dag import interpreter
    from pipeline.local.jobs.tuning import data_fit
    from pipeline.local.store.storage import join_uri
    from pipeline.settings import Settings
    from tests.training_entry.helpers import make_splits

    settings = settings or Settings(tune_jobs=3, tune_parallel_jobs=1)
    definition = build_definition(settings, parameters)
    for bundle in all_bundles(settings.model_file).values():
        prefix = f"s3://{settings.bucket}/{bundle.key_prefix(settings.prefix)}"
        for relative, data in bundle.objects().items():
            storage.put_bytes(data, join_uri(prefix, relative))
    outputs = []
    splits = make_splits(tmp_path / "digits", shard_count=2)
    for name, folder in splits.items():
        uri = f"s3://{settings.bucket}/{settings.prefix}/e-1/PreprocessData/output/{name}"
        for path in folder.iterdir():
            storage.put_file(path, f"{uri}/{path.name}")
        outputs.append({"OutputName": name, "S3Output": {"S3Uri": uri}})
    ctx = interpreter.Context(parameters=interpreter.resolve_parameters(definition, parameters),
                              execution={"PipelineExecutionId": "e-1"},
                              properties={"PreprocessData": {"ProcessingOutputConfig": {"Outputs": outputs}}})
    (step,) = [s for s in definition["Steps"] if s["Name"] == STEP_TUNE]
    request, _ = data_fit.clip_batch_size(interpreter.evaluate(step["Arguments"], ctx), storage)
    return request, splits


@pytest.mark.slow
@pytest.mark.skipif(__import__("shutil").which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_a_real_trial_stopped_early_keeps_its_last_model_and_says_one_epoch(tmp_path):
    """Issue 49: an early-stopped trial said "at epoch 1", then "Stopped after 3 epoch(s)", and
    left an empty model file. Three real trials of train.py (Horovod, 2 ranks, the digits), one
    at a time, under early stopping Auto (the median rule) as ``--tune`` asks for it. The
    ranges are fixed (Grid over the learning rate) so that the third trial trails the first two
    at epoch 1 and is stopped: its archive holds the model of the epoch it stopped at, and the
    tuner's log, the trial's own log, its record and its metric lines name the same epoch."""
    import json
    import re
    import tarfile

    import numpy as np
    import tensorflow as tf

    from pipeline.local.store.storage import LocalStorage
    from tests.training_entry.helpers import shard_paths
    from training_entry import contract
    from training_entry.input import examples, records

    storage = LocalStorage(tmp_path / "store")
    epochs = 12  # far more than the stopped trial gets to: its stop lands an epoch or two after the verdict
    request, splits = _tune_request(storage, tmp_path, Epochs=epochs, TrainingInstanceCount=1, ProcessesPerHost=2)
    config = request["HyperParameterTuningJobConfig"]
    assert config["TrainingJobEarlyStoppingType"] == "Auto"  # what --tune asks for by default
    # Grid, in order: two rates that learn the digits in an epoch, then one that trails them.
    config["Strategy"] = "Grid"
    config["ParameterRanges"] = {"CategoricalParameterRanges": [
        {"Name": "base-learning-rate", "Values": ["0.01", "0.005", "0.0002"]}]}
    static = request["TrainingJobDefinition"]["StaticHyperParameters"]
    static.update({"batch-size": "32", "warmup-epochs": "0"})
    job = ht.HyperparameterTuningJob(request, "tune-digits", storage, tmp_path / "jobs", echo=False,
                                     environments=tmp_path / "environments")
    result = job.run()

    log = (job.log_dir / "tuning-job.log").read_text()
    third = next(t for t in result.trials if t.number == 3)
    assert [t.status for t in result.trials] == ["Completed", "Completed", "Stopped"], log[-3000:]
    (judged,) = re.findall(r"trial 3 stopping early: early stopping \(Auto\): at epoch (\d+) ", log)
    (stopped, rest) = re.findall(r"trial 3 Stopped at epoch (\d+)(.*)", log)[0]
    assert "no model kept" not in rest and third.kept_model, log[-3000:]
    # One epoch everywhere: the tuner's line, the script's own stop line, its metric lines, its record.
    trial_log = third.job.log_path.read_text()
    (said,) = re.findall(r"stopped \(SIGTERM\) after epoch (\d+): saving the model trained so far", trial_log)
    epoch_lines = [line for line in trial_log.splitlines() if "trainpipe-metrics" in line]
    (record,) = [r for r in json.loads((job.log_dir / ht.TRIALS_FILE).read_text()) if r["number"] == 3]
    assert int(stopped) == int(said) == len(epoch_lines) == third.reported == record["epochs"], log[-2000:]
    assert trial_log.index(epoch_lines[-1]) < trial_log.index("stopped (SIGTERM)")  # that epoch's line, then the stop
    assert int(judged) == third.verdict_epoch <= int(stopped) < epochs
    summary = next(s for s in result.description[ht.SUMMARIES_KEY] if s["TrainingJobName"] == third.name)
    assert summary["TrainingJobStatus"] == "Stopped"
    # Its reason names the verdict's epoch and the one it stopped at, as describe-training-job shows it.
    described = json.loads((third.job.job_dir / "description.json").read_text())
    assert summary["FailureReason"] == described["FailureReason"] == third.stop_reason
    assert third.stop_reason.startswith(f"early stopping (Auto): at epoch {judged} ")
    assert third.stop_reason.endswith(f" (it stopped after epoch {stopped})")
    assert summary["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == third.last_value

    # Its archive: the SavedModel of the epoch it stopped at, where SageMaker puts a stopped job's.
    uri = third.result.description["ModelArtifacts"]["S3ModelArtifacts"]
    archive = tmp_path / "model.tar.gz"
    storage.get_file(uri, archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        assert f"{contract.MODEL_VERSION}/saved_model.pb" in [n.removeprefix("./") for n in names], names
        tar.extractall(tmp_path / "model", filter="data")
    model = tf.keras.models.load_model(str(tmp_path / "model" / contract.MODEL_VERSION), compile=False)
    serialized = [r for shard in shard_paths(splits["validation"]) for r in records.read_file_records(str(shard))]
    x, y = examples.parse_batch(tf.constant(serialized), model.input_shape[1])
    accuracy = float(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == y.numpy()))
    # The last epoch's val_accuracy (the ranks' shards averaged), not the verdict epoch's.
    assert abs(accuracy - third.last_value) <= 0.03, (accuracy, third.last_value)


@pytest.mark.slow
@pytest.mark.skipif(namespaces.unavailable_reason() is not None, reason="simulated hosts need namespaces")
def test_a_stopped_parameter_server_trial_keeps_its_model(tmp_path):
    """A trial of ``--distribution parameter_server --tune`` (2 hosts: a chief and a worker,
    a parameter server on each), stopped after its first epoch: SIGTERM reaches the scripts,
    not the parameter servers the chief still needs for its last epoch (they died with it,
    and the grace period waited for them, which never end by themselves); the chief stops at
    the epoch end, saves, and the trial keeps that model."""
    import tarfile
    import threading

    from pipeline.local.jobs.tuning.trials import Trial
    from pipeline.local.store.storage import LocalStorage
    from pipeline.settings import Settings
    from training_entry import contract

    storage = LocalStorage(tmp_path / "store")
    settings = Settings(tune_jobs=3, tune_parallel_jobs=1, distribution=contract.STRATEGY_PARAMETER_SERVER)
    request, _ = _tune_request(storage, tmp_path, settings, Epochs=200, TrainingInstanceCount=2, ProcessesPerHost=1,
                               TrainDistribution="FullyReplicated")
    values = {"base-learning-rate": "0.01", "batch-size": "32", "warmup-epochs": "0"}
    stop = threading.Event()
    job = ht.TrialJob(hr.parse(request).trial_request(values), "ps-trial-001", storage, tmp_path / "job",
                      echo=False, environments=tmp_path / "environments", stop_event=stop)
    trial = Trial(1, "ps-trial-001", values, None, [], job, stop)
    trial.stop_reason = job.stop_reason = "stopped early by the test"
    trial.start()
    deadline = time.monotonic() + 240
    while not (job.log_path.is_file() and "trainpipe-metrics" in job.log_path.read_text()):
        assert trial.thread.is_alive() and time.monotonic() < deadline, job.log_path.read_text()[-3000:]
        time.sleep(0.2)
    stop.set()
    trial.thread.join(200)
    log = job.log_path.read_text()
    assert trial.result is not None and trial.result.status == "Stopped", log[-3000:]
    assert "stopped (SIGTERM) after epoch" in log and trial.kept_model, log[-3000:]
    archive = tmp_path / "model.tar.gz"
    storage.get_file(trial.result.description["ModelArtifacts"]["S3ModelArtifacts"], archive)
    with tarfile.open(archive) as tar:
        assert f"{contract.MODEL_VERSION}/saved_model.pb" in [n.removeprefix("./") for n in tar.getnames()]
