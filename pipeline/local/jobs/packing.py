"""A job's folders to and from archives: the code's sourcedir.tar.gz unpacked, the model and
output folders packed (with every link checked before anything is written)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from pipeline.local.jobs.failures import CLIENT_ERROR, JobFailure
from training_entry import archives


def extract_sourcedir(archive: Path, target: Path) -> None:
    """SageMaker: sourcedir.tar.gz is unpacked into /opt/ml/code (the one safe extractor)."""
    try:
        archives.extract(str(archive), str(target))
    except archives.UnsafeArchiveError as error:
        raise JobFailure(str(error), CLIENT_ERROR) from None
    except (tarfile.TarError, EOFError, OSError) as error:
        raise JobFailure(f"sagemaker_submit_directory {archive}: not a readable tar.gz "
                         f"({error})", CLIENT_ERROR) from None


def pack_directory(directory: Path, archive: Path, label: str = "model") -> None:
    """``directory`` as a tar.gz, a link inside it stored as what it points to (the extractor
    that evaluation and the init channel use refuses links). This runs in the runner, outside
    the job's namespace: a link out of the folder would read the runner's own files (the
    owner's ~/.ssh), so every link is checked before anything is written."""
    members = list(_members(Path(directory), Path(directory).resolve(), label, ()))
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path, name in members:
            tar.add(path, arcname=name, recursive=False)


def _members(folder: Path, root: Path, label: str, chain: tuple[Path, ...], prefix: str = ""):
    """(the file or folder to read, its name in the archive), depth first, links resolved."""
    for entry in sorted(folder.iterdir()):
        name, real = prefix + entry.name, entry
        if entry.is_symlink():
            real = entry.resolve()
            where = os.readlink(entry)
            if not real.exists():
                raise JobFailure(f"{label}/{name} is a link to {where}, which does not exist; remove it "
                                 "or copy the file into the folder", CLIENT_ERROR)
            if not real.is_relative_to(root):
                raise JobFailure(f"{label}/{name} is a link to {where}, outside the folder; the local runner "
                                 "packs only what is in it (SageMaker's container cannot reach this "
                                 "machine's files): copy the file into the folder instead of linking it",
                                 CLIENT_ERROR)
        yield real, name
        if real.is_dir():
            if real.resolve() in chain or real.resolve() == root:
                raise JobFailure(f"{label}/{name} is a link to {os.readlink(entry)}, a folder that holds it: "
                                 "packing it would never end; remove the link", CLIENT_ERROR)
            yield from _members(real, root, label, (*chain, real.resolve()), name + "/")
