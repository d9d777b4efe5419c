#!/usr/bin/env bash
# Regenerates the committed example reports in reports/example/ (linked from the README):
# the bundled demo (MobileNetV3-Small, clean) and the planted fault fault_conv_weight (one
# output channel of a conv scaled by 1.05), each as HTML, Markdown and JUnit, plus the
# fault's repro bundle. Runs from the repository root with relative paths, so the reports
# name files as a checkout sees them, not as this machine does. Screenshots are refreshed when
# Chromium is installed (scripts/screenshot.sh says how to get it).
#
#   scripts/example_reports.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/bootstrap.sh >/dev/null
cargo build --quiet
bin=./target/debug/align-check
out=reports/example
mkdir -p "$out"

# The demo pair is exported into reports/demo/ (ignored by git), as scripts/demo.sh does.
.venv/bin/python scripts/make_demo.py reports/demo
report() {
    local name="$1" dir="$2"
    shift 2
    local args=("$dir/model.pt" "$dir/model.onnx" --inputs "$dir/inputs.npz"
        --html "$out/$name.html" --markdown "$out/$name.md" --junit "$out/$name.junit.xml" -q)
    # A failing check (exit 1) is what the fault example shows.
    "$bin" "${args[@]}" "$@" || [ $? -eq 1 ]
}
report demo reports/demo
rm -rf "$out/fault_conv_weight.repro"
report fault_conv_weight tests/fixtures/fault_conv_weight --repro "$out/fault_conv_weight.repro"

if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    for name in demo fault_conv_weight; do
        bash scripts/screenshot.sh "$out/$name.html" "$out/$name.png"
    done
else
    echo "example_reports.sh: no Chromium, screenshots left as they were" >&2
fi
echo "wrote $(ls "$out" | tr '\n' ' ')"
