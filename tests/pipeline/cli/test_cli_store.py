"""``trainpipe store`` (pipeline/cli/store.py) and the SDK session whose uploads land in
the store (pipeline/local/store/session.py)."""

from __future__ import annotations

import boto3
import pytest

from pipeline.cli.main import main
from pipeline.local.store.storage import LocalStorage
from tests.moto_aws import moto_url  # noqa: F401  (a session fixture: one moto server)


def test_cp_a_folder_and_a_file_then_ls_and_copy_back(tmp_path, capsys):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.csv").write_text("a\n")
    (data / "sub" / "b.csv").write_text("b\n")
    work = ["--workdir", str(tmp_path / "w")]
    assert main(["store", "cp", str(data), "s3://my-bucket/raw/", *work]) == 0
    assert main(["store", "cp", str(data / "a.csv"), "s3://my-bucket/one/", *work]) == 0
    assert main(["store", "cp", f"file://{data / 'a.csv'}", "s3://my-bucket/one/a.csv", *work]) == 0
    assert "(unchanged)" in capsys.readouterr().out
    store = LocalStorage(tmp_path / "w" / "store")
    assert store.list("s3://my-bucket/") == ["s3://my-bucket/one/a.csv", "s3://my-bucket/raw/a.csv",
                                             "s3://my-bucket/raw/sub/b.csv"]
    # The layout is documented: s3://bucket/key is <workdir>/store/bucket/key.
    assert (tmp_path / "w" / "store" / "my-bucket" / "raw" / "sub" / "b.csv").read_text() == "b\n"
    assert main(["store", "ls", "s3://my-bucket/raw", *work]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in listed] == ["s3://my-bucket/raw/a.csv", "s3://my-bucket/raw/sub/b.csv"]
    assert main(["store", "ls", *work]) == 0
    assert capsys.readouterr().out.strip() == "s3://my-bucket/"
    assert main(["store", "cp", "s3://my-bucket/raw/", str(tmp_path / "back"), *work]) == 0
    assert (tmp_path / "back" / "sub" / "b.csv").read_text() == "b\n"
    assert main(["store", "path", *work]) == 0
    assert capsys.readouterr().out.strip().endswith("/w/store")


def test_cp_refuses_what_it_cannot_copy_in_one_line(tmp_path, capsys):
    work = ["--workdir", str(tmp_path / "w")]
    assert main(["store", "cp", str(tmp_path / "absent"), "s3://my-bucket/x/", *work]) == 2
    assert "store cp: " in capsys.readouterr().err
    assert main(["store", "cp", "a", "b", *work]) == 2
    assert "one of SOURCE and DEST must be an s3:// URI" in capsys.readouterr().err
    assert main(["store", "cp", str(tmp_path), "s3://Bad_Bucket/x", *work]) == 2
    assert "not a valid bucket name" in capsys.readouterr().err


def test_cp_to_a_destination_ending_in_a_slash_copies_into_that_folder(tmp_path, capsys):
    work = ["--workdir", str(tmp_path / "w")]
    (tmp_path / "model.tar.gz").write_bytes(b"model")
    assert main(["store", "cp", str(tmp_path / "model.tar.gz"), "s3://my-bucket/run/", *work]) == 0
    # As `aws s3 cp`: out/ is a folder (made if need be), and the file keeps its name in it.
    assert main(["store", "cp", "s3://my-bucket/run/model.tar.gz", f"{tmp_path / 'out'}/", *work]) == 0
    assert (tmp_path / "out" / "model.tar.gz").read_bytes() == b"model"
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"s3://my-bucket/run/model.tar.gz -> {tmp_path / 'out' / 'model.tar.gz'}")
    # An existing folder without the slash is a folder too; any other name is the file's.
    assert main(["store", "cp", "s3://my-bucket/run/model.tar.gz", str(tmp_path / "out"), *work]) == 0
    assert main(["store", "cp", "s3://my-bucket/run/model.tar.gz", str(tmp_path / "renamed.tgz"), *work]) == 0
    assert (tmp_path / "renamed.tgz").read_bytes() == b"model"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.tar.gz"]


def test_cp_of_a_folder_again_writes_only_what_changed(tmp_path, capsys):
    work = ["--workdir", str(tmp_path / "w")]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("a")
    (tmp_path / "d" / "b.txt").write_text("b")
    assert main(["store", "cp", str(tmp_path / "d"), "s3://my-bucket/d", "--recursive", *work]) == 0
    (tmp_path / "d" / "b.txt").write_text("b2")
    assert main(["store", "cp", str(tmp_path / "d"), "s3://my-bucket/d", *work]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{tmp_path / 'd'}/ -> s3://my-bucket/d/: 2 object(s)",
                                                    f"{tmp_path / 'd'}/ -> s3://my-bucket/d/: 2 object(s), 1 unchanged"]


