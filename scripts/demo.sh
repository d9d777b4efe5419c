#!/usr/bin/env bash
# The bundled demo, end to end: installs what is missing, builds align-check, exports a real
# network (MobileNetV3-Small) to TorchScript and ONNX, and checks one against the other.
# Everything it writes goes under reports/demo/.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/bootstrap.sh >/dev/null
cargo build --quiet
out="reports/demo"
mkdir -p "$out"
.venv/bin/python scripts/make_demo.py "$out"
set +e
./target/debug/align-check "$out/model.pt" "$out/model.onnx" --inputs "$out/inputs.npz" \
    --json "$out/report.json" | tee "$out/report.txt"
status=${PIPESTATUS[0]}
set -e
echo "reports written to $out/ (exit code $status)"
exit "$status"
