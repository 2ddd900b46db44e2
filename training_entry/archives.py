"""The one safe tar extractor: the runner's sourcedir, the evaluation's model.tar.gz and the
init channel's archive all go through ``extract``. Standard library only (it runs in the
containers and in pipeline/), Python 3.10 syntax.

An archive is refused, with nothing of it left behind, when a member would land outside the
destination (an absolute name, ``..``, a path through a link), when a symbolic or hard link
points outside it, or when a member is a device or FIFO. ``tar -C dir .`` archives (members
``.``, ``./a``) are ordinary and accepted.

Three lines of defence: every member's name and link target is checked before anything is
written (a bad last member leaves no first member behind); each member is then extracted
alone, after checking its real path against what is already on disk (links extracted
earlier included) and through tarfile's ``data`` filter where the Python has it; finally
every link extracted is resolved once more, so a chain of links that only escapes once all
of them exist is refused too.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile

# tarfile.FilterError exists from Python 3.10.12 / 3.11.4; older container Pythons lack it.
_FILTER_ERRORS = getattr(tarfile, "FilterError", ())
_HAS_FILTERS = hasattr(tarfile, "data_filter")


class UnsafeArchiveError(ValueError):
    """An archive member that would escape the destination; the message names it."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _name(member: tarfile.TarInfo) -> str:
    """The member's name relative to the archive root ('./a/b' -> 'a/b', './' -> '.')."""
    return posixpath.normpath(member.name) if member.name else "."


def check_member(member: tarfile.TarInfo, root: str, archive: str) -> None:
    """Refuse ``member`` by its name and link target alone (nothing on disk is read)."""
    name = member.name
    normal = _name(member)
    if name.startswith("/") or normal == ".." or normal.startswith("../"):
        raise UnsafeArchiveError(
            f"refusing to extract {archive}: member {name!r} would be written outside the "
            f"extraction directory; rebuild the archive with relative paths only"
        )
    if member.issym() or member.islnk():
        link = member.linkname
        # A symbolic link resolves from its own folder, a hard link from the archive root.
        base = posixpath.dirname(normal) if member.issym() else ""
        target = posixpath.normpath(posixpath.join(base, link))
        if link.startswith("/") or target == ".." or target.startswith("../"):
            raise UnsafeArchiveError(
                f"refusing to extract {archive}: link {name!r} -> {link!r} points outside the "
                f"extraction directory"
            )
    elif not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(
            f"refusing to extract {archive}: member {name!r} is a device or FIFO, which an "
            f"archive of code, weights or a model never holds"
        )


def _check_on_disk(member: tarfile.TarInfo, root: str, archive: str) -> None:
    """The same rules against the real paths, following the links already extracted."""
    # The raw name, as tarfile joins it: 'l/../x' must go through the link 'l' on disk.
    path = os.path.join(root, member.name)
    target = os.path.realpath(path)
    if not _inside(target, root):
        raise UnsafeArchiveError(
            f"refusing to extract {archive}: member {member.name!r} would be written outside "
            f"the extraction directory (through a link); rebuild the archive without it"
        )
    if member.issym() or member.islnk():
        base = os.path.dirname(path) if member.issym() else root
        if not _inside(os.path.realpath(os.path.join(base, member.linkname)), root):
            raise UnsafeArchiveError(
                f"refusing to extract {archive}: link {member.name!r} -> {member.linkname!r} "
                f"points outside the extraction directory"
            )


def extract(archive: str, destination: str) -> list[str]:
    """Extract ``archive`` (any compression tarfile reads) into ``destination``; returns the
    member names written. Raises UnsafeArchiveError (nothing of the archive left in
    ``destination``), or tarfile.TarError / OSError / EOFError for an unreadable archive."""
    os.makedirs(destination, exist_ok=True)
    root = os.path.realpath(destination)
    written: list[str] = []
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            check_member(member, root, archive)
        try:
            for member in members:
                if _name(member) == ".":
                    continue  # the root itself ('tar -C dir .'): it exists already
                _check_on_disk(member, root, archive)
                if _HAS_FILTERS:
                    tar.extract(member, root, filter="data")
                else:  # pragma: no cover - older container Pythons
                    tar.extract(member, root)
                written.append(_name(member))
            for name in written:
                path = os.path.join(root, name)
                if os.path.islink(path) and not _inside(os.path.realpath(path), root):
                    raise UnsafeArchiveError(
                        f"refusing to extract {archive}: link {name!r} -> {os.readlink(path)!r} "
                        f"points outside the extraction directory (through another link)"
                    )
        except _FILTER_ERRORS as e:
            _remove(root, written)
            raise UnsafeArchiveError(f"refusing to extract {archive}: {e}") from None
        except BaseException:
            _remove(root, written)
            raise
    return written


def _remove(root: str, names: list[str]) -> None:
    """Take back what an interrupted extraction wrote (links first, never following them)."""
    for name in sorted(set(names), key=lambda n: n.count("/"), reverse=True):
        path = os.path.join(root, name)
        try:
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
            elif os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass
