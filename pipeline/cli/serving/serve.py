"""``trainpipe serve`` and ``trainpipe predict``: use a trained model on this machine.

    trainpipe serve   [--workdir W] [--model M | --run ID] [--host H] [--port P]
    trainpipe predict [--workdir W] [--model M | --run ID] [--json] FILE...

The model (``--model``): ``latest`` (the default: the best package in the local registry of
the workdir, as ``trainpipe models`` lists it, whose model takes what is sent: Approved first,
then the highest accuracy, then the newest; see model_choice.py), ``table`` or ``image`` (the
best of that kind), a version number of that
registry's group (or ``group/N``), a model package ARN, a ``model.tar.gz``, an ``s3://`` URI in the local store, or
a folder holding ``<version>/saved_model.pb``; ``--run ID``: that local execution's trained
model. This side never imports TensorFlow: it finds the SavedModel folder (extracting an
archive once, under ``<workdir>/serving/``), then runs ``python -m serving.server`` (SageMaker's
TensorFlow Serving contract, see serving/) or ``serving.predict`` in its place.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from pipeline.cli.local.commands import absolute_path
from pipeline.cli.serving import model_choice
from pipeline.errors import UserError
from pipeline.local.store.registry import ModelPackage, Registry
from pipeline.local.store.storage import LocalStorage, S3Uri
from pipeline.workdir import HELP as WORKDIR_HELP
from serving import files as served_files
from serving.files import SAVED_MODEL_FILE

LATEST = "latest"
EXTRACTED_DIR = "serving"  # <workdir>/serving/<digest>/: each archive extracted once


def register(subparsers) -> None:
    serve = subparsers.add_parser(
        "serve", help="serve a trained model over HTTP as a SageMaker TensorFlow Serving endpoint does",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _model_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    serve.add_argument("--port", type=int, default=8080, help="default 8080 (SageMaker's)")
    serve.add_argument("--name", default="model", help="the TF Serving model name in /v1/models/<name>")
    serve.add_argument("--access-log", action="store_true", help="print one line per request")
    serve.set_defaults(func=run_serve)
    predict = subparsers.add_parser(
        "predict", help="run images or CSV rows through a trained model, without a server",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _model_arguments(predict)
    predict.add_argument("--json", action="store_true", help="one JSON object per prediction")
    predict.add_argument("files", nargs="+", metavar="FILE",
                         help="images (one each), .csv rows (feature columns, no label), .json bodies")
    predict.set_defaults(func=run_predict)


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", type=absolute_path, help=WORKDIR_HELP)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--model", default=LATEST, metavar="MODEL",
                       help="latest (default: the registered model that takes what is sent, Approved "
                            "first, then the highest accuracy, then the newest), table or image (the "
                            "best of that kind), a registry version (N or group/N), "
                            "a model package ARN, a model.tar.gz, an s3:// URI in the local store, or a "
                            "model folder")
    which.add_argument("--run", metavar="EXECUTION_ID", help="the model trained by this local execution")


def run_serve(args: argparse.Namespace) -> int:
    model_dir, what = resolve_model(Path(args.workdir), args.model, args.run, command="serve")
    print(f"trainpipe serve: {what}: {model_dir}", file=sys.stderr, flush=True)
    if served_files.is_script_model(model_dir):
        # PyTorch: the model's code/inference.py, served as AWS's PyTorch inference image serves it
        # (/ping, /invocations), so a client of the endpoint runs unchanged against this one.
        _exec("serving.handler", ["--model-dir", str(model_dir), "--program", served_files.SCRIPT, "--host",
                                  args.host, "--port", str(args.port)] + (["--access-log"] if args.access_log else []),
              Path(args.workdir))
    argv = ["--model-dir", str(model_dir), "--host", args.host, "--port", str(args.port), "--name", args.name]
    _exec("serving.server", argv + (["--access-log"] if args.access_log else []), Path(args.workdir))


def run_predict(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir)
    groups = _files_by_kind(args.files) if args.model == LATEST and not args.run else {None: args.files}
    # Resolved before any runs: a refusal comes before the first answer, not between two.
    chosen = [(resolve_model(workdir, args.model, args.run, wanted=kind, command="predict"), files)
              for kind, files in groups.items()]
    json_flag = ["--json"] if args.json else []
    if len(chosen) == 1:
        (model_dir, what), files = chosen[0]
        print(f"trainpipe predict: {what}: {model_dir}", file=sys.stderr, flush=True)
        _exec("serving.predict", ["--model-dir", str(model_dir), *json_flag, *files], workdir)
    # Tables and images in one command: each kind through its own model, in turn.
    worst = 0
    for (model_dir, what), files in chosen:
        print(f"trainpipe predict: {what}: {model_dir}", file=sys.stderr, flush=True)
        code = subprocess.run([sys.executable, "-m", "serving.predict", "--model-dir", str(model_dir),
                               *json_flag, *files], env=_child_environment(workdir)).returncode
        if code == served_files.BROKEN_PIPE_STATUS:  # the reader went away (| head): nothing more to print
            return code
        worst = code if code < 0 or worst < 0 else max(worst, code)
    return worst


def _files_by_kind(files: list[str]) -> dict[str | None, list[str]]:
    """The files by the kind of model that takes them, in the order given; a JSON body (either
    kind) goes with the others when they are of one kind."""
    groups: dict[str | None, list[str]] = {}
    for name in files:
        groups.setdefault(served_files.kind_of(name), []).append(name)
    known = [k for k in groups if k is not None]
    if len(known) == 1 and None in groups:
        groups[known[0]] += groups.pop(None)
    return groups


def _exec(module: str, argv: list[str], workdir: Path) -> None:
    """The server in this process's place: SIGTERM and Ctrl-C reach it, and its exit status
    is the command's."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", module, *argv], _child_environment(workdir))


