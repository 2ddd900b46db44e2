"""Writing an execution to MLflow through ``MlflowClient``: live, step by step, and later.

One experiment per pipeline (named as the pipeline), one parent run per execution, one child
run per step that ran (``mlflow.parentRunId``), the registered model package as a model
version of the registered model named as its group. What has been logged is kept beside the
execution's record, in ``<run dir>/mlflow.json`` (per tracking URI: the experiment, the
parent run, each step's run, the model version), so logging is resumable: ``sync`` logs what
is missing and nothing twice; a step run left half-written (the server went away mid-step, or
took a request the client had given up on) is deleted and logged again whole.

The live ``Tracker`` never fails the pipeline: the first error (a server that is down, slow
past ``MLFLOW_HTTP_REQUEST_TIMEOUT``, refusing) stops tracking for the rest of that execution,
and when it ends one warning line says what was not logged and the command that logs it.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
import queue
import shlex
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

from pipeline.errors import UserError
from pipeline.local.execution import EXECUTING, ExecutionRecord, StepRecord, record_from_document
from pipeline.local.hosts import waiting
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
    named = f" --tracking-uri {shlex.quote(target.uri)}" if target is not None and not target.embedded else ""
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
    Tracker's thread warnings are dropped by ``_ThreadWarnings`` instead."""
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


class _ThreadWarnings:
    """While installed (``warnings.showwarning``, from the runner's thread), warnings raised on
    the Tracker's thread are dropped and every other thread's are shown as before."""

    def __init__(self):
        self.previous = warnings.showwarning

    def __call__(self, message, category, filename, lineno, file=None, line=None):
        if threading.current_thread().name != THREAD_NAME:
            self.previous(message, category, filename, lineno, file, line)

    def install(self) -> None:
        warnings.showwarning = self

    def remove(self) -> None:
        if warnings.showwarning is self:  # not if something replaced it since
            warnings.showwarning = self.previous


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

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainpipe" / "mlflow"
    empty = cache / f"empty-store-mlflow-{version('mlflow')}.db"
    try:
        if not empty.is_file():
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as scratch:
                made = Path(scratch) / "store.db"
                SqlAlchemyStore(f"sqlite:///{made}", Path(scratch).as_uri()).engine.dispose()
                os.replace(made, empty)  # atomic: a concurrent maker loses nothing
        db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(empty, db)
    except OSError:  # no cache folder to write: MLflow makes the store itself, slowly
        return
    if artifact_root:  # the copy's Default experiment points into the folder it was made in
        import sqlite3

        with contextlib.closing(sqlite3.connect(db)) as connection, connection:
            connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                               (f"{artifact_root}/0",))


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
        self.state["last"] = target.uri
        self.entry = self.state["targets"].setdefault(target.uri, {"steps": {}})

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
            return self.client.create_experiment(pipeline, artifact_location=location,
                                                 tags={R.TAG_PIPELINE: pipeline})
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
                          link=self.target.run_link(experiment, run.info.run_id))
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


# --- live, from the runner ------------------------------------------------------------------------
WARM_UPS = ("import mlflow.pyfunc", "the requirements check", "the evaluation figures")


