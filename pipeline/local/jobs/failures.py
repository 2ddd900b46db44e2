"""Why a local job failed, named the way SageMaker Pipelines would name it (for retry
policies): the failure types, the container's failure reason files, and the exit of the
process that failed first."""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from pathlib import Path

from pipeline.local.hosts.processes import EXTERNAL_SIGNALS, signal_name
from pipeline.local.store.channels import relative_key
from pipeline.local.store.storage import S3Uri, StorageError, join_uri
from training_entry.contract import CONTAINER_BASE_DIR, INPUT_DATA_DIR, MODEL_DIR
from training_entry.failure import split_where

# SageMaker: how much of the container's failure reason file the job keeps.
FAILURE_REASON_LIMIT = 1024

# Failure types: what SageMaker Pipelines would call the failure, for retry policies.
ALGORITHM_ERROR = "AlgorithmError"  # the script's fault: never retried
INTERNAL_ERROR = "SageMaker.JOB_INTERNAL_ERROR"
RESOURCE_LIMIT = "SageMaker.RESOURCE_LIMIT"
CLIENT_ERROR = "ClientError"  # bad request (channels, code location): never retried


class JobFailure(Exception):
    def __init__(self, reason: str, failure_type: str = ALGORITHM_ERROR):
        super().__init__(reason)
        self.reason = reason
        self.failure_type = failure_type


def read_reason(path: Path) -> str | None:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return text[:FAILURE_REASON_LIMIT] or None


class FailureWatch:
    """The first failure file any host writes (later ones are often ranks being killed). A
    rank writes it as it fails, before it exits: of the files found at one poll, the oldest."""

    def __init__(self, files: dict[str, Path]):
        self.files = files
        self.first: tuple[str, str] | None = None  # (host, text)

    def poll(self) -> None:
        if self.first is not None:
            return
        found = []
        for host, path in self.files.items():
            try:
                written = path.stat().st_mtime_ns
            except OSError:
                continue
            text = read_reason(path)
            if text:
                found.append((written, host, text))
        if found:
            _, host, text = min(found)
            self.first = (host, text)


def first_failure(rank: int | None, host: str, signum: int | None, code: int | None,
                  first_file: tuple[str, str] | None, last_line: str | None) -> JobFailure:
    """The job's failure, named after the process that failed first. ``rank`` on ``host``
    (rank None: the host's one process) is the one whose exit ended the job; ``first_file``
    is the earliest failure file, (host, text). A rank writes that file as it fails, before
    it exits: when the file names another rank (``describe``'s ``[rank R of N on algo-K]``)
    or host, that one failed first and this exit is its echo (a peer killed by mpirun)."""
    if first_file is None:
        return exit_failure(_process(rank, host), signum, code, last_line, reported=False)
    file_host, text = first_file
    reason, named_rank, named_host = split_where(text)
    named_host = named_host or file_host
    if named_host == host and (named_rank is None or rank is None or named_rank == rank):
        return exit_failure(_process(rank, host), signum, code, reason, reported=True)
    return JobFailure(f"AlgorithmError: {_process(named_rank, named_host)} failed: {reason}",
                      ALGORITHM_ERROR)


def _process(rank: int | None, host: str) -> str:
    return host if rank is None else f"rank {rank} on {host}"


def exit_failure(who: str, signum: int | None, code: int | None, detail: str | None,
                 reported: bool) -> JobFailure:
    """The failure of process ``who``, killed by ``signum`` or exited with ``code``. A kill
    from outside (the OOM killer, an operator) with no reason the container wrote
    (``reported``) is the platform's fault; anything else is the script's."""
    if signum is not None:
        how = f"was killed by signal {signum} ({signal_name(signum)})"
        if signum in {int(s) for s in EXTERNAL_SIGNALS} and not reported:
            return JobFailure(
                f"InternalServerError: {who} {how}: out of memory, or killed from outside the job",
                INTERNAL_ERROR)
    else:
        how = f"exited with code {code}"
    reason = f"AlgorithmError: {who} {how}" + (f": {detail}" if detail else "")
    if signum == signal.SIGABRT and detail and TEARDOWN_ABORT in detail:
        reason += TEARDOWN_HINT
    return JobFailure(reason, ALGORITHM_ERROR)