def _child_environment(workdir: Path, environ=None) -> dict[str, str]:
    """What the model's process starts with. A SavedModel is code (a ReadFile op can read
    /proc/self/environ), maybe not the user's own: it gets what a job's process gets, the
    allowlist of pipeline/environment.py (no credential) and a HOME of its own under the
    workdir, not the caller's ~/.aws. TensorFlow's start-up banner (oneDNN, CPU features) is
    INFO: hidden, as for every job's process; a user's own setting wins."""
    import importlib.util

    from pipeline.local.jobs.lifecycle import base_environment
    from pipeline.local.store.private import private_dir

    env = base_environment(dict(os.environ if environ is None else environ),
                           home=private_dir(workdir / EXTRACTED_DIR / "home"))
    spec = importlib.util.find_spec("serving")  # found, not imported: no TensorFlow here
    if spec is not None and spec.origin is not None:  # a source checkout run without installing
        env["PYTHONPATH"] = str(Path(spec.origin).resolve().parents[1])
    return env


# --- which model -----------------------------------------------------------------------------
def resolve_model(workdir: Path, spec: str = LATEST, run: str | None = None, wanted: str | None = None,
                  command: str = "serve") -> tuple[Path, str]:
    """(a folder holding ``<version>/saved_model.pb``, how it was found), or ``UserError``.
    ``wanted``: the kind of data that will be sent (None: unknown), for ``latest``."""
    if run:
        return _extracted(workdir, _run_model_uri(workdir, run), f"the model of execution {run}")
    if spec in model_choice.KINDS:  # before paths: ./table names a folder called table
        spec, wanted = LATEST, spec
    path = Path(spec).expanduser()
    if spec != LATEST and path.is_dir():
        return path.resolve(), "model folder"
    if spec != LATEST and path.is_file():
        return _extracted(workdir, str(path.resolve()), "archive")
    if spec.startswith("s3://"):
        return _extracted(workdir, spec, "store object")
    package, reason = _package(workdir, spec, wanted, command)
    return _extracted(workdir, package.model_data_url,
                      f"model package {package.arn} ({reason or package.approval_status})")


