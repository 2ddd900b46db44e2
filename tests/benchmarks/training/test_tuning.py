"""The tuning benchmark's own parts: the runs it makes (ours with ``--tune``, Random and the
early stopping it compares) and how it counts trial-epochs (no trial runs here)."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.training import tuning
from pipeline.local.jobs.tuning import hyperparameter_ranges as hr


def test_the_benchmarks_runs_are_ours_with_random_and_the_early_stopping_asked():
    done = subprocess.run([sys.executable, "-m", "pipeline", "definition", *tuning.tuning_flags(8, 2, "Off")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (step,) = [s for s in json.loads(done.stdout)["Steps"] if s["Name"] == tuning.STEP]
    config = step["Arguments"]["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Random" and config["TrainingJobEarlyStoppingType"] == "Off"
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 8, "MaxParallelTrainingJobs": 2}
    assert config["RandomSeed"] == 42  # the same values in every run, whatever the timing
    literal = json.loads(json.dumps(step["Arguments"]), object_hook=lambda d: "1" if set(d) & {"Get", "Std:Join"} else d)
    hr.parse(literal)  # what the runner accepts


def test_trial_epochs_and_the_best_objective_come_from_the_trials_record():
    trials = [{"epochs": 3, "objective": 0.9, "stopped_early": False},
              {"epochs": 1, "objective": 0.4, "stopped_early": True},
              {"epochs": 0, "objective": None, "stopped_early": False}]
    assert tuning.epochs_trained(trials) == 4
    assert tuning.best_objective(trials) == 0.9
