"""Writing an execution to MLflow through ``MlflowClient``: live, step by step, and later.

One experiment per pipeline (named as the pipeline), one parent run per execution, one child
run per step that ran (``mlflow.parentRunId``), the registered model package as a model
version of the registered model named as its group. What has been logged is kept beside the
execution's record, in ``<run dir>/mlflow.json`` (per tracking URI: the experiment, the
parent run, each step's run, the model version), so logging is resumable: ``sync`` logs what
is missing and nothing twice; a step run left half-written (the server went away mid-step, or
took a request the client had given up on) is deleted and logged again whole.

The live logging, from the runner, is ``pipeline/tracking/live.py``'s ``Tracker``: it never
fails the pipeline: the first error (a server that is down, slow past
``MLFLOW_HTTP_REQUEST_TIMEOUT``, refusing) stops tracking for the rest of that execution,
and when it ends one warning line says what was not logged and the command that logs it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.execution import EXECUTING, ExecutionRecord, StepRecord, record_from_document
from pipeline.local.store.private import write_private
from pipeline.local.store.storage import Storage
from pipeline.tracking import records as R
from pipeline.tracking.target import Target
from training_entry import archives

STATE_FILE = "mlflow.json"
# A server that is down or slow must cost the pipeline seconds, not MLflow's default minutes
# of retries (7 retries, backoff factor 2, 120 s a request); a user's own setting wins.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 # Its progress bars and "View run at" lines would land in the run's output.
                 "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
                 "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
# The pyfunc model's loader lives with the serving code (it imports TensorFlow; pipeline/
# must not): MLflow's models-from-code file, and the packages it imports, copied into the model.
# Named by path, never imported here: its loader's imports reach TensorFlow (import-linter).
PYFUNC_FILE = "mlflow_pyfunc.py"
PYFUNC_ARTIFACT = "saved_model"  # serving.mlflow_pyfunc.ARTIFACT (a test holds them equal)
_QUIET_LOGGERS = ("mlflow", "urllib3", "alembic", "sqlalchemy")


def sync_command(workdir: Path, execution_id: str | None = None, target: Target | None = None) -> str:
    """The command that logs what is missing, to ``target``: named unless it is the workdir's
    embedded store (a server that never answered is in no record ``track sync`` reads)."""
    named = f" --tracking-uri {shlex.quote(target.display)}" if target is not None and not target.embedded else ""
    return (f"trainpipe track sync --workdir {workdir}" + (f" --execution {execution_id}" if execution_id else "")
            + named)


THREAD_NAME = "trainpipe-mlflow"  # the Tracker's thread


@contextlib.contextmanager
def quiet():
    """MLflow's own chatter (urllib3's retry warnings, alembic's migrations, "View run at")
    stays off the run's output: a failure is the one line the Tracker prints. The loggers'
    levels are the process's: while the Tracker's thread logs, the runner's own lines from
    these libraries (urllib3's, through boto3) are held back too. Python's warnings filters
    are the process's as well, and ``catch_warnings`` is not safe beside another thread's (its
    exit restores the filters it saw on entry, whatever the other did meanwhile): on the
    Tracker's thread warnings are dropped by ``live.ThreadWarnings`` instead."""
    levels = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        if threading.current_thread().name == THREAD_NAME:
            yield
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def http_defaults() -> None:
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)


def client_for(target: Target):
    http_defaults()  # a no-op on the Tracker's thread: set by Tracker.started on the runner's
    with quiet():
        from mlflow import MlflowClient

        if target.embedded:
            place_empty_store(Path(target.uri.removeprefix("sqlite:///")), target.artifact_location)
        return MlflowClient(tracking_uri=target.uri, registry_uri=target.uri)


