"""The object store contract, on a local directory and through boto3 (moto on 127.0.0.1)."""

from __future__ import annotations

import pytest

from pipeline.local.store.storage import (
    LocalStorage,
    S3Uri,
    S3UriError,
    StorageError,
    content_digest,
    local_files,
    md5_of_bytes,
)
from tests.pipeline.local.helpers import BUCKET

ROOT = f"s3://{BUCKET}"


def test_put_get_list_exists(storage, tmp_path, no_network):
    storage.put_bytes(b"a", f"{ROOT}/data/train/a.txt")
    storage.put_bytes(b"b", f"{ROOT}/data/train/sub/b.txt")
    storage.put_bytes(b"c", f"{ROOT}/data/train2/c.txt")
    source = tmp_path / "local.bin"
    source.write_bytes(b"from a file")
    storage.put_file(source, f"{ROOT}/data/file.bin")

    # S3 semantics: a prefix is a string prefix of keys, not a folder.
    assert storage.list(f"{ROOT}/data/train") == [
        f"{ROOT}/data/train/a.txt", f"{ROOT}/data/train/sub/b.txt", f"{ROOT}/data/train2/c.txt"]
    assert storage.list(f"{ROOT}/data/train/") == [f"{ROOT}/data/train/a.txt", f"{ROOT}/data/train/sub/b.txt"]
    assert storage.list(f"{ROOT}/nothing/") == []
    assert storage.exists(f"{ROOT}/data/file.bin") and not storage.exists(f"{ROOT}/data/none")
    target = tmp_path / "out" / "got.bin"
    storage.get_file(f"{ROOT}/data/file.bin", target)
    assert target.read_bytes() == b"from a file"
    assert storage.read_bytes(f"{ROOT}/data/train/a.txt") == b"a"


def test_identical_objects_are_not_uploaded_again(storage):
    uri = f"{ROOT}/code/bundle.tar.gz"
    assert storage.md5(uri) is None
    assert storage.put_bytes_if_changed(b"v1", uri) is True
    assert storage.md5(uri) == md5_of_bytes(b"v1")
    assert storage.put_bytes_if_changed(b"v1", uri) is False
    assert storage.put_bytes_if_changed(b"v2", uri) is True
    assert storage.read_bytes(uri) == b"v2"


def test_trees_round_trip_and_skip_symlinks(storage, tmp_path):
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "x.txt").write_text("x")
    (tree / "y.txt").write_text("y")
    (tree / "link.txt").symlink_to(tree / "y.txt")  # SageMaker: symlinks are not followed
    uploaded = storage.put_tree(tree, f"{ROOT}/ckpt/run-1")
    assert sorted(uploaded) == [f"{ROOT}/ckpt/run-1/a/x.txt", f"{ROOT}/ckpt/run-1/y.txt"]
    back = tmp_path / "back"
    storage.get_tree(f"{ROOT}/ckpt/run-1", back)
    assert (back / "a" / "x.txt").read_text() == "x" and (back / "y.txt").read_text() == "y"
    assert not (back / "link.txt").exists()


def test_trees_are_written_again_only_where_they_changed_and_objects_delete(storage, tmp_path):
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "x.txt").write_text("x")
    (tree / "y.txt").write_text("y")
    prefix = f"{ROOT}/uploads/tree/"
    assert storage.put_tree_if_changed(tree, prefix) == ([prefix + "a/x.txt", prefix + "y.txt"], 2)
    (tree / "y.txt").write_text("y2")
    assert storage.put_tree_if_changed(tree, prefix)[1] == 1
    storage.delete(prefix + "a/x.txt")
    storage.delete(prefix + "a/x.txt")  # absent: no error, as S3's DeleteObject
    assert storage.list(prefix) == [prefix + "y.txt"]


def test_the_content_digest_follows_names_and_bytes_not_place(tmp_path):
    one, two = tmp_path / "one" / "data", tmp_path / "two" / "data"
    for folder in (one, two):
        (folder / "ants").mkdir(parents=True)
        (folder / "ants" / "a.jpg").write_bytes(b"a")
    assert content_digest(one) == content_digest(two) and len(content_digest(one)) == 16
    (two / "ants" / "a.jpg").rename(two / "ants" / "b.jpg")
    assert content_digest(one) != content_digest(two)
    before = content_digest(one)
    (one / "ants" / "link.jpg").symlink_to(one / "ants" / "a.jpg")  # not uploaded, not counted
    assert content_digest(one) == before
    assert local_files(one) == [one / "ants" / "a.jpg"]


def test_local_store_layout_and_atomic_names(tmp_path):
    storage = LocalStorage(tmp_path)
    storage.put_bytes(b"z", f"{ROOT}/k/z.bin")
    assert (tmp_path / BUCKET / "k" / "z.bin").read_bytes() == b"z"
    assert storage.local_path(f"{ROOT}/k/z.bin") == tmp_path / BUCKET / "k" / "z.bin"
    assert not list(tmp_path.rglob("*partial*"))


@pytest.mark.parametrize(("uri", "message"), [
    ("bucket/key", "is not an s3:// URI"),
    ("https://bucket/key", "is not an s3:// URI"),
    ("s3://", "is not a valid bucket name"),
    ("s3://Bad_Bucket/key", "is not a valid bucket name"),
    ("s3://b/key", "is not a valid bucket name"),
    ("s3://bucket/a/../b", "'..' is not allowed"),
])
def test_malformed_uris_are_one_clear_line(uri, message):
    with pytest.raises(S3UriError, match=message) as error:
        S3Uri.parse(uri, "InputDataUri")
    assert str(error.value).startswith(f"InputDataUri {uri!r}")
    assert "\n" not in str(error.value)


def test_uri_helpers():
    uri = S3Uri.parse("s3://bucket/a/b")
    assert (uri.bucket, uri.key) == ("bucket", "a/b")
    assert str(uri.child("c.txt")) == "s3://bucket/a/b/c.txt"


@pytest.mark.parametrize("key", ["/{outside}/escaped", "a//b", "a/./b", "./b"])
def test_keys_with_empty_or_dot_segments_are_refused_and_nothing_leaves_the_store(
        storage, tmp_path, key):
    outside = tmp_path / "outside"
    outside.mkdir()
    uri = f"{ROOT}/" + key.format(outside=str(outside).lstrip("/"))
    for call in (lambda: storage.put_bytes(b"x", uri), lambda: storage.exists(uri)):
        with pytest.raises(S3UriError, match="empty or '.' segment in the key"):
            call()
    assert list(outside.iterdir()) == []


def test_a_checkpoint_restore_never_writes_outside_its_directory(s3_storage, tmp_path):
    # S3 itself takes any key: objects named "ckpt//<abs path>" or "ckpt/a/../../x" must not
    # turn into files outside the checkpoint directory.
    outside = tmp_path / "outside"
    outside.mkdir()
    s3_storage.put_bytes(b"ok", f"{ROOT}/ckpt/good.txt")
    for bad in (f"ckpt/{outside}/abs.txt", "ckpt/a/../../up.txt"):
        s3_storage.client.put_object(Bucket=BUCKET, Key=bad, Body=b"evil")
        restore = tmp_path / "restore" / "checkpoints"
        with pytest.raises(StorageError, match="outside"):
            s3_storage.get_tree(f"{ROOT}/ckpt", restore)
        s3_storage.client.delete_object(Bucket=BUCKET, Key=bad)
    assert list(outside.iterdir()) == [] and not (tmp_path / "restore" / "up.txt").exists()
    assert [p.name for p in s3_storage.get_tree(f"{ROOT}/ckpt", tmp_path / "again")] == ["good.txt"]
