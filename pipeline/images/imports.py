"""Does a job's code import only what its image and its requirements.txt provide?

SageMaker runs the code in the image's Python with the image's packages plus what the
code's ``requirements.txt`` installs (the toolkit runs ``pip install -r`` first). An
import of anything else fails there, on paid instances, after every earlier step has run.
``check_code`` finds that before any step runs, from the code alone:

- the imports are read with ``ast`` (never run), from the entry point and the job's own
  modules it imports (followed through the code folder), or from every ``.py`` file when
  the entry point is not Python;
- not counted: the job's own modules and packages, relative imports, the standard library
  of the image's Python (``sys.stdlib_module_names`` of this Python, corrected for the
  modules each minor version added or removed), imports guarded by ``try: ... except
  ImportError`` (optional by design) or ``if TYPE_CHECKING:``, and what the code itself
  ``pip install``s (AWS's examples do, ``subprocess.check_call([sys.executable, "-m", "pip",
  "install", ...])``);
- every file is also parsed as the image's Python would parse it (``ast.parse`` with
  ``feature_version``): syntax newer than the image's Python is refused the same way.

It answers with one line to refuse (naming the module, the step, the image and the ways
out) or to warn (an unknown image; a requirement whose modules can only be guessed).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pipeline.images import catalog
from pipeline.images.distributions import KNOWN, parse_requirements

# How each minor version's standard library differs from this Python's (3.11), measured with
# each interpreter's sys.stdlib_module_names (3.8 and 3.9 predate it: their additions since,
# from the "What's New" pages). Private modules (_name) are left out: code does not import them.
_ADDED_SINCE = {  # module -> the first minor version that has it
    "tomllib": 11, "zoneinfo": 9, "graphlib": 9,
}
_REMOVED_IN = {  # module -> the first minor version without it
    "binhex": 11,
    "asynchat": 12, "asyncore": 12, "distutils": 12, "imp": 12, "smtpd": 12,
    "aifc": 13, "audioop": 13, "cgi": 13, "cgitb": 13, "chunk": 13, "crypt": 13, "imghdr": 13,
    "lib2to3": 13, "mailcap": 13, "msilib": 13, "nis": 13, "nntplib": 13, "ossaudiodev": 13,
    "pipes": 13, "sndhdr": 13, "spwd": 13, "sunau": 13, "telnetlib": 13, "uu": 13, "xdrlib": 13,
}
_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
# pip install options followed by a value (a folder, a URL), not a requirement.
_PIP_VALUE_OPTIONS = {"--find-links", "-f", "--index-url", "-i", "--extra-index-url", "--target", "-t",
                      "--prefix", "--root", "--trusted-host", "-c", "--constraint", "--platform",
                      "--python-version", "--cache-dir", "--src"}
_PIP_TOKEN = re.compile(r"(?:^|[\s/])pip3?(?:\s|$)")


def stdlib(python: str) -> frozenset[str]:
    """The standard library's top-level modules of Python ``python`` ("3.10")."""
    minor = int(python.split(".")[1])
    names = {name for name in sys.stdlib_module_names if not name.startswith("_")}
    names |= set(_REMOVED_IN)
    names |= {"__future__", "__main__"}
    for module, since in _ADDED_SINCE.items():
        if minor < since:
            names.discard(module)
        else:
            names.add(module)
    for module, gone in _REMOVED_IN.items():
        if minor >= gone:
            names.discard(module)
    return frozenset(names)


@dataclass
class Scanned:
    imports: dict[str, str] = field(default_factory=dict)  # top-level module -> first "file:line"
    pip_installs: list[str] = field(default_factory=list)  # requirement strings the code installs
    pip_opaque: bool = False  # the code runs pip with arguments not known before it runs
    syntax_errors: list[str] = field(default_factory=list)  # "file:line: message"
    every: set[str] = field(default_factory=set)  # each top-level module an import names, optional ones too