# What a C++ std::thread destroyed while joinable prints before abort(). torch.distributed's gloo
# worker threads do it when a collective's work (holding tensors Python made) is freed during
# interpreter exit (pytorch/pytorch#179291): a rank that finished its script still aborts, on
# SageMaker as here. Measured on torch 2.13 (the test DDP script, 4 ranks under load): 14 of 140
# runs aborted with the DDP model only `del`-ed, 0 of 80 with gc.collect() after it (what DDP
# and the collectives leave in reference cycles is freed while the interpreter is still whole).
TEARDOWN_ABORT = "terminate called without an active exception"
TEARDOWN_HINT = (" (if the script uses torch.distributed: its process group outlived the script into "
                 "interpreter exit, pytorch/pytorch#179291; at the end, del the DDP model and optimizer, "
                 "gc.collect(), then dist.barrier() and dist.destroy_process_group())")


# --- The failure in the user's terms ------------------------------------------------------------
def parameter_terms(definition: Mapping) -> dict[str, str]:
    """{hyperparameter: pipeline parameter} for each Training step hyperparameter that is a
    parameter as it stands: ``{"Get": "Parameters.X"}``, or the SDK's one-value ``Std:Join``
    of it. The definition is the one place that says which parameter feeds which
    hyperparameter, for trainpipe's own definition and any other alike."""
    terms: dict[str, str] = {}
    for step in definition.get("Steps", []):
        if step.get("Type") != "Training":
            continue
        for name, value in step.get("Arguments", {}).get("HyperParameters", {}).items():
            join = value.get("Std:Join", {}) if isinstance(value, dict) else {}
            if join.get("On") == "" and len(join.get("Values", [])) == 1:
                value = join["Values"][0]
            get = value.get("Get") if isinstance(value, dict) and len(value) == 1 else None
            if isinstance(get, str) and get.startswith("Parameters."):
                terms[name] = get.split(".", 1)[1]
    return terms


# A number after the name: ``batch-size 32``, ``--batch-size=32``.
_VALUE = r"(?:[ =](?P<value>-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)(?!\w|\.\d))"


def in_user_terms(reason: str, terms: Mapping[str, str]) -> str:
    """``reason`` with each hyperparameter named as the user sets it in ``run --local``:
    ``batch-size 32`` (or ``--batch-size 32``) becomes ``-p BatchSize=32`` and a bare
    ``batch-size`` ``-p BatchSize``. A one-word name (``epochs``) is plain English too, so
    it is renamed only where a number follows it."""
    for hyperparameter, parameter in terms.items():
        name = r"(?<![\w-])(?:--)?" + re.escape(hyperparameter) + r"(?![\w-])"
        one_word = re.fullmatch(r"[A-Za-z]+", hyperparameter) is not None
        pattern = re.compile(name + (_VALUE if one_word else _VALUE + "?"))
        reason = pattern.sub(
            lambda m, p=parameter: f"-p {p}" + (f"={m['value']}" if m["value"] is not None else ""),
            reason)
    return reason


# A path in a reason: up to a space, a quote or a closing bracket ("No such file or directory:
# '/opt/ml/input/data/train/x.csv'", "... in /opt/ml/processing/input/data/x.csv, row 3").
_PATH_END = r"[^\s'\"`,;()\[\]]*"


def input_folders(description: Mapping) -> dict[str, str]:
    """{container folder: S3Uri} of a job's inputs, from its Describe*Job document (its
    request, evaluated): a training channel's ``/opt/ml/input/data/<channel>`` and a
    processing input's ``LocalPath``. Pipe channels are FIFOs: no file of theirs is named."""
    folders = {}
    for channel in description.get("InputDataConfig") or []:
        source = (channel.get("DataSource") or {}).get("S3DataSource") or {}
        mode = channel.get("InputMode") or description.get("AlgorithmSpecification", {}).get("TrainingInputMode")
        if source.get("S3Uri") and mode != "Pipe":
            # SageMaker: File and FastFile channels land in /opt/ml/input/data/<channel>.
            folders[f"{INPUT_DATA_DIR}/{channel['ChannelName']}"] = source["S3Uri"]
    for processing_input in description.get("ProcessingInputs") or []:
        source = processing_input.get("S3Input") or {}
        if source.get("S3Uri") and source.get("LocalPath"):
            folders[source["LocalPath"].rstrip("/")] = source["S3Uri"]
    return folders


