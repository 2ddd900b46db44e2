"""The house rules, checked on every source package: rooms of a size a reader can hold.

No module over 500 lines, no function over 80 (training_entry/train.py's ``main`` is exempt:
it is a straight read in the Horovod order), and every package says what it is in one
sentence, its ``__init__`` docstring.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_ROOTS = ("pipeline", "processing", "training_entry", "evaluation", "serving")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# The Horovod entrypoint's main(): a straight read in the Horovod order (strategy_train.py
# splits the TF strategies' same order into one function per cut point).
EXEMPT_FUNCTIONS = {("training_entry/train.py", "main")}
# A sentence ends at . ! or ? followed by a capital; "e.g. X" / "i.e. X" do not end one.
SENTENCE_BREAK = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.!?]\s+[A-Z]")


def _packages() -> list[Path]:
    """Every directory under the source roots that holds Python modules."""
    found = set()
    for root in SOURCE_ROOTS:
        for module in (ROOT / root).rglob("*.py"):
            if "__pycache__" not in module.parts:
                found.add(module.parent)
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(m for package in _packages() for m in package.glob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _is_one_sentence(docstring: str | None) -> bool:
    """The docstring's first paragraph is one sentence (details may follow a blank line)."""
    if not docstring or not docstring.strip():
        return False
    summary = " ".join(docstring.strip().split("\n\n")[0].split())
    return summary.endswith(".") and not SENTENCE_BREAK.search(summary)


def test_sentence_rule_itself():
    assert _is_one_sentence("Runs things: ``a``, ``b`` (e.g. Pipe) and c.\n\nDetails. More.")
    assert not _is_one_sentence("Runs things. Then more things.")
    assert not _is_one_sentence("no full stop")
    assert not _is_one_sentence("")
    assert not _is_one_sentence(None)


def test_the_source_roots_are_where_the_house_expects_them():
    assert len(_modules()) > 50, f"found only {len(_modules())} modules under {SOURCE_ROOTS}"


def test_no_module_over_500_lines():
    long = []
    for module in _modules():
        lines = len(module.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            long.append(f"{_name(module)}: {lines} lines")
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them into named parts):\n  " + "\n  ".join(long)


def test_no_function_over_80_lines():
    long = []
    for module in _modules():
        tree = ast.parse(module.read_text(encoding="utf-8"), filename=str(module))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and (_name(module), node.name) not in EXEMPT_FUNCTIONS:
                long.append(f"{_name(module)}:{node.lineno} {node.name}(): {lines} lines")
    assert not long, (f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n  "
                      + "\n  ".join(long))


def test_every_package_says_what_it_is_in_one_sentence():
    missing = []
    for package in _packages():
        init = package / "__init__.py"
        if not init.exists():
            missing.append(f"{_name(package)}/: no __init__.py")
            continue
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        if not _is_one_sentence(docstring):
            shown = repr(docstring.strip().split("\n\n")[0][:80]) if docstring else "no docstring"
            missing.append(f"{_name(init)}: {shown}")
    assert not missing, ("packages whose __init__ docstring is not one sentence (say what the "
                         "package is, ending in a full stop):\n  " + "\n  ".join(missing))