def place_empty_store(db: Path, artifact_root: str | None = None) -> None:
    """A new embedded store starts as a copy of an empty one this MLflow version made once
    on this machine (~/.cache/trainpipe/mlflow/): MLflow creates a SQLite store by running
    every migration since its first, 12 s on this project's 2-core machine, and every new
    workdir (every test's) would pay it. MLflow sees the copy at its head revision and
    migrates nothing. ``artifact_root``: where the copy's Default experiment keeps artifacts
    (as MLflow would have made it: ``<root>/0``)."""
    if db.exists():
        return
    from importlib.metadata import version

    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    from pipeline.local.hosts.shared_memory import cache_root  # trainpipe's one cache folder

    cache = cache_root() / "mlflow"
    empty = cache / f"empty-store-mlflow-{version('mlflow')}.db"
    try:
        if not empty.is_file():
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as scratch:
                made = Path(scratch) / "store.db"
                SqlAlchemyStore(f"sqlite:///{made}", Path(scratch).as_uri()).engine.dispose()
                os.replace(made, empty)  # atomic: a concurrent maker loses nothing
        db.parent.mkdir(parents=True, exist_ok=True)
        # Made whole beside it, then linked in under its name, which fails if a concurrent
        # run's store got there first: copied straight to its name, a second run's copy
        # replaced the first's store, with the first's runs in it, while the first was logging.
        with tempfile.TemporaryDirectory(dir=db.parent, prefix=f".{db.name}-") as scratch:
            made = Path(scratch) / db.name
            shutil.copyfile(empty, made)
            if artifact_root:  # the copy's Default experiment points into the folder it was made in
                import sqlite3

                with contextlib.closing(sqlite3.connect(made)) as connection, connection:
                    connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                                       (f"{artifact_root}/0",))
            with contextlib.suppress(FileExistsError):  # the other run's store: the one both use
                os.link(made, db)
    except OSError:  # no cache folder to write: MLflow makes the store itself, slowly
        return


