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


# --- claims generated from the code -----------------------------------------------------------

def test_the_step_types_local_mode_lists_are_the_ones_the_runner_runs():
    """docs/local-mode.md: "Step types that run locally: `A`, `B`, ..." is the runner's own list
    (issue 36: the page said Transform and CreateModel could not run, and they ran)."""
    from pipeline.local.dag.interpreter import SUPPORTED_STEP_TYPES

    text = " ".join((DOCS / "local-mode.md").read_text().split())
    listed = re.search(r"Step types that run locally: ((?:`\w+`(?:, )?)+)", text)
    assert listed, "docs/local-mode.md lists no 'Step types that run locally: `...`'"
    assert re.findall(r"`(\w+)`", listed.group(1)) == list(SUPPORTED_STEP_TYPES)


LOCAL_MODE = DOCS / "local-mode.md"
# Placeholders the page writes for a value, and a value of that kind to parse with.
PLACEHOLDERS = {"FILE": "pipeline.json", "DIR": "/tmp/work", "URL": "http://127.0.0.1:9000",
                "URI": "http://127.0.0.1:5000"}
# What a job's script receives (the toolkit's ``--key value`` encoding of hyperparameters,
# ``--model_dir``): the page names them, and they are no flag of trainpipe's.
SCRIPT_ARGUMENTS = ("--key", "--model_dir")


def test_the_commands_and_flags_local_mode_names_in_prose_parse():
    """Each ``trainpipe ...`` the page writes inline parses with the real CLI, and each
    ``--flag [VALUE]`` it names on its own is one `trainpipe run --local` takes (a value
    among its choices), placeholders (FILE, DIR, URL, URI) given a value of their kind."""
    bad, flags, commands = [], 0, 0
    for span in inline_code(LOCAL_MODE.read_text()):
        words = [PLACEHOLDERS.get(w, w) for w in shlex.split(span)] if re.match(r"(trainpipe|--)\b", span) else []
        if not words or words[0] in SCRIPT_ARGUMENTS:
            continue
        if words[0] == "trainpipe":
            commands += 1
        else:
            flags += 1
            words = ["trainpipe", "run", "--local", *words]
        reason = check_trainpipe_command(words)
        if reason and not (len(words) == 4 and reason.endswith("expected one argument")):  # a flag named bare
            bad.append(f"`{span}`: {reason}")
    assert commands >= 5 and flags >= 8, "the span reader found too few: is it broken?"
    assert not bad, "docs/local-mode.md names what the CLI does not take:\n" + "\n".join(bad)


def literals(*roots: str) -> set[str]:
    """Every string constant in the Python files under ``roots``."""
    return {node.value for root in roots for path in (REPO / root).rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Constant)
            and isinstance(node.value, str)}


def test_the_variables_local_mode_names_are_read_by_the_code():
    """``TRAINPIPE_*`` and ``SAGEMAKER_BASE_DIR`` are names in trainpipe's code; ``MLFLOW_*``
    are MLflow's own (its ``environment_variables.py``, read, not imported: seconds)."""
    import importlib.util

    text = LOCAL_MODE.read_text()
    ours = set(re.findall(r"\b(?:TRAINPIPE|SAGEMAKER)_[A-Z_]+\b", text))
    theirs = set(re.findall(r"\bMLFLOW_[A-Z_]+\b", text))
    assert len(ours) >= 8 and theirs, (ours, theirs)
    unknown = ours - literals("pipeline", "training_entry")
    assert not unknown, f"not in the code: {sorted(unknown)}"
    mlflow = Path(importlib.util.find_spec("mlflow").origin).parent / "environment_variables.py"
    declared = set(re.findall(r"^(MLFLOW_[A-Z_]+) = ", mlflow.read_text(), re.M))
    assert theirs <= declared, f"not MLflow's: {sorted(theirs - declared)}"


def test_the_container_paths_local_mode_names_are_the_contract_s():
    """Each ``/opt/ml`` path on the page is one the container contract defines
    (``training_entry/contract.py``)."""
    from training_entry import contract

    defined = {v for v in vars(contract).values() if isinstance(v, str) and v.startswith(contract.CONTAINER_BASE_DIR)}
    named = set(re.findall(r"/opt/ml(?:/\w[\w.-]*)*", LOCAL_MODE.read_text()))
    assert contract.CONTAINER_BASE_DIR in named and len(named) >= 2, named
    assert named <= defined, f"not the contract's: {sorted(named - defined)}"


