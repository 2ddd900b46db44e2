"""pipeline/definition/session.py: the SDK's config check, done once per distinct config."""

from __future__ import annotations

import pytest

from pipeline.definition.session import _validate_each_config_once


def test_a_config_that_passed_is_not_checked_again():
    calls = []
    once = _validate_each_config_once(calls.append)
    config = {"SchemaVersion": "1.0"}
    for _ in range(60):
        once(dict(config))
    once({"SchemaVersion": "1.0", "SageMaker": {}})
    assert calls == [config, {"SchemaVersion": "1.0", "SageMaker": {}}]


def test_a_bad_config_still_raises_every_time():
    def validate(config):
        raise ValueError("bad config")

    once = _validate_each_config_once(validate)
    for _ in range(2):
        with pytest.raises(ValueError, match="bad config"):
            once({"SchemaVersion": "nope"})


def test_the_sdk_uses_the_wrapped_check():
    import sagemaker.utils

    assert getattr(sagemaker.utils.validate_sagemaker_config, "trainpipe_wrapped", False)
