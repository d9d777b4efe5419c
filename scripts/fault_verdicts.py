"""Verdict, exit and first divergence of every fault fixture, so that a regeneration of the
fixtures (or a new binary) can be shown to keep each fault failing at the same layer (issue #19,
item 6).

Responsible for finding the fault fixtures (the zoo's manifest, the library family's manifest,
precision/overflow_fp16, drift/drift_and_fault and the deep family's `*_fault` models), running
one align-check binary on each exactly as the tests do (the fixture's inputs.npz when it has
one), and writing a JSON list of rows; `--compare BEFORE.json` prints the before/after table in
Markdown and exits 1 when a fault no longer exits 1 at the same layer.

    .venv/bin/python scripts/fault_verdicts.py --out /tmp/before.json
    .venv/bin/python scripts/fault_verdicts.py --out /tmp/after.json --compare /tmp/before.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


def fault_fixtures(deep_root):
    """(label, folder) of every fault fixture, in a fixed order."""
    found = []
    for family, manifest in (("zoo", os.path.join(FIXTURES, "manifest.json")),
                             ("lib", os.path.join(FIXTURES, "lib", "manifest.json"))):
        base = os.path.dirname(manifest)
        for entry in json.load(open(manifest)):
            if entry.get("fault") and not entry.get("export_error"):
                found.append((f"{family}/{entry['name']}", os.path.join(base, entry["name"])))
    found.append(("precision/overflow_fp16", os.path.join(FIXTURES, "precision",
                                                          "overflow_fp16")))
    found.append(("drift/drift_and_fault", os.path.join(FIXTURES, "drift", "drift_and_fault")))
    deep_manifest = os.path.join(deep_root, "manifest.json")
    if os.path.exists(deep_manifest):
        for entry in json.load(open(deep_manifest)):
            if entry.get("fault"):
                found.append((f"deep/{entry['name']}", os.path.join(deep_root, entry["name"])))
    return found


def run(binary, folder):
    with tempfile.TemporaryDirectory(prefix="fault-verdicts-") as tmp:
        out = os.path.join(tmp, "report.json")
        cmd = [binary, os.path.join(folder, "model.pt"), os.path.join(folder, "model.onnx"),
               "-q", "--json", out]
        if os.path.exists(os.path.join(folder, "inputs.npz")):
            cmd += ["--inputs", os.path.join(folder, "inputs.npz")]
        code = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp).returncode
        report = json.load(open(out)) if os.path.exists(out) else {}
    first = report.get("first_divergence") or {}
    return {"exit": code, "verdict": report.get("verdict"),
            "module": first.get("module"), "onnx_node": first.get("onnx_node"),
            "rel_to_range": first.get("rel_to_range")}


def table(before, after):
    by_label = {row["fixture"]: row for row in before}
    lines = ["| fault fixture | before: verdict, exit, first divergence | after | same |",
             "|---|---|---|---|"]
    broken = []
    for row in after:
        old = by_label.get(row["fixture"], {})
        same = old.get("exit") == row["exit"] == 1 and old.get("module") == row["module"] \
            and old.get("onnx_node") == row["onnx_node"]
        if not same:
            broken.append(row["fixture"])

        def cell(r):
            if not r:
                return "-"
            err = r.get("rel_to_range")
            size = f", {err:.1e} of range" if isinstance(err, (int, float)) else ""
            return f"{r.get('verdict')}, {r.get('exit')}, `{r.get('module')}` " \
                   f"(`{r.get('onnx_node')}`{size})"
        lines.append(f"| {row['fixture']} | {cell(old)} | {cell(row)} | "
                     f"{'yes' if same else '**no**'} |")
    return "\n".join(lines), broken


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default=os.path.join(REPO, "target", "debug", "align-check"))
    p.add_argument("--deep", default=os.path.join(FIXTURES, "deep"),
                   help="the deep family's folder (scripts/make_deep_fixtures.py)")
    p.add_argument("--out", required=True, help="JSON rows written here")
    p.add_argument("--compare", help="an earlier --out: print the before/after table")
    args = p.parse_args(argv)
    rows = []
    for label, folder in fault_fixtures(args.deep):
        row = dict(fixture=label, **run(args.binary, folder))
        print(f"{label}: exit {row['exit']} {row['verdict']} at {row['module']!r}",
              file=sys.stderr)
        rows.append(row)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    if args.compare:
        text, broken = table(json.load(open(args.compare)), rows)
        print(text)
        return 1 if broken else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
