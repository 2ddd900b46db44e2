"""The one workdir: where local runs, the local object store, the registry and caches live.

Every command that keeps or reads local runs (``run --local``, ``train --local``, ``models``,
``executions``/``status --local``, ``store``, ``advise``), the notebook and
``LocalStoreSession`` resolve it the same way, first match wins:

1. ``--workdir DIR`` (the notebook: ``notebook.workdir(DIR)``);
2. ``TRAINPIPE_WORKDIR``;
3. ``.trainpipe`` at the project root: the nearest folder, from the current one upwards, that
   holds ``pyproject.toml``; outside a project, the nearest folder holding a ``.trainpipe``;
4. ``./.trainpipe``.

So ``trainpipe models`` from the repository root sees what the notebook (started in
``notebooks/``) registered. A relative path is taken from the current directory and made
absolute: job processes run in other directories (a host's code dir), where a relative
workdir would point somewhere else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UserError

DIRNAME = ".trainpipe"
ENV_VAR = "TRAINPIPE_WORKDIR"
PROJECT_MARKER = "pyproject.toml"
# The --workdir help of every command that has one.
HELP = (f"where local runs, the local object store and the registry live (default: ${ENV_VAR}, "
        f"else {DIRNAME} at the project root, the nearest folder up holding {PROJECT_MARKER}, "
        f"else ./{DIRNAME})")


@dataclass(frozen=True)
class Workdir:
    path: Path  # absolute
    source: str  # which rule chose it, for the line a run prints

    def line(self) -> str:
        return f"workdir: {self.path} (from {self.source})"


def project_workdir(start: Path) -> Workdir | None:
    """``.trainpipe`` of the nearest ancestor of ``start`` (itself included) holding
    ``pyproject.toml``; else of the nearest one already holding a ``.trainpipe`` folder."""
    folders = [start, *start.parents]
    for folder in folders:
        if (folder / PROJECT_MARKER).is_file():
            return Workdir(folder / DIRNAME, f"the project root, where {PROJECT_MARKER} is")
    for folder in folders:
        if (folder / DIRNAME).is_dir():
            return Workdir(folder / DIRNAME, f"the nearest existing {DIRNAME} in or above the current directory")
    return None


def resolve_workdir(flag: str | Path | None = None, *, cwd: Path | None = None,
                    environ: Mapping[str, str] | None = None) -> Workdir:
    """The workdir by the rules above; a path that exists but is no folder is refused."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    environ = os.environ if environ is None else environ
    from_env = environ.get(ENV_VAR, "").strip()
    if flag is not None and str(flag).strip():
        chosen = Workdir(Path(flag), "--workdir")
    elif from_env:
        chosen = Workdir(Path(from_env), ENV_VAR)
    else:
        chosen = project_workdir(cwd.resolve()) or Workdir(Path(DIRNAME), "the current directory")
    path = (cwd / chosen.path).resolve()
    if path.exists() and not path.is_dir():
        raise UserError(f"workdir {path} (from {chosen.source}) is a file, not a folder; "
                        f"pass --workdir DIR or set {ENV_VAR} to a folder")
    return Workdir(path, chosen.source)
