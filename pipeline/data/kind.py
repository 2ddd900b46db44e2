"""Before any job starts: what InputDataUri holds (a table or an image tree), and whether
ModelArchitecture fits it. ``run --local`` lists the local store (or S3), ``start`` lists S3
with boto3; both through ``pipeline.local.store.storage``'s ``Storage.list``."""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.definition import parameters as P
from pipeline.local.store.storage import Storage
from processing.contract import DataKindError, data_kind


def relative_keys(storage: Storage, data_uri: str) -> list[str]:
    prefix = data_uri if data_uri.endswith("/") else data_uri + "/"
    keys = [uri[len(prefix):] for uri in storage.list(prefix)]
    if not keys and not data_uri.endswith("/") and storage.exists(data_uri):
        # SageMaker: an S3Prefix input may name one object (s3://bucket/data/digits.csv), which
        # the processing job receives under its own name.
        keys = [data_uri.rpartition("/")[2]]
    return keys


def check_input_data(storage: Storage, values: Mapping[str, object], has_model_file: bool) -> str:
    """The data's kind (``records.KIND_*``); ParameterError (one line) for data that is no
    table and no image tree, or an architecture that does not fit it."""
    data_uri = str(values[P.INPUT_DATA_URI])
    try:
        kind = data_kind(relative_keys(storage, data_uri))
    except DataKindError as error:
        raise P.ParameterError(f"{P.INPUT_DATA_URI}={data_uri}: {error}") from None
    P.check_architecture(values, kind, has_model_file)
    return kind
