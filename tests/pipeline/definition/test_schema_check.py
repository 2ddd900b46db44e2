"""The relaxed schema check accepts SDK output and rejects broken structure."""

from __future__ import annotations

import copy

import pytest

from pipeline.definition.build import build_definition
from pipeline.definition.schema_check import SchemaError, check_definition


@pytest.fixture(scope="module")
def definition():
    return build_definition()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(Version="2019-01-01"), "at Version"),
        (lambda d: d["Steps"][0].update(Type="Bogus"), "unknown Type 'Bogus'"),
        (lambda d: d["Steps"][1].pop("Name"), "'Name' is a required property"),
        (lambda d: d["Steps"][2].pop("Arguments"), "'Arguments' is a required property"),
        (lambda d: d["Parameters"][0].update(Type="Complex"), "Parameters/0"),
        (lambda d: d["Steps"][1]["RetryPolicies"][0].update(ExceptionType=["Step.BOGUS"]),
         "ExceptionType"),
    ],
)
def test_rejects(definition, mutate, message):
    broken = copy.deepcopy(definition)
    mutate(broken)
    with pytest.raises(SchemaError, match=message):
        check_definition(broken)


def test_accepts_sdk_output(definition):
    check_definition(definition)
