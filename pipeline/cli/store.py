"""``trainpipe store``: put code and data where a definition's ``s3://`` URIs point, for
``trainpipe run --local``.

    trainpipe store cp SOURCE DEST [--recursive] [--workdir DIR] [--s3-endpoint URL | --aws-s3]
        SOURCE a local file or folder and DEST an s3:// URI, or the reverse to copy out of the
        store. As `aws s3 cp`: a DEST ending in / (local or s3://) is a folder, and a file keeps
        its name inside it. A folder (or an s3:// prefix) is copied whole, with or without
        --recursive. Identical objects are not written again.
    trainpipe store rm S3_URI [--recursive] [--workdir DIR] [--s3-endpoint URL | --aws-s3]
        Remove one object, or with --recursive every object under S3_URI taken as a folder;
        each is named as it goes. A prefix without --recursive is refused, as `aws s3 rm` does.
    trainpipe store ls [S3_URI] [--workdir DIR] [--s3-endpoint URL | --aws-s3]
        The objects under S3_URI (a key prefix), with sizes; without it, the local store's
        buckets.
    trainpipe store path [--workdir DIR]
        Where the local store is: ``s3://bucket/key`` is the file ``<DIR>/store/bucket/key``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipeline.cli.local.commands import absolute_path, make_storage, storage_errors_are_user_errors
from pipeline.errors import UserError
from pipeline.local.store.storage import LocalStorage, S3Uri, join_uri
from pipeline.workdir import HELP as WORKDIR_HELP


def register(subparsers) -> None:
    store = subparsers.add_parser(
        "store", help="copy files into (or out of) the s3:// store `run --local` reads, list it",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = store.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(parser):
        parser.add_argument("--workdir", type=absolute_path,
                            help="the local store is <DIR>/store; DIR is " + WORKDIR_HELP)
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--s3-endpoint", metavar="URL", help="an S3-compatible server instead")
        where.add_argument("--aws-s3", action="store_true", help="real S3 instead")
        parser.add_argument("--region", default="us-east-1")

    cp = actions.add_parser("cp", help="copy a local file or folder to an s3:// URI, or back")
    cp.add_argument("source")
    cp.add_argument("dest")
    cp.add_argument("--recursive", "-r", action="store_true",
                    help="accepted for `aws s3 cp` habits: a folder is always copied whole")
    common(cp)
    cp.set_defaults(func=copy)
    rm = actions.add_parser("rm", help="remove an object, or every object under a prefix")
    rm.add_argument("uri", metavar="S3_URI")
    rm.add_argument("--recursive", "-r", action="store_true",
                    help="remove every object under S3_URI (taken as a folder)")
    common(rm)
    rm.set_defaults(func=remove)
    ls = actions.add_parser("ls", help="list the objects under an s3:// URI")
    ls.add_argument("uri", nargs="?")
    common(ls)
    ls.set_defaults(func=list_objects)
    path = actions.add_parser("path", help="print where the local store is")
    path.add_argument("--workdir", type=absolute_path, help=WORKDIR_HELP)
    path.set_defaults(func=print_path)


def copy(args: argparse.Namespace) -> int:
    storage = make_storage(args, args.region)
    source, dest = args.source, args.dest
    with storage_errors_are_user_errors(storage):
        if dest.startswith("s3://") and not source.startswith("s3://"):
            local = Path(source.removeprefix("file://"))
            S3Uri.parse(dest, "DEST")
            if local.is_dir():
                objects, written = storage.put_tree_if_changed(local, dest.rstrip("/") + "/")
                print(f"{local}/ -> {dest.rstrip('/')}/: {len(objects)} object(s)"
                      + ("" if written == len(objects) else f", {len(objects) - written} unchanged"))
            elif local.is_file():
                uri = join_uri(dest, local.name) if dest.endswith("/") else dest
                changed = storage.put_file_if_changed(local, uri)
                print(f"{local} -> {uri}" + ("" if changed else " (unchanged)"))
            else:
                raise UserError(f"store cp: {source}: no such file or directory")
        elif source.startswith("s3://") and not dest.startswith("s3://"):
            S3Uri.parse(source, "SOURCE")
            local = Path(dest)
            if storage.exists(source) and not source.endswith("/"):
                # As `aws s3 cp`: DEST/ (or an existing folder) is a folder, created if need be.
                into_folder = dest.endswith(("/", os.sep)) or local.is_dir()
                target = local / source.rsplit("/", 1)[1] if into_folder else local
                storage.get_file(source, target)
                print(f"{source} -> {target}")
            else:
                got = storage.get_tree(source.rstrip("/") + "/", local)
                if not got:
                    raise UserError(f"store cp: no objects under {source} in the {storage.describe()}")
                print(f"{source.rstrip('/')}/ -> {local}/: {len(got)} file(s)")
        else:
            raise UserError("store cp: one of SOURCE and DEST must be an s3:// URI and the other "
                            "a local path (e.g. trainpipe store cp data/ s3://my-bucket/raw/)")
    return 0


def remove(args: argparse.Namespace) -> int:
    """``store rm``: only objects the store lists are removed; LocalStorage keeps every key
    inside its root (``contained``), so nothing outside the store can go."""
    storage = make_storage(args, args.region)
    uri = args.uri
    key = S3Uri.parse(uri, "store rm").key
    folder = uri.rstrip("/") + "/"
    with storage_errors_are_user_errors(storage):
        is_object = bool(key) and not key.endswith("/") and storage.exists(uri)
        under = storage.list(folder)
        if not args.recursive:
            if not is_object and under:
                raise UserError(f"store rm: {folder} is a prefix holding {len(under)} object(s); "
                                f"add --recursive to remove them all (trainpipe store rm --recursive {folder})")
            targets = [uri] if is_object else []
        else:
            targets = ([uri] if is_object else []) + under
        if not targets:
            raise UserError(f"store rm: no object {uri} and none under {folder} in the "
                            f"{storage.describe()}; see what is there with `trainpipe store ls`")
        for target in targets:  # every one checked before any is removed
            where = storage.outside_store(target)
            if where is not None:
                raise UserError(f"store rm: refusing to remove {target}: it is {where}, outside the "
                                f"{storage.describe()} (a folder on its way is a link out of the store); "
                                "remove it where it is, or remove the link")
        for target in targets:
            storage.delete(target)
            print(f"removed {target}")
    if len(targets) > 1:
        print(f"{len(targets)} object(s) removed from the {storage.describe()}")
    return 0


def list_objects(args: argparse.Namespace) -> int:
    storage = make_storage(args, args.region)
    if not args.uri:
        if not isinstance(storage, LocalStorage):
            raise UserError("store ls: give an s3://bucket/prefix to list")
        root = storage.root
        buckets = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        for bucket in buckets:
            print(f"s3://{bucket}/")
        if not buckets:
            print(f"the local store {root} is empty")
        return 0
    S3Uri.parse(args.uri, "store ls")
    with storage_errors_are_user_errors(storage):
        uris = storage.list(args.uri)
        for uri in uris:
            local = storage.local_path(uri)
            size = local.stat().st_size if local is not None and local.exists() else None
            print(f"{'' if size is None else size:>12}  {uri}")
    if not uris:
        print(f"no objects under {args.uri} in the {storage.describe()}")
    return 0


def print_path(args: argparse.Namespace) -> int:
    print(Path(args.workdir) / "store")
    return 0