# --- the state file ----------------------------------------------------------------------------
def read_state(run_dir: Path) -> dict:
    try:
        doc = json.loads((Path(run_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {"targets": {}}
    return doc if isinstance(doc.get("targets"), dict) else {"targets": {}}


def write_state(run_dir: Path, state: dict) -> None:
    write_private(Path(run_dir) / STATE_FILE, json.dumps(state, indent=2))


def last_link(run_dir: Path) -> str | None:
    """The parent run's link in the target the execution logged to last (for listings)."""
    state = read_state(run_dir)
    entry = state["targets"].get(state.get("last") or "")
    return entry.get("link") if entry else None


def last_experiment_link(run_dir: Path) -> str | None:
    """The runs table of the execution's experiment, where its runs compare side by side."""
    state = read_state(run_dir)
    entry = state["targets"].get(state.get("last") or "")
    return entry.get("experiment_link") if entry else None


# --- logging -------------------------------------------------------------------------------------
class ExecutionLog:
    """One execution in one tracking target: the calls, and the state that makes them resumable."""

    def __init__(self, target: Target, run_dir: Path, storage: Storage | None,
                 registry_path: Path | None, client=None):
        self.target = target
        self.run_dir = Path(run_dir)
        self.storage = storage
        self.registry_path = registry_path
        self.client = client or client_for(target)
        self.state = read_state(self.run_dir)
        # Keyed by the URI as shown: a password in it is never written to mlflow.json (a state
        # written before that keeps its entry, moved under the shown key).
        if target.uri != target.display and target.uri in self.state["targets"]:
            self.state["targets"].setdefault(target.display, self.state["targets"].pop(target.uri))
        self.state["last"] = target.display
        self.entry = self.state["targets"].setdefault(target.display, {"steps": {}})

    def save(self) -> None:
        write_state(self.run_dir, self.state)

    # -- the parent run --
    def experiment_id(self, pipeline: str) -> str:
        if self.entry.get("experiment_id"):
            return self.entry["experiment_id"]
        found = self.client.get_experiment_by_name(pipeline)
        if found is not None:
            return found.experiment_id
        location = None
        if self.target.embedded:  # not MLflow's default, ./mlruns under whatever the cwd is
            location = f"{self.target.artifact_location}/{_safe(pipeline)}"
        try:
            # MLflow 3's UI opens an experiment of no kind on its GenAI pages (traces); ours
            # holds training runs, which its machine-learning pages show.
            return self.client.create_experiment(pipeline, artifact_location=location,
                                                 tags={R.TAG_PIPELINE: pipeline, R.TAG_EXPERIMENT_KIND: R.EXPERIMENT_KIND})
        except Exception:  # another runner created it in between
            found = self.client.get_experiment_by_name(pipeline)
            if found is None:
                raise
            return found.experiment_id

    def ensure_parent(self, record: ExecutionRecord) -> str:
        if self.entry.get("run_id"):
            return self.entry["run_id"]
        payload = R.parent_run(record)
        experiment = self.experiment_id(self.target.experiment or record.pipeline_name)
        run = self.client.create_run(experiment, start_time=payload.start_ms, tags=payload.tags,
                                     run_name=payload.name)
        self._log_values(run.info.run_id, payload)
        self.entry.update(experiment_id=experiment, run_id=run.info.run_id,
                          link=self.target.run_link(experiment, run.info.run_id),
                          experiment_link=self.target.experiment_link(experiment))
        self.save()
        return run.info.run_id

    def end_parent(self, record: ExecutionRecord) -> None:
        if self.entry.get("ended") or record.status == EXECUTING:
            return
        parent = self.ensure_parent(record)
        payload = R.parent_end(record)
        self._log_values(parent, payload, params=False)
        self.client.set_terminated(parent, status=payload.status, end_time=payload.end_ms)
        self.entry["ended"] = True
        self.save()

    def forget_lost_runs(self) -> None:
        """Runs the state names that the store does not hold (a store lost, or, before issue 48,
        replaced by a concurrent first run's) are logged again: a lost parent takes the whole
        entry with it, and the step runs that pointed to it are deleted, else they would stand
        beside the ones logged again under the new parent."""
        if self.entry.get("run_id") and not self._holds(self.entry["run_id"]):
            for step in self.entry["steps"].values():
                if step.get("run_id") and self._holds(step["run_id"]):
                    self.client.delete_run(step["run_id"])
            self.entry.clear()
            self.entry["steps"] = {}
            return
        for name, step in list(self.entry["steps"].items()):
            if step.get("run_id") and not self._holds(step["run_id"]):
                del self.entry["steps"][name]

    def _holds(self, run_id: str) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_run(run_id)
        except MlflowException as error:
            if error.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise
        return True

    # -- a step's run --
    def step_logged(self, name: str) -> bool:
        return bool(self.entry["steps"].get(name, {}).get("logged"))

    def log_step(self, record: ExecutionRecord, step: StepRecord) -> None:
        if not R.loggable(step) or self.step_logged(step.name):
            return
        parent = self.ensure_parent(record)
        # A run of this step that was created and never finished (the server went away, or
        # answered after the client gave up, so that its id never came back) is deleted, and
        # the step logged again whole: one run per step, whatever happened before.
        stale = self.client.search_runs(
            [self.entry["experiment_id"]],
            filter_string=f"tags.`{R.TAG_PARENT}` = '{parent}' and tags.`{R.TAG_STEP}` = '{step.name}'")
        for run in stale:
            for nested in self.client.search_runs(  # its tuning trials, if it had any
                    [self.entry["experiment_id"]], filter_string=f"tags.`{R.TAG_PARENT}` = '{run.info.run_id}'"):
                self.client.delete_run(nested.info.run_id)
            self.client.delete_run(run.info.run_id)
        payload = R.step_run(record, step, self.storage, self.registry_path)
        run = self.client.create_run(self.entry["experiment_id"], start_time=payload.start_ms,
                                     tags={**payload.tags, R.TAG_PARENT: parent}, run_name=payload.name)
        run_id = run.info.run_id
        self.entry["steps"][step.name] = {"run_id": run_id, "logged": False}
        self.save()
        self._log_values(run_id, payload)
        if payload.to_parent is not None:  # the evaluation's metrics, the best trial's values
            self._log_values(parent, payload.to_parent)
        if payload.artifacts:
            with tempfile.TemporaryDirectory(prefix="trainpipe-mlflow-") as scratch:
                for relative, data in payload.artifacts.items():
                    path = Path(scratch) / relative
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                self.client.log_artifacts(run_id, scratch)
        for trial in payload.children:  # a Tuning step's trials, nested under its run
            child = self.client.create_run(self.entry["experiment_id"], start_time=trial.start_ms,
                                           tags={**trial.tags, R.TAG_PARENT: run_id}, run_name=trial.name)
            self._log_values(child.info.run_id, trial)
            self.client.set_terminated(child.info.run_id, status=trial.status, end_time=trial.end_ms)
        if payload.model is not None and self.storage is not None:
            version = self.log_model(run_id, payload.model)
            self.entry["steps"][step.name]["model_version"] = version
            self.entry["model_version"] = {"name": payload.model.group, "version": version}
        self.client.set_terminated(run_id, status=payload.status, end_time=payload.end_ms)
        self.entry["steps"][step.name]["logged"] = True
        self.save()

    def _log_values(self, run_id: str, payload: R.RunPayload, params: bool = True) -> None:
        from mlflow.entities import Metric, Param, RunTag

        metrics = [Metric(k, v, t, s) for k, v, t, s in payload.metrics]
        tags = [RunTag(k, v) for k, v in payload.tags.items()]
        plist = [Param(k, v) for k, v in payload.params.items()] if params else []
        # MLflow's log_batch limits: 1000 entries a call, of which 100 params and 100 tags.
        for i in range(0, len(plist), 100):
            self.client.log_batch(run_id, params=plist[i:i + 100])
        for i in range(0, len(tags), 100):
            self.client.log_batch(run_id, tags=tags[i:i + 100])
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i:i + 1000])

    # -- the model --
    def log_model(self, run_id: str, model: R.ModelToLog) -> str:
        """The package's SavedModel as a pyfunc model (``mlflow models serve|predict`` and
        ``mlflow.pyfunc.load_model`` load it) under the run's ``model/``, registered as a
        version of the registered model named as the package group, tagged with the package."""
        from mlflow.exceptions import MlflowException

        known = self.version_of(model)
        if known is not None:  # a cached Register step, or a step logged again: one version a package
            return known
        with tempfile.TemporaryDirectory(prefix="trainpipe-mlflow-model-") as scratch:
            saved = Path(scratch) / "model.tar.gz"
            saved.write_bytes(self.storage.read_bytes(model.model_data_url))
            extracted = Path(scratch) / PYFUNC_ARTIFACT
            extracted.mkdir()
            archives.extract(str(saved), str(extracted))  # the one safe extractor
            save_pyfunc(Path(scratch) / "model", extracted, model)
            self.client.log_artifacts(run_id, str(Path(scratch) / "model"), "model")
        source = f"{self.client.get_run(run_id).info.artifact_uri}/model"
        try:
            self.client.create_registered_model(
                model.group, tags={R.TAG_PIPELINE: "trainpipe"},
                description=f"trainpipe model package group {model.group}: one version per "
                            f"registered model package")
        except MlflowException as error:
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        tags = {R.TAG_MODEL_PACKAGE: model.package_arn,
                "sagemaker.model_package_version": str(model.package_version),
                "sagemaker.model_approval_status": model.approval_status}
        version = self.client.create_model_version(
            model.group, source, run_id=run_id, tags=tags,
            description=f"model package {model.package_arn} ({model.approval_status})")
        return str(version.version)

    def version_of(self, model: R.ModelToLog) -> str | None:
        """The model version that already stands for this model package, if any."""
        from mlflow.exceptions import MlflowException

        try:
            versions = self.client.search_model_versions(f"name='{_quoted(model.group)}'")
        except MlflowException:  # no registered model of that name yet
            return None
        found = [v for v in versions if (v.tags or {}).get(R.TAG_MODEL_PACKAGE) == model.package_arn]
        return str(min(int(v.version) for v in found)) if found else None


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def save_pyfunc(path: Path, saved_model_dir: Path, model: R.ModelToLog) -> None:
    import mlflow.pyfunc

    import serving
    import training_entry

    serving_dir = Path(serving.__file__).parent
    mlflow.pyfunc.save_model(
        path=str(path), python_model=str(serving_dir / PYFUNC_FILE),
        artifacts={PYFUNC_ARTIFACT: str(saved_model_dir)},
        code_paths=[str(serving_dir), str(Path(training_entry.__file__).parent)],
        # Said, not inferred: inference would load the model (TensorFlow) in a subprocess.
        pip_requirements=_requirements(),
        metadata={R.TAG_MODEL_PACKAGE: model.package_arn})
    for cache in path.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def _requirements() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("mlflow", "tensorflow-cpu", "numpy", "pandas", "starlette", "uvicorn"):
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            continue
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "pipeline"


def unlogged(record: ExecutionRecord, entry: dict | None) -> list[str]:
    """What of ``record`` a target's state lacks, in words."""
    entry = entry or {"steps": {}}
    out = [] if entry.get("run_id") else ["the execution's run"]
    out += [f"step {s.name}" for s in record.steps
            if R.loggable(s) and not entry["steps"].get(s.name, {}).get("logged")]
    if not entry.get("ended") and record.status != EXECUTING:
        out.append("the execution's end")
    return out


# --- later, from the records (trainpipe track sync) ------------------------------------------------
def sync_execution(doc: dict, target: Target, storage: Storage | None, registry_path: Path,
                   client=None) -> list[str]:
    """Log what ``target`` lacks of one execution (its ``execution.json`` document); returns
    what was logged, in words. An execution still running is left to its runner."""
    record = record_from_document(doc)
    if record.status == EXECUTING:
        raise UserError(f"execution {record.execution_id} is still running; sync it when it ends")
    log = ExecutionLog(target, Path(record.run_dir), storage, registry_path, client=client)
    with quiet():
        log.forget_lost_runs()
    missing = unlogged(record, log.entry)
    with quiet():
        log.ensure_parent(record)
        for step in record.steps:
            log.log_step(record, step)
        log.end_parent(record)
    return missing
