"""Each simulated host's own /opt/ml and hostname (pipeline/local/hosts/namespaces.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.local.hosts import mpi, namespaces, shared_memory
from tests import readme_record
from training_entry.contract import CONTAINER_BASE_DIR

AVAILABLE = namespaces.unavailable_reason() is None


def test_the_launcher_names_the_contract_s_container_base():
    # namespaces.py is stdlib-only (run by file path), so it spells the path itself.
    assert namespaces.CONTAINER_BASE == CONTAINER_BASE_DIR


def python_launcher(host, tree, cwd, argv, hosts=""):
    """namespaces.py run by file path: what non-root users get (root gets util-linux's unshare)."""
    return [sys.executable, "-S", "-I", namespaces.LAUNCHER, host, str(tree), cwd, hosts, "--", *argv]


@pytest.mark.skipif(not AVAILABLE, reason=f"no namespaces here: {namespaces.unavailable_reason()}")
@pytest.mark.parametrize("launch", [namespaces.command, python_launcher], ids=["command", "python"])
def test_a_host_sees_its_tree_at_opt_ml_and_its_name_and_nothing_leaks(tmp_path, launch):
    tree = tmp_path / "algo-2"
    (tree / "input" / "config").mkdir(parents=True)
    (tree / "input" / "config" / "resourceconfig.json").write_text('{"current_host": "algo-2"}')
    script = ("import json, os, socket; "
              "print(socket.gethostname(), os.getcwd(), "
              "json.load(open('/opt/ml/input/config/resourceconfig.json'))['current_host'], "
              "socket.gethostbyname('algo-1'), socket.gethostbyname('algo-2')); "
              "open('/opt/ml/written', 'w').write('x')")
    machine_hosts = Path("/etc/hosts").read_text()
    hosts = namespaces.hosts_file(tmp_path / "hosts", ["algo-1", "algo-2"])
    done = subprocess.run(launch("algo-2", tree, "/opt/ml/input", [sys.executable, "-c", script], hosts=hosts),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["algo-2", "/opt/ml/input", "algo-2", "127.0.0.1", "127.0.0.1"]
    assert Path("/etc/hosts").read_text() == machine_hosts
    assert (tree / "written").read_text() == "x"
    # The machine's own /opt/ml and hostname are untouched.
    assert subprocess.run(["cat", "/proc/sys/kernel/hostname"], capture_output=True, text=True).stdout.strip() != "algo-2"
    assert not (Path(CONTAINER_BASE_DIR) / "written").exists()


def test_the_switch_turns_them_off_and_the_fallback_explains_a_missing_path():
    assert namespaces.unavailable_reason({namespaces.SWITCH_ENV: "0"}) == f"{namespaces.SWITCH_ENV}=0"
    reason = ("AlgorithmError: algo-1 exited with code 1: FileNotFoundError: [Errno 2] No such file "
              "or directory: '/opt/ml/processing/input/raw_data_all.csv'")
    explained = namespaces.explain_missing_path(reason)
    assert explained.startswith(reason) and "SAGEMAKER_BASE_DIR" in explained
    assert namespaces.explain_missing_path("AlgorithmError: ValueError: bad") == "AlgorithmError: ValueError: bad"


def test_the_launcher_refuses_a_bad_command_line_and_a_tree_it_cannot_mount(tmp_path):
    usage = subprocess.run([sys.executable, namespaces.LAUNCHER, "algo-1"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    if AVAILABLE:
        missing = subprocess.run(python_launcher("algo-1", tmp_path / "absent", "/", ["true"]),
                                 capture_output=True, text=True)
        assert missing.returncode == 126
        assert "cannot give algo-1 its own /opt/ml" in missing.stderr
        fast = subprocess.run(namespaces.command("algo-1", tmp_path / "absent", "/", ["true"]),
                              capture_output=True, text=True)
        assert fast.returncode != 0 and "absent" in fast.stderr


# The toolkit names a hyperparameter's variable SM_HP_<NAME upper-cased>, hyphens kept
# (https://github.com/aws/sagemaker-training-toolkit/blob/3383937/src/sagemaker_training/environment.py#L1046-L1049):
# not a shell identifier, so a POSIX shell on the way (dash) would drop it.
ODD = {"SM_HP_LEARNING-RATE": "0.01", "SM_HP_USE.BN": "true", "PLAIN": "kept"}


@pytest.mark.skipif(not AVAILABLE, reason=f"no namespaces here: {namespaces.unavailable_reason()}")
def test_a_variable_whose_name_is_not_a_shell_word_reaches_the_command(tmp_path):
    env = {"PATH": "/usr/bin:/bin", **ODD}
    done = subprocess.run(namespaces.command("algo-1", tmp_path, "/", ["env"], env=env),
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert {k: seen.get(k) for k in ODD} == ODD


def test_shell_safe_sets_only_what_a_shell_would_drop():
    assert namespaces.shell_safe(["python", "x.py"], ODD) == [
        "env", "--", "SM_HP_LEARNING-RATE=0.01", "SM_HP_USE.BN=true", "python", "x.py"]
    assert namespaces.shell_safe(["python"], {"PLAIN": "1"}) == ["python"]


def failing_command(*args, **kwargs):
    return ["/bin/sh", "-c", "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1"]


def test_the_probe_never_creates_opt_ml_where_namespaces_fail(tmp_path, monkeypatch):
    """Else scripts naming /opt/ml would write into one folder every host and job shares."""
    base = tmp_path / "opt" / "ml"
    monkeypatch.setattr(namespaces, "CONTAINER_BASE", str(base))
    monkeypatch.setattr(namespaces, "command", failing_command)
    namespaces.probe.cache_clear()
    try:
        assert namespaces.probe() == "unshare: unshare failed: Operation not permitted"
        assert not base.exists()
        assert "NO private" in namespaces.mode_line({}) and "refused" in namespaces.mode_line({})
    finally:
        namespaces.probe.cache_clear()


@pytest.mark.skipif(not AVAILABLE, reason=f"no namespaces here: {namespaces.unavailable_reason()}")
def test_the_probe_makes_the_mount_point_once_namespaces_work(tmp_path, monkeypatch):
    base = tmp_path / "opt" / "ml"
    monkeypatch.setattr(namespaces, "CONTAINER_BASE", str(base))
    namespaces.probe.cache_clear()
    try:
        assert namespaces.probe() is None
        assert base.is_dir() and not any(base.iterdir())
        assert "own" in namespaces.mode_line({}) and "Linux namespaces" in namespaces.mode_line({})
    finally:
        namespaces.probe.cache_clear()


def test_the_run_says_which_mode_it_is_in():
    assert namespaces.mode_line({namespaces.SWITCH_ENV: "0"}).startswith(
        f"hosts: NO private /opt/ml per host ({namespaces.SWITCH_ENV}=0)")


def test_permission_denied_on_opt_ml_is_explained():
    reason = ("AlgorithmError: algo-1 exited with code 1: PermissionError: [Errno 13] Permission "
              "denied: '/opt/ml/model/model.keras'")
    explained = namespaces.explain_missing_path(reason)
    readme_record.record(explained)
    assert explained.startswith(reason + " [the machine's /opt/ml is ")
    assert "SAGEMAKER_BASE_DIR" in explained and "unprivileged user namespaces" in explained
    assert namespaces.explain_missing_path("PermissionError: [Errno 13] Permission denied: '/data/x'") == \
        "PermissionError: [Errno 13] Permission denied: '/data/x'"


# --- a host's own processes: the runner's credentials out of a job's reach (issue 48) ---------
SECRET = "wJalrXUtnFEMI-runner-secret-7f3a"
TOKEN = "mlflow-token-runner-9c2e"
FILE_SECRET = "aws-credentials-file-secret-51d0"
# What a hostile job does: every /proc/*/environ it can read, and the usual credential files by
# absolute path (the runner's home is given as its argument); it prints what it found.
SNOOP = """
import glob, os, sys
home = sys.argv[1]
seen = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        seen.append(open(path, "rb").read().decode("latin-1"))
    except OSError:
        pass
for name in (".aws/credentials", ".netrc"):
    try:
        seen.append(open(os.path.join(home, name)).read())
    except OSError:
        pass
text = "\\n".join(seen)
try:  # what a later run would load or believe (native libraries, the code-imports cache)
    open(os.path.join(os.environ["TRAINPIPE_CACHE"], "planted"), "w").close()
    cache = "cache-written"
except OSError:
    cache = "cache-read-only"
print("processes", len(glob.glob("/proc/[0-9]*")), cache, "found",
      [s for s in sys.argv[2:] if s in text] or "nothing", flush=True)
"""


@pytest.mark.skipif(namespaces.pid_probe() is not None, reason=f"no PID namespaces here: {namespaces.pid_probe()}")
def test_a_job_reading_proc_environ_and_credential_files_finds_no_runner_secret(tmp_path):
    """run --local through its process, with AWS and MLflow secrets in its environment and a
    credentials file in its home: the job's one step reads every /proc/*/environ and the files,
    and tries to write into trainpipe's cache."""
    import json
    import os

    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, processing_request, put_script

    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {FILE_SECRET}\n")
    (home / ".netrc").write_text(f"machine mlflow.example.com login u password {FILE_SECRET}\n")
    workdir = tmp_path / "work"
    code = f"s3://{BUCKET}/code/snoop/"
    put_script(LocalStorage(workdir / "store"), code, "snoop.py", SNOOP)
    step = processing_request(code, "snoop.py", arguments=[str(home), SECRET, TOKEN, FILE_SECRET])
    definition = tmp_path / "snoop.json"
    definition.write_text(json.dumps({"Version": "2020-12-01", "Parameters": [], "Steps": [
        {"Name": "Snoop", "Type": "Processing", "Arguments": step}]}))
    (tmp_path / "cache").mkdir()
    env = {**os.environ, "HOME": str(home), "AWS_SECRET_ACCESS_KEY": SECRET, "MLFLOW_TRACKING_TOKEN": TOKEN,
           "TRAINPIPE_TRACKING": "off", "TRAINPIPE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir)], cwd=Path(__file__).resolve().parents[4], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    said = {line.split("] ")[-1] for log in (workdir / "runs").rglob("*.log")
            for line in log.read_text().splitlines() if "processes " in line and " found " in line}
    (line,) = said  # the job's log and its host's say the same line
    assert line.endswith("cache-read-only found nothing"), line
    assert not (tmp_path / "cache" / "planted").exists()
    assert int(line.split()[1]) <= 4  # its namespace's first process, itself, and nothing of the runner's


@pytest.mark.skipif(namespaces.pid_probe() is not None, reason=f"no PID namespaces here: {namespaces.pid_probe()}")
def test_credentials_behind_links_and_named_by_variables_are_empty_for_a_host(tmp_path, monkeypatch):
    """~/.aws a link to a dotfiles folder (hidden where it points: that path reads it too), the
    files GOOGLE_APPLICATION_CREDENTIALS and AWS_WEB_IDENTITY_TOKEN_FILE name, the GitHub CLI's
    token; a link to a folder holding the home is never hidden. The old code hid none of these."""
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles"
    (dotfiles / "aws").mkdir(parents=True)
    (dotfiles / "aws" / "credentials").write_text(FILE_SECRET)
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text(FILE_SECRET)
    (home / ".aws").symlink_to(dotfiles / "aws")
    (home / ".mlflow").symlink_to(tmp_path)  # holds the home: hiding it would hide everything
    for name in ("gcp.json", "token"):
        (tmp_path / name).write_text(FILE_SECRET)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "gcp.json"))
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    paths = [home / ".aws" / "credentials", dotfiles / "aws" / "credentials", home / ".config" / "gh" / "hosts.yml",
             tmp_path / "gcp.json", tmp_path / "token"]
    script = ("import sys\ndef read(p):\n    try:\n        return open(p).read()\n    except OSError:\n"
              "        return ''\nprint([read(p) for p in sys.argv[1:]])")  # a hidden folder is empty
    (tmp_path / "algo-1").mkdir()
    done = subprocess.run(namespaces.command("algo-1", tmp_path / "algo-1", "/", [sys.executable, "-c", script,
                                             *map(str, paths)], pid=True), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([""] * len(paths))
    assert all(path.read_text() == FILE_SECRET for path in paths)  # the runner's own view is untouched


# A runner where no host gets a PID namespace (TRAINPIPE_NAMESPACES=0): it learns so, then a job
# of its user reads its /proc/PID/environ. namespaces.py is loaded by path (it is stdlib-only).
UNDUMPABLE_RUNNER = """
import importlib.util, os, subprocess, sys
spec = importlib.util.spec_from_file_location("namespaces", sys.argv[1])
namespaces = importlib.util.module_from_spec(spec)
spec.loader.exec_module(namespaces)
print(namespaces.mode_line())
job = ("import os\\ntry:\\n    print(os.environ['NEEDLE'] in open(f'/proc/{os.getppid()}/environ').read())\\n"
       "except OSError as error:\\n    print(type(error).__name__)")
env = {"NEEDLE": os.environ["AWS_SECRET_ACCESS_KEY"], "PATH": os.defpath}  # a job's own, scrubbed
print(subprocess.run([sys.executable, "-c", job], env=env, capture_output=True, text=True).stdout.strip())
"""


def _not_root() -> tuple[str, object]:
    """A Python and a way to run it as a user who is not root (root reads every process's environ)."""
    import os

    if os.geteuid() != 0:
        return sys.executable, None
    python = "/usr/bin/python3"
    if not Path(python).exists():
        pytest.skip("as root, this needs /usr/bin/python3 to run as nobody")
    return python, lambda: (os.setgid(65534), os.setuid(65534))


def test_where_jobs_see_the_runners_processes_its_environment_is_not_theirs_to_read(tmp_path):
    """The runner is made not dumpable once it knows that jobs get no PID namespace: its
    /proc/PID/environ is root's, and a job of its user cannot read it (the old code: it read the
    runner's AWS secret); the mode line says so."""
    python, demote = _not_root()
    env = {"TRAINPIPE_NAMESPACES": "0", "AWS_SECRET_ACCESS_KEY": SECRET, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([python, "-S", "-c", UNDUMPABLE_RUNNER, namespaces.LAUNCHER], env=env, cwd="/",
                          capture_output=True, text=True, timeout=60, preexec_fn=demote)
    assert done.returncode == 0, done.stderr
    mode, job = done.stdout.strip().splitlines()
    assert job == "PermissionError"
    assert mode.endswith("and can read the environment (/proc/PID/environ) of those running as its user, this "
                         "runner's excepted (it is not dumpable), and this user's credential files (~/.aws, ...), and "
                         "can write the workdir's model registry and tracking store (registry.sqlite, mlflow.db): "
                         "keep credentials out of the environment you run trainpipe from, or run where Linux "
                         "namespaces work"), mode
    assert mode.startswith("hosts: NO private /opt/ml per host (TRAINPIPE_NAMESPACES=0): "), mode


def test_where_pid_namespaces_are_not_allowed_one_line_says_what_a_job_can_see(monkeypatch):
    monkeypatch.setattr(namespaces, "unavailable_reason", lambda environ=None: None)
    monkeypatch.setattr(namespaces, "pid_probe", lambda: "unshare: Operation not permitted")
    line = namespaces.mode_line({})
    readme_record.record(line)
    assert line == ("hosts: each simulated host has its own /opt/ml and hostname (Linux namespaces); no PID "
                    "namespace per host here (unshare: Operation not permitted): a job sees every process of "
                    "this machine, and can read the environment (/proc/PID/environ) of those running as its "
                    "user, this runner's included, and this user's credential files (~/.aws, ...), and can write the "
                    "workdir's model registry and tracking store (registry.sqlite, mlflow.db): keep "
                    "credentials out of the environment you run trainpipe from, or run where Linux namespaces work")
    assert "--pid" not in namespaces.command("algo-1", "/tmp", "/", ["true"])


# The same snoop in each rank of a two-host MPI job; what it looks for is in needles.json beside it.
RANK_SNOOP = """
import glob, json, os, pathlib, time
needles = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "needles.json")))
meeting = pathlib.Path(needles["meeting"])  # a folder of the machine's both hosts reach


def meet(stage):  # every host's rank is running while the others look
    (meeting / f"{stage}-{os.environ['SM_CURRENT_HOST']}").touch()
    ends = time.monotonic() + 60
    while len(list(meeting.glob(f"{stage}-*"))) < 2 and time.monotonic() < ends:
        time.sleep(0.05)


meet("started")
seen, hosts = [], set()
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        text = open(path, "rb").read().decode("latin-1")
    except OSError:
        continue
    seen.append(text)
    hosts.update(v.split("=", 1)[1] for v in text.split("\\0") if v.startswith("SM_CURRENT_HOST="))
for name in (".aws/credentials", ".netrc"):
    try:
        seen.append(open(os.path.join(needles["home"], name)).read())
    except OSError:
        pass
text = "\\n".join(seen)
print("snoop", os.environ["SM_CURRENT_HOST"], "sees hosts", ",".join(sorted(hosts)), "found",
      [s for s in needles["secrets"] if s in text] or "nothing", flush=True)
meet("looked")
"""


@pytest.mark.skipif(namespaces.pid_probe() is not None, reason=f"no PID namespaces here: {namespaces.pid_probe()}")
@pytest.mark.skipif(not (mpi.mpirun_path() and shared_memory.library()[0]),
                    reason="needs Open MPI's mpirun and the shared-memory library (mpicc)")
def test_the_hosts_of_a_shared_memory_mpi_job_share_a_pid_namespace_that_holds_nothing_of_the_runner(tmp_path):
    """A shared-memory MPI launch runs its one daemon, and so every rank of every host, in one
    PID namespace (ranks in separate ones crash Open MPI's shared memory): its hosts see each
    other's processes (one job's), never the runner's environment or credential files."""
    import json
    import os

    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {FILE_SECRET}\n")
    (home / ".netrc").write_text(f"machine mlflow.example.com login u password {FILE_SECRET}\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "snoop.py").write_text(RANK_SNOOP)
    (tmp_path / "meeting").mkdir()
    (code / "needles.json").write_text(json.dumps({"home": str(home), "secrets": [SECRET, TOKEN, FILE_SECRET],
                                                   "meeting": str(tmp_path / "meeting")}))
    (tmp_path / "cache").mkdir()
    env = {**os.environ, "HOME": str(home), "AWS_SECRET_ACCESS_KEY": SECRET, "MLFLOW_TRACKING_TOKEN": TOKEN,
           "TRAINPIPE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli.main", "train", "--local", "--workdir",
                           str(tmp_path / "work"), "--entry-point", "snoop.py", "--source-dir", str(code),
                           "--instances", "2", "--processes-per-host", "1", "--job-name", "snoop"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "(shared memory;" in output, output[-3000:]  # the launch this test is about
    said = sorted({line.split("snoop ", 1)[1] for line in output.splitlines() if "snoop algo-" in line})
    assert said == ["algo-1 sees hosts algo-1,algo-2 found nothing",
                    "algo-2 sees hosts algo-1,algo-2 found nothing"], output[-3000:]


# A requirement built from source: its setup.py is the job author's code, run by the runner's pip.
SETUP_SNOOP = """
import glob, os
seen = [repr(dict(os.environ))]
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        seen.append(open(path, "rb").read().decode("latin-1"))
    except OSError:
        pass
for path in ({home!r} + "/.aws/credentials", os.path.expanduser("~/.aws/credentials")):
    try:
        seen.append(open(path).read())
    except OSError:
        pass
with open({out!r}, "a") as out:
    out.write("\\\\n".join(seen) + "\\\\n")
from setuptools import setup
setup(name="snoop", version="0.1", py_modules=[])
"""


@pytest.mark.skipif(namespaces.pid_probe() is not None, reason=f"no PID namespaces here: {namespaces.pid_probe()}")
def test_a_requirement_built_from_source_reads_no_runner_secret(tmp_path):
    """train --local whose requirements.txt names a local sdist: its setup.py (pip runs it to
    build the wheel) reads its environment, every /proc/*/environ and the runner's credentials
    file. The old code ran that pip beside the runner: it read the runner's /proc/PID/environ."""
    import io
    import os
    import tarfile

    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {FILE_SECRET}\n")
    seen = tmp_path / "seen.txt"
    sdist = tmp_path / "snoop-0.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in {"setup.py": SETUP_SNOOP.format(home=str(home), out=str(seen)),
                           "PKG-INFO": "Metadata-Version: 2.1\nName: snoop\nVersion: 0.1\n"}.items():
            info = tarfile.TarInfo(f"snoop-0.1/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('trained')\n")
    (code / "requirements.txt").write_text(f"{sdist}\n")
    (tmp_path / "cache").mkdir()
    env = {**os.environ, "HOME": str(home), "AWS_SECRET_ACCESS_KEY": SECRET, "MLFLOW_TRACKING_TOKEN": TOKEN,
           "TRAINPIPE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli.main", "train", "--local", "--workdir",
                           str(tmp_path / "work"), "--entry-point", "train.py", "--source-dir", str(code),
                           "--job-name", "snoop"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    text = seen.read_text()  # setup.py ran
    assert "'PATH'" in text
    assert [s for s in (SECRET, TOKEN, FILE_SECRET) if s in text] == []


# A job that would alter what the runner keeps in its workdir: the model registry, the tracking
# store, a SQLite journal the runner's next open would roll into the registry, the step cache.
TAMPER = """
import os, sys
workdir = sys.argv[1]
said = []
for name in ("registry.sqlite", "mlflow.db", "registry.sqlite-journal", "cache/planted"):
    try:
        with open(os.path.join(workdir, name), "ab") as f:
            f.write(b"tampered")
        said.append(name + "=written")
    except OSError as error:
        said.append(name + "=" + type(error).__name__)
os.makedirs("/opt/ml/processing/output", exist_ok=True)
open("/opt/ml/processing/output/own.txt", "w").write("its own output")
print("tamper", " ".join(said), flush=True)
"""


@pytest.mark.skipif(namespaces.pid_probe() is not None, reason=f"no PID namespaces here: {namespaces.pid_probe()}")
def test_a_job_cannot_write_the_workdirs_registry_or_tracking_store(tmp_path):
    """run --local through its process, whose one job opens the workdir's registry.sqlite and
    mlflow.db for writing and plants a journal beside them: each is refused (a read-only file
    system), its own output is kept. The old code let it write every one."""
    import json
    import os

    from pipeline.local.store.storage import LocalStorage
    from tests.pipeline.local.helpers import BUCKET, processing_request, put_script

    workdir = tmp_path / "work"
    (workdir / "cache").mkdir(parents=True)
    (workdir / "mlflow.db").write_bytes(b"the tracking store")
    code = f"s3://{BUCKET}/code/tamper/"
    put_script(LocalStorage(workdir / "store"), code, "tamper.py", TAMPER)
    step = processing_request(code, "tamper.py", arguments=[str(workdir)])
    definition = tmp_path / "tamper.json"
    definition.write_text(json.dumps({"Version": "2020-12-01", "Parameters": [], "Steps": [
        {"Name": "Tamper", "Type": "Processing", "Arguments": step}]}))
    env = {**os.environ, "TRAINPIPE_TRACKING": "off", "TRAINPIPE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--local", "--definition", str(definition),
                           "--workdir", str(workdir)], cwd=Path(__file__).resolve().parents[4], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    mode = next(line for line in (done.stderr + done.stdout).splitlines() if "hosts: each" in line)
    readme_record.record(mode[mode.index("hosts: "):])
    assert mode.endswith("(Linux namespaces; a job sees none of this runner's processes or credential files, and "
                         "cannot write the workdir's model registry, tracking store or step cache)"), mode
    said = {line.split("tamper ", 1)[1] for log in (workdir / "runs").rglob("*.log")
            for line in log.read_text().splitlines() if "tamper " in line and "=" in line}
    assert said == {"registry.sqlite=OSError mlflow.db=OSError registry.sqlite-journal=OSError "
                    "cache/planted=OSError"}, said
    assert (workdir / "mlflow.db").read_bytes() == b"the tracking store"
    assert not (workdir / "registry.sqlite-journal").exists() and not (workdir / "cache" / "planted").exists()
    registry = workdir / "registry.sqlite"
    assert not registry.exists() or b"tampered" not in registry.read_bytes()
