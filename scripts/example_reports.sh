#!/usr/bin/env bash
# Writes the committed example reports in reports/example/ (linked from the README), or with
# --check fails (exit 1) when one of them is not what the binary writes today.
#
# The examples come from committed fixtures, so they need no export and take about a second
# each: resnet_tiny (tests/fixtures/resnet_tiny_legacy, a clean pass) as the terminal table,
# HTML, Markdown and JUnit, and the planted fault fault_conv_weight (the same network with one
# output channel of a conv scaled by 1.05) as these, JSON and its repro bundle. They run from the
# repository root with relative paths and --threads 2, so the reports name files as a checkout
# sees them and do not depend on the machine's core count.
#
# --check writes the same reports into a temporary folder and compares them with the committed
# ones after blanking what legitimately changes from run to run: timings, peak memory, version
# strings, the output folder, the checkout's absolute path and the production session's
# full-precision distances (see normalize below); .npz files are compared by their arrays,
# since their zip entries carry timestamps. Figures at rounding level come from the CPU's
# float arithmetic (AVX2 and AVX-512 kernels sum in different orders), so cpu.txt records the
# vector width of the CPU that wrote the examples: on a CPU of another width --check compares
# the reports with every number blanked (their structure and words), skips the arrays, and
# says so; regenerating on that CPU makes the comparison exact again. The README
# quotes the first lines of the fault's terminal report; --check fails when it no longer does.
#
#   scripts/example_reports.sh            # regenerate (builds target/debug/align-check first)
#   scripts/example_reports.sh --check    # what scripts/test.sh runs after cargo test
#
# ALIGN_CHECK_BIN=PATH runs another binary instead (and skips the build).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

mode=write
case "${1:-}" in
    --check) mode=check ;;
    "") ;;
    *) echo "usage: scripts/example_reports.sh [--check]" >&2; exit 2 ;;
esac

bin="${ALIGN_CHECK_BIN:-${CARGO_TARGET_DIR:-target}/debug/align-check}"
if [ "$mode" = write ] && [ -z "${ALIGN_CHECK_BIN:-}" ]; then
    cargo build --quiet
fi
if [ ! -x "$bin" ]; then
    echo "example_reports.sh: no align-check binary at $bin (cargo build, or set ALIGN_CHECK_BIN)" >&2
    exit 2
fi

committed=reports/example
if [ "$mode" = check ]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
else
    # Only this script writes here: what it no longer makes must not linger.
    rm -rf "$committed"
    mkdir -p "$committed"
    out="$committed"
fi

report() {
    local name="$1" fixture="tests/fixtures/$2"
    shift 2
    # The terminal report is stdout (no colour off a terminal). A failing check (exit 1) is
    # what the fault example shows; anything else is an error.
    "$bin" "$fixture/model.pt" "$fixture/model.onnx" --inputs "$fixture/inputs.npz" \
        --threads 2 --html "$out/$name.html" --markdown "$out/$name.md" \
        --junit "$out/$name.junit.xml" "$@" >"$out/$name.txt" || [ $? -eq 1 ]
}
# The widest vector extension the CPU has: what decides a kernel's summation order.
cpu_width() {
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then echo avx512
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then echo avx2
    else echo other; fi
}
cpu_width >"$out/cpu.txt"

report resnet_tiny resnet_tiny_legacy
report fault_conv_weight fault_conv_weight --json "$out/fault_conv_weight.json" \
    --repro "$out/fault_conv_weight.repro"

if [ "$mode" = write ]; then
    echo "wrote $(cd "$out" && find . -type f | sort | tr '\n' ' ')"
    exit 0
fi