def _package(workdir: Path, spec: str, wanted: str | None = None,
             command: str = "serve") -> tuple[ModelPackage, str | None]:
    """The package, and why it was chosen where the user named none (None: they named it)."""
    registry = Registry(workdir / "registry.sqlite")
    packages = registry.list()
    if not packages:
        raise UserError(f"no model packages in {registry.path}: run the pipeline (trainpipe run --local), "
                        "or give --model a model.tar.gz, an s3:// URI or a model folder")
    if spec == LATEST:
        return model_choice.choose(packages, wanted, command)
    if spec.startswith("arn:"):
        found = [p for p in packages if p.arn == spec]
    else:
        group, _, version = spec.rpartition("/")
        if not version.isdigit():
            raise UserError(f"--model {spec!r} is not a file, folder, s3:// URI, model package ARN or "
                            "registry version (N or group/N); see trainpipe models")
        groups = {p.group for p in packages}
        if not group and len(groups) > 1:
            raise UserError(f"--model {spec}: the registry has several groups ({', '.join(sorted(groups))}); "
                            f"say which: --model GROUP/{version}")
        found = [p for p in packages if p.version == int(version) and (not group or p.group == group)]
    if not found:
        raise UserError(f"--model {spec}: no such model package in {registry.path} (trainpipe models lists them)")
    return found[0], None


def _run_model_uri(workdir: Path, execution_id: str) -> str:
    from pipeline.local.execution import RECORD_FILE, load

    run_dir = workdir / "runs" / execution_id
    if not (run_dir / RECORD_FILE).is_file():
        raise UserError(f"--run {execution_id}: no execution {run_dir} (trainpipe executions lists them)")
    doc = load(run_dir)
    uris = [step["properties"]["ModelArtifacts"]["S3ModelArtifacts"] for step in doc.get("steps", [])
            if isinstance(step.get("properties"), dict) and "ModelArtifacts" in step["properties"]]
    if not uris:
        raise UserError(f"--run {execution_id}: the execution has no trained model (status {doc.get('status')})")
    return uris[-1]


def local_object(workdir: Path, uri: str) -> Path:
    """The file of ``uri`` in the local store of ``workdir``."""
    S3Uri.parse(uri, "the model URI")
    store = LocalStorage(workdir / "store")
    path = store.local_path(uri)
    if path is None:
        raise UserError(f"{uri} is not in the local store {store.root} (trainpipe store ls lists it)")
    return path


def _extracted(workdir: Path, where: str, what: str) -> tuple[Path, str]:
    """The archive at ``where`` (a file or an s3:// URI) extracted under the workdir, once."""
    from training_entry import archives

    archive = local_object(workdir, where) if where.startswith("s3://") else Path(where)
    stat = archive.stat()
    digest = hashlib.sha256(json.dumps([str(archive), stat.st_size, stat.st_mtime_ns]).encode()).hexdigest()[:16]
    target = workdir / EXTRACTED_DIR / digest
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{digest}.partial-", dir=target.parent))
        try:
            archives.extract(str(archive), str(partial))
            os.rename(partial, target)
        except (OSError, EOFError, ValueError, tarfile.TarError, archives.UnsafeArchiveError) as e:
            # predict and serve started at once both extract: the rename loses to the first one's
            # whole folder (a rename only ever places a whole one), which is as good as its own.
            if not (isinstance(e, OSError) and target.is_dir()):
                raise UserError(f"cannot extract the model archive {archive}: {e}") from None
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    if not any(target.glob(f"*/{SAVED_MODEL_FILE}")) and not (target / SAVED_MODEL_FILE).is_file() \
            and not served_files.is_script_model(target):
        raise UserError(f"{archive} holds no <version>/{SAVED_MODEL_FILE} (a TensorFlow SavedModel "
                        "as training writes it); is it a model.tar.gz of this pipeline?")
    return target, f"{what} {where}"
