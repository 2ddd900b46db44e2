"""Files only their owner may read: the local runner's records hold a request's Environment
and hyperparameters, which may carry a password or a key (``request.json``,
``description.json``, ``definition.json``, ``execution.json``)."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def write_private(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` (whole, through a rename) readable by this user only: the
    file never exists under the umask's mode, even for an instant."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(partial, path)


def private_dir(path: Path | str) -> Path:
    """``path`` made (with its parents) and set to this user only."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR)
    return path
