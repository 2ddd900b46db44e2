"""The README's and the guide's promises that a script can check.

- README.md opens with the two commands (``make run``, ``make test``; ``.ci/run`` runs the latter).
- The failure table (docs/troubleshooting.md, "When something is wrong"): each row names the
  test that produces its message (``tests/<file>.py::<test>``, or a whole file). This module
  runs those tests with ``README_MESSAGES_FILE`` set (``tests/readme_record.py``: every message
  they raise, print or read back is recorded) and requires each row's message to equal one of
  them verbatim. ``…`` in a row stands for text that differs from run to run (a temporary path,
  a timestamp) and matches anything, but only where the row writes it; a CLI prefix
  (``trainpipe <command>: error: ``, ``preprocess: ``) may precede the message.
- Every page (README.md and docs/*.md): its code snippets (each ``trainpipe`` command line
  parses and its ``-p`` parameters resolve, each ``make`` target exists, each Python snippet
  compiles, and what any snippet imports or runs from this repository exists), its relative
  links, and the repository paths it writes in backticks.

    .venv/bin/pytest tests/test_readme.py -q            (rows whose test is slow: -m slow)
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests import readme_record

REPO = Path(__file__).resolve().parents[1]
README_PATH = REPO / "README.md"
README = README_PATH.read_text()
DOCS = REPO / "docs"
PAGES = [README_PATH, *sorted(DOCS.glob("*.md"))]
TABLE_PAGE = DOCS / "troubleshooting.md"
TABLE_HEADING = "## When something is wrong"
ELLIPSIS = "…"
# What a command prints before a message that is the README's.
PREFIX = r"(?:trainpipe [\w-]+: error: |preprocess: |evaluate: )?"
# Top-level folders whose paths and modules a page may name.
ROOTS = ("pipeline", "training_entry", "processing", "evaluation", "serving", "tests", "benchmarks",
         "scripts", "infra", "tools", "notebooks", "docs")
PYTHON_ROOTS = ("pipeline", "training_entry", "processing", "evaluation", "serving", "tests", "benchmarks")


def rel(page: Path) -> str:
    return str(page.relative_to(REPO))


# --- the failure table ------------------------------------------------------------------------

def failure_rows() -> list[tuple[str, str, str]]:
    section = TABLE_PAGE.read_text().split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[2].startswith("`tests/"):
            message = re.sub(r"^`+ ?|`+$", "", cells[1]).strip()
            rows.append((cells[0], message, cells[2].strip("`")))
    return rows


def pattern_of(message: str) -> re.Pattern:
    """The row's message as a regex: verbatim, each ``…`` any text."""
    return re.compile(PREFIX + ".*?".join(re.escape(part) for part in message.split(ELLIPSIS)))


def shown_by(message: str, produced: list[str]) -> bool:
    """The message is one whole line (or the whole text) of something the test produced."""
    pattern = pattern_of(message)
    return any(pattern.fullmatch(line) for text in produced for line in [text, *text.splitlines()])


def is_slow(target: str) -> bool:
    """Whether the named test is marked slow (itself or its whole module)."""
    path, _, name = target.partition("::")
    tree = ast.parse((REPO / path).read_text())
    def slow(node) -> bool:
        return "mark.slow" in ast.unparse(node)
    for node in tree.body:
        if isinstance(node, ast.Assign) and slow(node.value) and any(
                getattr(t, "id", "") == "pytestmark" for t in node.targets):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return any(slow(d) for d in node.decorator_list)
    return False


def produced_by(target: str, recorded: dict[str, list[str]]) -> list[str]:
    """What ``target`` (a test, or a whole test file) produced."""
    if "::" in target:
        return recorded.get(target, [])
    return [text for test, texts in recorded.items() if test.startswith(target + "::") for text in texts]


def run_and_record(targets: list[str], tmp_path: Path) -> dict[str, list[str]]:
    """What each of ``targets`` produced, by target (file::test): read from this session's own
    recording for the targets that already ran and passed in it (``make test``), the others
    run in a fresh pytest."""
    session = readme_record.SESSION
    done = {t for t in targets if session is not None and session.covers(t)}
    produced: dict[str, list[str]] = {}
    for entry in session.produced() if done else []:
        target = re.sub(r"\[.*$", "", entry["test"])
        if target in done or target.split("::")[0] in done:
            produced.setdefault(target, []).append(entry["text"])
    rest = sorted(set(targets) - done)
    for target, texts in (run_in_a_fresh_pytest(rest, tmp_path) if rest else {}).items():
        produced.setdefault(target, []).extend(texts)
    return produced


