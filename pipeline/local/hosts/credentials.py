"""The runner user's credential files and folders a simulated host's processes must not read:
found by the runner (its HOME and environment; a job's are not the runner's) and handed to the
host's launcher, which mounts an empty read-only folder or /dev/null over each
(``namespaces.hide_credentials``), and trainpipe's cache, which it makes read-only.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

from pipeline.local.hosts.shared_memory import cache_root

# The runner's and the user's credentials: hidden from a host's processes (an empty, read-only
# folder or file mounted over each one that exists, a link's target), relative to the home
# folder; also the files the variables below name (the AWS SDK's, Google's, a web identity token).
CREDENTIAL_PATHS = (".aws", ".config/gcloud", ".azure", ".kube", ".docker", ".ssh", ".netrc", ".git-credentials",
                    ".pypirc", ".databrickscfg", ".mlflow", ".config/sagemaker", ".config/gh", ".huggingface",
                    ".cache/huggingface/token", ".vault-token", ".boto", ".s3cfg")
CREDENTIAL_FILE_VARIABLES = ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                             "GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG", "DOCKER_CONFIG", "NETRC")


def credential_paths(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The usual credential files and folders of this user that exist: found by the runner
    (its HOME; a job's environment is not the runner's) and handed to the launcher."""
    home = os.path.expanduser("~")
    # And the user's home by the password database: what ~ is to a process given no HOME (the
    # runner's pip) or by absolute path, where the runner's HOME is another folder.
    homes = dict.fromkeys(h for h in (home, _account_home()) if h)
    paths = [os.path.join(h, relative) for h in homes for relative in CREDENTIAL_PATHS]
    # KUBECONFIG is a list of files.
    paths += [p for name in CREDENTIAL_FILE_VARIABLES for p in (environ.get(name) or "").split(os.pathsep)]
    # A link is hidden where it points (~/.aws -> a dotfiles folder): its target is readable by
    # that path too. Never a target that holds the home (a link to / would hide everything).
    real, home = (os.path.realpath(p) for p in paths if p and os.path.lexists(p)), os.path.realpath(home) + "/"
    found = [p for p in dict.fromkeys(real) if os.path.exists(p) and not home.startswith(p.rstrip("/") + "/")]
    return found + [f"ro:{cache_root(environ)}"] + workdir_paths()


# The workdir of the run whose jobs are launched (``protect_workdir``): read-only for a host's
# processes, the model registry (registry.sqlite), the tracking store (mlflow.db, mlartifacts/),
# the step cache and the object store with it (a read-only file alone would still let a job plant
# the SQLite journal beside it that the runner's next open rolls into the file), except what
# jobs write: the jobs' own folders (runs/, jobs/) and the job environments, where the runner's
# pip, run as a job is, installs requirements. Set by run --local's runner.
_WORKDIR: list[str] = []
WORKDIR_WRITABLE = ("runs", "jobs", "job-environments")  # jobs/: train --local's


def protect_workdir(workdir) -> None:
    """The runner's, before its jobs: their hosts get ``workdir`` read-only (``workdir_paths``)."""
    _WORKDIR[:] = [os.path.realpath(workdir)]


def workdir_paths() -> list[str]:
    """``ro:`` the protected workdir, then ``rw:`` each folder of it that jobs write (the launcher
    applies them in this order)."""
    return [entry for workdir in _WORKDIR
            for entry in [f"ro:{workdir}", *(f"rw:{os.path.join(workdir, name)}" for name in WORKDIR_WRITABLE)]]


def _account_home() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir or None
    except KeyError:
        return None
