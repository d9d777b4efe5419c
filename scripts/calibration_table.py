"""Prints the tolerance calibration table of docs/tolerances.md: for every fixture, the largest
error relative to range over its layers (clean fixtures) or at the planted fault, the first
divergence, and coverage. Uses the debug build of align-check; run scripts/test.sh first.

Run: .venv/bin/python scripts/calibration_table.py
"""

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(REPO, "target", "debug", "align-check")


def main() -> None:
    manifest = json.load(open(os.path.join(REPO, "tests", "fixtures", "manifest.json")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for e in manifest:
            if e.get("export_error"):
                continue
            d = os.path.join(REPO, "tests", "fixtures", e["name"])
            out = os.path.join(tmp, e["name"] + ".json")
            code = subprocess.run(
                [BINARY, os.path.join(d, "model.pt"), os.path.join(d, "model.onnx"),
                 "--inputs", os.path.join(d, "inputs.npz"), "--json", out, "-q"],
                check=False).returncode
            r = json.load(open(out))
            fd = r["first_divergence"]
            if e["fault"]:
                err = fd["rel_to_range"] if fd else float("nan")
                passing = [l["rel_to_range"] for l in r["layers"] if l["pass"]]
                clean = max(passing) if passing else 0.0
            else:
                clean = max(l["rel_to_range"] for l in r["layers"])
                err = None
            cov = r["coverage"]
            rows.append((e["name"], e["exporter"], "fault" if e["fault"] else "clean", clean, err,
                         (fd["module"] or "(top level)") if fd else "-",
                         100.0 * cov["torch_layers_paired"] / cov["torch_layers_total"], code))
    print("| fixture | exporter | kind | worst passing layer (rel. to range) | error at fault | first divergence | coverage | exit |")
    print("|---|---|---|---|---|---|---|---|")
    for name, exporter, kind, clean, err, fd, cov, code in rows:
        fault = f"{err:.1e}" if err is not None else "-"
        print(f"| {name} | {exporter} | {kind} | {clean:.1e} | {fault} | {fd} | {cov:.0f}% | {code} |")


if __name__ == "__main__":
    sys.exit(main())
