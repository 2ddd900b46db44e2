"""What of trainpipe's own environment reaches code that is not trainpipe's: a local job's
processes and the check of the user's model file.

SageMaker gives a container only its request's Environment and the platform's variables,
never the caller's. A process started here gets those (set by whoever starts it) plus the
stated allowlist below: what a process on this machine needs to run Python, TensorFlow and
MPI. Everything else stays out, in particular:

- credentials (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, GITHUB_TOKEN, APIKEY, DB_PASS, ...):
  none is on the allowlist, which is what decides. The prefix families on it are libraries'
  settings (HOROVOD_, NCCL_, ...) and trainpipe's own; a credential's name inside one of them
  (HOROVOD_SSH_KEYS, TRAINPIPE_HF_PAT) is still refused by the name pattern below, which only
  narrows the prefix families and never lets a name through; nor does a value that carries a
  credential (a URI with a password, an AWS access key id) under a prefix family's name;
- ``HOME``: the caller's home holds ``~/.aws/credentials``, ``~/.netrc``, ``~/.ssh``; a job gets
  a fresh one of its own (SageMaker: ``/root`` of the image, which holds none of the caller's);
- ``TF_CONFIG``: it switches TensorFlow into multi-worker mode; only a job kind sets it, per
  host, after this scrub (and a request's Environment may, as on SageMaker);
- ``PYTHONPATH``, ``PYTHONHOME``, ``PYTHONUSERBASE``, ``VIRTUAL_ENV``, ``PIP_*``: the job's Python
  is laid out by its job environment (``pipeline/local/jobs/environments/environment.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from training_entry.contract import has_userinfo

# Passed on by exact name.
ALLOWED_NAMES = frozenset({
    "PATH", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
    "LD_LIBRARY_PATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS",
    "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    # TensorFlow's own switches for logging and threads; never TF_CONFIG (see above).
    "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS",
    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "XLA_FLAGS",
    # SageMaker sets the region in every container; not a secret.
    "AWS_REGION", "AWS_DEFAULT_REGION",
})
# Passed on by prefix: thread and collective-communication tuning, trainpipe's own switches
# (TRAINPIPE_FLAT_ALLREDUCE, ...), and coverage of subprocesses in the test suite.
ALLOWED_PREFIXES = ("LC_", "HOROVOD_", "NCCL_", "KMP_", "MKL_", "OPENBLAS_", "TRAINPIPE_",
                    "COV_CORE_", "COVERAGE_")
# Inside a prefix family, a name like these is a credential's and is not passed on (the
# exact names above are none of them).
SECRET_NAME = re.compile(
    r"SECRET|TOKEN|PASSW|CREDENTIAL|PRIVATE|AUTH|APIKEY|ACCESSKEY"
    r"|(^|_)(API_|ACCESS_)?KEY(S|FILE)?($|_)|(^|_)(PASS|PWD|PAT)($|_)", re.IGNORECASE)


def passed_on(name: str) -> bool:
    """Whether the caller's variable ``name`` reaches a process that is not trainpipe's."""
    if name in ALLOWED_NAMES:
        return True
    return name.startswith(ALLOWED_PREFIXES) and not SECRET_NAME.search(name)


# A value that is a credential whatever its name: a URI with user information
# (TRAINPIPE_DB_URL=postgres://u:p@host/db), an AWS access key id.
_ACCESS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")


def carries_credential(value: str) -> bool:
    return has_userinfo(value) or _ACCESS_KEY_ID.search(value) is not None


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` reduced to what ``passed_on`` allows, less a prefix family's variable whose
    value carries a credential (the names alone do not tell)."""
    return {k: v for k, v in environ.items()
            if passed_on(k) and (k in ALLOWED_NAMES or not carries_credential(v))}
