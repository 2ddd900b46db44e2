"""Each simulated host sees its own ``/opt/ml`` and is called ``algo-N``: Linux namespaces.

SageMaker scripts open ``/opt/ml/...`` directly and some check ``socket.gethostname()``
against ``resourceconfig.json``. On this machine every simulated host's tree lives under
``<job dir>/hosts/<host>``; this launcher runs a host's process (a processing host's command,
a training rank, or a training host's Open MPI daemon, whose ranks inherit it) in
a private mount namespace where that tree is bind-mounted on ``/opt/ml``, and in a UTS
namespace whose hostname is the host's name. The job's hosts file (the machine's
``/etc/hosts`` plus ``127.0.0.1 algo-1 ... algo-N``, ``hosts_file()``) is bind-mounted on
``/etc/hosts``, so the host names resolve as they do between SageMaker's instances (to this
machine).

Each host also gets a PID namespace with its own /proc where allowed (``pid_probe``): a job
sees its host's processes only, so it cannot read the runner's environment (/proc/PID/environ)
or signal it; the runner user's credential files (~/.aws, ~/.netrc, ...) are empty for it and
trainpipe's cache read-only. The namespace's first process is the launcher (``run_as_init``).
A shared-memory MPI launch's ranks share its one daemon's (Open MPI's shared memory breaks
across PID namespaces). Where not allowed, one line says what a job can see (``pid_notice``).
The rest of the file system and the network are the machine's own, and the runner still sees
and ends every process (its /proc shows them all).

As root this takes ``unshare(2)`` and ``mount(2)``; as another user it first enters a user
namespace of its own (where the kernel allows unprivileged ones) mapping the user to itself,
so the script keeps its identity. ``/opt/ml`` must exist as an (empty) mount point. The
probe tries all of this on a mount point of its own first, and creates ``/opt/ml`` (which
needs root) only once it knows that every job will mount its hosts' trees over it: where
namespaces cannot work it never creates it, so a script that names ``/opt/ml`` cannot quietly
write into one folder shared by every host and every later job.

Where none of this is possible the runner falls back to moving container paths under the
host's directory (``SAGEMAKER_BASE_DIR``), says so at the start of the run and in its summary
(``mode_line``), and refuses, before it starts, a job whose code names ``/opt/ml`` itself
(``pipeline/local/jobs/lifecycle.py``).

Standard library only, and run by file path (like ``rank_exec.py``):

    python namespaces.py [--pid [--wait-all] [--hide PATH ...]] HOST TREE CWD HOSTS_FILE [TARGET] -- COMMAND [ARG ...]

(HOSTS_FILE may be ""; TARGET, where the tree is mounted, is /opt/ml unless given; --pid: a
PID namespace of the host's own, with its /proc; --hide: a credential file or folder made empty.)
``TRAINPIPE_NAMESPACES=0`` in the runner's environment turns the namespaces off.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from functools import lru_cache

# SageMaker: where the container's tree is (training_entry/contract.py names it too; this file
# imports nothing outside the standard library, see test_namespaces.py for the tie).
CONTAINER_BASE = "/opt/ml"
SWITCH_ENV = "TRAINPIPE_NAMESPACES"
LAUNCHER = os.path.abspath(__file__)

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x04000000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_BIND, _MS_REC = 4096, 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG, _PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 1, 3, 4
class NamespaceError(OSError):
    pass


@lru_cache(maxsize=1)  # found once, before unshare: find_library starts a process (ldconfig)
def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def hosts_file(path, hosts: list[str]) -> str:
    """Write the machine's /etc/hosts plus a line naming every simulated host; its path."""
    try:
        with open("/etc/hosts") as f:
            machine = f.read()
    except OSError:
        machine = "127.0.0.1 localhost\n"
    with open(path, "w") as f:
        f.write(machine.rstrip("\n") + "\n# trainpipe: the job's simulated hosts\n127.0.0.1 " + " ".join(hosts) + "\n")
    return str(path)


