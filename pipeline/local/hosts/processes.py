"""Child processes of one local job: started in their own sessions, tagged, and always ended.

Every process a job starts gets ``MARKER_ENV=<job token>`` in its environment. Open MPI's
daemons leave their session and put every rank in a process group of its own, so killing
process groups is not enough; at the end of a job every process on this machine that carries
the job's token (found through /proc) is terminated as well. Nothing else is touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

MARKER_ENV = "TRAINPIPE_JOB_TOKEN"
# A job folder's token file: the marker its processes carry (MARKER_ENV), read by the sweep.
JOB_TOKEN_FILE = "job.token"


def new_token() -> str:
    return uuid.uuid4().hex


@dataclass
class Child:
    label: str
    process: subprocess.Popen
    log: Path


class ProcessSet:
    def __init__(self, token: str):
        self.token = token
        self.children: list[Child] = []

    def spawn(self, label: str, argv: list[str], env: dict, cwd: Path, log: Path) -> Child:
        """Start ``argv`` with stdout and stderr appended to ``log``."""
        env = {**env, MARKER_ENV: self.token}
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            process = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        child = Child(label, process, log)
        self.children.append(child)
        return child

    def running(self) -> list[Child]:
        return [c for c in self.children if c.process.poll() is None]

    def finished(self) -> list[Child]:
        return [c for c in self.children if c.process.poll() is not None]

    def terminate(self, grace: float = 10.0) -> int:
        """SIGTERM every child's process group (mpirun passes it on to its ranks), wait up
        to ``grace`` seconds, then SIGKILL; finally end anything left carrying the token.

        Ctrl-C or SIGTERM while this runs cannot cut it short: a further interrupt only
        skips what is left of the grace period (SIGKILL at once). Returns how many
        interrupts arrived meanwhile, for the caller to act on once everything is ended."""
        with interrupts_deferred() as deferred:
            for child in self.running():
                _signal_group(child.process.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.running() and time.monotonic() < deadline and not deferred.since_start:
                time.sleep(0.05)
            for child in self.running():
                _signal_group(child.process.pid, signal.SIGKILL)
            for child in self.children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=5)
            sweep(self.token, grace=0.0 if deferred.since_start else 3.0)
        return deferred.since_start


class _Deferred:
    """Interrupts that arrived inside ``interrupts_deferred`` blocks (nested ones share it)."""

    def __init__(self):
        self.count = 0
        self.depth = 0
        self.previous: dict[int, object] = {}
        self.first: int | None = None  # the first stop signal of this process (stop_reason)


_DEFERRED = _Deferred()
# What stops a run: Ctrl-C, SIGTERM, and SIGHUP (its terminal closed). The job's processes run
# in sessions of their own, so the terminal's hangup never reaches them: only the runner can
# end them, and it must not die of the default SIGHUP action before it has.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOPPED_BY_USER = "stopped by the user (Ctrl-C / SIGTERM)"
STOPPED_BY_HANGUP = "stopped: its terminal closed (SIGHUP)"


def stop_reason() -> str:
    """Why the run was stopped, from the stop signal that arrived first."""
    return STOPPED_BY_HANGUP if _DEFERRED.first == signal.SIGHUP else STOPPED_BY_USER


def _stop_signal_arrived(signum: int) -> None:
    if _DEFERRED.first is None:
        _DEFERRED.first = signum
    if signum == signal.SIGHUP:
        _silence_hung_up_terminal()


def _silence_hung_up_terminal() -> None:
    """After a hangup, writing to the terminal fails (EIO) and would cut the cleanup short:
    stdout and stderr that were a terminal now go to /dev/null. Pipes and files (nohup, a
    test, a log) keep receiving, so the record of the stop is still printed there."""
    import stat

    devnull = None
    try:
        for fd in (1, 2):
            try:
                is_terminal = stat.S_ISCHR(os.fstat(fd).st_mode)
            except OSError:
                continue
            if is_terminal:
                devnull = devnull if devnull is not None else os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)
    finally:
        if devnull is not None:
            os.close(devnull)


class _Block:
    def __init__(self, start: int):
        self.start = start

    @property
    def since_start(self) -> int:
        return _DEFERRED.count - self.start


@contextlib.contextmanager
def interrupts_deferred():
    """Within: Ctrl-C, SIGTERM and SIGHUP raise nothing, they are counted (``block.since_start``).
    Cleanup that must finish (ending a job's processes, writing its record) runs inside; the
    caller decides afterwards what the interrupt means. Only the main thread can set signal
    handlers: elsewhere this defers nothing."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield _Block(_DEFERRED.count)
        return
    if _DEFERRED.depth == 0:

        def handler(signum, frame):
            _DEFERRED.count += 1
            _stop_signal_arrived(signum)

        _DEFERRED.previous.update(_install(handler))
    _DEFERRED.depth += 1
    block = _Block(_DEFERRED.count)
    try:
        yield block
    finally:
        _DEFERRED.depth -= 1
        if _DEFERRED.depth == 0:
            for sig, previous in _DEFERRED.previous.items():
                signal.signal(sig, previous)
            _DEFERRED.previous.clear()


def _install(handler) -> dict[int, object]:
    """``handler`` for every stop signal this process does not ignore (``nohup`` ignores
    SIGHUP: such a run outlives its terminal, as asked); the handlers it replaced."""
    replaced = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            replaced[sig] = signal.signal(sig, handler)
    return replaced


def signal_group(pid: int, sig: int) -> None:
    """``sig`` to the process group ``pid`` leads (every child runs in a session of its own): a
    host's namespace launcher leaves stop signals to its group (``namespaces.run_as_init``)."""
    _signal_group(pid, sig)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def tagged_pids(token: str) -> list[int]:
    """Processes on this machine whose environment carries ``token`` (Linux /proc)."""
    needle = f"{MARKER_ENV}={token}".encode()
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def sweep(token: str, grace: float = 3.0) -> list[int]:
    """End every process still tagged with ``token``: SIGTERM, then SIGKILL after ``grace``,
    until none is left (a process that forks while being ended is found on the next pass)."""
    pids = tagged_pids(token)
    for pid in pids:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and tagged_pids(token):
        time.sleep(0.05)
    for _ in range(50):
        left = tagged_pids(token)
        if not left:
            break
        for pid in left:
            _kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return pids


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode} ({signal_name(-returncode)})"
    return f"exited with code {returncode}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# Signals that end a process from outside (the kernel's OOM killer sends SIGKILL): on
# SageMaker these look like a lost instance, an internal error, not the script's fault.
EXTERNAL_SIGNALS = {signal.SIGKILL, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def stop_signals_as_interrupt():
    """SIGTERM and SIGHUP stop a run the way Ctrl-C does: children ended, execution marked
    Stopped (``stop_reason`` says which). SIGINT is Python's KeyboardInterrupt already; it
    is only noted here."""

    def handler(signum, frame):
        _stop_signal_arrived(signum)
        if signum == signal.SIGINT:
            return previous_int(signum, frame) if callable(previous_int) else None
        raise KeyboardInterrupt

    previous_int = signal.getsignal(signal.SIGINT)
    previous = _install(handler)
    try:
        yield
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)
