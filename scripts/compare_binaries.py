#!/usr/bin/env python3
"""Runs two align-check commands on every committed fixture pair and compares their JSON
reports: the installed wheel's `align-check` against `target/release/align-check` (issue 52),
or any two builds.

A fixture pair is a folder under tests/fixtures holding model.pt and model.onnx (with
inputs.npz when it has one). Each command checks it with the same arguments; the reports are
compared after dropping what legitimately differs between two runs (timing, peak memory,
versions, file paths) and the production session's full-precision distances, which ONNX
Runtime's thread scheduling moves in the last bits. Prints one line per pair that differs
(the first differing key) and a last line `N identical, N differ`; exit 1 if any differ.

`--timing RUNS` instead runs A and B alternately RUNS times on each pair and prints the
median of their JSON's `timing.pairing_s` and `timing.total_s` side by side, with B/A
ratios and their geometric mean over the pairs: whether a change to pairing costs time,
measured under the same machine load.

`--drop KEY` drops more keys (`--drop paired_by` when pass names changed on purpose);
`--cache-a DIR` keeps A's reports in DIR and reuses them, so a slow baseline runs once
while B is rebuilt and checked again.

    .venv/bin/python scripts/compare_binaries.py A B [--only REGEX] [--drop KEY] [--cache-a DIR]
    .venv/bin/python scripts/compare_binaries.py A B --timing 3 [--only REGEX]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
DROPPED = {"timing", "memory", "environment", "torch_model", "onnx_model", "seconds"}
DISTANCES = re.compile(r"\(largest [^)]*\)[^;]*")


def pairs(only):
    for root, _, files in sorted(os.walk(FIXTURES)):
        if "model.pt" in files and "model.onnx" in files:
            if only is None or re.search(only, root):
                yield root


def normalised(value, dropped, key=""):
    if isinstance(value, dict):
        return {k: normalised(v, dropped, k) for k, v in value.items() if k not in dropped}
    if isinstance(value, list):
        return [normalised(v, dropped, key) for v in value]
    if isinstance(value, str):
        value = value.replace(REPO, "REPO")
        if "production session" in value:
            value = DISTANCES.sub("(largest …)", value)
    return value


def first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return path
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}"
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}[len]"
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else path


def report(command, folder, out, cached=None):
    """The exit code and JSON report of `command` on one fixture pair; with `cached`, a
    file to reuse the result from (written on the first run)."""
    if cached and os.path.exists(cached):
        with open(cached) as f:
            saved = json.load(f)
        return saved["code"], saved["report"]
    code, result = run_report(command, folder, out)
    if cached:
        with open(cached, "w") as f:
            json.dump({"code": code, "report": result}, f)
    return code, result


def run_report(command, folder, out):
    args = [command, os.path.join(folder, "model.pt"), os.path.join(folder, "model.onnx"),
            "-q", "--threads", "2", "--json", out]
    if os.path.exists(os.path.join(folder, "inputs.npz")):
        args += ["--inputs", os.path.join(folder, "inputs.npz")]
    done = subprocess.run(args, capture_output=True, text=True)
    if not os.path.exists(out):
        return done.returncode, {"stderr": done.stderr.strip().splitlines()[-1:]}
    with open(out) as f:
        return done.returncode, json.load(f)


def timing(a, b, only, runs):
    """Prints A's and B's median pairing and total seconds per pair, and B/A ratios."""
    import math
    import statistics
    ratios = {"pairing_s": [], "total_s": []}
    print(f"{'pair':40} {'pairing A':>10} {'pairing B':>10} {'B/A':>6} {'total A':>9} {'total B':>9} {'B/A':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for folder in pairs(only):
            seen = {0: [], 1: []}
            for _ in range(runs):
                for k, cmd in enumerate((a, b)):
                    _, result = run_report(cmd, folder, os.path.join(tmp, f"{k}.json"))
                    seen[k].append(result.get("timing") or {})
            med = {k: {key: statistics.median(t.get(key, 0.0) for t in seen[k])
                       for key in ratios} for k in seen}
            row = [os.path.relpath(folder, FIXTURES)[:40]]
            for key in ratios:
                x, y = med[0][key], med[1][key]
                if x > 0 and y > 0:
                    ratios[key].append(y / x)
                row += [f"{x:10.4f}", f"{y:10.4f}", f"{(y / x if x else float('nan')):6.2f}"]
            print(f"{row[0]:40} " + " ".join(row[1:]))
    for key, rs in ratios.items():
        if rs:
            mean = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"{key}: B/A geometric mean {mean:.3f} over {len(rs)} pairs")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--only", metavar="REGEX")
    p.add_argument("--drop", metavar="KEY", action="append", default=[])
    p.add_argument("--cache-a", metavar="DIR")
    p.add_argument("--timing", metavar="RUNS", type=int)
    args = p.parse_args(argv)
    if args.timing:
        return timing(args.a, args.b, args.only, args.timing)
    dropped = DROPPED | set(args.drop)
    if args.cache_a:
        os.makedirs(args.cache_a, exist_ok=True)
    same = differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        for folder in pairs(args.only):
            name = os.path.relpath(folder, FIXTURES)
            cached = (os.path.join(args.cache_a, name.replace(os.sep, "__") + ".json")
                      if args.cache_a else None)
            results = [report(cmd, folder, os.path.join(tmp, f"{k}.json"), cached if k == 0 else None)
                       for k, cmd in enumerate((args.a, args.b))]
            (code_a, json_a), (code_b, json_b) = results
            where = first_difference(normalised(json_a, dropped), normalised(json_b, dropped))
            if code_a != code_b or where:
                differ += 1
                print(f"{name}: exit {code_a} vs {code_b}, first difference at {where}")
            else:
                same += 1
            for k in (0, 1):
                path = os.path.join(tmp, f"{k}.json")
                if os.path.exists(path):
                    os.remove(path)
    print(f"{same} identical, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