def enter(host: str, tree: str, hosts: str = "", target: str = CONTAINER_BASE, pid: bool = False,
          hide: list[str] | tuple[str, ...] = ()) -> None:
    """Make this process (and what it execs) see ``tree`` at ``target`` (/opt/ml), hostname
    ``host``, and ``hosts`` (when given) at /etc/hosts. The mount point must exist (``probe``).
    ``pid``: this process's next child is the first process of a new PID namespace (``run_as_init``
    does the rest); ``hide``: credential files and folders (``credentials.credential_paths``) made empty."""
    if not os.path.isdir(target):
        raise NamespaceError(2, f"{target} does not exist: {missing_mount_point_fix()}")
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWNS | _CLONE_NEWUTS | (_CLONE_NEWUSER if uid != 0 else 0) | (_CLONE_NEWPID if pid else 0)
    _check(libc.unshare(flags), "unshare")
    if uid != 0:
        # The new user namespace maps the user to itself: files keep their owner, and the
        # capabilities it grants (to mount and set the hostname) are dropped at exec.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # Private first: the bind mount must not propagate back to the machine's namespace.
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.mount(os.fsencode(tree), os.fsencode(target), None, _MS_BIND | _MS_REC, None),
           f"mount --bind {tree} {target}")
    if hosts:
        _check(libc.mount(os.fsencode(hosts), b"/etc/hosts", None, _MS_BIND, None),
               f"mount --bind {hosts} /etc/hosts")
    hide_credentials(libc, hide)
    name = host.encode()
    _check(libc.sethostname(name, len(name)), "sethostname")


def enter_pid_only(hide: list[str] | tuple[str, ...] = ()) -> None:
    """A PID namespace (and the mount namespace its /proc needs) for this process's next child,
    ``hide`` made empty: one Open MPI daemon's in a shared-memory launch (``pid_only_command``)."""
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID | (_CLONE_NEWUSER if uid != 0 else 0)), "unshare")
    if uid != 0:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    hide_credentials(libc, hide)


def pid_only_command(argv: list[str], python: str = sys.executable) -> list[str]:
    """``argv`` in a PID namespace of its own (with its /proc, no credential files), else as it
    is: one Open MPI daemon's, whose ranks share it (apart, shared memory crashes: pids collide)."""
    if pid_probe() is not None:
        return list(argv)
    hide = [arg for path in _credential_paths() for arg in ("--hide", path)]
    return [python, "-S", "-I", LAUNCHER, "--pid-only", *hide, "--", *argv]


def _credential_paths() -> list[str]:
    from pipeline.local.hosts.credentials import credential_paths  # the runner's side only

    return credential_paths()


def hide_credentials(libc, paths) -> None:
    """An empty read-only folder over each credential folder, /dev/null over each file: a
    job reads none of them by path (its own are in its environment, as on SageMaker). ``ro:``
    PATH (trainpipe's cache, the run's workdir): read-only, so no job plants what a later run
    loads or believes, nor alters the registry; ``rw:`` PATH (jobs' folders): writable again."""
    for path in paths:
        if path.startswith(("ro:", "rw:")):  # (not there yet: nothing to protect or keep writable)
            if os.path.isdir(path[3:]):
                _check(libc.mount(os.fsencode(path[3:]), os.fsencode(path[3:]), None, _MS_BIND | _MS_REC, None), path)
                _check(libc.mount(None, os.fsencode(path[3:]), None, _MS_BIND | _MS_REMOUNT | _kept_flags(
                    path[3:]) | (_MS_RDONLY if path.startswith("ro:") else 0), None), path)
        elif os.path.isdir(path) and not os.path.islink(path):
            _check(libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                              b"size=4k,mode=0500"), f"mount tmpfs over {path}")
        elif os.path.isfile(path):
            _check(libc.mount(b"/dev/null", os.fsencode(path), None, _MS_BIND, None), f"mount --bind /dev/null {path}")


def _kept_flags(path: str) -> int:  # a user namespace locks these of its mounts: dropping one is EPERM
    found = os.statvfs(path).f_flag  # statvfs's nosuid, nodev, noexec and atime flags -> mount(2)'s
    return sum(ms for st, ms in ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC),
               (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21)) if found & st)


# Signals that end a job (the runner's killpg, Open MPI's): they reach the command from its
# process group; the launcher and the first process outlive them until the command ends.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def run_as_init(program: list[str], wait_all: bool = False) -> int:
    """After ``enter(pid=True)``: fork the namespace's first process, which mounts its /proc and
    runs ``program`` as its child; end as ``program`` ended (exit code, or the same signal). The
    command is never the first process: that one drops every signal it has no handler for
    (pid_namespaces(7)), a Python job the runner's SIGTERM. When it ends, the kernel kills the
    rest. ``wait_all``: until the last process ends (orted --daemonize's first exits at once)."""
    libc = _libc()  # enter()'s: a process started now (find_library's) would be the namespace's first
    status_read, status_write = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(status_read)
        os._exit(_init(libc, program, status_write, wait_all))
    os.close(status_write)
    for sig in _STOP_SIGNALS:  # the command gets them from the process group; this one waits for it
        signal.signal(sig, signal.SIG_IGN)
    with os.fdopen(status_read, "rb") as pipe:
        said = pipe.read()
    _, init_status = os.waitpid(init, 0)
    status = int(said) if said.strip().isdigit() else init_status
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no disposition to reset
            signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        return 128 + number  # not reached for a signal that ends a process
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1