def run_in_a_fresh_pytest(targets: list[str], tmp_path: Path) -> dict[str, list[str]]:
    """Run ``targets`` in a fresh pytest; what each produced, by target (file::test)."""
    out = tmp_path / "messages.jsonl"
    out.write_text("")
    env = {**os.environ, readme_record.ENV: str(out)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *sorted(set(targets))],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, "the tests the failure table names must pass:\n" + result.stdout[-3000:]
    produced: dict[str, list[str]] = {}
    for line in out.read_text().splitlines():
        entry = json.loads(line)
        target = re.sub(r"\[.*$", "", entry["test"])
        produced.setdefault(target, []).append(entry["text"])
    return produced


ROWS = failure_rows()
FAST = [r for r in ROWS if not is_slow(r[2])]
SLOW = [r for r in ROWS if is_slow(r[2])]


@pytest.fixture(scope="module")
def fast_messages(tmp_path_factory):
    return run_and_record([r[2] for r in FAST], tmp_path_factory.mktemp("readme"))


@pytest.fixture(scope="module")
def slow_messages(tmp_path_factory):
    return run_and_record([r[2] for r in SLOW], tmp_path_factory.mktemp("readme-slow"))


def test_readme_opens_with_the_two_commands():
    head = README.splitlines()[:8]
    assert any(line.startswith("make run") for line in head)
    assert any(line.startswith("make test") for line in head)
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_the_failure_table_covers_what_issue_6_lists():
    covered = " ".join(row[0] for row in failure_rows())
    for item in ("unknown parameter", "below 1", "threshold", "input mode", "distribution",
                 "instance type", "fewer objects than instances", "raw data missing",
                 "raw data empty", "wrong columns", "NaN", "corrupted", "empty channel",
                 "inputdataconfig", "not a SavedModel", "s3://", "schema check"):
        assert item in covered, f"the failure table has no row for {item!r}"


@pytest.mark.parametrize("what, message, target", FAST, ids=lambda v: v[:40])
def test_each_failure_message_is_what_its_test_prints(what, message, target, fast_messages):
    produced = produced_by(target, fast_messages)
    assert produced, f"{what}: {target} produced no message (does it exist and record one?)"
    assert shown_by(message, produced), (
        f"{what}: the table's message is not what {target} produced:\n  table: {message}\n"
        + "\n".join(f"  got:   {t}" for t in produced[:8]))


@pytest.mark.slow
@pytest.mark.parametrize("what, message, target", SLOW, ids=lambda v: v[:40])
def test_each_slow_failure_message_is_what_its_test_prints(what, message, target, slow_messages):
    produced = produced_by(target, slow_messages)
    assert produced, f"{what}: {target} produced no message"
    assert shown_by(message, produced), (
        f"{what}: the table's message is not what {target} produced:\n  table: {message}\n"
        + "\n".join(f"  got:   {t}" for t in produced[:8]))


def test_a_row_with_half_its_message_replaced_is_caught(fast_messages):
    """The check itself: replace either half of any row's message with other text (the
    bug the old pattern test let through) and it no longer matches."""
    for what, message, target in FAST:
        produced = produced_by(target, fast_messages)
        middle = len(message) // 2
        for changed in (message[:middle] + "x" * (len(message) - middle),
                        "x" * middle + message[middle:]):
            assert not shown_by(changed, produced), f"{what}: a changed message still passes"


# --- the pages: snippets, links, paths ---------------------------------------------------------

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def snippets(language: str) -> list[tuple[str, str]]:
    """(page, code) of every fenced block in ``language`` on every page."""
    return [(rel(page), m.group(2)) for page in PAGES for m in FENCE.finditer(page.read_text())
            if m.group(1) == language]


def inline_code(text: str) -> list[str]:
    """The backticked spans outside fenced blocks (``…`` spans too)."""
    prose = FENCE.sub("", text)
    return [m.group(2) for m in re.finditer(r"(`+)(.+?)\1", prose, re.S)]


def command_lines(code: str) -> list[list[str]]:
    """Each simple command of a shell snippet as words: continuations joined, comments
    dropped, split at ``&&``, ``||``, ``|`` and ``;``."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for word in lexer:
            if word in ("&&", "||", "|", ";"):
                commands.append(words)
                words = []
            else:
                words.append(word)
        commands.append(words)
    return [c for c in commands if c]


def module_file(module: str) -> Path | None:
    """The file a dotted module of this repository is, if it exists."""
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def top_level_names(path: Path) -> set[str]:
    """What ``from <module> import NAME`` can take: its top-level definitions and imports,
    and for a package its submodules."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if path.name == "__init__.py":
        names |= {p.stem for p in path.parent.glob("*.py")} | {
            p.name for p in path.parent.iterdir() if (p / "__init__.py").is_file()}
    return names


