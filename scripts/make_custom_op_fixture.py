#!/usr/bin/env python3
"""Regenerates tests/fixtures/custom_op_lib_legacy/: a model that calls a *real* custom op.

Unlike the custom_op_* fixtures of make_fixtures.py (a torch.autograd.Function inlined while
tracing, so model.pt holds plain aten ops), this model calls `my_ops::my_add` (2*a + b), the
TorchScript operator compiled from tests/custom_ops/torch_my_add.cpp. model.pt therefore
cannot be loaded without that library, and model.onnx holds a `my_add` node in the custom
domain `my_ops` that ONNX Runtime runs only with the custom-op library from
tests/custom_ops/ort_my_add.rs. scripts/build_custom_ops.sh builds all three libraries.

Writes model.pt (traced), model.onnx (legacy exporter, opset 17, my_ops domain version 1),
inputs.npz (keyed by ONNX input names) and meta.json (the op, the inputs, and the numbers the
checks below measured). Checks, any failure exits 1:
  - TorchScript (with the op library) against ONNX Runtime with the correct kernel: within
    1e-4 at the output, with ONNX Runtime's optimisations on and off;
  - the same with the wrong kernel (float16 rounding): apart by more than 1e-4, so the
    fixture can serve as a planted fault.

Run with the pinned interpreter: .venv/bin/python scripts/make_custom_op_fixture.py
"""

import argparse
import json
import os
import subprocess
import sys
import warnings


import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

from fixtures_lib import export as ex

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "custom_op_lib_legacy")
DOMAIN = "my_ops"
OP = "my_add"
SEED = 6
CLEAN_ATOL = 1e-4


class RealCustomOpNet(nn.Module):
    """conv -> my_ops::my_add(x, b) -> relu -> conv: the op sits between two layers, so a
    wrong kernel shows up first at the op and then downstream."""

    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(3, 3, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv_out = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, a, b):
        x = self.conv_in(a)
        y = torch.ops.my_ops.my_add(x, b)
        return self.conv_out(self.relu(y))


def my_add_symbolic(g, a, b):
    """Maps the TorchScript op to a node `my_add` of the domain `my_ops`, typed like `a`
    (the legacy exporter cannot infer a custom node's output type)."""
    return g.op(f"{DOMAIN}::{OP}", a, b).setType(a.type())


def build_libraries():
    """Paths printed by scripts/build_custom_ops.sh, as a dict."""
    out = subprocess.run(["bash", os.path.join(REPO, "scripts", "build_custom_ops.sh")],
                         check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def run_onnx(path, feeds, custom_ops_lib, optimise):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 2
    so.register_custom_ops_library(custom_ops_lib)
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def max_diff(ref, model_onnx, feeds, custom_ops_lib):
    """Largest |torch - ort| at the output, over both ORT optimisation settings."""
    return max(float(np.max(np.abs(ref.astype(np.float64) - run_onnx(model_onnx, feeds,
                                                                        custom_ops_lib, o))))
               for o in (True, False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=FIXTURE, help="fixture folder (default: %(default)s)")
    parser.add_argument("--libs", metavar="DIR",
                        help="use the libraries already in DIR instead of running "
                             "scripts/build_custom_ops.sh")
    args = parser.parse_args()

    if args.libs:
        libs = {k: os.path.join(args.libs, f) for k, f in (
            ("torch_ops", "libtorch_my_add.so"), ("ort_custom_ops", "libort_my_add.so"),
            ("ort_custom_ops_wrong", "libort_my_add_wrong.so"))}
    else:
        libs = build_libraries()
    torch.ops.load_library(libs["torch_ops"])

    torch.manual_seed(SEED)
    model = RealCustomOpNet().eval()
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8))
    names, output_names = ["a", "b"], ["out"]
    os.makedirs(args.out, exist_ok=True)
    model_pt = os.path.join(args.out, "model.pt")
    model_onnx = os.path.join(args.out, "model.onnx")

    with torch.no_grad():
        traced = torch.jit.trace(model, inputs)
    traced.save(model_pt)

    torch.onnx.register_custom_op_symbolic(f"{DOMAIN}::{OP}", my_add_symbolic, 9)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter, on purpose
        torch.onnx.export(model, inputs, model_onnx, dynamo=False, opset_version=17,
                          input_names=names, output_names=output_names,
                          custom_opsets={DOMAIN: 1}, do_constant_folding=True)
    ex.save_inputs(os.path.join(args.out, "inputs.npz"), names, inputs)

    # Checks: the files as saved, loaded back.
    graph = onnx.load(model_onnx)
    custom = [n for n in graph.graph.node if n.domain == DOMAIN]
    assert [n.op_type for n in custom] == [OP], f"expected one {DOMAIN}::{OP} node, got {custom}"
    feeds = ex.load_inputs(os.path.join(args.out, "inputs.npz"))
    with torch.no_grad():
        ref = torch.jit.load(model_pt)(*[torch.from_numpy(feeds[n]) for n in names]).numpy()
    good = max_diff(ref, model_onnx, feeds, libs["ort_custom_ops"])
    wrong = max_diff(ref, model_onnx, feeds, libs["ort_custom_ops_wrong"])
    print(f"max |torch - ort| at the output: correct kernel {good:.3g}, wrong kernel {wrong:.3g}")
    failures = []
    if good > CLEAN_ATOL:
        failures.append(f"correct kernel differs by {good:.3g} > {CLEAN_ATOL}")
    if wrong <= CLEAN_ATOL:
        failures.append(f"wrong kernel differs by only {wrong:.3g} <= {CLEAN_ATOL}")

    meta = {
        "name": os.path.basename(args.out),
        "exporter": "legacy",
        "opset": ex.onnx_opset(graph),
        "torch_op": f"{DOMAIN}::{OP}",
        "onnx_op": {"domain": DOMAIN, "op_type": OP, "node": custom[0].name},
        "inputs": [{"name": n, "shape": list(t.shape), "dtype": "float32"}
                   for n, t in zip(names, inputs)],
        "outputs": output_names,
        "max_output_diff": {"correct_kernel": good, "wrong_kernel": wrong},
    }
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
