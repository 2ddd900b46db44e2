"""``-p`` values of s3:// parameters that name local files or folders: found, checked as the
job would check them, and copied into the store (``trainpipe run --local``)."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.store.storage import Storage, content_digest, join_uri, local_files


def find_local_data(overrides: dict, settings) -> dict[str, tuple[Path, str]]:
    """-p values of s3:// parameters that name a local file or folder (a path or a file://
    URI) are swapped in ``overrides`` for the store prefix they will be copied to; returns
    {name: (path, uri)}. Nothing is written here: the copy waits until every value is checked."""
    from pipeline.definition import parameters as P
    from pipeline.local.dag.preflight import local_path_of

    found = {}
    for name in P.S3_URI_PARAMETERS:
        value = overrides.get(name)
        path = local_path_of(value)
        if path is None:
            continue
        if not path.exists():
            raise UserError(f"-p {name}={value}: no such file or directory; give an s3:// URI, "
                            "or a local file or folder to copy into the store")
        if not local_files(path):
            raise UserError(f"-p {name}={value}: the folder holds no files (symbolic links are "
                            "not followed); give the folder that holds the data")
        if name == P.INPUT_DATA_URI:
            check_local_tree(name, value, path, str(overrides.get(P.LABEL_COLUMN) or P.BY_NAME[P.LABEL_COLUMN].default))
        label = re.sub(r"[^A-Za-z0-9._-]+", "-", path.resolve().name).strip("-.") or "data"
        uri = P.local_upload_uri(settings.bucket, settings.prefix, label, content_digest(path))
        overrides[name] = uri
        found[name] = (path, uri)
    return found


def check_local_tree(name: str, value: str, path: Path, label_column: str) -> None:
    """The listing check the store's copy would get (``processing.contract.data_kind``: a
    table, or an image tree with nothing else in it), and every CSV's header has the label
    column, on the local files before anything is copied: a stray GIF is refused before 398
    photos are written to the store, and a missing LabelColumn names the user's file, not the
    job's ``/opt/ml/...`` copy of it."""
    from processing.contract import DataKindError, data_kind
    from processing.rawdata import DataError, label_index, read_header

    files = local_files(path)
    try:
        data_kind([p.relative_to(path).as_posix() for p in files] if path.is_dir() else [path.name])
    except DataKindError as error:
        raise UserError(f"-p {name}={value}: {error}") from None
    for table in (f for f in files if f.suffix.lower() == ".csv"):
        try:
            label_index(str(table), read_header(str(table)), label_column)
        except DataError as error:
            raise UserError(f"-p {name}={value}: {error}") from None


def copy_local_data(storage: Storage, found: dict[str, tuple[Path, str]], say) -> None:
    """Copy what ``find_local_data`` found; one line each says where it is."""
    for name, (path, uri) in found.items():
        shown = f"{path}/" if path.is_dir() else str(path)
        if path.is_dir():
            objects, written = storage.put_tree_if_changed(path, uri)
            count = len(objects)
        else:
            count, written = 1, int(storage.put_file_if_changed(path, join_uri(uri, path.name)))
        if written:
            say(f"-p {name}: {shown} copied to {uri} ({written} of {count} object(s) written)")
        else:
            say(f"-p {name}: {shown} is already in the store at {uri} ({count} object(s))")
