#!/usr/bin/env bash
# The wheel end to end, as a user meets it (scripts/test.sh runs it last, in its unfiltered
# run). Builds dist/align_check-*.whl (scripts/build_wheel.sh) and installs it, offline, into
# two fresh virtual environments:
#
# - `user`, which sees the pinned torch and onnxruntime through a .pth file naming the pinned
#   environment's site-packages (CI copies no 5 GB; pip still checks the wheel's torch== and
#   onnxruntime== requirements against them). With its installed `align-check`: the planted
#   fault tests/fixtures/fault_conv_weight exits 1 and the clean resnet_tiny_legacy exits 0;
#   the committed example reports are what it writes (scripts/example_reports.sh --check with
#   ALIGN_CHECK_BIN: its reports equal the checkout's, apart from timing, versions and paths);
#   `python -m align_check.export` exports an example model that it then checks (exit 0).
# - `bare`, the wheel alone (--no-deps: no torch, no onnxruntime), as a summary job has it:
#   `align-check summary` of the two JSON reports (exit 1, one failed) and `--version` work;
#   a check says in one line that torch is missing and the pip command (exit 2), and with a
#   stand-in torch 2.12.0 that it found the wrong version.
#
# ALIGN_CHECK_WHEEL=PATH tests that wheel instead of building one. Exit 0 when all of that
# holds; otherwise 1 with a line saying which step failed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

wheel="${ALIGN_CHECK_WHEEL:-}"  # a wheel built before (CI's build step), else built here
[ -n "$wheel" ] || wheel="$(bash scripts/build_wheel.sh | tail -n 1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pinned="$(readlink -f .venv)"
base="$("$pinned/bin/python" -c 'import sys; print(sys._base_executable)')"
site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
fail() { echo "test_wheel.sh: $*" >&2; exit 1; }
# Runs a command, expecting exit status $1; its stdout and stderr go to $work/last.
expect() {
    local want="$1" got=0
    shift
    "$@" >"$work/last" 2>&1 || got=$?
    [ "$got" -eq "$want" ] || { cat "$work/last" >&2; fail "exit $got, not $want: $*"; }
}
check() {
    local fx="tests/fixtures/$1"
    shift
    "$ac" "$fx/model.pt" "$fx/model.onnx" --inputs "$fx/inputs.npz" -q "$@"
}

# Venvs without pip of their own (whose setuptools would shadow the pinned one that torch
# requires): the pinned environment's pip installs into them (--python).
venv() { "$base" -m venv --without-pip "$1"; }
install() { "$pinned/bin/python" -m pip --python "$1/bin/python" install --quiet --no-index "${@:2}"; }

venv "$work/user"
site "$pinned" >"$(site "$work/user")/align-check-pinned-env.pth"
install "$work/user" "$wheel"
ac="$work/user/bin/align-check"
expect 1 check fault_conv_weight --json "$work/fault_conv_weight.json"
expect 0 check resnet_tiny_legacy --json "$work/resnet_tiny_legacy.json"
expect 0 env ALIGN_CHECK_BIN="$ac" bash scripts/example_reports.sh --check
expect 0 "$work/user/bin/python" -m align_check.export scripts.examples.my_add:factory \
    --input a=1x3x16x16 --input b=1x3x16x16 --out "$work/my_add"
expect 0 "$ac" "$work/my_add/model.pt" "$work/my_add/model.onnx" --inputs "$work/my_add/inputs.npz" -q
echo "test_wheel.sh: installed align-check: fault exit 1, clean exit 0, example reports equal, export + check" >&2

venv "$work/bare"
install "$work/bare" --no-deps "$wheel"
ac="$work/bare/bin/align-check"
# Nothing of this machine's libtorch: no path to it in the full binary, no libtorch needed by
# the summary one (whose build rpath is then unused), and no LD_LIBRARY_PATH from here on.
b="$(site "$work/bare")/align_check/bin/align-check"
if readelf -d "$b" | grep -E "R(UN)?PATH" | grep -qF -e "$pinned" -e "$repo"; then
    fail "$b has a RUNPATH into this machine's environment"
fi
if readelf -d "$ac-summary" | grep -E "NEEDED" | grep -qE "torch|c10"; then
    fail "align-check-summary links libtorch: $(readelf -d "$ac-summary" | grep -E 'NEEDED.*(torch|c10)' | tr -s ' ')"
fi
unset LD_LIBRARY_PATH
expect 1 "$work/bare/bin/python" -c 'import torch'
expect 0 "$ac" --version
expect 1 "$ac" summary "$work/fault_conv_weight.json" "$work/resnet_tiny_legacy.json" \
    --markdown "$work/summary.md"
grep -q fault_conv_weight "$work/summary.md" || fail "summary.md does not name fault_conv_weight"
expect 2 check fault_conv_weight
[ "$(wc -l <"$work/last")" -eq 1 ] && grep -q "pip install torch==" "$work/last" \
    || { cat "$work/last" >&2; fail "no torch: not one line with the pip command"; }
mkdir "$(site "$work/bare")/torch"
echo "__version__ = '2.12.0'" >"$(site "$work/bare")/torch/version.py"
expect 2 check fault_conv_weight
grep -q "found torch 2.12.0" "$work/last" || { cat "$work/last" >&2; fail "torch 2.12.0 not named"; }
echo "test_wheel.sh: without torch: summary and --version run; a check says what to install" >&2
echo "test_wheel.sh: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) passed"
