"""ModelArchitecture against the data under InputDataUri, before any job (local store);
the user's model file checked in a subprocess; shipped in the training bundle."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from pipeline.data.kind import check_input_data
from pipeline.definition import parameters as P
from pipeline.definition.build import STEP_TRAIN, build_definition
from pipeline.definition.bundles import training_bundle, user_model_path
from pipeline.definition.user_model import check_user_model, uses_user_model
from pipeline.errors import UserError
from pipeline.local.store.storage import LocalStorage
from pipeline.settings import Settings
from training_entry import contract as training


@pytest.fixture
def store(tmp_path):
    storage = LocalStorage(tmp_path / "store")
    for key in ("bkt/photos/cat/1.jpg", "bkt/photos/dog/2.png", "bkt/table/digits.csv"):
        storage.put_bytes(b"x,label\n0,1\n" if key.endswith(".csv") else b"0", f"s3://{key}")
    return storage


def values(**overrides):
    return P.resolve(overrides, bucket="bkt", prefix="p")


def test_the_kind_of_the_data_decides_which_architectures_fit(store):
    assert check_input_data(store, values(InputDataUri="s3://bkt/photos/"), False) == "image"
    assert check_input_data(store, values(InputDataUri="s3://bkt/photos", ModelArchitecture="efficientnet_b0"),
                            False) == "image"
    assert check_input_data(store, values(InputDataUri="s3://bkt/table/", ModelArchitecture="mlp"), False) == "table"
    with pytest.raises(P.ParameterError, match=r"^ModelArchitecture=small_cnn does not fit the table data under "
                       r"InputDataUri=s3://bkt/table/; use one of mlp \(or auto\)$"):
        check_input_data(store, values(InputDataUri="s3://bkt/table/", ModelArchitecture="small_cnn"), False)
    with pytest.raises(P.ParameterError, match="ModelArchitecture=mlp does not fit the image data"):
        check_input_data(store, values(InputDataUri="s3://bkt/photos/", ModelArchitecture="mlp"), False)
    # InputDataUri may name one object, as SageMaker's S3Prefix inputs allow.
    assert check_input_data(store, values(InputDataUri="s3://bkt/table/digits.csv"), False) == "table"
    with pytest.raises(P.ParameterError, match="ModelArchitecture=small_cnn does not fit the table data"):
        check_input_data(store, values(InputDataUri="s3://bkt/table/digits.csv", ModelArchitecture="small_cnn"), False)
    with pytest.raises(P.ParameterError, match="^InputDataUri=s3://bkt/nothing/: no raw data under InputDataUri"):
        check_input_data(store, values(InputDataUri="s3://bkt/nothing/"), False)
    with pytest.raises(P.ParameterError, match="ModelArchitecture=custom needs your model file"):
        check_input_data(store, values(InputDataUri="s3://bkt/photos/", ModelArchitecture="custom"), False)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [("ModelArchitecture", "vgg16", "must be one of auto, mlp, small_cnn"),
     ("ImageSize", "16", r"ImageSize=16: must be at least 32 \(or 0\)"),
     ("Augmentation", "mixup", "must be one of crop_flip, crop, none"),
     ("FineTuneLearningRateFactor", "2", "must be at most 1")],
)
def test_bad_image_parameters(name, value, message):
    with pytest.raises(P.ParameterError, match=message):
        values(**{name: value})


GOOD = """
import tensorflow as tf

def build_model(input_shape, num_classes, hyperparameters):
    inputs = tf.keras.Input(input_shape)
    x = tf.keras.layers.Flatten()(inputs)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(num_classes, activation="softmax")(x))
"""


def test_the_model_file_is_checked_locally_in_one_line(tmp_path):
    good = tmp_path / "my_model.py"
    good.write_text(GOOD)
    said = check_user_model(str(good), "image", values(ImageSize="32"))
    assert "takes (32, 32, 3), outputs [batch, 3]" in said
    assert "takes (8,)" in check_user_model(str(good), "table", values())
    bad = tmp_path / "broken.py"
    bad.write_text(GOOD.replace("num_classes, activation", "10, activation"))
    with pytest.raises(UserError, match=r"^--model-file: model file broken.py: the model outputs \(1, 10\)") as e:
        check_user_model(str(bad), "image", values())
    assert "\n" not in str(e.value)
    assert uses_user_model(values(), str(good)) and not uses_user_model(values(ModelArchitecture="small_cnn"), str(good))


def test_the_model_file_ships_in_the_training_bundle_and_the_job_is_told_where(tmp_path):
    model = tmp_path / "my_model.py"
    model.write_text(GOOD)
    bundle = training_bundle(str(model))
    with tarfile.open(fileobj=io.BytesIO(bundle.archive())) as tar:
        assert tar.extractfile(user_model_path(str(model))).read().decode() == GOOD
    assert bundle.digest != training_bundle().digest
    definition = build_definition(Settings(model_file=str(model)), {"ModelArchitecture": "custom"})
    train = next(s for s in definition["Steps"] if s["Name"] == STEP_TRAIN)
    hps = train["Arguments"]["HyperParameters"]
    assert json.loads(hps[training.HP_MODEL_FILE]) == "user_model/my_model.py"
    assert hps[training.HP_MODEL_ARCHITECTURE] == {"Get": "Parameters.ModelArchitecture"}
    assert "Parameters.ImageSize" in json.dumps(hps[training.HP_IMAGE_SIZE])
    plain = build_definition(Settings(), {})
    assert training.HP_MODEL_FILE not in next(s for s in plain["Steps"] if s["Name"] == STEP_TRAIN)[
        "Arguments"]["HyperParameters"]
    with pytest.raises(ValueError, match="must be an existing .py file"):
        Settings(model_file=str(tmp_path / "missing.py"))
