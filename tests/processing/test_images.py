"""The image-tree path of PreprocessData: files as they are, split, sharded, manifested."""

from __future__ import annotations

import json
import re

import pytest
import tensorflow as tf

from processing.preprocess import main
from tests.processing.conftest import (
    MlTree,
    read_image_split,
    run_preprocess,
    shard_record_counts,
    write_image_tree,
)
from training_entry.input import records

CLASSES = {"cat": 20, "dog": 14, "zebra finch": 10}


@pytest.mark.parametrize("instances, per_host", [(1, 1), (2, 2)])
def test_each_split_gets_one_shard_per_rank_equal_within_one(ml, instances, per_host):
    write_image_tree(ml.raw_dir, CLASSES)
    assert main(["--instance-count", str(instances), "--processes-per-host", str(per_host)]) == 0
    for split in ("train", "validation", "test"):
        counts = shard_record_counts(ml.outputs[split])
        assert len(counts) == instances * per_host
        assert max(counts.values()) - min(counts.values()) <= 1
        assert ml.manifest(split).shards == counts


def test_records_hold_each_file_byte_for_byte_with_label_class_and_size(ml):
    written = write_image_tree(ml.raw_dir, CLASSES, kind="jpeg")
    assert main([]) == 0
    seen = [r for split in ("train", "validation", "test") for r in read_image_split(ml.outputs[split])]
    assert len(seen) == len(written)
    by_bytes = {data: path for path, data in written.items()}
    names = sorted(CLASSES)
    for record in seen:
        path = by_bytes[record["image"]]  # the record's bytes are exactly one file's bytes
        assert record["class_name"] == path.split("/")[0]
        assert record["label"] == names.index(record["class_name"])
        height, width = tf.io.decode_jpeg(record["image"]).shape[:2]
        assert (record["height"], record["width"]) == (height, width)
    assert {by_bytes[r["image"]] for r in seen} == set(written)


def test_a_large_jpeg_stays_its_size_in_the_shard(ml):
    """No decode and re-encode: a 200 KB file is a 200 KB record (plus a few dozen bytes)."""
    write_image_tree(ml.raw_dir, {"a": 3, "b": 3})
    noisy = tf.random.stateless_uniform([512, 512, 3], seed=[1, 2], maxval=256, dtype=tf.int32)
    big = tf.io.encode_jpeg(tf.cast(noisy, tf.uint8), quality=95).numpy()
    assert len(big) > 200_000
    (ml.raw_dir / "a" / "big.jpg").write_bytes(big)
    assert main([]) == 0
    found = [r for s in ("train", "validation", "test") for r in read_image_split(ml.outputs[s]) if r["image"] == big]
    assert len(found) == 1 and (found[0]["height"], found[0]["width"]) == (512, 512)
    total = sum(p.stat().st_size for s in ("train", "validation", "test") for p in ml.outputs[s].glob("*.tfrecord"))
    assert total < len(big) + 7 * 2_000  # the six small images and framing


def test_manifests_say_image_and_name_the_classes_in_label_order(ml):
    write_image_tree(ml.raw_dir, CLASSES)
    assert main([]) == 0
    for split in ("train", "validation", "test"):
        doc = json.loads((ml.outputs["manifest"] / f"{split}.json").read_text())
        assert doc["kind"] == "image"
        assert doc["class_names"] == ["cat", "dog", "zebra finch"]
        assert doc["num_classes"] == 3
        manifest = ml.manifest(split)
        assert manifest.kind == records.KIND_IMAGE and manifest.class_names == ("cat", "dog", "zebra finch")
    test = read_image_split(ml.outputs["test"])
    assert {r["class_name"] for r in test} == set(CLASSES)  # every class reaches every split


def test_split_sizes_and_order_are_stratified_and_seeded(tmp_path, monkeypatch):
    outputs = []
    for seed in ("1", "1", "2"):
        tree = MlTree(tmp_path / f"run{len(outputs)}")
        write_image_tree(tree.raw_dir, CLASSES)
        assert run_preprocess(tree, monkeypatch, "--seed", seed) == 0
        outputs.append(tree.output_files())
    assert outputs[0] == outputs[1]
    assert outputs[0] != outputs[2]


def test_hosts_write_disjoint_shards_whose_union_is_the_single_host_output(tmp_path, monkeypatch):
    single = MlTree(tmp_path / "single")
    write_image_tree(single.raw_dir, CLASSES)
    assert run_preprocess(single, monkeypatch, "--instance-count", "3") == 0
    union = {}
    for host in range(2):
        tree = MlTree(tmp_path / f"host{host}")
        write_image_tree(tree.raw_dir, CLASSES)
        tree.set_hosts(host, 2)
        assert run_preprocess(tree, monkeypatch, "--instance-count", "3") == 0
        files = tree.output_files()
        assert not set(files) & set(union)
        union.update(files)
    assert union == single.output_files()


