"""The one safe tar extractor (training_entry/archives.py) and the three places that use it."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from training_entry import archives
from training_entry.model.init_weights import InitError, find_source

REPO = Path(__file__).resolve().parents[2]


def build(path: Path, members: list[tuple[str, str, bytes | str]]) -> Path:
    """members: (name, kind, data): kind 'file' (bytes), 'dir', 'sym' / 'hard' (link name),
    'fifo'."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = data
            tar.addfile(info)
    return path


@pytest.fixture
def dirs(tmp_path):
    out = tmp_path / "out"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not touch")
    return tmp_path, out, outside


def test_a_tar_c_dir_dot_archive_is_ordinary(dirs):
    tmp_path, out, _ = dirs
    source = tmp_path / "src"
    (source / "1" / "variables").mkdir(parents=True)
    (source / "1" / "saved_model.pb").write_bytes(b"pb")
    (source / "1" / "variables" / "v.index").write_bytes(b"ix")
    (source / "link").symlink_to("1/saved_model.pb")
    archive = tmp_path / "model.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(source), "."], check=True)
    with tarfile.open(archive) as tar:
        assert {"./", "."} & set(tar.getnames()) and "./1/saved_model.pb" in tar.getnames()
    written = archives.extract(str(archive), str(out))
    assert "1/saved_model.pb" in written
    assert (out / "1" / "saved_model.pb").read_bytes() == b"pb"
    assert (out / "1" / "variables" / "v.index").read_bytes() == b"ix"
    assert (out / "link").read_bytes() == b"pb"  # a link inside the root is fine


@pytest.mark.parametrize("members, message", [
    ([("ok.txt", "file", b"x"), ("{outside}/abs.txt", "file", b"x")],
     r"member '/.*/outside/abs.txt' would be written outside the extraction directory"),
    ([("ok.txt", "file", b"x"), ("../up.txt", "file", b"x")],
     r"member '\.\./up\.txt' would be written outside"),
    ([("ok.txt", "file", b"x"), ("./a/../../up.txt", "file", b"x")],
     r"member '\./a/\.\./\.\./up\.txt' would be written outside"),
    ([("ok.txt", "file", b"x"), ("etc", "sym", "{outside}")],
     r"link 'etc' -> '/.*/outside' points outside the extraction directory"),
    ([("ok.txt", "file", b"x"), ("a/up", "sym", "../../outside")],
     r"link 'a/up' -> '\.\./\.\./outside' points outside"),
    ([("ok.txt", "file", b"x"), ("pw", "hard", "{outside}/secret.txt")],
     r"link 'pw' -> '/.*/outside/secret\.txt' points outside"),
    ([("ok.txt", "file", b"x"), ("pw", "hard", "../outside/secret.txt")],
     r"link 'pw' -> '\.\./outside/secret\.txt' points outside"),
    ([("ok.txt", "file", b"x"), ("pipe", "fifo", "")], r"member 'pipe' is a device or FIFO"),
    # Each step looks inside; only on disk, through the link extracted first, do they escape.
    ([("ok.txt", "file", b"x"), ("l", "sym", "."), ("l/../up.txt", "file", b"x")],
     r"member 'l/\.\./up\.txt' would be written outside"),
    ([("ok.txt", "file", b"x"), ("c", "sym", "."), ("a", "sym", "c/../outside")],
     r"link 'a' -> 'c/\.\./outside' points outside"),
    ([("ok.txt", "file", b"x"), ("c", "sym", "."), ("pw", "hard", "c/../outside/secret.txt")],
     r"link 'pw' -> 'c/\.\./outside/secret\.txt' points outside"),
])
def test_members_and_links_out_of_the_root_are_refused_and_nothing_is_left(dirs, members, message):
    tmp_path, out, outside = dirs
    members = [(n.format(outside=outside), k, d.format(outside=outside) if isinstance(d, str) else d)
               for n, k, d in members]
    archive = build(tmp_path / "bad.tar.gz", members)
    with pytest.raises(archives.UnsafeArchiveError, match=r"^refusing to extract .*bad\.tar\.gz: " + message):
        archives.extract(str(archive), str(out))
    # Nothing of the archive stays, inside or out, and what was outside is unchanged.
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "do not touch"
    assert not (tmp_path / "up.txt").exists()


def test_the_runner_the_evaluation_and_the_init_channel_use_only_this_extractor():
    """No other tar extraction in the code the containers and the runner run."""
    calls = re.compile(r"\.extractall\(|(?<!archives)\.extract\(|\.extractfile\(")
    offenders = [str(p.relative_to(REPO)) for folder in ("pipeline", "training_entry", "evaluation",
                                                           "processing")
                 for p in (REPO / folder).rglob("*.py")
                 if p.name != "archives.py" and calls.search(p.read_text())]
    assert offenders == []


def test_the_init_channel_takes_a_tar_c_dir_dot_archive(tmp_path):
    source = tmp_path / "model"
    (source / "1").mkdir(parents=True)
    (source / "1" / "saved_model.pb").write_bytes(b"pb")
    (tmp_path / "init").mkdir()
    subprocess.run(["tar", "-czf", str(tmp_path / "init" / "model.tar.gz"), "-C", str(source), "."],
                   check=True)
    kind, path = find_source(str(tmp_path / "init"), str(tmp_path / "scratch"))
    assert (kind, Path(path)) == ("saved_model", tmp_path / "scratch" / "1")


def test_the_init_channel_refuses_a_link_out(tmp_path):
    (tmp_path / "init").mkdir()
    build(tmp_path / "init" / "model.tar.gz", [("1/saved_model.pb", "sym", "/etc/passwd")])
    with pytest.raises(InitError, match=r"^init channel: refusing to extract .*model\.tar\.gz: link "
                                        r"'1/saved_model\.pb' -> '/etc/passwd' points outside"):
        find_source(str(tmp_path / "init"), str(tmp_path / "scratch"))
