"""docs/local-mode.md's claims, checked against the code (issue 36: the page had said Transform
and CreateModel could not run, a re-run resumes, and timings nobody measured): the step types
that run locally, each command and flag it writes inline, the variables, the container paths,
the folders and defaults, and its first command. Seconds; the page's snippets and links are
tests/test_readme.py's, whose helpers these share.

    .venv/bin/pytest tests/test_local_mode_doc.py -q
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

from tests.test_readme import DOCS, FENCE, REPO, check_trainpipe_command, inline_code


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
                "URI": "http://127.0.0.1:5000", "N": "2", "SECONDS": "60", "EXECUTION": "e-1",
                "STEP": "WaitForApproval", "NAME=VALUE": "approved=true"}
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
    (``training_entry/contract.py``), or, for ``@step`` functions, the SageMaker SDK's own
    (its job driver's path and the file its bootstrap writes)."""
    from sagemaker.remote_function import job
    from sagemaker.remote_function.runtime_environment import (
        bootstrap_runtime_environment as bootstrap,
    )

    from training_entry import contract

    defined = {v for v in vars(contract).values() if isinstance(v, str) and v.startswith(contract.CONTAINER_BASE_DIR)}
    defined |= {job.JOBS_CONTAINER_ENTRYPOINT[1], bootstrap.ENV_OUTPUT_FILE}
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
    from pipeline.local.hosts.launch_settings import LOCAL_CYCLE_TIME_MS
    from pipeline.local.jobs.lifecycle import ENVIRONMENTS, HOMES
    from pipeline.local.store.channels import fifo_path
    from pipeline.tracking import deadline
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
        f"(`{deadline.ENV_VAR}`, {deadline.DEFAULT_S:g} s by default)",
    ]
    assert not [c for c in claims if c not in text], [c for c in claims if c not in text]
    # "what make run runs": the first command of the page, as the Makefile's run target has it.
    first = snippets_of(LOCAL_MODE, "bash")[0].splitlines()[0]
    assert re.search(r"^run:.*\n\t\$\(BIN\)/" + re.escape(first.split("#")[0].strip().removeprefix(".venv/bin/")) + "$",
                     (REPO / "Makefile").read_text(), re.M), first


def snippets_of(page: Path, language: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(page.read_text()) if m.group(1) == language]