def missing_imports(text: str) -> list[str]:
    """The modules and names of this repository that ``text`` imports or runs and that do
    not exist: ``from M import a, b``, ``import M``, ``python -m M`` (a comment's line
    breaks joined first, so that an import wrapped over two comment lines is read whole)."""
    text = re.sub(r"\n#\s*", " ", text)
    root = "|".join(PYTHON_ROOTS)
    wrong = []
    for m in re.finditer(rf"\bfrom\s+((?:{root})(?:\.\w+)*)\s+import\s+([\w \t,]+)", text):
        path = module_file(m.group(1))
        if path is None:
            wrong.append(m.group(1))
            continue
        names = [n.split()[0] for n in m.group(2).split(",") if n.split()]
        wrong += [f"{m.group(1)}.{n}" for n in names if n not in top_level_names(path)]
    for m in re.finditer(rf"(?:\bimport|\bpython3?\s+-m)\s+((?:{root})(?:\.\w+)*)", text):
        if module_file(m.group(1)) is None:
            wrong.append(m.group(1))
    return wrong


def check_trainpipe_command(words: list[str]) -> str | None:
    """Why a ``trainpipe ...`` command line would not parse, or its parameters not resolve."""
    from pipeline.cli.main import build_parser
    from pipeline.definition import parameters

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = build_parser().parse_args(words[1:])
    except SystemExit:
        return stderr.getvalue().strip().splitlines()[-1]
    if getattr(args, "parameters", None) and not getattr(args, "definition", None):
        try:  # a definition of one's own (--definition FILE) has its own parameters
            assignments = parameters.parse_assignments(args.parameters)
            if getattr(args, "local", False):  # run --local copies a local path into its store
                assignments.update({name: "s3://b/p/uploads/x/" for name in parameters.S3_URI_PARAMETERS
                                    if assignments.get(name) and not assignments[name].startswith("s3://")})
            parameters.resolve(assignments, bucket="b", prefix="p")
        except Exception as error:  # noqa: BLE001 -- the message is the finding
            return str(error)
    return None


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M))


def test_every_trainpipe_and_make_command_in_a_snippet_parses():
    """Each shell snippet's ``trainpipe`` commands parse with the real CLI (no command
    runs) and take known parameters with valid values; each ``make`` target exists."""
    bad, seen = [], 0
    for page, code in snippets("bash"):
        for words in command_lines(code):
            if Path(words[0]).name == "trainpipe":
                seen += 1
                reason = check_trainpipe_command(words)
                if reason:
                    bad.append(f"{page}: {shlex.join(words)}\n    {reason}")
            elif words[0] == "make" and len(words) > 1 and words[1] not in make_targets():
                bad.append(f"{page}: make {words[1]}: no such target in the Makefile")
    assert seen > 20, "the snippet reader found too few trainpipe commands: is it broken?"
    assert not bad, "snippets that would not run:\n" + "\n".join(bad)


def test_every_python_snippet_compiles_and_uses_what_exists():
    """Each Python snippet compiles; what it imports from this repository exists, and so
    does every ``module.name`` it reads from a module it imported that way."""
    bad = []
    for page, code in snippets("python"):
        try:
            tree = ast.parse(code)
        except SyntaxError as error:
            bad.append(f"{page}: does not compile: {error}")
            continue
        bad += [f"{page}: imports {name}, which does not exist" for name in missing_imports(code)]
        modules = {}  # local name -> module file, for `from pkg import module` and `import a.b as m`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PYTHON_ROOTS:
                for alias in node.names:
                    path = module_file(f"{node.module}.{alias.name}")
                    if path is not None:
                        modules[alias.asname or alias.name] = path
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules and node.attr not in top_level_names(modules[node.value.id])):
                bad.append(f"{page}: {node.value.id}.{node.attr} does not exist")
    assert not bad, "\n".join(bad)


def test_what_pages_import_or_run_in_prose_and_shell_exists():
    """``python -m M``, ``from M import x`` in inline code, shell snippets and their
    comments (e.g. ``python -c "from pipeline.data.default import ..."``)."""
    bad = []
    for page in PAGES:
        text = page.read_text()
        spans = inline_code(text) + [m.group(2) for m in FENCE.finditer(text) if m.group(1) != "python"]
        bad += [f"{rel(page)}: {name}" for span in spans for name in missing_imports(span)]
    assert not bad, "modules or names the pages use that do not exist:\n" + "\n".join(bad)


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def test_every_relative_link_resolves():
    bad = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z][\w+.-]*:|#", target):  # https:, mailto:, an anchor on the page
                continue
            if not (page.parent / target.split("#", 1)[0]).exists():
                bad.append(f"{rel(page)}: ({target})")
    assert not bad, "links to files that do not exist:\n" + "\n".join(bad)


