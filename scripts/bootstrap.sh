#!/usr/bin/env bash
# Installs the pinned Python environment that align-check's build and scripts rely on, once
# per machine, and links it into this checkout as `.venv`.
#
# The environment (torch with its CUDA wheels is about 5 GB) lives in a cache outside the
# clone, keyed by the hash of scripts/requirements.txt, so a second clone or a fresh CI clone
# on the same machine reuses it instead of downloading again. pip's own download cache sits
# beside it for the same reason. Override the location with ALIGN_CHECK_CACHE.
#
# Prints the venv path on its last line. Safe to run again: it does nothing when the cached
# environment is complete.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${ALIGN_CHECK_CACHE:-$HOME/.cache/align-check}"
req="$repo/scripts/requirements.txt"
key="$(sha256sum "$req" | cut -c1-12)"
venv="$cache/venv-$key"
python="${PYTHON:-python3}"

mkdir -p "$cache"
if [ ! -f "$venv/.complete" ]; then
    echo "align-check bootstrap: installing pinned Python environment into $venv" >&2
    echo "  (first time on this machine: several GB, a few minutes)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    PIP_CACHE_DIR="$cache/pip" "$venv/bin/python" -m pip install --progress-bar off -r "$req" >&2
    touch "$venv/.complete"
fi

# Version-independent links, so the build need not know the Python minor version.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
ln -sfn "$site/torch" "$venv/libtorch"
ln -sfn "$(ls "$site"/onnxruntime/capi/libonnxruntime.so.* | head -n 1)" "$venv/libonnxruntime.so"

# The checkout-local link is what .cargo/config.toml (LIBTORCH) and build.rs (the ONNX
# Runtime library) point at, so plain `cargo build` works after this script has run once.
ln -sfn "$venv" "$repo/.venv"
echo "$venv"
