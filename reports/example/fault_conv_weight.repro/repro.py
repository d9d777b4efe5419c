#!/usr/bin/env python3
"""Reproduces one layer's difference between ONNX Runtime and PyTorch, found by align-check.

align-check copies this file into a repro bundle (`align-check ... --repro DIR`) as repro.py,
next to what it reads:

- model.onnx: the smallest ONNX model that computes the layer: its own nodes, from the values
  PyTorch computed for what they read (graph inputs), with only those nodes' weights;
- inputs.npz: those values, one array per graph input of model.onnx;
- expected.npz: PyTorch's value of the layer (array `expected`);
- repro.json: the output to fetch, the tolerance, the session settings and what align-check
  measured.

It runs model.onnx with onnxruntime (graph optimisations off, as align-check runs it),
compares the output with PyTorch's value the way align-check does (max |onnx - torch|, and
that relative to the largest |torch|), prints both figures and exits 1 when some element is
beyond the tolerance, 0 otherwise. It needs numpy and onnxruntime only.
"""

import json
import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))


def load_npz(name):
    with np.load(os.path.join(HERE, name)) as archive:
        return {key: archive[key] for key in archive.files}


def session(config):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = int(config.get("threads", 0))
    options.inter_op_num_threads = 1
    if config.get("custom_ops_library"):
        options.register_custom_ops_library(config["custom_ops_library"])
    return ort.InferenceSession(os.path.join(HERE, "model.onnx"), options,
                                providers=["CPUExecutionProvider"])


def compare(expected, got, atol, rtol):
    """align-check's statistics: max |t - r| over the finite pairs, that divided by the
    largest finite |r|, and how many elements are beyond atol * max(1, max|r|) + rtol * |r|
    (a NaN or infinity on one side only is always beyond)."""
    r = expected.astype(np.float64).reshape(-1)
    t = got.astype(np.float64).reshape(-1)
    if r.size != t.size:
        raise SystemExit(f"output has {t.size} elements, PyTorch's value {r.size}")
    finite = np.isfinite(r) & np.isfinite(t)
    diff = np.abs(t[finite] - r[finite])
    max_abs = float(diff.max()) if diff.size else 0.0
    finite_r = np.abs(r[np.isfinite(r)])
    ref_max = float(finite_r.max()) if finite_r.size else 0.0
    if ref_max > 0:
        rel_to_range = max_abs / ref_max
    else:
        rel_to_range = float("inf") if max_abs > 0 else 0.0
    bound = atol * max(1.0, ref_max) + rtol * np.abs(r[finite])
    beyond = int((diff > bound).sum())
    both_nan = np.isnan(r) & np.isnan(t)
    same_inf = np.isinf(r) & (r == t)
    beyond += int((~finite & ~both_nan & ~same_inf).sum())
    return max_abs, rel_to_range, beyond


def main():
    with open(os.path.join(HERE, "repro.json")) as f:
        config = json.load(f)
    inputs = load_npz("inputs.npz")
    expected = load_npz("expected.npz")["expected"]
    (got,) = session(config).run([config["output"]], inputs)
    atol, rtol = config["tolerance"]["atol"], config["tolerance"]["rtol"]
    max_abs, rel_to_range, beyond = compare(expected, got, atol, rtol)
    measured = config["align_check"]
    print(f"layer {config['layer']} (ONNX node {config['onnx_node']}, {config['onnx_op']})")
    print(f"max_abs={max_abs!r} rel_to_range={rel_to_range!r}")
    print(f"align-check measured max_abs={measured['max_abs']!r} "
          f"rel_to_range={measured['rel_to_range']!r}")
    verdict = "FAIL" if beyond else "pass"
    print(f"{verdict}: {beyond} of {expected.size} elements beyond atol {atol:g} "
          f"* max(1, max|torch|) + rtol {rtol:g} * |torch| (onnxruntime {ort.__version__})")
    return 1 if beyond else 0


if __name__ == "__main__":
    sys.exit(main())