# What may differ between two runs of the same code, blanked on both sides. The production
# session's full-precision distances run through ONNX Runtime's optimised kernels, whose
# rounding differs from one CPU to another (2.88e-7 from the unoptimised run on the machine
# that wrote the reports, 1.92e-7 on an AVX2 machine without AVX-512), like a timing; the
# reports' rounded figures from PyTorch stay compared.
other_cpu=0
if [ "$(cat "$committed/cpu.txt" 2>/dev/null)" != "$(cat "$out/cpu.txt")" ]; then
    other_cpu=1
    echo "example_reports.sh: reports/example/ was written on a CPU of another vector width" \
        "($(cat "$committed/cpu.txt" 2>/dev/null || echo unknown), this one $(cat "$out/cpu.txt")):" \
        "numbers and arrays are not compared, only structure and words" >&2
fi

normalize() {
    local blank='s/x/x/'
    if [ "$other_cpu" -eq 1 ]; then
        # Numbers standing alone; digits inside names (layer1.1.bn2) stay compared.
        blank='s/(^|[^A-Za-z0-9_.])[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/\1N/g'
    fi
    sed -E \
        -e "s#$out#$committed#g" \
        -e 's/[-+0-9.eE]+ from the unoptimised run/N from the unoptimised run/g' \
        -e '/"vs_(unoptimised|torch)": \{/,/\}/ s/": [-+0-9.eE]+,?$/": N/' \
        -e "s#$repo/##g" \
        -e 's/[0-9]+(\.[0-9]+)? (ms|s)\b/N s/g' \
        -e 's/time="[0-9.]+"/time="N"/g' \
        -e 's/"([a-z_]+_s)": [-+0-9.eE]+/"\1": N/g' \
        -e 's/"peak_rss_bytes": [0-9]+/"peak_rss_bytes": N/g' \
        -e 's/[0-9]+\.[0-9]+\.[0-9]+(\+[A-Za-z0-9.]+)?/VERSION/g' \
        -e "$blank" \
        "$1"
}

same_arrays() {
    .venv/bin/python -c '
import sys
import numpy as np
a, b = (np.load(p) for p in sys.argv[1:])
same = sorted(a.files) == sorted(b.files) and all(
    a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k], equal_nan=True) for k in a.files)
sys.exit(0 if same else 1)' "$1" "$2"
}

stale=0
while IFS= read -r f; do
    fresh="$out/$f" kept="$committed/$f"
    if [ ! -f "$kept" ]; then
        echo "example_reports.sh: $kept is not committed" >&2
        stale=1
        continue
    fi
    case "$f" in
        cpu.txt) continue ;;
        *.npz) { [ "$other_cpu" -eq 1 ] || same_arrays "$fresh" "$kept"; } && continue ;;
        *.onnx) cmp -s "$fresh" "$kept" && continue ;;
        *) diff -q <(normalize "$fresh") <(normalize "$kept") >/dev/null && continue ;;
    esac
    stale=1
    case "$f" in
        *.npz | *.onnx) echo "example_reports.sh: $kept is stale (its contents differ)" >&2 ;;
        *)
            echo "example_reports.sh: $kept is stale; first differences (< committed, > now):" >&2
            diff <(normalize "$kept") <(normalize "$fresh") | head -6 >&2 || true
            ;;
    esac
done < <(cd "$out" && find . -type f | sed 's#^\./##' | sort)
while IFS= read -r f; do
    if [ ! -f "$out/$f" ]; then
        echo "example_reports.sh: $committed/$f is no longer written" >&2
        stale=1
    fi
done < <(cd "$committed" && find . -type f | sed 's#^\./##' | sort)

# The README's excerpt of the terminal report: its first three lines, verbatim.
excerpt="$(head -3 "$out/fault_conv_weight.txt")"
if ! grep -qF -- "$(head -1 <<<"$excerpt")" README.md \
    || [ "$(grep -cxF -f <(printf '%s\n' "$excerpt") README.md)" -lt 3 ]; then
    echo "example_reports.sh: README.md no longer quotes the first lines of fault_conv_weight.txt:" >&2
    printf '%s\n' "$excerpt" >&2
    stale=1
fi

if [ "$stale" -ne 0 ]; then
    echo "example_reports.sh: regenerate with scripts/example_reports.sh and commit reports/example/" >&2
    exit 1
fi
echo "example_reports.sh: reports/example/ is up to date"
