"""pipeline/local/jobs/jsonpath.py: the JSONPath subset of Transform's filters."""

from __future__ import annotations

import pytest

from pipeline.local.jobs.jsonpath import JsonPathError, apply

ROW = ["id-7", "5.1", "3.5", "1.4", "0.2"]
RECORD = {"id": 7, "features": [1, 2, 3], "SageMakerOutput": {"classes": "cat", "probabilities": [0.9, 0.1]}}


@pytest.mark.parametrize("path, value, expected", [
    ("$", ROW, ROW),
    ("$[1:]", ROW, ROW[1:]),
    ("$[0,-1]", ROW, ["id-7", "0.2"]),
    ("$[2]", ROW, "3.5"),
    ("$[:2]", ROW, ROW[:2]),
    ("$.features", RECORD, [1, 2, 3]),
    ("$['id','SageMakerOutput']", RECORD, {"id": 7, "SageMakerOutput": RECORD["SageMakerOutput"]}),
    ("$.SageMakerOutput.classes", RECORD, "cat"),
    ("$.SageMakerOutput['probabilities'][0]", RECORD, 0.9),
])
def test_the_documented_subset(path, value, expected):
    assert apply(path, value) == expected


@pytest.mark.parametrize("path, value, words", [
    ("features", RECORD, "must start with '$'"),
    ("$..id", RECORD, "cannot read"),
    ("$[a]", ROW, "is not an index"),
    ("$.id", ROW, "not a JSON object"),
    ("$[9]", ROW, "only 5 fields"),
    ("$.missing", RECORD, "has no ['missing']"),
    ("$[0]", RECORD, "not a list"),
])
def test_what_it_cannot_do_is_one_line(path, value, words):
    with pytest.raises(JsonPathError, match=words.replace("[", r"\[").replace("$", r"\$")):
        apply(path, value, "InputFilter")