def test_summary_counts_images_classes_and_decodes(ml, capsys):
    write_image_tree(ml.raw_dir, CLASSES)
    assert main(["--instance-count", "2"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("preprocess: 44 images in 3 classes (cat, dog, zebra finch) -> train ")
    assert "2 shards per split, host 1/1 decoded 44 image(s) in" in line


# --- Refusals: one line naming the file or class and the fix; nothing written ---------------
def truncated_jpeg(ml: MlTree) -> None:
    written = write_image_tree(ml.raw_dir, CLASSES, kind="jpeg")
    path = ml.raw_dir / "dog" / "dog-003.jpg"
    path.write_bytes(written["dog/dog-003.jpg"][:200])


def three_bad_images(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, CLASSES)
    for name in ("cat/cat-001.png", "dog/dog-002.png", "dog/dog-007.png"):
        (ml.raw_dir / name).write_bytes((ml.raw_dir / name).read_bytes()[:60])


def gif_named_png(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, CLASSES)
    (ml.raw_dir / "cat" / "cat-000.png").write_bytes(b"GIF89a" + b"\x00" * 40)


def empty_jpeg(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, CLASSES)
    (ml.raw_dir / "cat" / "empty.jpg").write_bytes(b"")


def text_in_a_class_folder(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, CLASSES)
    (ml.raw_dir / "dog" / "labels.txt").write_text("dog\n")


def empty_class(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, CLASSES)
    (ml.raw_dir / "bird").mkdir()
    (ml.raw_dir / "bird" / ".DS_Store").write_bytes(b"\x00")


def class_too_small(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, {**CLASSES, "owl": 2})


def one_class(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, {"cat": 20})


def fewer_images_than_shards(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, {"a": 10, "b": 10})  # 3 images each in validation and test


def csv_and_image_tree(ml: MlTree) -> None:
    write_image_tree(ml.raw_dir, CLASSES)
    ml.write_csv([[1.0], [2.0]], [0, 1], name="extra/data.csv")


def image_outside_a_class_folder(ml: MlTree) -> None:
    written = write_image_tree(ml.raw_dir, CLASSES)
    (ml.raw_dir / "stray.png").write_bytes(written["cat/cat-000.png"])


RAW = r".*/processing/input/data"
CASES = [
    (truncated_jpeg, [], rf"^{RAW}/dog/dog-003\.jpg does not decode as a JPEG \(.*\); replace or remove each one under {RAW}$"),
    (three_bad_images, [], rf"^{RAW}/cat/cat-001\.png does not decode as a PNG \(.*\); 2 more image\(s\) fail too \(dog/dog-002\.png, dog/dog-007\.png\); replace or remove each one"),
    (gif_named_png, [], rf"^{RAW}/cat/cat-000\.png is a GIF, not a JPEG or PNG; replace or remove each one"),
    (empty_jpeg, [], rf"^{RAW}/cat/empty\.jpg is an empty file, not a JPEG or PNG"),
    (text_in_a_class_folder, [], rf"^{RAW}: dog/labels\.txt is not a \.jpg/\.jpeg/\.png image but sits in the image tree \(1 such file\(s\)\); convert it to JPEG/PNG or move it out of InputDataUri$"),
    (empty_class, [], rf"^class folder {RAW}/bird holds no \.jpg/\.jpeg/\.png images; add images of 'bird' or remove the folder$"),
    (class_too_small, [], rf"^class 'owl' \({RAW}/owl\) has 2 image\(s\), too few to appear in every split \(train/validation/test\); each class needs at least 3: add images of 'owl' or remove the folder$"),
    (one_class, [], rf"^{RAW} has a single class folder \('cat'\); a classifier needs at least 2"),
    (fewer_images_than_shards, ["--instance-count", "2", "--processes-per-host", "2"], rf"^{RAW}: the (validation|test) split gets 3 images but 4 shards are needed \(--instance-count 2 x --processes-per-host 2\); use fewer training workers"),
    (csv_and_image_tree, [], rf"^{RAW}: InputDataUri mixes table data \(extra/data\.csv\) with 44 image\(s\) \(e\.g\. cat/cat-000\.png\)"),
    (image_outside_a_class_folder, [], rf"^{RAW}: image stray\.png is not in a class folder"),
]


@pytest.mark.parametrize("write, args, message", CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_image_trees_are_refused_with_one_line_and_nothing_written(ml, capsys, write, args, message):
    write(ml)
    assert main(args) == 1
    text = ml.message.read_text()
    assert "\n" not in text and len(text.encode()) <= 1024
    assert re.search(message, text), text
    assert capsys.readouterr().err.strip().endswith(f"preprocess: {text}")
    assert ml.leftovers() == []


def test_a_failure_while_writing_leaves_nothing(ml, monkeypatch):
    write_image_tree(ml.raw_dir, CLASSES)
    calls = []

    def fails_on_the_tenth(*args, **kwargs):
        calls.append(1)
        if len(calls) == 10:
            raise OSError(28, "No space left on device")
        return b""

    monkeypatch.setattr("training_entry.input.examples.serialize_image", fails_on_the_tenth)
    assert main([]) == 1
    assert "OSError: [Errno 28] No space left on device" in ml.message.read_text()
    assert ml.leftovers() == []


def test_threads_change_the_speed_not_the_sizes_or_the_failure_named(ml):
    from processing.images import check_images, list_image_tree

    write_image_tree(ml.raw_dir, CLASSES)
    tree = list_image_tree(str(ml.raw_dir))
    one, many = (check_images(tree, range(len(tree.paths)), workers=w) for w in (1, 3))
    assert (one == many).all() and set(map(tuple, one.tolist())) == {(12, 10), (9, 15)}
    for name in ("dog/dog-009.png", "cat/cat-004.png"):
        (ml.raw_dir / name).write_bytes(b"\x89PNG\r\n\x1a\n broken")
    for workers in (1, 3):
        with pytest.raises(Exception, match=r"cat/cat-004\.png does not decode as a PNG .*; 1 more image\(s\) fail too \(dog/dog-009\.png\)"):
            check_images(tree, range(len(tree.paths)), workers=workers)