def _init(libc, program: list[str], status_write: int, wait_all: bool) -> int:
    """The namespace's first process: /proc, then ``program`` as its child, whose raw wait
    status it hands the launcher. It reaps every orphan of the namespace meanwhile."""
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the launcher gone (SIGKILL): all go
    try:
        _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None),
               "mount -t proc proc /proc")
    except OSError as error:
        print(f"namespaces.py: cannot mount this host's /proc: {error}", file=sys.stderr, flush=True)
        return 126
    child = os.fork()
    if child == 0:
        os.close(status_write)
        try:
            os.execvp(program[0], program)
        except OSError as error:
            print(f"cannot run {program[0]}: {error}", file=sys.stderr, flush=True)
        os._exit(127)
    said = None
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:  # nothing left in the namespace
            break
        if pid == child:
            said = str(status).encode()
            if not wait_all:
                break
    if said is None:
        return 1
    os.write(status_write, said)
    return 0


# As root, util-linux's unshare and mount do the same as this file's main() in a few
# milliseconds, where a Python start costs 50-150 ms per host on a busy machine
# (benchmarks/training/scaling/p6_namespaces.py). The hostname is written through /proc: no hostname binary.
_SHELL_ENTER = ('mount --bind "$1" "$5" && printf %s "$2" > /proc/sys/kernel/hostname'
                ' && { [ -z "$4" ] || mount --bind "$4" /etc/hosts; } && cd "$3" && shift 5 && exec "$@"')
# A POSIX shell (dash is Debian's /bin/sh) drops, when it execs, every variable whose name is
# not a shell identifier: SM_HP_LEARNING-RATE, which the toolkit sets for the hyperparameter
# learning-rate. Those are set again after the shell, by env(1) (``shell_safe``).
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _fast_path() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("mount"))


def shell_safe(argv: list[str], env: Mapping[str, str] | None) -> list[str]:
    """``argv`` such that the variables of ``env`` that a shell on the way would drop (names
    that are not shell identifiers) reach it all the same: ``env NAME=VALUE ... argv``. Such
    values show in the command line of env(1) for the instant before it execs; they are
    hyperparameters, on the script's own command line anyway (``--learning-rate 0.01``)."""
    odd = [f"{k}={v}" for k, v in (env or {}).items() if not _SHELL_NAME.fullmatch(k)]
    return ["env", "--", *odd, *argv] if odd else list(argv)


def command(host: str, tree, cwd: str, argv: list[str], python: str = sys.executable,
            hosts: str | None = None, env: Mapping[str, str] | None = None,
            target: str = CONTAINER_BASE, pid: bool | None = None, daemon: bool = False) -> list[str]:
    """``argv`` run as a process of ``host`` whose /opt/ml is ``tree``, started in ``cwd``
    (a container path such as /opt/ml/code: it exists only once the tree is mounted), with
    ``hosts`` (from ``hosts_file()``) as its /etc/hosts when given. ``env`` is the environment
    the command will be started with: what the launcher's shell would lose of it is kept.
    ``pid``: in a PID namespace of its own with its own /proc and no credential files (by
    default where ``pid_probe`` found that this machine allows it), through this file's
    launcher: Python's start (tens of ms) is the price of a first process that forwards
    nothing, reaps orphans and ends as the command ended, which the shell cannot."""
    if pid is None:
        pid = pid_probe() is None
    if pid:
        hide = [arg for path in _credential_paths() for arg in ("--hide", path)]
        daemonizes = ["--wait-all"] if daemon else []  # the namespace outlives argv (orted --daemonize)
        return [python, "-S", "-I", LAUNCHER, "--pid", *daemonizes, *hide, host, str(tree), cwd, hosts or "", target,
                "--", *argv]
    if _fast_path() and os.path.isdir(target):
        return [shutil.which("unshare"), "--mount", "--uts", "--propagation", "private", "/bin/sh", "-c",
                _SHELL_ENTER, "trainpipe-namespace", str(tree), host, cwd, hosts or "", target,
                *shell_safe(argv, env)]
    # -S -I: no site-packages, no user environment; the launcher needs the standard library only.
    return [python, "-S", "-I", LAUNCHER, host, str(tree), cwd, hosts or "", target, "--", *argv]


def enabled_by_user(environ=os.environ) -> bool:
    return environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@lru_cache(maxsize=1)
