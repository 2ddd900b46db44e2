#!/usr/bin/env bash
# Installs the native TFRecord reader (_trainpipe_records, from training_entry/input/_records_native.c)
# into a Python environment: scripts/install.sh runs it after Horovod, the same way.
#
#   bash scripts/install_native.sh PYTHON
#
# Built by scripts/build_native.sh and cached outside the clone, keyed by everything it was
# compiled against (source hash, Python ABI, compiler, CPU architecture), so a reinstall
# copies it in. Never fatal: when the build or the import fails it prints one notice and
# removes the module, and Pipe mode uses the Python reader (training_entry/input/records.py).
set -euo pipefail
python=${1:?usage: install_native.sh PYTHON}
here=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${TRAINPIPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainpipe}
say() { printf '[install] %s\n' "$*"; }

source_file="$here/training_entry/input/_records_native.c"
sha=$(sha256sum "$source_file" | cut -c1-64)
read -r platlib suffix < <("$python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"], sysconfig.get_config_var("EXT_SUFFIX"))')
module="_trainpipe_records$suffix"
installed_sha() { "$python" -c 'import _trainpipe_records as m; print(m.source_sha256)' 2>/dev/null || true; }

if [ "$(installed_sha)" = "$sha" ]; then
    say "native TFRecord reader already installed"
    exit 0
fi
cc=${CC:-gcc}
cc_version=$("$cc" -dumpfullversion 2>/dev/null || echo none)
key="records-native-${sha:0:16}${suffix%.so}-${cc##*/}${cc_version}-$(uname -m)"
cache_dir="$cache_root/native/$key"
rm -f "$platlib/$module"
if [ -f "$cache_dir/$module" ]; then
    say "using cached native TFRecord reader from $cache_dir"
else
    tmp_dir=$(mktemp -d)
    if bash "$here/scripts/build_native.sh" "$python" "$tmp_dir" >"$tmp_dir/log" 2>&1; then
        mkdir -p "$cache_dir"
        mv "$tmp_dir/$module" "$cache_dir/"  # only a finished build enters the cache
        say "built the native TFRecord reader (cached in $cache_dir)"
    else
        reason=$(grep -m1 -i -e error -e 'no ' "$tmp_dir/log" || tail -1 "$tmp_dir/log")
        say "notice: the native TFRecord reader did not build (${reason:-$cc failed}); Pipe mode uses the Python reader"
        rm -rf "$tmp_dir"
        exit 0
    fi
    rm -rf "$tmp_dir"
fi
cp "$cache_dir/$module" "$platlib/$module"
if [ "$(installed_sha)" != "$sha" ]; then
    rm -f "$platlib/$module"
    say "notice: the native TFRecord reader does not import in $python; Pipe mode uses the Python reader"
fi