def test_rm_removes_an_object_or_with_recursive_a_prefix_and_names_each(tmp_path, capsys):
    work = ["--workdir", str(tmp_path / "w")]
    data = tmp_path / "data"
    (data / "ants").mkdir(parents=True)
    (data / "ants" / "a.jpg").write_bytes(b"a")
    (data / "ants" / "b.jpg").write_bytes(b"b")
    (data / "t.csv").write_text("x\n")
    assert main(["store", "cp", str(data), "s3://my-bucket/raw/", *work]) == 0
    assert main(["store", "cp", str(data / "t.csv"), "s3://my-bucket/rawer/", *work]) == 0
    capsys.readouterr()
    store = LocalStorage(tmp_path / "w" / "store")
    assert main(["store", "rm", "s3://my-bucket/raw/t.csv", *work]) == 0
    assert capsys.readouterr().out == "removed s3://my-bucket/raw/t.csv\n"
    # A prefix without --recursive: refused, as `aws s3 rm` does, and nothing removed.
    assert main(["store", "rm", "s3://my-bucket/raw", *work]) == 2
    assert capsys.readouterr().err.strip() == (
        "trainpipe store: error: store rm: s3://my-bucket/raw/ is a prefix holding 2 object(s); add "
        "--recursive to remove them all (trainpipe store rm --recursive s3://my-bucket/raw/)")
    assert len(store.list("s3://my-bucket/raw/")) == 2
    # --recursive takes the prefix as a folder: raw/ goes, rawer/ (the same string prefix) stays.
    assert main(["store", "rm", "s3://my-bucket/raw", "--recursive", *work]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "removed s3://my-bucket/raw/ants/a.jpg", "removed s3://my-bucket/raw/ants/b.jpg",
        f"2 object(s) removed from the local object store {tmp_path / 'w' / 'store'}"]
    assert store.list("s3://my-bucket/") == ["s3://my-bucket/rawer/t.csv"]
    assert not (tmp_path / "w" / "store" / "my-bucket" / "raw").exists()  # no empty folders left
    assert (data / "ants" / "a.jpg").exists()  # the local source is not the store's


def test_rm_refuses_what_is_not_there_and_what_is_not_in_the_store(tmp_path, capsys):
    work = ["--workdir", str(tmp_path / "w")]
    assert main(["store", "rm", "s3://my-bucket/nothing", "--recursive", *work]) == 2
    assert capsys.readouterr().err.strip() == (
        "trainpipe store: error: store rm: no object s3://my-bucket/nothing and none under "
        f"s3://my-bucket/nothing/ in the local object store {tmp_path / 'w' / 'store'}; see what is "
        "there with `trainpipe store ls`")
    (tmp_path / "w" / "outside").mkdir(parents=True)
    (tmp_path / "w" / "outside" / "keep").write_text("k")
    assert main(["store", "rm", "s3://my-bucket/../../outside/keep", *work]) == 2
    assert "'..' is not allowed in a key" in capsys.readouterr().err
    assert main(["store", "rm", str(tmp_path / "w" / "outside" / "keep"), *work]) == 2
    assert "is not an s3:// URI" in capsys.readouterr().err
    assert (tmp_path / "w" / "outside" / "keep").exists()


def test_rm_recursive_never_removes_through_a_linked_folder_out_of_the_store(tmp_path, capsys):
    """A bucket folder (or a folder in a key) that is a link to elsewhere: rm refuses before
    removing anything, and the files the link reaches stay."""
    work = ["--workdir", str(tmp_path / "w")]
    outside = tmp_path / "elsewhere"
    (outside / "raw").mkdir(parents=True)
    (outside / "raw" / "keep.txt").write_text("k")
    store_root = tmp_path / "w" / "store"
    store_root.mkdir(parents=True)
    (store_root / "linked-bucket").symlink_to(outside, target_is_directory=True)
    assert main(["store", "rm", "--recursive", "s3://linked-bucket/raw/", *work]) == 2
    assert capsys.readouterr().err.strip() == (
        "trainpipe store: error: store rm: refusing to remove s3://linked-bucket/raw/keep.txt: it is "
        f"{outside / 'raw' / 'keep.txt'}, outside the local object store {store_root} (a folder on its "
        "way is a link out of the store); remove it where it is, or remove the link")
    assert (outside / "raw" / "keep.txt").read_text() == "k"


def test_cp_to_an_s3_endpoint_needs_no_credentials(tmp_path, capsys, monkeypatch, moto_url):  # noqa: F811
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x",
                 aws_secret_access_key="x").create_bucket(Bucket="no-creds")
    (tmp_path / "f.txt").write_text("hello")
    assert main(["store", "cp", str(tmp_path / "f.txt"), "s3://no-creds/f.txt", "--s3-endpoint", moto_url]) == 0
    captured = capsys.readouterr()
    assert "no AWS credentials configured; using dummy ones" in captured.err
    assert main(["store", "ls", "s3://no-creds/", "--s3-endpoint", moto_url]) == 0
    assert "s3://no-creds/f.txt" in capsys.readouterr().out
    assert main(["store", "rm", "s3://no-creds/f.txt", "--s3-endpoint", moto_url]) == 0
    assert capsys.readouterr().out == "removed s3://no-creds/f.txt\n"
    assert main(["store", "rm", "s3://no-creds/f.txt", "--s3-endpoint", moto_url]) == 2


def test_the_sdk_s_uploads_land_in_the_local_store(tmp_path):
    from sagemaker.s3 import S3Uploader

    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=tmp_path, bucket="my-bucket")
    (tmp_path / "data.csv").write_text("x\n")
    uri = S3Uploader.upload(str(tmp_path / "data.csv"), "s3://my-bucket/input", sagemaker_session=session)
    assert uri == "s3://my-bucket/input/data.csv"
    assert (tmp_path / "store" / "my-bucket" / "input" / "data.csv").read_text() == "x\n"
    assert session.default_bucket() == "my-bucket"
    session.upload_string_as_file_body("body", "my-bucket", "k/v.txt")
    assert (tmp_path / "store" / "my-bucket" / "k" / "v.txt").read_text() == "body"


def test_the_session_keeps_keys_inside_the_store(tmp_path):
    from pipeline.local.store.session import LocalStoreSession

    session = LocalStoreSession(workdir=tmp_path, bucket="my-bucket")
    with pytest.raises(Exception, match="outside|escape|\\.\\."):
        session.upload_string_as_file_body("x", "my-bucket", "../x")
