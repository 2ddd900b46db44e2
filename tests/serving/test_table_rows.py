"""serving/table_rows.py: CSV lines for a typed table's model, through a real server (HTTP).

A header line is skipped by its names, as the float table's model skips a first line that
is not numbers (tests/serving/test_server.py); a row of the wrong width says what the model
takes and, when the label column is still in it, to drop it (issue 36).
"""

from __future__ import annotations

import pytest

from serving import table_rows
from serving.web import RequestError
from tests.serving.conftest import (
    TYPED_CLASSES,
    TYPED_COLUMNS,
    TYPED_LABEL,
    save_typed_table_model,
    serving,
)

ROWS = "Dream,41.0,2008,p1\nBiscoe,NA,2009,p2\n"
HEADER = "island,bill_length_mm,year,id\n"
TAKES = "the model takes 4 columns: island, bill_length_mm, year, id (the training header's order)"


@pytest.fixture(scope="module")
def typed_server(tmp_path_factory):
    with serving(save_typed_table_model(str(tmp_path_factory.mktemp("typed")))) as server:
        yield server


def _classes(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [p["classes"] for p in response.json()["predictions"]]


def test_a_header_line_is_skipped_as_on_every_table_model(typed_server):
    plain = _classes(typed_server.post("/invocations", ROWS, "text/csv"))
    assert len(plain) == 2 and set(plain) <= set(TYPED_CLASSES)
    assert _classes(typed_server.post("/invocations", HEADER + ROWS, "text/csv")) == plain
    # The training CSV's own header (the label among the names) is a header too.
    assert _classes(typed_server.post("/invocations", "species,island,bill_length_mm,year,id\n" + ROWS,
                                      "text/csv")) == plain
    only = typed_server.post("/invocations", HEADER, "text/csv")
    assert only.status_code == 400
    assert only.json()["error"] == f"the CSV body is only a header line; send rows of {TAKES[16:]}"


def test_a_row_with_the_label_still_in_it_says_what_the_model_takes(typed_server):
    answer = typed_server.post("/invocations", "Dream,41.0,2008,p1,Adelie\n", "text/csv")
    assert answer.status_code == 400
    assert answer.json()["error"] == f"CSV row 1 has 5 values; {TAKES}; drop the label column 'species'"
    short = typed_server.post("/invocations", HEADER + "Dream,41.0\n", "text/csv")
    assert short.json()["error"] == f"CSV row 1 (line 2 of the body) has 2 values; {TAKES}; the label column is left out"
    assert "image" not in short.text
    assert typed_server.post("/invocations", ROWS, "text/csv").status_code == 200  # still serving


def test_a_model_saved_without_its_columns_gets_tensorflows_words_not_an_images(tmp_path):
    """An older model (no description beside it): the CSV lines' error is not 'not an image'."""
    from serving import codec
    from serving.model import ServedModel

    model = ServedModel(save_typed_table_model(str(tmp_path / "old"), described=False))
    assert model.table is None
    request = codec.decode(model, "text/csv", b"Dream,41.0,2008,p1,Adelie\n")
    with pytest.raises(RequestError) as refused:
        model.predict(request.signature, request.inputs)
    assert str(refused.value).startswith("the CSV lines do not fit the model (every feature column in the "
                                         "training header's order, without the label column): ")
    assert "Expect 4 fields but have 5" in str(refused.value)


def test_the_description_is_every_column_in_header_order_and_the_label():
    assert table_rows.takes(table_rows_description()) == TAKES[16:]
    assert table_rows.checked_lines(["Dream,41,2008,x"], None) == ["Dream,41,2008,x"]


def table_rows_description() -> dict:
    from training_entry.model import tabular

    return tabular.table_description(TYPED_COLUMNS, TYPED_LABEL)
