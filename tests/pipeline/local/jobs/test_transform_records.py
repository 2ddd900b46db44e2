"""pipeline/local/jobs/transform_records.py: split, filter, batch, join, assemble."""

from __future__ import annotations

import json

import pytest

from pipeline.local.jobs import transform_records as tr


def settings(**changes) -> tr.Settings:
    base = dict(content_type="text/csv", accept="application/json", split_type="Line", batch_strategy="MultiRecord",
                max_payload_bytes=6 * tr.MEGABYTE, assemble_with="Line", input_filter="$", output_filter="$",
                join_input=False)
    return tr.Settings(**{**base, **changes})


def test_split_line_and_none():
    assert tr.split(b"a,1\n\nb,2\r\n", "Line") == [b"a,1", b"b,2"]
    assert tr.split(b"a,1\nb,2\n", "None") == [b"a,1\nb,2\n"]
    assert tr.split(b"", "None") == []


def test_batches_single_and_multi_record_within_the_payload():
    records = [b"x" * 40] * 5
    assert tr.batches(records, settings(batch_strategy="SingleRecord")) == [[0], [1], [2], [3], [4]]
    assert tr.batches(records, settings(max_payload_bytes=100)) == [[0, 1], [2, 3], [4]]
    assert tr.batches(records, settings(max_payload_bytes=0)) == [[0, 1, 2, 3, 4]]  # 0: no limit
    with pytest.raises(ValueError, match="record 1 is 0.00 MB, over MaxPayloadInMB"):
        tr.batches([b"x" * 200], settings(max_payload_bytes=100))


def test_input_filter_on_csv_and_json():
    assert tr.filter_input(b"id-1,5.1,3.5", settings(input_filter="$[1:]")) == b"5.1,3.5"
    doc = json.dumps({"id": 1, "x": [1, 2]}).encode()
    assert tr.filter_input(doc, settings(content_type="application/json", input_filter="$.x")) == b"[1,2]"


def test_answers_back_to_records():
    answer = json.dumps({"predictions": [{"classes": "a"}, {"classes": "b"}]}).encode()
    assert tr.per_record(answer, 2, "w") == [{"classes": "a"}, {"classes": "b"}]
    assert tr.per_record(b"1\n2\n", 2, "w") == [1, 2]
    assert tr.per_record(b'{"predictions": [1]}', 1, "w") == [1]
    with pytest.raises(ValueError, match="use BatchStrategy SingleRecord"):
        tr.per_record(b'{"predictions": [1]}', 3, "w")


def test_join_with_the_input_then_filter():
    csv_in = settings(join_input=True, output_filter="$[0,-1]", accept="text/csv")
    assert tr.joined(b"id-1,5.1,3.5", "cat", csv_in) == b"id-1,cat"
    json_in = settings(content_type="application/json", join_input=True,
                       output_filter="$['id','SageMakerOutput']")
    line = tr.joined(b'{"id": 1, "x": [1, 2]}', {"classes": "cat"}, json_in)
    assert json.loads(line) == {"id": 1, "SageMakerOutput": {"classes": "cat"}}
    classes_only = settings(output_filter="$.classes", accept="application/json")
    assert tr.joined(b"5.1,3.5", {"classes": "cat", "probabilities": [1]}, classes_only) == b'"cat"'


def test_assemble_line_and_none():
    assert tr.assemble([b"a", b"b\n"], "Line") == b"a\nb\n"
    assert tr.assemble([b"a", b"b"], "None") == b"ab"
