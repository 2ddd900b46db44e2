"""``trainpipe init-weights``: the backbone file made in a subprocess (random weights here: no
network), uploaded to S3 (moto), and the --init-model-uri to build with printed."""

from __future__ import annotations

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

    assert main(["init-weights", "--architecture", "resnet50", "--image-size", "16", "--weights", "random",
                 "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--image-size 16: must be 32..1024" in err and len(err.strip().splitlines()) == 1
