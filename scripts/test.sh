#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the pinned environment if missing
# (reusing the machine-wide cache), regenerates fixtures only if they are missing, then runs
# every Rust test against the real libtorch and ONNX Runtime.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/bootstrap.sh >/dev/null
if [ ! -f tests/fixtures/manifest.json ]; then
    .venv/bin/python scripts/make_fixtures.py
fi
if [ ! -f tests/fixtures/lib/manifest.json ]; then
    .venv/bin/python scripts/make_library_fixtures.py
fi
if [ ! -f tests/fixtures/first_contact/model.onnx ]; then
    .venv/bin/python scripts/make_first_contact_fixtures.py
fi
if [ ! -f tests/fixtures/precision/overflow_fp16/model.onnx ]; then
    .venv/bin/python scripts/make_precision_fixtures.py
fi
if [ ! -f tests/fixtures/optimized/manifest.json ]; then
    .venv/bin/python scripts/make_optimized_fixtures.py
fi
if [ ! -f tests/fixtures/drift/drift_and_fault/model.onnx ]; then
    .venv/bin/python scripts/make_drift_fixtures.py
fi
if [ ! -f tests/fixtures/deep/manifest.json ]; then
    .venv/bin/python scripts/make_deep_fixtures.py >/dev/null
fi
if [ ! -f tests/fixtures/signature/manifest.json ]; then
    .venv/bin/python scripts/make_signature_fixtures.py
fi
if [ ! -f tests/fixtures/production/gelu_head/model.onnx ]; then
    .venv/bin/python scripts/make_production_fixtures.py >/dev/null
fi
if [ ! -f tests/fixtures/quantized/cnn_qdq/model.onnx ]; then
    .venv/bin/python scripts/make_quantized_fixtures.py >/dev/null 2>&1
fi
cargo test "$@"
