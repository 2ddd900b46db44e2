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
