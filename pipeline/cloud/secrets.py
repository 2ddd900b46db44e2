"""Keep credentials out of what is sent to SageMaker.

A pipeline definition is readable by anyone who may describe the pipeline, and stays in its
execution history. upsert scans the definition text before sending it and refuses to send one
that contains an AWS access key id, something shaped like a secret key or session token, a
URI with credentials in it (``https://user:password@host``), or the value of any AWS_*
environment variable or of the credentials in use.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from training_entry.contract import redact

# AKIA: long-term access key id; ASIA: temporary (STS) access key id.
ACCESS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
# 40 base64 characters with both cases and a digit: a secret access key. A hex digest has no
# upper case, so content hashes do not match; a run with more than two "/" is taken for a
# path (a key has 0.6 of them on average).
_B64 = r"A-Za-z0-9/+"
SECRET_KEY = re.compile(rf"(?<![{_B64}=])(?=[{_B64}]*[a-z])(?=[{_B64}]*[A-Z])(?=[{_B64}]*[0-9])"
                        rf"[{_B64}]{{40}}(?![{_B64}=])")
# Session tokens are hundreds of base64 characters.
SESSION_TOKEN = re.compile(rf"[{_B64}]{{100,}}={{0,2}}")
MAX_SLASHES_IN_A_KEY = 2
# A URI whose user information (a password or token) is set; up to its host.
URI_WITH_USERINFO = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s\"]+@[^/?#\s\"]*")
# AWS_* variables whose values are configuration, not secrets, and may rightly appear in a
# definition (the region is in every image URI, the account and a role in every ARN). Values
# too short to mean anything ("true", "1") are skipped by length.
NOT_SECRET_VARIABLES = frozenset(
    {"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCOUNT_ID", "AWS_PROFILE", "AWS_ROLE_ARN"}
)
MIN_VALUE_LENGTH = 8


@dataclass(frozen=True)
class Finding:
    kind: str
    excerpt: str  # masked: enough to find it, never the whole value

    def __str__(self) -> str:
        return f"{self.kind} ({self.excerpt})"


def _mask(value: str) -> str:
    return value[:4] + "..." if len(value) > 8 else "..."


def find_secrets(
    text: str,
    environ: Mapping[str, str] = os.environ,
    extra_values: Iterable[str] = (),
) -> list[Finding]:
    """What in ``text`` looks like a credential; empty when it is clean."""
    findings = []
    for pattern, kind in (
        (ACCESS_KEY_ID, "an AWS access key id"),
        (SECRET_KEY, "something shaped like an AWS secret access key"),
        (SESSION_TOKEN, "something shaped like a session token"),
    ):
        findings += [
            Finding(kind, _mask(m.group(0))) for m in pattern.finditer(text)
            if pattern is not SECRET_KEY or m.group(0).count("/") <= MAX_SLASHES_IN_A_KEY
        ]
    # https://user:password@host (a tracking server's, a database's): shown without them.
    findings += [Finding("a URI with credentials", redact(m.group(0))) for m in URI_WITH_USERINFO.finditer(text)]
    values = {
        name: value for name, value in environ.items()
        if name.startswith("AWS_") and name not in NOT_SECRET_VARIABLES
    }
    values.update({f"the credentials in use ({i})": v for i, v in enumerate(extra_values)})
    for name, value in sorted(values.items()):
        if value and len(value) >= MIN_VALUE_LENGTH and value in text:
            findings.append(Finding(f"the value of {name}", _mask(value)))
    return findings