@dataclass
class _FileFacts:
    """What one file's text says, whatever its path and its job (``_read``'s cache holds it)."""

    imports: list[tuple[str, int]] = field(default_factory=list)  # unguarded absolute: (top, line)
    follow: list[tuple[str, int, tuple]] = field(default_factory=list)  # (module, level, names)
    pip_installs: list[str] = field(default_factory=list)
    pip_opaque: bool = False
    syntax_error: tuple[int, str] | None = None  # (line, message) as the image's Python says
    parsed: bool = True


def _dotted(node) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ''."""
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return node.id if isinstance(node, ast.Name) else ""


def _version_test(test, minor: int | None) -> bool | None:
    """The value of ``sys.version_info <op> (3, N)`` (or ``[:2]``, ``[1]``, ``.minor``) under the
    image's Python 3.``minor``; None where the test is anything else or cannot be known."""
    if minor is None or not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    index = None
    if isinstance(left, ast.Subscript):
        index = left.slice
        left = left.value
    elif isinstance(left, ast.Attribute) and left.attr in ("major", "minor"):
        index = ast.Constant(0 if left.attr == "major" else 1)
        left = left.value
    if _dotted(left) not in ("sys.version_info", "version_info"):
        return None
    try:
        value = ast.literal_eval(right)
    except ValueError:
        return None
    ours: tuple = (3, minor)
    if isinstance(index, ast.Constant) and isinstance(index.value, int) and index.value < 2:
        ours = ours[index.value]
    elif index is not None and not isinstance(index, ast.Slice):
        return None
    if isinstance(value, tuple):
        if len(value) > 2 and tuple(value[:2]) == ours:
            return None  # the image's micro version decides: not known here
        value = tuple(value[:2]) if len(value) > 2 else value
    compare = {ast.GtE: lambda a, b: a >= b, ast.Gt: lambda a, b: a > b, ast.Lt: lambda a, b: a < b,
               ast.LtE: lambda a, b: a <= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
    try:
        return compare[type(op)](ours, value) if type(op) in compare else None
    except TypeError:
        return None


_FIND_SPEC = ("find_spec", "find_loader", "util.find_spec", "importlib.util.find_spec", "pkgutil.find_loader")
_IMPORT_MODULE = ("import_module", "importlib.import_module", "__import__")


def _probed(test) -> set[str]:
    """The modules an ``if`` test asks about (``find_spec("x")`` anywhere in it): the code
    imports them only when they are there, or installs them when they are not."""
    return {call.args[0].value.split(".", 1)[0] for call in ast.walk(test)
            if isinstance(call, ast.Call) and _dotted(call.func).endswith(_FIND_SPEC) and call.args
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)}


class _Visitor(ast.NodeVisitor):
    def __init__(self, facts: _FileFacts, minor: int | None = None):
        self.facts = facts
        self.guarded = 0
        self.minor = minor  # the image's Python 3.minor: a sys.version_info branch that never runs is skipped
        self.optional: list[set[str]] = []  # modules probed by an enclosing find_spec test

    def _add(self, module: str, line: int, level: int = 0, names: Iterable[str] = ()) -> None:
        self.facts.follow.append((module, level, tuple(names)))
        top = module.split(".", 1)[0]
        if level or not module or self.guarded or any(top in probed for probed in self.optional):
            return
        self.facts.imports.append((top, line))

    def visit_With(self, node) -> None:
        # ``with suppress(ImportError): import x``: optional by design, as try/except is.
        guard = any(isinstance(item.context_expr, ast.Call) and _dotted(item.context_expr.func).endswith("suppress")
                    and {_dotted(a).rsplit(".", 1)[-1] for a in item.context_expr.args} & _GUARDS
                    for item in node.items)
        self.guarded += guard
        self.generic_visit(node)
        self.guarded -= guard

    visit_AsyncWith = visit_With

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._add(node.module or "", node.lineno, node.level, [a.name for a in node.names])

    def visit_Try(self, node) -> None:
        caught = set()
        for handler in node.handlers:
            kinds = handler.type
            if kinds is None:
                caught.add("BaseException")
            for item in (kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]) if kinds is not None else []:
                caught.add(item.attr if isinstance(item, ast.Attribute) else getattr(item, "id", ""))
        guard = bool(caught & _GUARDS)
        self.guarded += guard
        for statement in node.body:
            self.visit(statement)
        self.guarded -= guard
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
        if name == "TYPE_CHECKING":
            for part in node.orelse:
                self.visit(part)
            return
        taken = _version_test(test, self.minor)
        if taken is not None:  # only the branch the image's Python runs
            for part in node.body if taken else node.orelse:
                self.visit(part)
            return
        self.optional.append(_probed(test))
        self.generic_visit(node)
        self.optional.pop()

    def visit_Call(self, node: ast.Call) -> None:
        # import_module("x") with a constant name imports x, as ``import x`` does.
        if _dotted(node.func) in _IMPORT_MODULE and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and not any(k.arg == "package" for k in node.keywords):
            self._add(node.args[0].value, node.lineno)
        # pip run by the code itself: every argument list naming pip and install. AWS's idiom,
        # [sys.executable, "-m", "pip", "install", "x"], installs x and only x: the interpreter
        # is no unknown; anything not constant after "install" is.
        words, opaque = [], []
        for arg in node.args:
            items = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
            for item in items:
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    words.extend(item.value.split())
                elif _dotted(item) == "sys.executable":
                    words.append("python")
                else:
                    opaque.append(len(words))
        if "install" in words and any(w in ("pip", "pip3") or w.endswith("/pip") or _PIP_TOKEN.search(w) for w in words):
            at = words.index("install")
            after = words[at + 1:]
            self.facts.pip_installs.extend(w for i, w in enumerate(after) if not w.startswith("-")
                                           and not (i and after[i - 1] in _PIP_VALUE_OPTIONS))
            self.facts.pip_opaque |= any(i > at for i in opaque) or any(
                w in ("-r", "--requirement", "-e", ".") for w in after)
        self.generic_visit(node)


