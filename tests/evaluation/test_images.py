"""EvaluateModel on image shards: scored through serving_bytes, full metrics, mistakes saved."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import tensorflow as tf
from sklearn import metrics as sk

from evaluation import report
from evaluation.evaluate import main
from tests import readme_record
from tests.evaluation.conftest import (
    IMAGE_CLASSES,
    brightness_probabilities,
    image_test_set,
    make_archive,
    scored_data,
    write_image_shards,
)


@pytest.fixture
def scored_images(ev, image_models):
    encoded, labels, means = image_test_set()
    write_image_shards(ev.test_dir, encoded, labels, shards=3)
    make_archive(ev.archive, {"1": image_models["brightness"]})
    return encoded, labels, brightness_probabilities(means)


def test_the_report_matches_scikit_learn_on_the_same_predictions(ev, scored_images):
    _, labels, probabilities = scored_images
    assert main([]) == 0
    document = ev.report()
    predicted = probabilities.argmax(axis=1)
    accuracy = sk.accuracy_score(labels, predicted)
    assert 0.5 < accuracy < 1, "the test set should be partly wrong, or equality proves little"
    assert document["kind"] == "image"
    assert report.read_json_path(document, report.ACCURACY_JSON_PATH) == pytest.approx(accuracy, abs=1e-12)
    loss = float(tf.keras.losses.SparseCategoricalCrossentropy()(labels, probabilities))
    assert report.read_json_path(document, report.LOSS_JSON_PATH) == pytest.approx(loss, rel=1e-4)
    assert document["class_names"] == list(IMAGE_CLASSES)
    assert document["confusion_matrix"] == sk.confusion_matrix(labels, predicted).tolist()
    precision, recall, f1, support = sk.precision_recall_fscore_support(labels, predicted, zero_division=0)
    for label, name in enumerate(IMAGE_CLASSES):
        entry = document["per_class"][str(label)]
        assert entry["class_name"] == name and entry["support"] == support[label]
        assert (entry["precision"], entry["recall"], entry["f1"]) == pytest.approx((precision[label], recall[label], f1[label]))
    top_k = document["metrics"]["top_k_accuracy"]
    assert top_k["k"] == 2  # min(5, classes - 1)
    assert top_k["value"] == pytest.approx(sk.top_k_accuracy_score(labels, probabilities, k=2))
    assert report.read_json_path(document, report.TOP_K_JSON_PATH) == top_k["value"]


def test_the_most_confident_mistakes_are_saved_as_they_were(ev, scored_images):
    encoded, labels, probabilities = scored_images
    assert main(["--batch-size", "4"]) == 0
    document = ev.report()
    predicted = probabilities.argmax(axis=1)
    wrong = np.flatnonzero(predicted != labels)
    saved = document["misclassified"]
    assert len(saved) == min(len(wrong), report.MISCLASSIFIED_KEPT) > 0
    confidences = [m["confidence"] for m in saved]
    assert confidences == sorted(confidences, reverse=True)
    expected = sorted(probabilities[wrong].max(axis=1), reverse=True)[: len(saved)]
    assert confidences == pytest.approx(expected, rel=1e-4)
    written = sorted(p.name for p in (ev.output_dir / report.MISCLASSIFIED_DIR).iterdir())
    assert written == sorted(m["file"].split("/")[1] for m in saved)
    for mistake in saved:
        data = (ev.output_dir / mistake["file"]).read_bytes()
        index = encoded.index(data)  # byte for byte one of the test images
        assert mistake["label"] == labels[index] and mistake["predicted"] == predicted[index]
        assert mistake["class_name"] == IMAGE_CLASSES[labels[index]]
        assert mistake["predicted_class_name"] == IMAGE_CLASSES[predicted[index]]
        assert mistake["file"].endswith(".png" if data.startswith(b"\x89PNG") else ".jpg")


def test_batch_size_changes_memory_not_results(ev, scored_images, tmp_path):
    assert main(["--batch-size", "1"]) == 0
    small = ev.report()
    (ev.output_dir / report.REPORT_FILE).unlink()
    assert main([]) == 0
    large = ev.report()
    assert small["confusion_matrix"] == large["confusion_matrix"]
    assert small["metrics"]["loss"]["value"] == pytest.approx(large["metrics"]["loss"]["value"], rel=1e-6)


def test_a_model_without_serving_bytes_is_refused_in_one_line(ev, saved_models):
    encoded, labels, _ = image_test_set(records=6)
    write_image_shards(ev.test_dir, encoded, labels, shards=1)
    make_archive(ev.archive, {"1": saved_models["seeded"]})  # a table model
    assert main([]) == 1
    text = ev.message.read_text()
    readme_record.record(text)
    assert "\n" not in text
    assert re.search(
        r"model\.tar\.gz: version 1 has no 'serving_bytes' signature \(it has: serving_default\); an image "
        r"model must export serving_bytes\(image_bytes: tf\.string \[None\]\) -> \{'probabilities'", text
    ), text


def test_a_signature_with_other_names_is_refused(ev, image_models):
    encoded, labels, _ = image_test_set(records=6)
    write_image_shards(ev.test_dir, encoded, labels, shards=1)
    make_archive(ev.archive, {"1": image_models["wrong_output"]})
    assert main([]) == 1
    assert "signature 'serving_bytes' takes ['image_bytes'] and returns ['scores']; expected input 'image_bytes' and output 'probabilities'" in ev.message.read_text()


def test_a_table_report_has_the_same_metrics_and_no_image_parts(ev, saved_models):
    x, y = scored_data()
    ev.write_test_shards(x, y)
    make_archive(ev.archive, {"1": saved_models["seeded"]})
    assert main([]) == 0
    document = ev.report()
    assert document["kind"] == "table" and "misclassified" not in document and "class_names" not in document
    matrix = np.array(document["confusion_matrix"])
    assert matrix.sum() == len(y) and matrix.sum(axis=1).tolist() == np.bincount(y, minlength=3).tolist()
    assert document["metrics"]["top_k_accuracy"]["k"] == 2
    assert set(document["per_class"]["0"]) == {"support", "correct", "precision", "recall", "f1"}
    assert json.loads(json.dumps(document)) == document