def test_every_guide_page_is_in_the_index():
    index = (DOCS / "README.md").read_text()
    linked = {target.split("#", 1)[0] for target in LINK.findall(index)}
    unlisted = [p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in linked]
    assert not unlisted, f"docs/README.md does not link {unlisted}"


def repository_paths(text: str) -> list[str]:
    """``pipeline/...``, ``tests/...`` etc. that a page writes in backticks or a code block,
    as the start of a path (not ``…/processing/input/data``, a container path in a message);
    ``file.py::test`` is taken as the file; placeholders (``<key>``, ``*``) are skipped."""
    spans = inline_code(text) + [m.group(2) for m in FENCE.finditer(text)]
    found = []
    for span in spans:
        for m in re.finditer(rf"(?<![\w/.…~$<-])((?:{'|'.join(ROOTS)})/[^\s`'\",;:)\]]*)", span):
            path = m.group(1).rstrip(".")
            if not re.search(r"[<>*…{}]", path):
                found.append(path)
    return found


def test_every_repository_path_a_page_names_exists():
    bad = [f"{rel(page)}: {path}" for page in PAGES for path in repository_paths(page.read_text())
           if not (REPO / path).exists()]
    assert not bad, "paths that do not exist (moved? fix the page):\n" + "\n".join(bad)


def layout_entries(block: str) -> list[str]:
    """The paths a layout tree names: ``name/`` or ``name.py`` at the start of a line, two
    spaces of indent per level below the one above (later text on the line describes it)."""
    entries, stack = [], []
    for line in block.splitlines():
        m = re.match(r"( *)([\w.-]+/|[\w.-]+\.\w+)(?:\s|$)", line)
        if not m or len(m.group(1)) >= 20:  # a description's continuation line
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        entries.append("".join(stack))
    return entries


def test_the_layout_tree_names_folders_and_modules_that_exist():
    page = DOCS / "development.md"
    block = page.read_text().split("## Layout", 1)[1].split("```", 2)[1]
    entries = layout_entries(block)
    assert "pipeline/local/dag/" in entries and "training_entry/run/" in entries, entries
    missing = [e for e in entries if not (REPO / e).exists()]
    assert not missing, f"docs/development.md's layout names what does not exist: {missing}"
    packages = {str(p.parent.relative_to(REPO)) + "/" for root in PYTHON_ROOTS[:5]
                for p in (REPO / root).rglob("__init__.py") if "__pycache__" not in p.parts}
    unlisted = sorted(packages - set(entries))
    assert not unlisted, f"packages missing from docs/development.md's layout: {unlisted}"


def test_the_path_and_module_checks_catch_a_moved_module():
    """The checks themselves: a page naming a module that moved is caught."""
    assert repository_paths("see `pipeline/local/tuning.py` and `tests/pipeline/x.py::test_y`") == [
        "pipeline/local/tuning.py", "tests/pipeline/x.py"]
    assert repository_paths("`…/processing/input/data/dog` and `<workdir>/store/`") == []
    assert missing_imports("python -m training_entry.check_model x.py") == ["training_entry.check_model"]
    assert missing_imports("from pipeline.data.default import\n# export_digits_image as e") == [
        "pipeline.data.default.export_digits_image"]
    assert missing_imports("from pipeline.data.default import export_digits_images as e") == []
    assert check_trainpipe_command(["trainpipe", "run", "--local", "-p", "Epoch=3"]).startswith(
        "unknown parameter 'Epoch'")
    assert "invalid choice" in check_trainpipe_command(["trainpipe", "runn", "--local"])


def model_file_snippets() -> list[tuple[str, str, str]]:
    """(page, file name, code) of each Python snippet that is a model file (``# x.py``
    first, a ``build_model``)."""
    found = []
    for page, code in snippets("python"):
        first = code.splitlines()[0]
        if re.fullmatch(r"# \w+\.py", first) and "def build_model(" in code:
            found.append((page, first[2:], code))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("page, name, code", model_file_snippets(), ids=lambda v: v[:30])
def test_a_model_file_snippet_passes_the_model_check(page, name, code, tmp_path):
    """The model file a page shows is one the pipeline accepts: the check ``run --local``
    runs before any job (TensorFlow builds it: seconds)."""
    (tmp_path / name).write_text(code)
    result = subprocess.run(
        [sys.executable, "-m", "training_entry.model.check_model", str(tmp_path / name),
         "--image-size", "32", "--classes", "10"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{page}: {name}: {result.stderr.strip()[-2000:]}"
