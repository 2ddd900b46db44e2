"""pipeline/cli/options.py: what ``--tune`` refuses, through the CLI's in-process entry, before
anything runs (issue 49: ``--tune 0``, ``--tune-parallel`` above ``--tune``, and a ``-p`` of a
parameter the tuning job chooses were ignored or changed silently)."""

from __future__ import annotations

import pytest

from pipeline.cli.main import main
from tests import readme_record


def _refused(argv: list[str], tmp_path, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    return err.splitlines()[-1]


@pytest.mark.parametrize("command", ["run", "definition"])
def test_tune_zero_is_refused_in_one_line(command, tmp_path, capsys):
    extra = ["--local", "--workdir", str(tmp_path)] if command == "run" else []
    last = _refused([command, *extra, "--tune", "0"], tmp_path, capsys)
    assert last.endswith("error: argument --tune: 0 trials: give N >= 1, or leave --tune out to train once")
    readme_record.record(last)
    assert not (tmp_path / "runs").exists()


def test_more_parallel_trials_than_trials_is_refused(tmp_path, capsys):
    assert main(["run", "--local", "--workdir", str(tmp_path), "--tune", "2", "--tune-parallel", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("trainpipe run: error: --tune-parallel 3 is more than the 2 trials of --tune 2: give "
                   "--tune-parallel 2 or less, or more trials")
    assert not (tmp_path / "runs").exists()


def test_the_default_parallel_is_lowered_for_one_trial(tmp_path, capsys):
    from pipeline.definition.build import build_definition
    from pipeline.settings import Settings

    # --tune 1 alone is no refusal: the default of 2 side by side is what is lowered.
    definition = build_definition(Settings(tune_jobs=1))
    (tune,) = [s for s in definition["Steps"] if s["Type"] == "Tuning"]
    limits = tune["Arguments"]["HyperParameterTuningJobConfig"]["ResourceLimits"]
    assert limits["MaxParallelTrainingJobs"] == 1


@pytest.mark.parametrize("parameter", ["BatchSize=64", "BaseLearningRate=0.01", "WarmupEpochs=1"])
def test_a_parameter_the_tuner_chooses_is_refused_with_tune(parameter, tmp_path, capsys):
    assert main(["run", "--local", "--workdir", str(tmp_path), "--tune", "2", "-p", parameter]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"trainpipe run: error: -p {parameter} with --tune: the tuning job chooses BaseLearningRate, "
                   f"BatchSize, WarmupEpochs for each trial (docs/tuning.md); drop -p {parameter}, or drop "
                   f"--tune to train with it")
    readme_record.record(err)
    assert not (tmp_path / "runs").exists()
    # definition refuses it as well: the same tuner.
    assert main(["definition", "--tune", "2", "-p", parameter]) == 2
    assert f"-p {parameter} with --tune" in capsys.readouterr().err


def test_with_tune_a_split_too_small_for_the_smallest_tried_batch_is_refused_naming_no_batch_size(tmp_path, capsys):
    """With --tune the tuning job chooses BatchSize, so the up-front check asks whether the
    smallest batch size it tries fits (the tuning step clips the top), and never suggests a
    -p BatchSize that --tune refuses."""
    rows = tmp_path / "tiny.csv"
    rows.write_text("a,b,label\n" + "".join(f"{i},{i % 7},{i % 2}\n" for i in range(30)))
    argv = ["run", "--local", "--workdir", str(tmp_path / "w"), "-p", f"InputDataUri={rows}"]
    assert main([*argv, "--tune", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("trainpipe run: error: BatchSize=16 (the smallest --tune tries) is larger than the 10 "
                          "training records each of the 2 ranks"), err
    assert err.endswith("use -p TrainingInstanceCount=1") and "-p BatchSize" not in err
    assert main(argv) == 2  # without --tune, its own BatchSize is the fix it names first
    assert capsys.readouterr().err.strip().endswith("use -p BatchSize=10")


def test_tuning_from_the_environment_is_a_number_and_checked_as_the_flags_are(monkeypatch, tmp_path, capsys):
    """The build settings are also TRAINPIPE_<NAME> variables (run --help): TRAINPIPE_TUNE_JOBS
    and TRAINPIPE_TUNE_PARALLEL_JOBS were passed on as strings and failed in a traceback. They
    are numbers now, a parallel above the trials is refused as --tune-parallel's is, and a value
    that is no number is one line naming the variable."""
    import json

    out = tmp_path / "d.json"
    monkeypatch.setenv("TRAINPIPE_TUNE_JOBS", "3")
    monkeypatch.setenv("TRAINPIPE_TUNE_PARALLEL_JOBS", "1")
    assert main(["definition", "-o", str(out)]) == 0
    (tune,) = [s for s in json.loads(out.read_text())["Steps"] if s["Type"] == "Tuning"]
    limits = tune["Arguments"]["HyperParameterTuningJobConfig"]["ResourceLimits"]
    assert limits == {"MaxNumberOfTrainingJobs": 3, "MaxParallelTrainingJobs": 1}
    capsys.readouterr()
    monkeypatch.setenv("TRAINPIPE_TUNE_PARALLEL_JOBS", "5")
    assert main(["run", "--local", "--workdir", str(tmp_path / "w"), "--tune", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "trainpipe run: error: TRAINPIPE_TUNE_PARALLEL_JOBS=5 is more than the 2 trials of --tune 2: set it to 2 "
        "or less, or give more trials")
    assert not (tmp_path / "w" / "runs").exists()
    monkeypatch.setenv("TRAINPIPE_TUNE_PARALLEL_JOBS", "two")
    assert main(["definition", "--tune", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "trainpipe definition: error: TRAINPIPE_TUNE_PARALLEL_JOBS='two' is not a whole number: set it to one, or "
        "unset it")