def _module_files(files: Mapping[str, str]) -> dict[str, str]:
    """Dotted module name -> file, for every .py file (relative to the code's root)."""
    found = {}
    for path in files:
        pure = PurePosixPath(path)
        if pure.suffix != ".py":
            continue
        parts = list(pure.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = path
    return found


def local_names(files: Iterable[str]) -> set[str]:
    """Top-level names the job's own code provides: every module and package in its folder
    (and in each subfolder, for a script run from there: its folder is sys.path[0])."""
    names = set()
    for path in files:
        parts = PurePosixPath(path).parts
        for index, part in enumerate(parts):
            if index == len(parts) - 1:
                if part.endswith(".py"):
                    names.add(part[:-3])
                elif part.endswith(".so"):
                    names.add(part.split(".", 1)[0])
            else:
                names.add(part)
    names.discard("__init__")
    return names


# A job's code is read twice before it runs (the preflight's check of every step, then the
# job's own environment: ``interpreters.facts``) and its shared modules once per step: ~200
# parses, ~0.7 s of each run on 2 cores without a cache. Each text's facts are kept twice:
# in this process, keyed by the text itself (the two readings see it at different paths;
# bounded, as the texts are held), and on disk for later runs, one small JSON file each under
# ~/.cache/trainpipe/code-imports/, keyed by the text's digest, this module's own source and
# this Python's version (a change to how imports are read, or to the parser's words, is a new
# cache): the digits pipeline's 53 files were ~0.3 s of every later run's start.
_READ_CACHE: dict[tuple[str, int, bool], _FileFacts] = {}
_READ_CACHE_FILES = 2000


@functools.cache
def _disk_cache() -> Path | None:
    try:
        reader = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    except OSError:
        return None
    # shared_memory.cache_root's folder, written out: the definition's reader (local.dag)
    # imports this module and must not import local.hosts (import-linter).
    base = Path(os.environ.get("TRAINPIPE_CACHE") or
                Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainpipe")
    # This Python's version too: its parser words the syntax errors that are kept.
    return base / "code-imports" / f"{reader}-py{sys.version_info[0]}.{sys.version_info[1]}"


def _trusted(path: Path, folder: Path) -> bool:
    """Entry, folder and cache folder this user's, writable by no one else, no link: else an entry
    planted by someone else (a shared TRAINPIPE_CACHE) would say what a file imports."""
    uid = os.geteuid()
    for place in (path, path.parent, folder):
        try:
            info = os.lstat(place)
        except OSError:
            return False
        if stat.S_ISLNK(info.st_mode) or info.st_uid != uid or info.st_mode & 0o022:
            return False
    return True


def _from_disk(path: Path, folder: Path) -> _FileFacts | None:
    if not _trusted(path, folder):
        return None
    try:
        doc = json.loads(path.read_text())
        return _FileFacts(imports=[(t, int(n)) for t, n in doc["imports"]],
                          follow=[(m, int(level), tuple(names)) for m, level, names in doc["follow"]],
                          pip_installs=list(doc["pip_installs"]), pip_opaque=bool(doc["pip_opaque"]),
                          syntax_error=tuple(doc["syntax_error"]) if doc["syntax_error"] else None,
                          parsed=bool(doc["parsed"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _to_disk(path: Path, facts: _FileFacts) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(dataclasses.asdict(facts)))
        os.replace(scratch, path)  # atomic: a concurrent run reads the old file or the new
    except OSError:  # no cache folder to write: the next run parses again
        return


def _read(text: str, minor: int, judge_syntax: bool) -> _FileFacts:
    key = (text, minor, judge_syntax)
    cached = _READ_CACHE.get(key)
    if cached is not None:
        return cached
    folder = _disk_cache()
    stored = None
    if folder is not None:
        digest = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()
        stored = folder / digest[:2] / f"{digest}-3.{minor}{'' if judge_syntax else '-unjudged'}.json"
    facts = _from_disk(stored, folder) if stored is not None else None
    if facts is None:
        facts = _parse(text, minor, judge_syntax)
        if stored is not None:
            _to_disk(stored, facts)
    if len(_READ_CACHE) >= _READ_CACHE_FILES:
        _READ_CACHE.clear()
    _READ_CACHE[key] = facts
    return facts


def _parse(text: str, minor: int, judge_syntax: bool) -> _FileFacts:
    facts = _FileFacts()
    try:
        tree = ast.parse(text, feature_version=(3, minor) if judge_syntax else None)
    except SyntaxError as error:
        tree = None
        if judge_syntax:  # else newer syntax than this Python knows: the image's may parse it
            facts.syntax_error = (error.lineno, error.msg)
            try:
                tree = ast.parse(text)
            except SyntaxError:
                tree = None
    if tree is None:
        facts.parsed = False
    else:
        _Visitor(facts, minor).visit(tree)
    return facts


def scan(files: Mapping[str, str], entry_points: Iterable[str] | None, python: str) -> Scanned:
    """Read the imports of ``entry_points`` and of the local modules they reach (all ``.py``
    files when ``entry_points`` is None). ``files``: path relative to the code root -> text."""
    scanned = Scanned()
    local = local_names(files)
    modules = _module_files(files)
    minor = int(python.split(".")[1])
    judge_syntax = minor <= sys.version_info[1]  # this Python cannot judge newer syntax
    queue = [p for p in (entry_points if entry_points is not None else sorted(modules.values())) if p in files]
    seen: set[str] = set()
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        facts = _read(files[path], minor, judge_syntax)
        if facts.syntax_error:
            scanned.syntax_errors.append(f"{path}:{facts.syntax_error[0]}: {facts.syntax_error[1]}")
        if not facts.parsed:
            continue
        for top, line in facts.imports:
            if top not in local:
                scanned.imports.setdefault(top, f"{path}:{line}")
        scanned.every.update(t for m, level, _ in facts.follow if m and not level and (t := m.split(".")[0]) not in local)
        scanned.pip_installs.extend(facts.pip_installs)
        scanned.pip_opaque |= facts.pip_opaque
        package = list(PurePosixPath(path).parent.parts)
        for module, level, names in facts.follow:
            base = package[:len(package) - (level - 1)] if level else []
            if level and level - 1 > len(package):
                continue
            dotted = ".".join([*base, *([module] if module else [])]).strip(".")
            candidates = [dotted] + [f"{dotted}.{n}" if dotted else n for n in names]
            # A script's sibling modules are importable by their bare name (sys.path[0]).
            if not level and package:
                sibling = ".".join([*package, module])
                candidates += [sibling] + [f"{sibling}.{n}" for n in names]
            for candidate in candidates:
                parts = candidate.split(".")
                for end in range(1, len(parts) + 1):
                    target = modules.get(".".join(parts[:end]))
                    if target and target not in seen:
                        queue.append(target)
    return scanned


def install_name(module: str) -> str:
    """The pip distribution to suggest for a module (``sklearn`` -> ``scikit-learn``)."""
    for distribution, provided in KNOWN.items():
        if provided and provided[0] == module and not distribution.endswith(("-cpu", "-gpu", "-headless")) \
                and distribution not in ("pytorch", "msgpack-python"):
            return distribution
    return module.replace("_", "-")


@dataclass(frozen=True)
class Verdict:
    refusal: str | None = None  # the one line that refuses the run
    warning: str | None = None  # the one line said before the job runs as today
    record: catalog.ImageRecord | None = None


HOROVOD_IMAGE_PREFIX = "trainpipe-"  # our own training image's record: records/trainpipe-*.json


def check_code(files: Mapping[str, str], image_uri: str, requirements: str | None, *,
               step: str, entry_points: Iterable[str] | None = None,
               requirements_name: str = "requirements.txt") -> Verdict:
    """Judge one job's code against its image (see the module docstring). ``files``: path
    relative to the code's root -> text; ``requirements``: the text of the requirements.txt
    SageMaker would install for this job (None: none)."""
    record, unchecked = catalog.find(image_uri), None
    if record is None and catalog.nearest(image_uri):  # an AWS image of a version not recorded
        record, unchecked = catalog.nearest(image_uri)
    if record is None:
        return Verdict(warning=f"step {step}: no record of what the image {image_uri or '(none)'} holds "
                               f"(pipeline/images/records/): its imports are not checked, and the job "
                               f"runs with every package this machine has")
    scanned = scan(files, entry_points, record.python)
    image = f"{image_uri} (Python {record.python}, record {record.name})"
    if scanned.syntax_errors:
        first = scanned.syntax_errors[0]
        return Verdict(refusal=f"step {step}: {first}: the image {image_uri} (record {record.name}) has "
                               f"Python {record.python}, which cannot parse this code; write it for Python "
                               f"{record.python}, or run the step on an image with a newer Python", record=record)
    wanted = parse_requirements(requirements or "")
    # What the code pip-installs by name (AWS's sys.executable idiom) installs that and only
    # that (issue 47): its modules are the name's own even where the name is not known here.
    installed = parse_requirements("\n".join(scanned.pip_installs))
    base = stdlib(record.python) | record.modules | wanted.modules | installed.modules
    missing = {m: where for m, where in scanned.imports.items() if m not in base}
    if not missing:
        return Verdict(record=record, warning=unchecked and f"step {step}: {unchecked}")
    named = ", ".join(f"{m} ({where})" for m, where in sorted(missing.items(), key=lambda kv: kv[1]))
    if wanted.guessed or wanted.opaque or installed.opaque or scanned.pip_opaque:
        unsure = [*wanted.guessed, *wanted.opaque] or ["a pip install the code builds at run time"]
        return Verdict(warning=f"step {step}: imports {named} that the image {image} does not have; "
                               f"{', '.join(unsure)} may install them (their modules are not known "
                               f"here), so the job runs", record=record)
    ways = [f"add a line {' / '.join(install_name(m) for m in sorted(missing))} to the "
            f"{requirements_name} next to the entry point",
            "or name an image that has it"]
    if "horovod" in missing:
        ours = catalog.named(HOROVOD_IMAGE_PREFIX)
        built = next((src["url"] for src in (ours.sources if ours else ()) if not src["url"].startswith("http")),
                     "infra/training-image/Dockerfile")
        ways.append(f"or, for horovod on a stock TensorFlow image, trainpipe's own Horovod training "
                    f"image ({ours.name + ', ' if ours else ''}{built})")
    return Verdict(refusal=f"step {step}: the code imports {named}, which the image {image} does not "
                           f"have and no requirements.txt installs: it would fail there with "
                           f"ModuleNotFoundError; {', '.join(ways)}", record=record)
