"""What a rank does when training fails: tell SageMaker why, then take the job down.

SageMaker: the first 1 KB of ``/opt/ml/output/failure`` becomes the job's FailureReason.
Horovod/MPI: a rank that raises must exit, non-zero and promptly. The other ranks are then
blocked in an allreduce that will never complete; mpirun (SageMaker passes
``-mca orte_abort_on_non_zero_status 1``) kills them when it sees the non-zero exit. We leave
with ``os._exit`` rather than ``sys.exit`` because the normal interpreter shutdown runs
``hvd.shutdown()`` and joins TensorFlow and tf.data threads, which can block on the very
collective the dead rank abandoned. Python 3.10 syntax, standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import traceback
from collections.abc import Callable

from training_entry import contract

FAILURE_LIMIT_BYTES = 1024  # SageMaker: FailureReason keeps the first 1 KB
_PROCESS_START = time.time()


class UserError(Exception):
    """The job's input or configuration is wrong; the message says what and how to fix it."""


def failure_file(env: dict | None = None) -> str:
    """SageMaker: ``$SM_OUTPUT_DIR/failure``, else ``/opt/ml/output/failure`` (moved by
    ``SAGEMAKER_BASE_DIR``)."""
    env = os.environ if env is None else env
    output_dir = env.get("SM_OUTPUT_DIR")
    if output_dir:
        return os.path.join(output_dir, os.path.basename(contract.FAILURE_FILE))
    return contract.container_path(contract.FAILURE_FILE)


def describe(error: BaseException, where: str = "") -> str:
    """One useful first line: our own errors speak for themselves; anything else is named by
    its type. ``where`` says which rank (several ranks may fail; the first one wins)."""
    text = " ".join(str(error).split()) or "(no message)"
    reason = text if isinstance(error, UserError) else f"{type(error).__name__}: {text}"
    return f"{reason} [{where}]" if where else reason


# ``describe``'s suffix: "[rank R of N on algo-K]", "[rank R of N]" or "[algo-K]" (SageMaker's
# host names; a bare "[word]" at the end of someone else's reason is not taken for one).
_WHERE_RE = re.compile(r"\s*\[(?:rank (\d+) of \d+(?: on ([^\]\s]+))?|(algo-\d+))\]$")


def split_where(reason: str) -> tuple[str, int | None, str | None]:
    """``describe``'s text back as (reason, rank, host); rank and host are None where the
    text does not say (a reason some other program wrote)."""
    match = _WHERE_RE.search(reason)
    if match is None:
        return reason, None, None
    rank = int(match.group(1)) if match.group(1) is not None else None
    return reason[: match.start()], rank, match.group(2) or match.group(3)


def truncate_utf8(text: str, limit: int = FAILURE_LIMIT_BYTES) -> bytes:
    return text.encode()[:limit].decode(errors="ignore").encode()


def write_failure(reason: str, path: str, started: float = _PROCESS_START) -> bool:
    """Write ``reason`` unless another rank of this job on this host already wrote one.

    The first failure is usually the cause and the later ones its echo (a rank whose peer
    died sees "Horovod has been shut down"), so the first writer wins. A file older than
    this process is a previous job's (a reused local tree), and is replaced. Returns
    whether this call wrote the file.
    """
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            if os.path.getmtime(path) >= started:
                return False
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # another rank got there between our check and our create
        return False
    except OSError as e:  # the exit status still fails the job
        print(f"trainpipe: could not write {path}: {e}", file=sys.stderr, flush=True)
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(truncate_utf8(reason))
    return True


def report_exit_message(program: str, message: str) -> None:
    """A processing job's failure: one line on stderr and in ``/opt/ml/output/message``
    (SageMaker: the job's ExitMessage, first 1 KB). Processing and evaluation use this."""
    message = " ".join(message.split())  # one line, even for a multi-line exception text
    print(f"{program}: {message}", file=sys.stderr, flush=True)
    path = contract.container_path(contract.EXIT_MESSAGE_FILE)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(truncate_utf8(message))
    except OSError as e:  # the message is a courtesy; the exit code is what fails the job
        print(f"{program}: could not write {path}: {e}", file=sys.stderr)


def run_and_report(main: Callable[[], object], where: Callable[[], str] = lambda: "") -> None:
    """Run ``main``; on success return normally. On any exception: failure file, traceback
    to stderr, immediate non-zero exit (see the module docstring for why ``os._exit``)."""
    try:
        main()
    except BaseException as error:  # SystemExit/KeyboardInterrupt too: the job must end
        code = error.code if isinstance(error, SystemExit) else 1
        if isinstance(error, SystemExit) and code in (0, None):
            raise
        try:
            location = where()
        except Exception:  # describing the failure must not fail
            location = ""
        cause = root_cause(error)
        if not (cause is error and isinstance(error, UserError)):
            # A refusal raised as it is says all in its one line; with several ranks, the same
            # traceback from each would only bury it.
            traceback.print_exc()
        reason = describe(cause, location)
        print(f"trainpipe: training failed: {reason}", file=sys.stderr, flush=True)
        write_failure(reason, failure_file())
        for cleanup in _cleanups:  # os._exit skips atexit and finally blocks
            with contextlib.suppress(Exception):  # cleaning up must not mask the failure
                cleanup()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) and code != 0 else 1)


# --- Temporary files to remove even when leaving with os._exit -------------------------------
_cleanups: list[Callable[[], object]] = []


def cleanup_on_failure(cleanup: Callable[[], object]) -> None:
    _cleanups.append(cleanup)


# --- Root causes raised where the main thread cannot see them --------------------------------
_causes: list[BaseException] = []


def note_cause(error: BaseException) -> None:
    """Remember an error raised inside an input pipeline or thread. TensorFlow re-raises it
    in the main thread wrapped in an OpError whose text starts with graph-execution noise;
    the failure file should carry this one instead."""
    if not _causes:
        _causes.append(error)


def root_cause(error: BaseException) -> BaseException:
    return _causes[0] if _causes else error
