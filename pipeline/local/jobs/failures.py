"""Why a local job failed, named the way SageMaker Pipelines would name it (for retry
policies): the failure types, the container's failure reason files, and the exit of the
process that failed first."""

from __future__ import annotations

from pathlib import Path

from pipeline.local.hosts.processes import EXTERNAL_SIGNALS, signal_name

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
    """The first failure file any host writes (later ones are often ranks being killed)."""

    def __init__(self, files: dict[str, Path]):
        self.files = files
        self.first: tuple[str, str] | None = None  # (host, text)

    def poll(self) -> None:
        if self.first is not None:
            return
        for host, path in self.files.items():
            text = read_reason(path) if path.exists() else None
            if text:
                self.first = (host, text)
                return


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
    return JobFailure(f"AlgorithmError: {who} {how}" + (f": {detail}" if detail else ""), ALGORITHM_ERROR)
