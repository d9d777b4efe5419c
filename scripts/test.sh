#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the pinned environment if missing
# (reusing the machine-wide cache), regenerates fixtures only if they are missing, runs every
# Rust test against the real libtorch and ONNX Runtime, checks that the committed example
# reports are what the binary just built writes (scripts/example_reports.sh --check), runs
# the registry sweep's CI slice, then builds, installs and checks the wheel.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/bootstrap.sh >/dev/null
# Every generator of scripts/fixtures_lib/generators.py whose fixtures are missing (a fresh
# clone lacks only the uncommitted tests/fixtures/deep/).
.venv/bin/python scripts/regenerate_fixtures.py --missing
cargo test "$@"
# The sweep's expected-culprit derivation (plain Python, no models).
.venv/bin/python -m unittest discover -s scripts/sweep -p 'test_*.py'
# A filtered run (arguments given) checks only what it names.
if [ $# -eq 0 ]; then
    bash scripts/example_reports.sh --check
    # The registry sweep's fixed CI slice (docs/sweep.md): ten small real models, both
    # exporters and four variants, with their injected faults; exit 1 on a missed target.
    # Exports are cached outside the clone (about 9 minutes to build them on a new machine,
    # 1-5 minutes of checks once cached).
    .venv/bin/python scripts/sweep.py --slice ci --check \
        --binary "${CARGO_TARGET_DIR:-$repo/target}/debug/align-check"
    # The wheel as a user installs it (scripts/test_wheel.sh): a release build (cached in
    # target/ after the first), installed offline into fresh venvs, checked on committed
    # fixtures, and `summary` without torch. About a minute once the release build is cached.
    bash scripts/test_wheel.sh
fi
