"""Images with `trainpipe run --local`: the refusals that come before any job (architecture
vs data kind, the user's model file). The digits' PNG tree run end to end (processing ->
training -> evaluation -> register, small_cnn) is the README tour's own run, checked by
tests/test_readme.py; Pipe on two hosts over images by tests/training_entry/
test_train_images_mpirun.py. Slow:

    .venv/bin/pytest tests/pipeline/local/test_images_end_to_end.py -m slow
"""

from __future__ import annotations

import pytest

from pipeline.definition import parameters as P
from pipeline.local.hosts import mpi
from pipeline.settings import PLACEHOLDER_BUCKET, Settings

from .test_end_to_end import trainpipe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(mpi.mpirun_path() is None, reason="Open MPI's mpirun is not installed"),
]
IMAGES = P.default_image_data_uri(PLACEHOLDER_BUCKET, Settings().prefix)


def test_what_does_not_fit_is_refused_before_any_job(tmp_path):
    # The default data is a table: an image backbone cannot train on it.
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), "-p", "ModelArchitecture=mobilenet_v2")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "ModelArchitecture=mobilenet_v2 does not fit the table data under InputDataUri=" in last
    assert not (tmp_path / "runs").exists() or not any(
        (run / "jobs").exists() and any((run / "jobs").iterdir()) for run in (tmp_path / "runs").iterdir())

    broken = tmp_path / "my_model.py"
    broken.write_text("import tensorflow as tf\n\ndef build_model(input_shape, num_classes, hp):\n"
                      "    return tf.keras.Sequential([tf.keras.Input(input_shape), tf.keras.layers.Flatten(),\n"
                      "                                tf.keras.layers.Dense(7)])\n")
    result = trainpipe("run", "--local", "--workdir", str(tmp_path), "--model-file", str(broken),
                       "-p", f"InputDataUri={IMAGES}")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "--model-file: model file my_model.py: the model outputs (1, 7) for one input" in last
