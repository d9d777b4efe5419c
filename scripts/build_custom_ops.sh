#!/usr/bin/env bash
# Builds the my_add custom-operator libraries used by tests/custom_ops.rs and the
# custom_op_lib_* fixtures, and prints where they are:
#
#   torch_ops=DIR/libtorch_my_add.so            TorchScript op my_ops::my_add   (--torch-ops)
#   ort_custom_ops=DIR/libort_my_add.so         ONNX Runtime kernel, 2*a + b    (--ort-custom-ops)
#   ort_custom_ops_wrong=DIR/libort_my_add_wrong.so   ONNX Runtime kernel rounded to float16
#
# The TorchScript library is compiled with g++ against the libtorch that align-check links
# (LIBTORCH, else the bootstrapped .venv/libtorch), with the C++ ABI that torch reports; the
# ONNX Runtime libraries are cdylib examples of this package (cargo build --example). Both
# steps are skipped when their outputs are newer than their sources, so a second run takes
# about a second. DIR is the first argument, default target/custom_ops.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/target/custom_ops}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

libtorch="${LIBTORCH:-$repo/.venv/libtorch}"
if [ ! -d "$libtorch/include/torch" ]; then
    echo "build_custom_ops.sh: no libtorch at $libtorch (set LIBTORCH or run scripts/bootstrap.sh)" >&2
    exit 2
fi
libtorch="$(cd "$libtorch" && pwd -P)"

# TorchScript operator library ---------------------------------------------------------------
torch_src="$repo/tests/custom_ops/torch_my_add.cpp"
torch_lib="$out/libtorch_my_add.so"
if [ ! -f "$torch_lib" ] || [ "$torch_src" -nt "$torch_lib" ] || [ "$0" -nt "$torch_lib" ] \
    || [ "$libtorch/lib/libtorch_cpu.so" -nt "$torch_lib" ]; then
    # The library must use the same std::string ABI as libtorch or the op fails to register
    # (undefined symbols at load time). The PyPI wheel says which one it was built with.
    abi=1
    if [ -x "$repo/.venv/bin/python" ]; then
        abi="$("$repo/.venv/bin/python" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')"
    fi
    "${CXX:-g++}" -shared -fPIC -O2 -std=c++17 -Wno-c++20-extensions \
        -D_GLIBCXX_USE_CXX11_ABI="$abi" \
        -I"$libtorch/include" -I"$libtorch/include/torch/csrc/api/include" \
        "$torch_src" -L"$libtorch/lib" -lc10 -ltorch_cpu -Wl,-rpath,"$libtorch/lib" \
        -o "$torch_lib.tmp"
    mv "$torch_lib.tmp" "$torch_lib"
fi

# ONNX Runtime custom-op libraries -----------------------------------------------------------
# cargo decides itself whether anything changed; the copies keep stable names outside the
# cargo-managed folder.
cd "$repo"
"${CARGO:-cargo}" build --quiet --example ort_my_add --example ort_my_add_wrong
examples="${CARGO_TARGET_DIR:-$repo/target}/debug/examples"
for name in ort_my_add ort_my_add_wrong; do
    if ! cmp -s "$examples/lib$name.so" "$out/lib$name.so"; then
        cp "$examples/lib$name.so" "$out/lib$name.so.tmp"
        mv "$out/lib$name.so.tmp" "$out/lib$name.so"
    fi
done

echo "torch_ops=$torch_lib"
echo "ort_custom_ops=$out/libort_my_add.so"
echo "ort_custom_ops_wrong=$out/libort_my_add_wrong.so"
