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