def test_the_folders_and_defaults_local_mode_states_are_the_code_s(tmp_path):
    """Where a run puts things, and what `make run` runs with: each as the page writes it,
    made from the code's own names and values."""
    from argparse import Namespace

    from pipeline.cli.local.commands import make_storage
    from pipeline.definition import parameters as P
    from pipeline.local.dag.preflight import LOCAL_INPUTS_PREFIX
    from pipeline.local.execution import RECORD_FILE
    from pipeline.local.hosts.tuning import LOCAL_CYCLE_TIME_MS
    from pipeline.local.jobs.lifecycle import ENVIRONMENTS, HOMES
    from pipeline.local.store.channels import fifo_path
    from pipeline.tracking.logger import HTTP_DEFAULTS
    from pipeline.tracking.target import EMBEDDED_ARTIFACTS, EMBEDDED_DB

    store = make_storage(Namespace(s3_endpoint=None, aws_s3=False, workdir=tmp_path), "us-east-1")
    values = P.resolve({}, bucket="b", prefix="p")
    text = " ".join(LOCAL_MODE.read_text().split())
    claims = [
        f"`.trainpipe/{store.root.relative_to(tmp_path)}`", f"`<workdir>/{EMBEDDED_DB}`",
        f"`<workdir>/{EMBEDDED_ARTIFACTS}`", f"`<workdir>/{ENVIRONMENTS}/`", f"`<job>/{HOMES}/<host>`",
        f"`s3://<bucket>/{LOCAL_INPUTS_PREFIX}/<Parameter>/<content hash>/`", f"with `{RECORD_FILE}`",
        f"`{fifo_path(Path(), '<channel>', 0).name.replace('0', '<epoch>')}`",
        f"({values[P.TRAINING_INSTANCE_COUNT]} hosts × {values[P.PROCESSES_PER_HOST]} rank, "
        f"{values[P.EPOCHS]} epochs)", f"`{P.ACCURACY_THRESHOLD}` ({values[P.ACCURACY_THRESHOLD]:g})",
        f"Horovod cycle time {LOCAL_CYCLE_TIME_MS} ms",
        f"(`MLFLOW_HTTP_REQUEST_TIMEOUT`, {HTTP_DEFAULTS['MLFLOW_HTTP_REQUEST_TIMEOUT']} s here by default)",
    ]
    assert not [c for c in claims if c not in text], [c for c in claims if c not in text]
    # "what make run runs": the first command of the page, as the Makefile's run target has it.
    first = snippets_of(LOCAL_MODE, "bash")[0].splitlines()[0]
    assert re.search(r"^run:.*\n\t\$\(BIN\)/" + re.escape(first.split("#")[0].strip().removeprefix(".venv/bin/")) + "$",
                     (REPO / "Makefile").read_text(), re.M), first


def snippets_of(page: Path, language: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(page.read_text()) if m.group(1) == language]


# --- the tour, as a newcomer runs it ------------------------------------------------------------

AWS_COMMANDS = ("upsert", "start")  # "an AWS account from here on": each refuses in one line here