def probe() -> str | None:
    """None when this machine can give hosts their own /opt/ml and hostname, else why not.
    Tried once per runner process with a trivial command, the way a job would use it."""
    if not sys.platform.startswith("linux"):
        return f"Linux namespaces are not available on {sys.platform}"
    # Tried on a mount point of its own: /opt/ml is made only once namespaces are known to work.
    with tempfile.TemporaryDirectory(prefix="trainpipe-ns-") as scratch:
        tree, target = os.path.join(scratch, "tree"), os.path.join(scratch, "mnt")
        os.mkdir(tree)
        os.mkdir(target)
        marker = "trainpipe-namespace-probe"
        open(os.path.join(tree, marker), "w").close()
        check = (f'test -e {target}/{marker} && '
                 f'test "$(cat /proc/sys/kernel/hostname)" = algo-1')
        try:
            done = subprocess.run(command("algo-1", tree, "/", ["/bin/sh", "-c", check], target=target, pid=False),
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode != 0:
            lines = [line for line in (done.stderr or "").strip().splitlines() if line.strip()]
            return lines[-1] if lines else f"the probe exited with code {done.returncode}"
    if not os.path.isdir(CONTAINER_BASE):
        try:
            os.makedirs(CONTAINER_BASE, exist_ok=True)  # the mount point: every job mounts over it
        except OSError as error:
            return f"{CONTAINER_BASE} does not exist and cannot be created ({error.strerror}): " \
                   f"{missing_mount_point_fix()}"
    return None


@lru_cache(maxsize=1)
def pid_probe() -> str | None:
    """None when hosts can also have a PID namespace of their own with its /proc (a job then
    sees its host's processes only, none of the runner's), else why not. Tried once per
    runner process, after ``probe``. Where not, the runner is made not dumpable (``_not_dumpable``)."""
    reason = _pid_probe()
    return _not_dumpable(reason) if reason is not None else None


def _not_dumpable(reason: str) -> str:
    """Before any job, where jobs see this runner's processes: a process that is not dumpable
    has its /proc/PID/environ and mem owned by root, so a job of its user reads neither (a
    job's execve makes the job dumpable again; a job run as root reads them anyway)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    return reason


def _pid_probe() -> str | None:
    reason = unavailable_reason()
    if reason is not None:
        return reason
    with tempfile.TemporaryDirectory(prefix="trainpipe-ns-") as scratch:
        tree, target = os.path.join(scratch, "tree"), os.path.join(scratch, "mnt")
        os.mkdir(tree)
        os.mkdir(target)
        # The command is the namespace's second process, and /proc is that namespace's (its
        # process 1 is the launcher's first process, not the machine's init).
        check = 'test "$$" = 2 && grep -q namespaces.py /proc/1/cmdline'
        try:
            done = subprocess.run(command("algo-1", tree, "/", ["/bin/sh", "-c", check], target=target, pid=True),
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or "").strip().splitlines() if line.strip()]
        return lines[-1] if lines else f"the PID namespace probe exited with code {done.returncode}"
    return None


def pid_notice(reason: str) -> str:
    """What a job can see where hosts get no PID namespace: said once at the start of a run."""
    hidden = os.geteuid() != 0 and ctypes.CDLL(None).prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0  # pid_probe
    return (f"note: no PID namespace per host here ({reason}): a job sees every process of this machine, "
            f"and can read the environment (/proc/PID/environ) of those running as its user, this "
            f"runner's {'excepted (it is not dumpable)' if hidden else 'included'}, and this user's credential files "
            f"(~/.aws, ...), and can write the workdir's model registry and tracking store (registry.sqlite, "
            f"mlflow.db): keep credentials out of the environment you run trainpipe from, or run where Linux namespaces work")


def missing_mount_point_fix() -> str:
    return (f"create the empty mount point once as root (sudo mkdir -p {CONTAINER_BASE}), "
            f"then every job's hosts get their own {CONTAINER_BASE}")


def unavailable_reason(environ=os.environ) -> str | None:
    """None when jobs run in namespaces; otherwise the reason (switched off, or the probe's)."""
    reason = probe() if enabled_by_user(environ) else f"{SWITCH_ENV}=0"
    return _not_dumpable(reason) if reason is not None and environ is os.environ else reason


def fallback_notice(reason: str) -> str:
    """The one line a job prints when its hosts share the machine's /opt/ml and hostname."""
    return (f"note: no private {CONTAINER_BASE} per host here ({reason}): container paths are moved "
            f"under each host's directory and given as SAGEMAKER_BASE_DIR and SM_* variables; "
            f"gethostname() is this machine's; code that names {CONTAINER_BASE} itself is refused")


def mode_line(environ: Mapping[str, str] = os.environ) -> str:
    """How this run's jobs see /opt/ml: said at the start of a run and in its summary."""
    reason = unavailable_reason(environ)
    if reason is None and pid_probe() is None:
        protected = (", and cannot write the workdir's model registry, tracking store or step cache"  # run --local's
                     * any(path.startswith("rw:") for path in _credential_paths()))  # (credentials.workdir_paths)
        return (f"hosts: each simulated host has its own {CONTAINER_BASE}, hostname and processes "
                f"(Linux namespaces; a job sees none of this runner's processes or credential files{protected})")
    if reason is None:
        return (f"hosts: each simulated host has its own {CONTAINER_BASE} and hostname "
                f"(Linux namespaces); {pid_notice(pid_probe()).removeprefix('note: ')}")
    return (f"hosts: NO private {CONTAINER_BASE} per host ({reason}): container paths are moved "
            f"under each host's directory (SAGEMAKER_BASE_DIR, SM_*), jobs whose code names "
            f"{CONTAINER_BASE} are refused; {pid_notice(reason).removeprefix('note: ')}")


_MISSING = ("No such file", "FileNotFound", "not found", "does not exist")
_DENIED = ("Permission denied", "PermissionError", "Read-only file system")


def explain_missing_path(reason: str) -> str:
    """A failure on a missing or forbidden /opt/ml/... path under the fallback: say why, and
    the fix. As a non-root user, the machine's /opt/ml (when there is one) is root's: a
    script that writes there gets "Permission denied" and would otherwise be left guessing."""
    if CONTAINER_BASE + "/" not in reason and f"'{CONTAINER_BASE}'" not in reason:
        return reason
    fix = (f"read paths from SAGEMAKER_BASE_DIR or the SM_* variables, or run where Linux "
           f"namespaces work (as root, or with unprivileged user namespaces) and {SWITCH_ENV} is not 0")
    if any(s in reason for s in _DENIED):
        who = "root's" if os.geteuid() != 0 else "not writable here"
        return (f"{reason} [the machine's {CONTAINER_BASE} is {who}, and this machine gives no host a "
                f"private one ({probe_or_switch()}); the host's tree is at $SAGEMAKER_BASE_DIR: {fix}]")
    if not any(s in reason for s in _MISSING):
        return reason
    return (f"{reason} [no private {CONTAINER_BASE} per host on this machine ({probe_or_switch()}): "
            f"the host's tree is at $SAGEMAKER_BASE_DIR; {fix}]")


def probe_or_switch() -> str:
    return unavailable_reason() or "namespaces were not used"


def _main_pid_only(argv: list[str]) -> int:
    hide = []
    while argv[:1] == ["--hide"] and len(argv) > 1:
        hide.append(argv[1])
        argv = argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        print("usage: namespaces.py --pid-only [--hide PATH ...] -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    try:
        enter_pid_only(hide)
    except OSError as error:
        print(f"namespaces.py: cannot give the job a PID namespace: {error}", file=sys.stderr)
        return 126
    return run_as_init(argv[1:], wait_all=True)


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--pid-only"]:
        return _main_pid_only(argv[2:])
    pid = argv[1:2] == ["--pid"]
    argv = argv[:1] + argv[2:] if pid else argv
    wait_all = pid and argv[1:2] == ["--wait-all"]
    argv = argv[:1] + argv[2:] if wait_all else argv
    hide = []
    while pid and argv[1:2] == ["--hide"] and len(argv) > 2:
        hide.append(argv[2])
        argv = argv[:1] + argv[3:]
    target = CONTAINER_BASE
    if len(argv) >= 8 and argv[5] != "--" and argv[6] == "--":
        target, argv = argv[5], argv[:5] + argv[6:]
    if len(argv) < 7 or argv[5] != "--":
        print("usage: namespaces.py HOST TREE CWD HOSTS_FILE [TARGET] -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    host, tree, cwd, hosts, program = argv[1], argv[2], argv[3], argv[4], argv[6:]
    try:
        enter(host, tree, hosts, target, pid=pid, hide=hide)
        os.chdir(cwd)
    except OSError as error:
        print(f"namespaces.py: cannot give {host} its own {CONTAINER_BASE}: {error}", file=sys.stderr)
        return 126
    if pid:
        return run_as_init(program, wait_all)
    try:
        os.execvp(program[0], program)
    except OSError as error:
        print(f"cannot run {program[0]}: {error}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
