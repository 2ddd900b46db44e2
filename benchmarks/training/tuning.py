"""Tuning (issue 37): ``trainpipe run --local`` of our pipeline with ``--tune``, on the digits.

Four runs, as a user runs them, in one work directory (PreprocessData is cached after the
first), every one with one process per trial (``TrainingInstanceCount=1``), ``--epochs``
epochs and the gate's threshold at 0 (every run registers, so every run is evaluated):

- ``default``: the pipeline without tuning, its default hyperparameters;
- ``sequential``: ``--tune N --tune-parallel 1``, early stopping Off;
- ``parallel``: the same N trials, 2 at a time (``--tune-parallel 2``);
- ``early``: the sequential run with early stopping Auto.

The three tuning runs use the Random strategy with one seed (``--tune-strategy Random``), so
they ask for the same values whatever the timing (Bayesian's choices depend on which trials
have finished).

Figures (RESULT lines):

- ``tuning_best_minus_default_test_accuracy``: the test accuracy of the parallel run's
  registered model (its best trial's) minus the default run's;
- ``tuning_parallel2_vs_sequential_wall``: the TuneModel step's wall time, 2 at a time over one
  after another (one run each: minutes of training per run on the shared machine, so no
  best-of-n; the figure is noisy and says so);
- ``tuning_early_stopping_epochs_saved`` (not with ``--no-early``; ``make bench`` leaves it
  out: at 3 epochs of the MLP it saved 0 of 24 trial-epochs, 80 s for a figure that cannot
  move; the CNN's below measures it): the share of the sequential run's trial-epochs that
  the early run did not train, printed beside both runs' best objective (the same value when
  early stopping did not stop the best trial).
- ``tuning_early_stopping_epochs_saved_cnn`` (only with ``--cnn-trials N``; ``make bench``
  leaves it out: its two runs took 6.5 minutes on the loaded 2-core machine): the same share on
  the digits as an image tree (``pipeline/data/default.py``), so the CNN
  (``ModelArchitecture=auto`` picks small_cnn for images), N trials of ``--cnn-epochs`` epochs
  one after another, early stopping Off then Auto (its own work directory).

    .venv/bin/python -m benchmarks.training.tuning [--trials 8] [--epochs 3] [--no-early] [--cnn-trials 4 --cnn-epochs 3 [--only-cnn]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchmarks import harness as h
from pipeline.definition.build import STEP_EVALUATE
from pipeline.definition.build import STEP_TUNE as STEP
from pipeline.local.jobs.tuning.hyperparameter_tuning import TRIALS_FILE


def trainpipe(*args: str) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run([h.PYTHON, "-m", "pipeline", *args], cwd=h.REPO, capture_output=True, text=True)
    h.say(f"  trainpipe {' '.join(args[:3])} ...: exit {done.returncode} in {time.monotonic() - started:.0f}s")
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"trainpipe {' '.join(args)} failed")
    return done


def tuning_flags(trials: int, parallel: int, early_stopping: str) -> list[str]:
    """``run --local`` flags of one tuning run: Random, so every run asks for the same values."""
    return ["--tune", str(trials), "--tune-parallel", str(parallel), "--tune-strategy", "Random",
            "--tune-early-stopping", early_stopping]


def latest_execution(workdir: Path) -> dict:
    runs = sorted((workdir / "runs").glob("*/execution.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(runs[-1].read_text())


def step_of(execution: dict, name: str) -> dict:
    return next(s for s in execution["steps"] if s["name"] == name)


def seconds(step: dict) -> float:
    return (datetime.fromisoformat(step["end"]) - datetime.fromisoformat(step["start"])).total_seconds()


def test_accuracy(workdir: Path, execution: dict) -> float:
    from pipeline.local.store.storage import LocalStorage

    outputs = step_of(execution, STEP_EVALUATE)["properties"]["ProcessingOutputConfig"]["Outputs"]
    uri = next(o["S3Output"]["S3Uri"] for o in outputs if o["OutputName"] == "evaluation")
    report = json.loads(LocalStorage(workdir / "store").read_bytes(uri.rstrip("/") + "/evaluation.json"))
    return float(report["metrics"]["accuracy"]["value"])


def trials_of(execution: dict) -> list[dict]:
    step = step_of(execution, STEP)
    assert not step.get("cache_hit"), "the tuning step came from the cache: use a fresh --workdir"
    return json.loads((Path(step["job_dir"]) / TRIALS_FILE).read_text())


def epochs_trained(trials: list[dict]) -> int:
    return sum(int(t["epochs"]) for t in trials)


def best_objective(trials: list[dict]) -> float:
    return max(t["objective"] for t in trials if t["objective"] is not None)


def early_stopping_on_images(trials: int, epochs: int, workdir: Path) -> None:
    """Early stopping Off vs Auto on the CNN: the share of trial-epochs saved, both best objectives."""
    from pipeline.data.default import export_digits_images

    images = export_digits_images(workdir / "digits-images")
    params = ["-p", f"InputDataUri={images}", "-p", f"Epochs={epochs}", "-p", "TrainingInstanceCount=1",
              "-p", "AccuracyThreshold=0"]
    h.say(f"early stopping on the CNN: {trials} trials of {epochs} epochs on the digits images, workdir {workdir}")
    runs = {}
    for early in ("Off", "Auto"):
        trainpipe("run", "--local", *tuning_flags(trials, 1, early), "--workdir", str(workdir), *params)
        runs[early] = latest_execution(workdir)
    off, auto = trials_of(runs["Off"]), trials_of(runs["Auto"])
    walls = {early: seconds(step_of(runs[early], STEP)) for early in runs}
    stopped = sum(t["stopped_early"] for t in auto)
    h.say(f"CNN trial-epochs: {epochs_trained(off)} without early stopping ({walls['Off']:.0f}s), "
          f"{epochs_trained(auto)} with Auto ({walls['Auto']:.0f}s; {stopped} of {len(auto)} trials stopped); "
          f"best objective {best_objective(off):.4f} without, {best_objective(auto):.4f} with")
    h.result("tuning_early_stopping_epochs_saved_cnn", 1 - epochs_trained(auto) / epochs_trained(off),
             f"> 0 at the same best objective ({best_objective(auto):.4f} vs {best_objective(off):.4f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--cnn-trials", type=int, default=0, help="N > 0: the CNN's early stopping runs too")
    parser.add_argument("--cnn-epochs", type=int, default=3)
    parser.add_argument("--only-cnn", action="store_true", help="the CNN's early stopping runs only")
    parser.add_argument("--no-early", action="store_true",
                        help="leave out the MLP's early-stopping run (make bench: at 3 epochs it saved nothing)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="default: a fresh folder under the benchmarks' scratch root")
    args = parser.parse_args(argv)
    params = ["-p", f"Epochs={args.epochs}", "-p", "TrainingInstanceCount=1", "-p", "AccuracyThreshold=0"]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="run-", dir=h.work_dir("tuning")))
    if args.cnn_trials:
        early_stopping_on_images(args.cnn_trials, args.cnn_epochs, workdir / "cnn")
    if args.only_cnn:
        return 0
    h.say(f"tuning benchmark: {args.trials} trials of {args.epochs} epochs, workdir {workdir}")
    runs = {}
    trainpipe("run", "--local", "--workdir", str(workdir), *params)
    runs["default"] = latest_execution(workdir)
    for name, parallel, early in (("sequential", 1, "Off"), ("parallel", 2, "Off"), ("early", 1, "Auto"))[
            :2 if args.no_early else 3]:
        trainpipe("run", "--local", *tuning_flags(args.trials, parallel, early), "--workdir", str(workdir), *params)
        runs[name] = latest_execution(workdir)

    default_accuracy = test_accuracy(workdir, runs["default"])
    tuned_accuracy = test_accuracy(workdir, runs["parallel"])
    h.say(f"test accuracy: default settings {default_accuracy:.4f}, best trial's model {tuned_accuracy:.4f}")
    h.result("tuning_best_minus_default_test_accuracy", tuned_accuracy - default_accuracy, ">= 0")

    walls = {name: seconds(step_of(runs[name], STEP)) for name in ("sequential", "parallel")}
    h.say(f"TuneModel wall time: one after another {walls['sequential']:.0f}s, 2 at a time "
          f"{walls['parallel']:.0f}s (one run each on a shared machine: noisy)")
    h.result("tuning_parallel2_vs_sequential_wall", walls["parallel"] / walls["sequential"], "< 1 (0.5 ideal on 2 cores)")

    if args.no_early:
        return 0
    off, auto = trials_of(runs["sequential"]), trials_of(runs["early"])
    saved = 1 - epochs_trained(auto) / epochs_trained(off)
    stopped = sum(t["stopped_early"] for t in auto)
    h.say(f"trial-epochs: {epochs_trained(off)} without early stopping, {epochs_trained(auto)} with Auto "
          f"({stopped} of {len(auto)} trials stopped); best objective {best_objective(off):.4f} without, "
          f"{best_objective(auto):.4f} with")
    h.result("tuning_early_stopping_epochs_saved", saved,
             f"> 0 at the same best objective ({best_objective(auto):.4f} vs {best_objective(off):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
