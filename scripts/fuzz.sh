#!/usr/bin/env bash
# Fuzzes everything a user's file reaches, for a bounded time: the ONNX reader and the
# "expose everything" rewriter (with the scope and signature readers), and the .npy/.npz
# input readers. Targets live in tests/fuzz/ (a cargo-fuzz crate outside the main package).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Every crash, out-of-memory or hang is copied into tests/fixtures/fuzz_regressions/TARGET/
# (as a file the tool would be given: .onnx, .npy or .npz), where tests/fuzz_regressions.rs
# replays it on every test run, and the script then fails. Not part of scripts/test.sh: it
# is too slow for every run; its regressions are.
#
# Environment: FUZZ_JOBS (targets at once, default 2), FUZZ_SANITIZER (address, the default,
# or none). Needs the bootstrapped .venv (libtorch, numpy for the seeds). Only stable Rust is
# assumed: cargo-fuzz's nightly flags are allowed through RUSTC_BOOTSTRAP=1.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx_model onnx_expose npy npz)
jobs="${FUZZ_JOBS:-2}"
sanitizer="${FUZZ_SANITIZER:-address}"
fuzz_dir=tests/fuzz
regressions=tests/fixtures/fuzz_regressions
cargo_fuzz_version=0.13.1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz $cargo_fuzz_version"
    cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked
fi
if [ ! -d .venv/libtorch/lib ]; then
    echo "fuzz.sh: .venv/libtorch is missing; run scripts/bootstrap.sh first" >&2
    exit 2
fi

# The same flags for build and run, so nothing is rebuilt in between. Debug assertions are on
# because they are in the debug builds users and tests run: an overflow must surface here.
export RUSTC_BOOTSTRAP=1
mkdir -p "$fuzz_dir/artifacts"
echo "building the fuzz targets (sanitizer: $sanitizer; the first build compiles libtorch's bindings again)"
if ! cargo fuzz build --fuzz-dir "$fuzz_dir" -O --debug-assertions --sanitizer "$sanitizer" \
    >"$fuzz_dir/artifacts/build.log" 2>&1; then
    tail -n 20 "$fuzz_dir/artifacts/build.log" >&2
    echo "fuzz.sh: the fuzz targets did not build (log: $fuzz_dir/artifacts/build.log)" >&2
    exit 2
fi
bin_dir="$fuzz_dir/target/x86_64-unknown-linux-gnu/release"

.venv/bin/python scripts/fuzz_seeds.py "$fuzz_dir/corpus"

# The fuzz binaries are not given libtorch's rpath (only the main package's are).
export LD_LIBRARY_PATH="$repo/.venv/libtorch/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

extension() {
    case "$1" in
        onnx_model | onnx_expose) echo onnx ;;
        npy) echo npy ;;
        npz) echo npz ;;
    esac
}

run_target() {
    local t="$1" artifacts="$fuzz_dir/artifacts/$1"
    rm -rf "$artifacts" && mkdir -p "$artifacts"
    local dict=()
    [ -f "$fuzz_dir/$t.dict" ] && dict=("-dict=$fuzz_dir/$t.dict")
    # -rss_limit_mb: a real input file of a few kB must never need gigabytes.
    # -timeout: no single input may take 10 s. Leak checks are off: libtorch's static
    # initialisers, loaded with the library, hold memory for the life of the process.
    "$bin_dir/$t" "$fuzz_dir/corpus/$t" "${dict[@]}" \
        -artifact_prefix="$artifacts/" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -detect_leaks=0 -print_final_stats=1 \
        >"$artifacts/log.txt" 2>&1 || true
}

echo "fuzzing ${targets[*]} for $seconds s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
    run_target "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

found=()
for t in "${targets[@]}"; do
    artifacts="$fuzz_dir/artifacts/$t"
    # "Done N runs in S second(s)": a target stops early at its first failure.
    done_line=$(grep -a -o 'Done [0-9]* runs in [0-9]* second' "$artifacts/log.txt" | tail -n 1 || true)
    if [ -n "$done_line" ]; then
        read -r _ execs _ _ ran _ <<<"$done_line"
        echo "$t: $execs executions in $ran s (log: $artifacts/log.txt)"
    else
        execs=$(grep -a -o 'number_of_executed_units: *[0-9]*' "$artifacts/log.txt" | grep -o '[0-9]*$' || true)
        echo "$t: stopped at its first failure after ${execs:-?} executions (log: $artifacts/log.txt)"
    fi
    ext=$(extension "$t")
    for a in "$artifacts"/crash-* "$artifacts"/oom-* "$artifacts"/timeout-* "$artifacts"/leak-*; do
        [ -f "$a" ] || continue
        mkdir -p "$regressions/$t"
        dest="$regressions/$t/$(basename "$a").$ext"
        if [ "$t" = onnx_expose ]; then
            # The raw input describes a graph; keep the model it builds, which the tool reads.
            FUZZ_WRITE_ONNX="$dest" "$bin_dir/$t" "$a" >/dev/null 2>&1 || true
        else
            cp "$a" "$dest"
        fi
        found+=("$dest")
    done
done

if [ ${#found[@]} -gt 0 ]; then
    echo "fuzz.sh: ${#found[@]} failing input(s), copied for tests/fuzz_regressions.rs:" >&2
    printf '  %s\n' "${found[@]}" >&2
    echo "fuzz.sh: see the logs above for each stack; fix the code, then commit the files" >&2
    exit 1
fi
echo "fuzz.sh: no crashes"
