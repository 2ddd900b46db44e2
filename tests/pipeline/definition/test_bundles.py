"""Code bundles: reproducible, content-addressed, holding what each container imports."""

from __future__ import annotations

import io
import tarfile

from pipeline.definition import bundles


def test_training_archive_has_the_entry_point_at_its_root():
    bundle = bundles.training_bundle()
    with tarfile.open(fileobj=io.BytesIO(bundle.archive())) as tar:
        names = tar.getnames()
    assert "train.py" in names and "training_entry/train.py" in names
    assert "training_entry/contract.py" in names
    assert not any("__pycache__" in n for n in names)


def test_archives_are_reproducible():
    assert bundles.training_bundle().archive() == bundles.training_bundle().archive()
    assert bundles.training_bundle().digest == bundles.training_bundle().digest


def test_digest_changes_with_content():
    bundle = bundles.processing_bundle()
    changed = bundles.Bundle(bundle.name, {**bundle.files, "processing/x.py": b"# new"}, bundle.module)
    assert changed.digest != bundle.digest
    assert changed.key_prefix("p") != bundle.key_prefix("p")


def test_processing_and_evaluation_carry_the_shared_record_format():
    for bundle in (bundles.processing_bundle(), bundles.evaluation_bundle()):
        assert "training_entry/input/records.py" in bundle.files
        assert bundle.module.split(".")[0] + "/__init__.py" in bundle.files
