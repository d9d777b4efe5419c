#!/usr/bin/env bash
# Entry point of the benchmark (issue: "Per-layer checks at the speed of two forward passes").
#
# Responsible for getting everything bench.py needs in place and then handing over: the pinned
# Python environment (scripts/bootstrap.sh), a release build of align-check that is not older
# than its sources (the first release build compiles libtorch's bindings: many minutes on 2
# cores), then scripts/bench.py with every argument passed through. The benchmark networks are
# built and cached by bench.py itself (scripts/bench_models.py, under
# ${ALIGN_CHECK_CACHE:-~/.cache/align-check}/bench/).
#
#   scripts/bench.sh [--runs 3] [--models resnet50,vit_b_16,fpn_r18] [--skip-verify]
#                    [--threads N] [--out reports/bench.md]      (bench.py --help for all)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/bootstrap.sh >/dev/null

# The binary, and the example that writes what it captures from a .pt2 (bench.py's (g) values).
bin="target/release/align-check"
values="target/release/examples/pt2_values"
stale=0
for exe in "$bin" "$values"; do
    if [ ! -x "$exe" ]; then
        stale=1
    elif [ -n "$(find src tests/tools build.rs Cargo.toml Cargo.lock -newer "$exe" -type f 2>/dev/null | head -n 1)" ]; then
        stale=1
    fi
done
if [ "$stale" = 1 ]; then
    echo "bench.sh: building $bin (cargo build --release; the first time takes many minutes)" >&2
    cargo build --release --bin align-check --example pt2_values >&2
fi

exec "$repo/.venv/bin/python" scripts/bench.py "$@"
