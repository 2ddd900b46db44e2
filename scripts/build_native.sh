#!/usr/bin/env bash
# Builds the native TFRecord reader (training_entry/input/_records_native.c -> _trainpipe_records)
# for one Python interpreter: one C file, no dependency beyond the compiler and Python's headers.
#
#   bash scripts/build_native.sh PYTHON OUT_DIR
#
# Writes OUT_DIR/_trainpipe_records<EXT_SUFFIX> and prints its path. scripts/install.sh runs
# it at install time and caches the result; the tests run it into a temporary directory.
set -euo pipefail
python=${1:?usage: build_native.sh PYTHON OUT_DIR}
out_dir=${2:?usage: build_native.sh PYTHON OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
source_file="$here/training_entry/input/_records_native.c"
cc=${CC:-gcc}
command -v "$cc" >/dev/null || { echo "no C compiler ($cc)" >&2; exit 1; }
read -r include suffix < <("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX"))')
[ -f "$include/Python.h" ] || { echo "Python.h is missing from $include (install the Python development headers)" >&2; exit 1; }
sha=$(sha256sum "$source_file" | cut -c1-64)
mkdir -p "$out_dir"
target="$out_dir/_trainpipe_records$suffix"
"$cc" -O2 -fPIC -shared -Wall -Werror -std=c11 -D_GNU_SOURCE -I"$include" \
    -DTRAINPIPE_SOURCE_SHA256="\"$sha\"" -o "$target.partial" "$source_file"
mv "$target.partial" "$target"
echo "$target"