def object_of(uri: str, relative: str, storage) -> str:
    """The object a file ``relative`` below an input's folder was copied from
    (``channels.relative_key`` backwards); for a file no object made (the script's own
    guess), where an object of that name would be."""
    for path in (storage.list(uri) if storage is not None else []):
        key = S3Uri.parse(path).key
        if relative_key(S3Uri.parse(uri).key, key) == relative:
            return path
    return join_uri(uri, relative) if relative else uri


def in_user_paths(reason: str, description: Mapping, storage=None,
                  sources: Mapping[str, Path] | None = None, job_dir: Path | None = None,
                  container: bool = True) -> str:
    """``reason`` with each input file it names by its container path
    (``/opt/ml/input/data/train/x.csv``) named as the user knows it: the ``s3://`` object it
    was copied from, or the local file ``run --local`` copied into the store (``sources``:
    {s3:// prefix: local path}). Where namespaces are off, a host's tree is
    ``<job_dir>/hosts/<host>``, and its paths are read the same way; ``container`` False then
    leaves /opt/ml itself alone (the machine's, not the job's: ``explain_missing_path`` says so)."""
    # {folder below /opt/ml: S3Uri}, the longest first (.../data/train before .../data/t).
    below = {folder[len(CONTAINER_BASE_DIR):]: uri for folder, uri in input_folders(description).items()
             if folder.startswith(CONTAINER_BASE_DIR + "/")}
    if not below or not (container or job_dir is not None):
        return reason
    bases = [re.escape(CONTAINER_BASE_DIR)] if container else []
    if job_dir is not None:
        bases.append(re.escape(str(Path(job_dir) / "hosts")) + r"/algo-\d+")
    folders = "|".join(re.escape(f) for f in sorted(below, key=len, reverse=True))
    pattern = re.compile(rf"(?:{'|'.join(bases)})(?P<folder>{folders})(?:/(?P<rest>{_PATH_END}))?(?![\w.-])")

    def user_path(match: re.Match) -> str:
        rest = match["rest"] or ""
        stop = rest[len(rest.rstrip(".")):]  # a sentence's full stop is not the file's
        try:
            found = object_of(below[match["folder"]], rest[:len(rest) - len(stop)], storage)
        except (ValueError, OSError, StorageError):  # a malformed URI, an unreachable store: as it was
            return match[0]
        return (local_source(found, sources or {}) or found) + stop

    return pattern.sub(user_path, reason)


def local_source(uri: str, sources: Mapping[str, Path]) -> str | None:
    """The user's local file or folder that ``uri`` is the store's copy of, if any."""
    for prefix, local in sources.items():
        prefix = prefix.rstrip("/")
        if uri.rstrip("/") == prefix:
            return str(local)
        if uri.startswith(prefix + "/"):
            local = Path(local)
            return str(local / uri[len(prefix) + 1:]) if local.is_dir() else str(local)
    return None


def missing_program() -> str:
    return ("hyperparameter sagemaker_program is missing: nothing says which script to run; the "
            "Training step's HyperParameters must name it (the SDK v2 estimators set it from "
            "entry_point; SDK v3's ModelTrainer uploads sm_drivers/sourcecode.json instead)")


def empty_model_warning(host: str, no_namespaces: str | None) -> str:
    """Said when the job wrote nothing to its model directory: SageMaker would pack the same
    empty model.tar.gz, but here it is most often a script that wrote somewhere else."""
    text = f"the model is empty: nothing was written to {MODEL_DIR} (SM_MODEL_DIR) on {host}"
    if no_namespaces is not None:
        text += (f"; without a private {MODEL_DIR} per host here ({no_namespaces}) a script must "
                 f"write to $SM_MODEL_DIR")
    return text
