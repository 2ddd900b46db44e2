"""benchmarks/photos/lite0_crops.py's choices, with trainpipe itself stubbed (a real run takes
minutes: benchmarks/notes.md): which room each run trains in, which -p it passes, and one
RESULT line per room."""

from __future__ import annotations

import subprocess

import pytest

pytest.importorskip("skimage")


@pytest.fixture()
def stubbed(tmp_path, monkeypatch):
    """lite0_crops with trainpipe recorded, not run; the test accuracy 0.95 for every run."""
    from benchmarks.photos import lite0_crops

    monkeypatch.setenv("TRAINPIPE_BENCH_WORK", str(tmp_path))
    calls = []

    def trainpipe(*args, failed_ok=False):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, "", ""), 1.0

    monkeypatch.setattr(lite0_crops, "trainpipe", trainpipe)
    monkeypatch.setattr(lite0_crops, "test_accuracy", lambda workdir: 0.95)
    monkeypatch.setattr(lite0_crops, "predict_raw_photos", lambda workdir, folder: (6, 6))
    return lite0_crops, calls


def _runs(calls) -> list[tuple]:
    return [c for c in calls if c[0] == "run"]


def test_both_frameworks_train_from_one_init_folder_and_print_a_result_each(stubbed, capsys):
    lite0_crops, calls = stubbed
    assert lite0_crops.main(["--framework", "both", "--per-class", "3"]) == 0
    assert sum(c[0] == "init-weights" for c in calls) == 1
    runs = _runs(calls)
    assert [next(a for a in r if a.startswith("Framework=")) for r in runs] == \
        ["Framework=tensorflow", "Framework=pytorch"]
    assert len({r[r.index("--workdir") + 1] for r in runs}) == 2  # a workdir per room
    assert all("ImageSize=96" in r and "Epochs=6" in r for r in runs)
    out = capsys.readouterr().out
    assert "RESULT lite0_crops_accuracy 0.95 target 0.9" in out
    assert "RESULT lite0_crops_pytorch_accuracy 0.95 target 0.9" in out


def test_image_size_0_and_epochs_0_pass_neither_parameter(stubbed, capsys):
    """The issue's setting: the defaults plus ModelArchitecture (224 px, 10 epochs)."""
    lite0_crops, calls = stubbed
    assert lite0_crops.main(["--framework", "pytorch", "--image-size", "0", "--epochs", "0", "--per-class", "3"]) == 0
    (run,) = _runs(calls)
    assert "Framework=pytorch" in run and "ModelArchitecture=efficientnet_lite0" in run
    assert not [a for a in run if a.startswith(("ImageSize=", "Epochs="))]
    init = next(c for c in calls if c[0] == "init-weights")
    assert init[init.index("--image-size") + 1] == "224"  # init-weights' .h5 needs a size
    assert capsys.readouterr().out.count("RESULT ") == 1


def test_no_init_makes_no_init_folder_and_passes_no_init_model_uri(stubbed, capsys):
    """The issue's check word for word: the defaults plus ModelArchitecture, the job reading the
    installed package's weights in either room."""
    lite0_crops, calls = stubbed
    assert lite0_crops.main(["--framework", "both", "--no-init", "--per-class", "3"]) == 0
    assert not [c for c in calls if c[0] in ("init-weights", "store")]
    runs = _runs(calls)
    assert len(runs) == 2 and not [r for r in runs if "--init-model-uri" in r]
    assert capsys.readouterr().out.count("RESULT ") == 2