class Tracker:
    """What the runner calls (``RunOptions.tracker``): when the execution starts, when each
    step ends, and when it ends. Never raises; see the module docstring.

    The logging runs on a thread of its own, off the pipeline's critical path, and works only
    while the runner waits on a job (``pipeline/local/hosts/waiting.py``): importing MLflow,
    opening the store and the parent run (~2 s on 2 cores) overlap the first job, and each
    step is logged while the next one runs. The runner hands over a copy of the record as it
    stood (it goes on changing it). With nothing to log, the thread imports what the steps
    still to come will need (matplotlib for the evaluation's figures, MLflow's pyfunc saver
    and its installed-packages map, ~1 s together), so that logging the last steps, which no
    job overlaps, costs a fraction of a second. ``ended`` lifts the wait for a job and waits
    for the thread: what the execution's records say is in MLflow when the command returns.
    What a step's run carries from the store (``evaluation.json``, the model) and the registry
    (the package's approval status) is read when the thread logs it, later than the step's end:
    each execution's store keys are its own, and a package approved in between is logged as
    approved."""

    def __init__(self, target: Target, workdir: Path, storage: Storage, say: Callable[[str], None]):
        self.target = target
        self.workdir = Path(workdir)
        self.storage = storage
        self.say = say
        self.log: ExecutionLog | None = None
        self.error: str | None = None
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._warm_ups = list(WARM_UPS)
        self._closing = threading.Event()  # the execution ended: no job to wait for any more
        self._warnings = _ThreadWarnings()
        self._failed_at_start = False

    # -- the runner's side: hand over, never wait (but at the end) --
    def started(self, record: ExecutionRecord) -> None:
        http_defaults()  # os.environ is changed here, on the runner's thread, never beside it
        self._queue.put((self._start, copy.deepcopy(record), None))  # before any warm-up
        thread = threading.Thread(target=self._work, name=THREAD_NAME, daemon=True)
        self._warnings.install()
        try:
            thread.start()
        except RuntimeError as error:  # no thread to be had (the machine's process limit)
            self._warnings.remove()
            self.error = f"no thread to log from: {error}"
            self.log = None
            self._failed_at_start = True
            return
        self._thread = thread

    def step_ended(self, record: ExecutionRecord, step: StepRecord) -> None:
        if self._thread is not None:
            snapshot = copy.deepcopy(record)
            self._queue.put((self._step, snapshot, snapshot.step(step.name) or copy.deepcopy(step)))

    def ended(self, record: ExecutionRecord) -> None:
        if self._thread is None and not self._failed_at_start:  # it never started (nothing ran)
            return
        if self._thread is not None:
            self._queue.put((self._end, copy.deepcopy(record), None))
            self._queue.put(None)
            self._closing.set()
            try:
                try:
                    self._thread.join()
                except KeyboardInterrupt:  # the run is over: the first Ctrl-C only says so
                    self.say("finishing the MLflow logging of the last steps (about a second); "
                             "Ctrl-C again stops it, and `trainpipe track sync` logs the rest later")
                    self._thread.join()
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting; the records keep the rest
                self.error = self.error or "interrupted before it finished"
            self._warnings.remove()
            if self.error is None and unlogged(record, self.log.entry if self.log else None):
                self.error = "its thread ended before it had logged everything"  # a BaseException there
        if self.error is None:
            return
        missing = unlogged(record, self.log.entry if self.log else None)
        self.say(f"warning: MLflow tracking at {self.target.uri} failed ({self.error}); not logged: "
                 f"{', '.join(missing)}; the run is not affected: `{sync_command(self.workdir, record.execution_id, self.target)}` "
                 f"logs them from this execution's records")

    def link(self) -> str | None:
        return (self.log.entry.get("link") if self.log else None) if self.error is None else None

    # -- the thread's side --
    def _work(self) -> None:
        while True:
            self._while_a_job_runs()
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                if self._warm_ups and self.error is None:
                    self._warm_up(self._warm_ups.pop(0))
                    continue
                item = self._queue.get()
                self._while_a_job_runs()
            if item is None:
                return
            action, record, step = item
            self._guard(lambda: action(record, step))  # noqa: B023 (called at once)

    def _while_a_job_runs(self) -> None:
        while not self._closing.is_set() and not waiting.a_job_runs(0.05):
            pass

    def _guard(self, action: Callable[[], None]) -> None:
        if self.error is not None:
            return
        try:
            # MLflow's loggers quieted for the call (their levels are the process's: the
            # runner's own lines from them wait too); its warnings: _ThreadWarnings.
            with quiet():
                action()
        except Exception as error:  # noqa: BLE001 (a tracking failure never fails the pipeline)
            self.error = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]

    def _start(self, record: ExecutionRecord, _step) -> None:
        self.log = ExecutionLog(self.target, Path(record.run_dir), self.storage,
                                self.workdir / "registry.sqlite")
        self.log.ensure_parent(record)

    def _step(self, record: ExecutionRecord, step: StepRecord) -> None:
        self.log.log_step(record, step)

    def _end(self, record: ExecutionRecord, _step) -> None:
        for step in record.steps:  # the step a stop (Ctrl-C) cut short: its run ends KILLED
            self.log.log_step(record, step)
        self.log.end_parent(record)

    @staticmethod
    def _warm_up(what: str) -> None:
        """Import ahead what a later step's logging needs; a failure here is the step's to say."""
        try:
            with quiet():
                if what == WARM_UPS[0]:
                    import mlflow.pyfunc  # noqa: F401
                elif what == WARM_UPS[1]:
                    # save_model checks the model's pip requirements against what is installed:
                    # MLflow maps every installed distribution to its modules once per process.
                    from mlflow.utils import requirements_utils

                    requirements_utils._init_packages_to_modules_map()
                else:  # the first drawing loads the fonts: one tiny figure drawn
                    from matplotlib.figure import Figure

                    from pipeline import notebook  # noqa: F401

                    figure = Figure(figsize=(1, 1))
                    figure.subplots().set_title("0")
                    figure.savefig(io.BytesIO(), format="png")
        except Exception:  # noqa: BLE001, S110 (an optimisation only)
            pass


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
    missing = unlogged(record, log.entry)
    with quiet():
        log.ensure_parent(record)
        for step in record.steps:
            log.log_step(record, step)
        log.end_parent(record)
    return missing
