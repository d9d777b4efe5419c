#!/usr/bin/env python3
"""Checks every pair of the fixture zoo (tests/fixtures/manifest.json) with both references,
the TorchScript model.pt the zoo holds and a torch.export .pt2 of the same network, and prints
one line per pair: exit code, first-divergence module and coverage of each, and whether they
agree (issue 51: the .pt2 reference must give the same verdicts and the same first-divergence
modules).

Each network is rebuilt as scripts/make_fixtures.py builds it (same spec, seed, calibration),
exported with torch.export.export and saved with torch.export.save into --work (kept, so a
second run only checks). A fault fixture uses its source fixture's network: its fault is in
the ONNX file. A network torch.export cannot take is listed with torch.export's reason.
Exit 1 when some pair's verdict or first-divergence module differs between the references.

  .venv/bin/python scripts/compare_references.py --binary target/debug/align-check
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch

import make_fixtures
from fixtures_lib import driver

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(REPO, "tests", "fixtures")


def spec_of(entry, by_name):
    """The make_fixtures spec a fixture's network comes from, or None."""
    if entry.get("fault"):
        return spec_of(by_name[entry["fault"]["source_fixture"]], by_name)
    for suffix in ("_legacy", "_dynamo"):
        if entry["name"].endswith(suffix):
            spec = entry["name"][: -len(suffix)]
            return spec if spec in make_fixtures.FAMILY.specs else None
    return None


def export(spec, path):
    """Writes the spec's network as a .pt2; returns torch.export's reason when it cannot."""
    if os.path.exists(path):
        return None
    model, inputs = driver.build_model(make_fixtures.FAMILY, spec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.export.save(torch.export.export(model, tuple(inputs)), path)
    except Exception as err:  # torch.export's many failure types all mean "not exportable"
        return str(err).splitlines()[0][:90]
    return None


def check(binary, reference, fixture):
    """(exit code, first-divergence module, torch-side coverage) of one align-check run."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        folder = os.path.join(ZOO, fixture)
        run = subprocess.run([binary, reference, os.path.join(folder, "model.onnx"), "--inputs",
                              os.path.join(folder, "inputs.npz"), "--json", out],
                             capture_output=True, text=True)
        if not os.path.exists(out):
            return run.returncode, run.stderr.strip()[-90:], None
        report = json.load(open(out))
    divergence = report.get("first_divergence") or {}
    return run.returncode, divergence.get("module"), report["coverage"]["torch_ratio"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(REPO, "target", "debug", "align-check"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "align-check-pt2"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    manifest = json.load(open(os.path.join(ZOO, "manifest.json")))
    by_name = {e["name"]: e for e in manifest}
    same = differ = skipped = 0
    print(f"{'fixture':28} {'.pt2 (exit, first divergence, coverage)':44} TorchScript")
    for entry in manifest:
        name = entry["name"]
        spec = spec_of(entry, by_name)
        if not os.path.exists(os.path.join(ZOO, name, "model.onnx")):
            print(f"{name:28} no model.onnx (its export failed when the zoo was made)")
            skipped += 1
            continue
        if spec is None:
            print(f"{name:28} no network spec in scripts/make_fixtures.py")
            skipped += 1
            continue
        pt2 = os.path.join(args.work, f"{spec}.pt2")
        reason = export(spec, pt2)
        if reason:
            print(f"{name:28} torch.export fails: {reason}")
            skipped += 1
            continue
        a = check(args.binary, pt2, name)
        b = check(args.binary, os.path.join(ZOO, name, "model.pt"), name)
        agree = a[:2] == b[:2]
        same += agree
        differ += not agree
        print(f"{name:28} {str(a):44} {b} {'same' if agree else 'DIFFERENT'}")
    print(f"{same} pair(s) agree, {differ} differ, {skipped} not compared")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
