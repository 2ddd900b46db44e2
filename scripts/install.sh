#!/usr/bin/env bash
# Installs trainpipe and everything it needs into ./.venv, from this repository's own files.
#
#   bash scripts/install.sh          (make run / make test call it on first use)
#
# Steps, each skipped when already done:
#   1. Open MPI (mpirun + headers) from Debian's packages: Horovod is built against them.
#   2. .venv with Python 3.11, then ONE pip pass over pyproject's [local,dev] extras under
#      constraints.txt (one pass keeps numpy at 1.26.4, which TF 2.14 needs).
#   3. Horovod 0.28.1 built from source with TF + MPI + Gloo (never the horovod[tensorflow]
#      extra, which drags in a newer TF). The built wheel is cached outside the clone, keyed
#      by everything it was compiled against, so a second install skips the ~2-6 minute build.
#   4. The native TFRecord reader for Pipe mode (scripts/install_native.sh: one C file, built
#      and cached the same way; without it Pipe mode uses the Python reader).
#   5. A check that Horovod runs over MPI with TensorFlow.
set -euo pipefail
export TF_CPP_MIN_LOG_LEVEL=2  # keep TensorFlow's start-up banner out of the install log

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
venv=.venv
horovod_version=0.28.1
cache_root=${TRAINPIPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainpipe}

say() { printf '[install] %s\n' "$*"; }
die() { printf '[install] error: %s\n' "$*" >&2; exit 1; }

# --- 1. Open MPI ------------------------------------------------------------------------
mpi_header() { [ -f /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -f /usr/include/mpi.h ] \
    || { command -v mpicc >/dev/null && [ -n "$(mpicc --showme:incdirs 2>/dev/null)" ]; }; }
if ! command -v mpirun >/dev/null || ! mpi_header; then
    apt_cmd="apt-get update && apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing Open MPI: $apt_cmd"
        DEBIAN_FRONTEND=noninteractive bash -c "$apt_cmd" >/dev/null
    else
        die "Open MPI (mpirun and its headers) is missing. Run as root: sudo bash -c '$apt_cmd' then run this again."
    fi
fi

# --- 2. Python environment ----------------------------------------------------------------
python=${TRAINPIPE_PYTHON:-$(command -v python3.11 || true)}
[ -n "$python" ] || die "Python 3.11 is required (TensorFlow 2.14 has no wheels for newer Pythons). Install python3.11, or set TRAINPIPE_PYTHON=/path/to/python3.11."
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
    || die "$python is not Python 3.11. Set TRAINPIPE_PYTHON=/path/to/python3.11."

if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv with $python"
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
# Some machines list local package indexes that do not exist; pip warns once per package.
quiet_pip() { "${pip[@]}" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
quiet_pip install -q -c constraints.txt pip setuptools wheel
say "installing trainpipe[local,dev] under constraints.txt (one resolver pass)"
quiet_pip install -q -c constraints.txt -e ".[local,dev]"

# --- 3. Horovod ---------------------------------------------------------------------------
if "$venv/bin/python" -c "import horovod.tensorflow" 2>/dev/null; then
    say "horovod already installed"
else
    tf_version=$("$venv/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
    mpi_version=$(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')
    py_tag=$("$venv/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    # The wheel is only valid for the exact TF, MPI, Python and CPU it was compiled against.
    key="horovod-${horovod_version}-tf${tf_version}-${py_tag}-ompi${mpi_version}-$(uname -m)"
    wheel_dir="$cache_root/wheels/$key"
    if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
        say "building horovod $horovod_version from source (a few minutes; cached in $wheel_dir)"
        tmp_dir=$(mktemp -d)
        trap 'rm -rf "$tmp_dir"' EXIT
        HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
        HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
        MAKEFLAGS="-j$(nproc)" \
            quiet_pip wheel -q --no-build-isolation --no-deps --no-cache-dir \
            -w "$tmp_dir" "horovod==$horovod_version" \
            || die "the horovod build failed (see the compiler output above)"
        mkdir -p "$wheel_dir"
        mv "$tmp_dir"/horovod-*.whl "$wheel_dir"/  # only a finished wheel enters the cache
    else
        say "using cached horovod wheel from $wheel_dir"
    fi
    quiet_pip install -q --no-deps "$wheel_dir"/horovod-*.whl
fi

# --- 4. Native TFRecord reader ---------------------------------------------------------------
bash scripts/install_native.sh "$venv/bin/python"

# --- 5. Check -------------------------------------------------------------------------------
"${pip[@]}" check >/dev/null || die "pip check found broken requirements: run '$venv/bin/pip check'"
"$venv/bin/python" - <<'PY' || die "horovod does not import with TensorFlow; remove $venv and the wheel cache, then reinstall"
import horovod.tensorflow.keras as hvd
from horovod.common.util import mpi_built, gloo_built
assert mpi_built() and gloo_built(), "horovod was built without MPI or Gloo"
PY
say "done: $("$venv/bin/python" -c 'import tensorflow as tf, horovod, numpy; print(f"tensorflow {tf.__version__}, horovod {horovod.__version__}, numpy {numpy.__version__}")' 2>/dev/null)"
