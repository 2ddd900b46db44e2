"""What upsert puts in the artifact bucket before the pipeline can run: the code bundles and,
when the pipeline reads the default InputDataUri (or the default image data URI) and nothing
is there yet, the default data (the digits CSV, or the digits as a PNG tree).

Bundle keys contain the hash of their content (``bundles.py``), so an object already under
its key is the same code: only missing objects are uploaded. Uploads are encrypted with the
settings' KMS key when there is one (the bucket's default encryption covers the rest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.data.default import DIGITS_FILENAME, digits_csv, digits_images
from pipeline.definition import parameters as P
from pipeline.definition.bundles import Bundle, all_bundles
from pipeline.errors import UserError
from pipeline.settings import Settings


@dataclass(frozen=True)
class Upload:
    key: str
    body_factory: Callable[[], bytes]
    what: str  # for the plan printed before anything is written

    def body(self) -> bytes:
        return self.body_factory()


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise UserError(f"{uri!r} is not an s3:// URI")
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def _existing(s3, bucket: str, prefix: str) -> dict[str, int]:
    """key -> size of every object under ``prefix``."""
    found: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            found[item["Key"]] = item["Size"]
    return found


def bundle_uploads(
    s3, settings: Settings, bundles: dict[str, Bundle] | None = None, framework: str | None = None
) -> tuple[list[Upload], list[str]]:
    """(objects to upload, names of bundles already complete in the bucket); ``framework``: the
    definition's (``-p Framework``), whose bundles it names."""
    uploads, unchanged = [], []
    chosen = bundles or (all_bundles(settings.model_file, settings.tracking_uri, framework) if framework
                         else all_bundles(settings.model_file, settings.tracking_uri))
    for name, bundle in chosen.items():
        key_prefix = bundle.key_prefix(settings.prefix)
        existing = _existing(s3, settings.bucket, key_prefix + "/")
        objects = bundle.objects()
        # Same key means same content; a size check also catches a torn earlier upload.
        missing = {
            rel: body for rel, body in objects.items()
            if existing.get(f"{key_prefix}/{rel}") != len(body)
        }
        if not missing:
            unchanged.append(name)
        for rel, body in sorted(missing.items()):
            uploads.append(
                Upload(f"{key_prefix}/{rel}", (lambda b=body: b), f"code bundle {name}")
            )
    return uploads, unchanged


def default_data_uploads(s3, settings: Settings, input_data_uri: str) -> list[Upload]:
    """The digits CSV (or PNG tree), if the pipeline reads the default InputDataUri (or the
    default image data URI) and nothing is there yet."""
    csv_uri = P.default_input_data_uri(settings.bucket, settings.prefix)
    images_uri = P.default_image_data_uri(settings.bucket, settings.prefix)
    if input_data_uri not in (csv_uri, images_uri):
        return []
    bucket, prefix = split_s3_uri(input_data_uri)
    if bucket != settings.bucket or _existing(s3, bucket, prefix):
        return []
    if input_data_uri == csv_uri:
        return [Upload(prefix + DIGITS_FILENAME, lambda: _needs_sklearn(digits_csv),
                       "default data (scikit-learn digits)")]
    # The keys depend on the labels: the tree is made now, at plan time (1,797 small PNGs).
    return [
        Upload(prefix + key, (lambda b=body: b), "default image data (scikit-learn digits as PNGs)")
        for key, body in sorted(_needs_sklearn(digits_images).items())
    ]


def _needs_sklearn(make):
    try:
        return make()
    except ImportError as error:
        raise UserError(
            f"the default data needs scikit-learn ({error}): install trainpipe[local], or "
            f"upload your own data and pass -p {P.INPUT_DATA_URI}=s3://..."
        ) from None


def put(s3, settings: Settings, upload: Upload) -> None:
    extra = {}
    if settings.kms_key_id:
        extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": settings.kms_key_id}
    s3.put_object(Bucket=settings.bucket, Key=upload.key, Body=upload.body(), **extra)
