"""Each simulated host sees its own ``/opt/ml`` and is called ``algo-N``: Linux namespaces.

SageMaker scripts open ``/opt/ml/...`` directly and some check ``socket.gethostname()``
against ``resourceconfig.json``. On this machine every simulated host's tree lives under
``<job dir>/hosts/<host>``; this launcher runs a host's process (a processing host's command,
a training rank, or a training host's Open MPI daemon, whose ranks inherit it) in
a private mount namespace where that tree is bind-mounted on ``/opt/ml``, and in a UTS
namespace whose hostname is the host's name. The job's hosts file (the machine's
``/etc/hosts`` plus ``127.0.0.1 algo-1 ... algo-N``, ``hosts_file()``) is bind-mounted on
``/etc/hosts``, so the host names resolve as they do between SageMaker's instances (to this
machine). Nothing else changes: the rest of the file
system, the network and the process IDs are the machine's own, so MPI ranks on different
simulated hosts still share memory (``shared_memory.py``) and the loopback interface, and
the runner still sees and ends them.

As root this takes ``unshare(2)`` and ``mount(2)``; as another user it first enters a user
namespace of its own (where the kernel allows unprivileged ones) mapping the user to itself,
so the script keeps its identity. ``/opt/ml`` must exist as an (empty) mount point: created
when missing, which needs root. Where none of this is possible the runner falls back to
moving container paths under the host's directory (``SAGEMAKER_BASE_DIR``) and says so.

Standard library only, and run by file path (like ``rank_exec.py``):

    python namespaces.py HOST TREE CWD HOSTS_FILE -- COMMAND [ARG ...]     (HOSTS_FILE may be "")

``TRAINPIPE_NAMESPACES=0`` in the runner's environment turns the namespaces off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache

# SageMaker: where the container's tree is (training_entry/contract.py names it too; this file
# imports nothing outside the standard library, see test_namespaces.py for the tie).
CONTAINER_BASE = "/opt/ml"
SWITCH_ENV = "TRAINPIPE_NAMESPACES"
LAUNCHER = os.path.abspath(__file__)

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWUSER = 0x10000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18


class NamespaceError(OSError):
    pass


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


def enter(host: str, tree: str, hosts: str = "") -> None:
    """Make this process (and what it execs) see ``tree`` at /opt/ml, hostname ``host``,
    and ``hosts`` (when given) at /etc/hosts."""
    if not os.path.isdir(CONTAINER_BASE):
        try:
            os.makedirs(CONTAINER_BASE, exist_ok=True)
        except OSError as error:
            raise NamespaceError(error.errno, f"{CONTAINER_BASE} does not exist and cannot be "
                                 f"created ({error.strerror}); create it once as root: "
                                 f"mkdir -p {CONTAINER_BASE}") from None
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWNS | _CLONE_NEWUTS | (_CLONE_NEWUSER if uid != 0 else 0)
    _check(libc.unshare(flags), "unshare")
    if uid != 0:
        # The new user namespace maps the user to itself: files keep their owner, and the
        # capabilities it grants (to mount and set the hostname) are dropped at exec.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # Private first: the bind mount must not propagate back to the machine's namespace.
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.mount(os.fsencode(tree), os.fsencode(CONTAINER_BASE), None, _MS_BIND | _MS_REC, None),
           f"mount --bind {tree} {CONTAINER_BASE}")
    if hosts:
        _check(libc.mount(os.fsencode(hosts), b"/etc/hosts", None, _MS_BIND, None),
               f"mount --bind {hosts} /etc/hosts")
    name = host.encode()
    _check(libc.sethostname(name, len(name)), "sethostname")


# As root, util-linux's unshare and mount do the same as this file's main() in a few
# milliseconds, where a Python start costs 50-150 ms per host on a busy machine
# (benchmarks/p6_namespaces.py). The hostname is written through /proc: no hostname binary.
_SHELL_ENTER = ('mount --bind "$1" ' + CONTAINER_BASE + ' && printf %s "$2" > /proc/sys/kernel/hostname'
                ' && { [ -z "$4" ] || mount --bind "$4" /etc/hosts; } && cd "$3" && shift 4 && exec "$@"')


def _fast_path() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("mount"))


def command(host: str, tree, cwd: str, argv: list[str], python: str = sys.executable,
            hosts: str | None = None) -> list[str]:
    """``argv`` run as a process of ``host`` whose /opt/ml is ``tree``, started in ``cwd``
    (a container path such as /opt/ml/code: it exists only once the tree is mounted), with
    ``hosts`` (from ``hosts_file()``) as its /etc/hosts when given."""
    if _fast_path() and os.path.isdir(CONTAINER_BASE):
        return [shutil.which("unshare"), "--mount", "--uts", "--propagation", "private", "/bin/sh", "-c",
                _SHELL_ENTER, "trainpipe-namespace", str(tree), host, cwd, hosts or "", *argv]
    # -S -I: no site-packages, no user environment; the launcher needs the standard library only.
    return [python, "-S", "-I", LAUNCHER, host, str(tree), cwd, hosts or "", "--", *argv]


def enabled_by_user(environ=os.environ) -> bool:
    return environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@lru_cache(maxsize=1)
def probe() -> str | None:
    """None when this machine can give hosts their own /opt/ml and hostname, else why not.
    Tried once per runner process with a trivial command, the way a job would use it."""
    if not sys.platform.startswith("linux"):
        return f"Linux namespaces are not available on {sys.platform}"
    if not os.path.isdir(CONTAINER_BASE):
        try:
            os.makedirs(CONTAINER_BASE, exist_ok=True)  # the mount point; stays empty
        except OSError as error:
            return (f"{CONTAINER_BASE} does not exist and cannot be created ({error.strerror}); "
                    f"create it once as root: mkdir -p {CONTAINER_BASE}")
    with tempfile.TemporaryDirectory(prefix="trainpipe-ns-") as tree:
        marker = "trainpipe-namespace-probe"
        open(os.path.join(tree, marker), "w").close()
        check = (f'test -e {CONTAINER_BASE}/{marker} && '
                 f'test "$(cat /proc/sys/kernel/hostname)" = algo-1')
        try:
            done = subprocess.run(command("algo-1", tree, "/", ["/bin/sh", "-c", check]),
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode == 0:
            return None
        lines = [line for line in (done.stderr or "").strip().splitlines() if line.strip()]
        return lines[-1] if lines else f"the probe exited with code {done.returncode}"


def unavailable_reason(environ=os.environ) -> str | None:
    """None when jobs run in namespaces; otherwise the reason (switched off, or the probe's)."""
    if not enabled_by_user(environ):
        return f"{SWITCH_ENV}=0"
    return probe()


def fallback_notice(reason: str) -> str:
    """The one line a job prints when its hosts share the machine's /opt/ml and hostname."""
    return (f"note: no private {CONTAINER_BASE} per host here ({reason}): container paths are moved "
            f"under each host's directory and given as SAGEMAKER_BASE_DIR and SM_* variables; "
            f"gethostname() is this machine's")


def explain_missing_path(reason: str) -> str:
    """A failure on a missing /opt/ml/... path under the fallback: say why, and the fix."""
    if CONTAINER_BASE + "/" not in reason or not any(
            s in reason for s in ("No such file", "FileNotFound", "not found", "does not exist")):
        return reason
    return (f"{reason} [no private {CONTAINER_BASE} per host on this machine ({probe_or_switch()}): "
            f"the host's tree is at $SAGEMAKER_BASE_DIR; read paths from SAGEMAKER_BASE_DIR or the "
            f"SM_* variables, or run where Linux namespaces work (as root, or with unprivileged "
            f"user namespaces) and {SWITCH_ENV} is not 0]")


def probe_or_switch() -> str:
    return unavailable_reason() or "namespaces were not used"


def main(argv: list[str]) -> int:
    if len(argv) < 7 or argv[5] != "--":
        print("usage: namespaces.py HOST TREE CWD HOSTS_FILE -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    host, tree, cwd, hosts, program = argv[1], argv[2], argv[3], argv[4], argv[6:]
    try:
        enter(host, tree, hosts)
        os.chdir(cwd)
    except OSError as error:
        print(f"namespaces.py: cannot give {host} its own {CONTAINER_BASE}: {error}", file=sys.stderr)
        return 126
    try:
        os.execvp(program[0], program)
    except OSError as error:
        print(f"cannot run {program[0]}: {error}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
