"""A Tuning step's trials, nested under its step's run: the plain SDK v2 tuning pipeline
(tests/pipeline/local/test_tuning_step.py: four numpy trials of six short epochs, an
evaluation) run by `trainpipe run --local --definition` with no tracking flag and no
MLFLOW_TRACKING_URI, so into the embedded store in the workdir, and read back through
``MlflowClient``. Slow (about 20 s on 2 cores)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.tracking import records as R
from pipeline.tracking import target as T
from tests.pipeline.local.test_tuning_step import digits_split, execution_of, sdk_definition

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_each_trial_is_a_run_nested_under_the_tuning_steps_run(tmp_path):
    workdir, definition, _ = sdk_definition(tmp_path)
    train, test = digits_split(tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if k not in (T.SWITCH_ENV_VAR, T.ENV_VAR)}
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir), "-p", f"TrainData={train}", "-p", f"TestData={test}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    # The embedded default, and the one command that opens the UI on it.
    store = T.embedded(workdir)
    assert f"(open the UI: {T.mlflow_command()} ui --backend-store-uri {store.uri})" in done.stdout
    summaries = {s["name"]: s for s in execution_of(workdir)["steps"]}["TuneModel"]["properties"][
        "TrainingJobSummaries"]
    client = MlflowClient(store.uri)
    experiment = client.get_experiment_by_name(definition.stem)
    found = client.search_runs([experiment.experiment_id])
    (tuning,) = [r for r in found if r.info.run_name == "TuneModel"]
    trials = {r.info.run_name: r for r in found if r.data.tags.get(R.TAG_PARENT) == tuning.info.run_id}
    assert set(trials) == {s["TrainingJobName"] for s in summaries}
    best = summaries[0]  # best first
    assert tuning.data.tags["trainpipe.best_trial"] == best["TrainingJobName"]
    for summary in summaries:
        trial = trials[summary["TrainingJobName"]]
        assert trial.data.params["learning_rate"] == summary["TunedHyperParameters"]["learning_rate"]
        objective = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        if objective:
            assert trial.data.metrics["objective"] == pytest.approx(objective["Value"])
            history = client.get_metric_history(trial.info.run_id, objective["MetricName"])
            assert [m.step for m in history] == list(range(1, len(history) + 1)) and history
        assert trial.info.status == {"Completed": "FINISHED", "Stopped": "KILLED"}[summary["TrainingJobStatus"]]
