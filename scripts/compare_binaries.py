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

    .venv/bin/python scripts/compare_binaries.py A B [--only REGEX]
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


def normalised(value, key=""):
    if isinstance(value, dict):
        return {k: normalised(v, k) for k, v in value.items() if k not in DROPPED}
    if isinstance(value, list):
        return [normalised(v, key) for v in value]
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


def report(command, folder, out):
    args = [command, os.path.join(folder, "model.pt"), os.path.join(folder, "model.onnx"),
            "-q", "--threads", "2", "--json", out]
    if os.path.exists(os.path.join(folder, "inputs.npz")):
        args += ["--inputs", os.path.join(folder, "inputs.npz")]
    done = subprocess.run(args, capture_output=True, text=True)
    if not os.path.exists(out):
        return done.returncode, {"stderr": done.stderr.strip().splitlines()[-1:]}
    with open(out) as f:
        return done.returncode, json.load(f)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--only", metavar="REGEX")
    args = p.parse_args(argv)
    same = differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        for folder in pairs(args.only):
            results = [report(cmd, folder, os.path.join(tmp, f"{k}.json"))
                       for k, cmd in enumerate((args.a, args.b))]
            (code_a, json_a), (code_b, json_b) = results
            where = first_difference(normalised(json_a), normalised(json_b))
            name = os.path.relpath(folder, FIXTURES)
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