def tour_lines() -> list[str]:
    """The README's tour: each line of its first bash block, comment dropped."""
    block = README.split("## A ten-line tour", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def use_the_model_line(command: str) -> str:
    """The README's ``trainpipe <command> ...`` line in "Use the model", comment dropped."""
    block = README.split("## Use the model", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    (line,) = [ln for ln in block.splitlines() if f"trainpipe {command} " in ln]
    return re.sub(r"\s+#.*$", "", line).strip()


@pytest.mark.slow
@pytest.mark.timeout(3600)  # four whole pipeline runs: over the suite's 600 s on a busy machine
def check_what_the_tour_line_did(line: str, done: subprocess.CompletedProcess, work: Path) -> None:
    """What three of the tour's runs must have done, beyond exiting 0: the pipeline's own
    end-to-end checks, made on the tour's runs rather than on runs of their own (minutes:
    tests/pipeline/local/test_images_end_to_end.py's image-tree run is the tour's)."""
    import tarfile

    from pipeline.definition import build as D
    from pipeline.local.store.registry import Registry

    runs = sorted((work / "runs").iterdir())
    steps = {s["name"]: s for s in json.loads((runs[-1] / "execution.json").read_text())["steps"]}
    registered = Registry(work / "registry.sqlite").list()
    if "TrainInputMode=Pipe" in line:
        # 2 hosts x 2 processes, Pipe, ShardedByS3Key: each rank on its host, FIFOs cleaned
        # up, the model registered (the second version: make run's table model is the first).
        assert [p.version for p in registered] == [1, 2]
        assert registered[-1].metrics["metrics"]["accuracy"]["value"] >= 0.9
        assert steps[D.STEP_CONDITION]["properties"] == {"Outcome": True}
        assert steps[D.STEP_FAIL]["status"] == "NotExecuted"
        train = steps[D.STEP_TRAIN]
        job = Path(train["job_dir"])
        assert sorted(p.name for p in (job / "logs").glob("*.rank-*.log")) == [
            "algo-1.rank-0.log", "algo-1.rank-1.log", "algo-2.rank-2.log", "algo-2.rank-3.log"]
        assert "train Pipe/ShardedByS3Key" in (job / "job.log").read_text()
        assert not list(job.glob("hosts/*/input/data/*_[0-9]*")), "Pipe FIFOs left behind"
        model = work / "store" / train["properties"]["ModelArtifacts"]["S3ModelArtifacts"][5:]
        with tarfile.open(model) as tar:
            assert any(n.startswith("1/") and n.endswith("saved_model.pb") for n in tar.getnames())
    elif "digits-images" in line:
        assert [p.version for p in registered] == [1, 2, 3]
        log = (Path(steps[D.STEP_TRAIN]["job_dir"]) / "job.log").read_text()
        assert "model small_cnn on 32x32 images" in log, log[-2000:]
    elif "--definition pipeline.json" in line:
        # The definition make run interpreted, from its file: the same steps, run and registered.
        assert [p.version for p in registered] == [1, 2, 3, 4]
        assert all(steps[name]["status"] == "Succeeded"
                   for name in (D.STEP_PREPROCESS, D.STEP_TRAIN, D.STEP_EVALUATE, D.STEP_CONDITION))


def test_the_readme_tour_runs_top_to_bottom_in_a_fresh_workdir(tmp_path):
    """Issue 36: every line of the tour, as written, in a fresh workdir and folder; then the
    next section's ``predict new-rows.csv digit.png`` with both kinds registered. ``make``
    keeps its install stamp as it is (``make test`` installed; the tour is not the install)."""
    work = tmp_path / "work"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TRAINPIPE_"))},
           "TRAINPIPE_WORKDIR": str(work), "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true"}

    def run(line: str) -> subprocess.CompletedProcess:
        line = line.replace(".venv/bin/", f"{REPO}/.venv/bin/")
        if line.startswith("make "):
            line = f"make -C {REPO} -o .venv/.trainpipe-installed " + line[len("make "):]
        return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1200)

    lines = tour_lines()
    assert len(lines) == 10 and lines[0] == "make run", lines
    for line in lines:
        done = run(line)
        if shlex.split(line)[1] in AWS_COMMANDS:
            assert done.returncode == 2, f"{line}: exit {done.returncode}\n{done.stderr[-2000:]}"
            assert len(done.stderr.strip().splitlines()) == 1 and "error:" in done.stderr, done.stderr
        else:
            assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            check_what_the_tour_line_did(line, done, work)

    # Both kinds are registered now: the next section's predict sends each file to its own.
    store = work / "store" / "trainpipe-artifacts-placeholder" / "trainpipe" / "data"
    table = next((store / "digits").glob("*.csv")).read_text().splitlines()
    label = table[0].split(",").index("label")
    rows = [",".join(c for i, c in enumerate(row.split(",")) if i != label) for row in table[:4]]
    (tmp_path / "new-rows.csv").write_text("\n".join(rows) + "\n")  # the header and 3 rows, no label
    (tmp_path / "digit.png").write_bytes(next((store / "digits-images").rglob("*.png")).read_bytes())
    predicted = run(use_the_model_line("predict") + " --json")
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    answers = [json.loads(a) for a in predicted.stdout.splitlines()]
    assert [a["input"] for a in answers] == ["new-rows.csv:1", "new-rows.csv:2", "new-rows.csv:3", "digit.png"]
