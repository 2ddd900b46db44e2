"""serving/predict.py: files through the served model's code, without a server."""

from __future__ import annotations

import json

from serving.predict import main
from tests.serving.conftest import IMAGE_CLASSES, TABLE_CLASSES, encoded_image


def test_csv_rows_and_json_bodies_one_line_each(table_model, tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("a,b,c,d\n5.1,3.5,1.4,0.2\n6.7,3.0,5.2,2.3\n")
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"instances": [[5.1, 3.5, 1.4, 0.2]]}))
    assert main(["--model-dir", table_model, str(rows), str(body)]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [line[0] for line in lines] == [f"{rows}:1", f"{rows}:2", str(body)]
    assert all(line[1] in TABLE_CLASSES and 0 < float(line[2]) <= 1 for line in lines)
    assert lines[0][1:] == lines[2][1:]  # the same row, by CSV and by JSON


def test_images_as_json_and_a_refused_file_exits_2(image_model, tmp_path, capsys):
    png, jpeg, broken = tmp_path / "a.png", tmp_path / "b.jpg", tmp_path / "c.png"
    png.write_bytes(encoded_image("png"))
    jpeg.write_bytes(encoded_image("jpeg", 1))
    broken.write_bytes(b"not an image")
    assert main(["--model-dir", image_model, "--json", str(png), str(broken), str(jpeg)]) == 2
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["input"] for r in rows] == [str(png), str(jpeg)]
    assert all(r["class"] in IMAGE_CLASSES and len(r["probabilities"]) == len(IMAGE_CLASSES) for r in rows)
    assert f"predict: {broken}: the bytes are not an image" in captured.err


def test_no_model_is_one_line(tmp_path, capsys):
    assert main(["--model-dir", str(tmp_path), "x.csv"]) == 2
    assert "no SavedModel in" in capsys.readouterr().err


def test_a_rows_number_is_the_same_in_its_answer_and_in_an_error(table_model, tmp_path, capsys):
    """Issue 49: predict answered a header file's first row as ``file:1`` and refused the same
    row, once broken, as ``CSV row 2``. A row is numbered as its answer is (a header and blank
    lines are not rows); the body's line is said beside it where it differs."""
    good = "a,b,c,d\n5.1,3.5,1.4,0.2\n\n6.7,3.0,5.2,2.3\n"
    rows = tmp_path / "rows.csv"
    rows.write_text(good)
    assert main(["--model-dir", table_model, str(rows)]) == 0
    answered = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert answered == [f"{rows}:1", f"{rows}:2"]
    rows.write_text(good.replace("6.7,3.0", "6.7,x"))  # the second row, on the body's fourth line
    assert main(["--model-dir", table_model, str(rows)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"predict: {rows}: CSV row 2 (line 4 of the body) holds a value that is not a number: "
        "['6.7', 'x', '5.2', '2.3']")
    rows.write_text("5.1,3.5,1.4,0.2\n6.7,3.0\n")  # no header, no blank line: row and line agree
    assert main(["--model-dir", table_model, str(rows)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{rows}: CSV row 2 has 2 values; the model takes 4 (every "
                                                    "feature column in the training header's order, without the label)")
