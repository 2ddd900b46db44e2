"""The user's model file is checked in a subprocess with a job's scrubbed environment, for the
data's real classes and input shape."""

from __future__ import annotations

import subprocess

import pytest

from pipeline.data.shape import DataShape
from pipeline.definition import parameters as P
from pipeline.definition import user_model
from pipeline.errors import UserError


def test_the_model_check_gets_no_credential_and_a_home_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fake")
    monkeypatch.setenv("HOME", str(tmp_path / "runner-home"))
    monkeypatch.setenv("TF_CONFIG", "{}")
    seen = {}

    def run(command, **kwargs):
        seen.update(kwargs["env"])
        return subprocess.CompletedProcess(command, 0, "built", "")

    monkeypatch.setattr(user_model.subprocess, "run", run)
    model = tmp_path / "model.py"
    model.write_text("")
    assert user_model.check_user_model(str(model), "table", {}).startswith("built (")
    assert not {"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "TF_CONFIG"} & set(seen)
    assert seen["HOME"] != str(tmp_path / "runner-home")
    assert seen["PYTHONPATH"] == str(user_model.REPO_ROOT)


def _recording_run(monkeypatch, seen):
    def run(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, 0, "model.py: m takes ..., outputs ...", "")

    monkeypatch.setattr(user_model.subprocess, "run", run)


def test_the_check_builds_for_the_datas_real_classes_and_input(tmp_path, monkeypatch):
    """The listing's 2 class folders, not a placeholder 3; a table's real feature count."""
    seen = []
    _recording_run(monkeypatch, seen)
    model = tmp_path / "model.py"
    model.write_text("")
    said = user_model.check_user_model(str(model), DataShape("image", ("ants", "bees")), {P.IMAGE_SIZE: 64})
    assert seen[-1][-4:] == ["--image-size", "64", "--classes", "2"]
    assert said.endswith("(InputDataUri holds 2 classes: ants, bees)")
    user_model.check_user_model(str(model), DataShape("table", ("a", "b", "c", "d"), num_features=5), {})
    assert seen[-1][-4:] == ["--features", "5", "--classes", "4"]
    said = user_model.check_user_model(str(model), DataShape("table"), {})
    assert seen[-1][-4:] == ["--features", str(user_model.CHECK_FEATURES), "--classes", str(user_model.CHECK_CLASSES)]
    assert "known only after processing" in said


SEVEN_OUTPUTS = """
import tensorflow as tf

def build_model(input_shape, num_classes, hyperparameters):
    inputs = tf.keras.Input(input_shape)
    x = tf.keras.layers.Flatten()(inputs)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(7, activation="softmax")(x))
"""


def test_a_model_with_the_wrong_output_width_is_refused_with_the_real_class_count(tmp_path):
    model = tmp_path / "my_model.py"
    model.write_text(SEVEN_OUTPUTS)
    with pytest.raises(UserError) as info:
        user_model.check_user_model(str(model), DataShape("image", ("ants", "bees")), {P.IMAGE_SIZE: 32})
    message = str(info.value)
    assert "\n" not in message
    assert "it must output one tensor [batch, 2]" in message
    assert message.endswith("(InputDataUri holds 2 classes: ants, bees)")
