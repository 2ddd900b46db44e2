"""A Tuning step's trials, nested under its step's run: the plain SDK v2 tuning pipeline
(tests/pipeline/local/test_tuning_step.py: four numpy trials of six short epochs, an
evaluation) run by `trainpipe run --local --definition` with no tracking flag and no
MLFLOW_TRACKING_URI, so into the embedded store in the workdir, and read back through
``MlflowClient``. Slow (about 20 s on 2 cores)."""

from __future__ import annotations

import json
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
    workdir, definition, doc = sdk_definition(tmp_path)
    for step in doc["Steps"]:  # cached, so that the re-run below reuses its tuning job
        if step["Type"] == "Tuning":
            step["CacheConfig"] = {"Enabled": True, "ExpireAfter": "P30D"}
    definition.write_text(json.dumps(doc))
    train, test = digits_split(tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if k not in (T.SWITCH_ENV_VAR, T.ENV_VAR)}

    def run():
        done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                               "--workdir", str(workdir), "-p", f"TrainData={train}", "-p", f"TestData={test}"],
                              cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
        return done

    done = run()
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
        # Issue 49: every hyperparameter the trial trained with, not the tuned ones alone.
        assert trial.data.params["epochs"] == "6" and trial.data.params["epoch_seconds"] == "0.4"

    # Issue 49: the execution's run says it was tuned, carries the best trial's values (not the
    # defaults) and the evaluation's accuracy, so the experiment's runs compare by accuracy.
    (execution,) = [r for r in found if R.TAG_PARENT not in r.data.tags]
    assert execution.data.tags[R.TAG_TUNED] == "true"
    assert execution.data.tags[R.TAG_BEST_TRIAL] == best["TrainingJobName"]
    assert execution.data.params["learning_rate"] == best["TunedHyperParameters"]["learning_rate"]
    assert 0 <= execution.data.metrics["test_accuracy"] <= 1
    assert experiment.tags[R.TAG_EXPERIMENT_KIND] == R.EXPERIMENT_KIND
    assert (f"mlflow runs:   {T.UI_DEFAULT}/#/experiments/{experiment.experiment_id}/runs?workflowType="
            f"machine_learning") in done.stdout

    # Issue 49: a cached re-run logged every trial's run a second time. Its Tuning step's run
    # is a cache hit now, with no trials under it.
    again = run()
    assert "cache hit" in again.stdout
    runs = client.search_runs([experiment.experiment_id])
    assert len([r for r in runs if r.data.tags.get(R.TAG_STEP_TYPE) == "TuningTrial"]) == len(summaries)
    (rerun,) = [r for r in runs if r.info.run_name == "TuneModel" and r.info.run_id != tuning.info.run_id]
    # It names the execution whose trials it reused (docs/local-mode.md).
    assert rerun.data.tags[R.TAG_CACHE_HIT] == tuning.data.tags[R.TAG_EXECUTION]
    assert rerun.data.tags[R.TAG_BEST_TRIAL] == best["TrainingJobName"]
    assert not [r for r in runs if r.data.tags.get(R.TAG_PARENT) == rerun.info.run_id]
