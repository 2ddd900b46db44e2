"""``trainpipe init-weights``: the backbone file made in a subprocess (random weights here: no
network), uploaded to S3 (moto), and the --init-model-uri to build with printed."""

from __future__ import annotations

import hashlib
import re

import boto3

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
