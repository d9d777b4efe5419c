#!/usr/bin/env python3
"""Writes tests/fixtures/production/: model pairs for the production-session check
(tests/production.rs), each with inputs.npz and, in expected.json, what ONNX Runtime itself
measured on those inputs at every optimisation level.

- gelu_head: LayerNorm -> Linear -> GELU (erf) -> Linear -> GELU, its output read straight off
  the last GELU, whose inputs mostly lie around -2 (a sparse head). At `extended` and above ONNX Runtime fuses the erf GELU into one Gelu node
  (GeluFusionL2, exact), and with the session config entry
  `optimization.enable_gelu_approximation=1` its GeluApproximation pass then replaces that
  Gelu by the tanh approximation (FastGelu), which moves the output by up to 4.7e-4: beyond
  the outputs' float32 tolerance while the unoptimised session agrees with PyTorch.
- clean_cnn: Conv/BatchNorm/ReLU blocks, pooling and a Linear head, with calibrated BatchNorm
  statistics (fixtures_lib.calibrate): ONNX Runtime fuses Conv+ReLU, and at `all` runs NCHWc
  kernels, all within rounding: it must read "agrees" at every level.

Nothing is assumed: the script measures each fixture under ONNX Runtime at every level (with
and without the approximation entry) against the eager model, with align-check's default
output rule (|onnx - torch| <= 1e-4 * max(1, max|torch|) + 1e-3 * |torch|), and exits 1 if
gelu_head does not differ exactly where the tests expect it to or clean_cnn differs anywhere.
Random weights, seeded. Run with the pinned interpreter:
.venv/bin/python scripts/make_production_fixtures.py
It overwrites tests/fixtures/production/ and nothing else.
"""

import json
import os
import sys

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures_lib import export as ex  # noqa: E402
from fixtures_lib.calibrate import recalibrate_batchnorm  # noqa: E402
from fixtures_lib.manifest import fresh_folder  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
APPROXIMATION = {"optimization.enable_gelu_approximation": "1"}
# align-check's default output tolerance for float32 (src/compare/output_tolerance.rs).
OUTPUT_ATOL, OUTPUT_RTOL = 1e-4, 1e-3


class GeluHead(torch.nn.Module):
    def __init__(self, width=64, hidden=128):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, hidden)
        self.act1 = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(hidden, width)
        self.act2 = torch.nn.GELU()
        # Sparse features, as a trained head has them: most pre-activations sit around -2,
        # where the tanh approximation is furthest from the erf GELU (4.7e-4 at -2.7) while
        # the outputs stay small, so the outputs' tolerance (scaled by max(1, max|y|)) is
        # tight there.
        with torch.no_grad():
            self.fc2.weight.mul_(3.0)
            self.fc2.bias.fill_(-2.0)

    def forward(self, x):
        return self.act2(self.fc2(self.act1(self.fc1(self.norm(x)))))


class CleanCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()

        def block(cin, cout):
            return torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(),
            )

        self.features = torch.nn.Sequential(
            block(3, 16), block(16, 16), torch.nn.MaxPool2d(2), block(16, 32), block(32, 32)
        )
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def within_output_tolerance(reference, test):
    """(passes, max abs error, error relative to range) under the default output rule."""
    r = reference.astype(np.float64)
    t = test.astype(np.float64)
    diff = np.abs(t - r)
    bound = OUTPUT_ATOL * max(1.0, float(np.abs(r).max())) + OUTPUT_RTOL * np.abs(r)
    return bool((diff <= bound).all()), float(diff.max()), float(diff.max() / np.abs(r).max())


def measure(onnx_path, feed, reference):
    """Each level, plain and with the GELU approximation entry, against `reference`."""
    results = {}
    for config_name, config in (("plain", {}), ("gelu_approximation", APPROXIMATION)):
        for level, value in LEVELS.items():
            options = ort.SessionOptions()
            options.graph_optimization_level = value
            options.intra_op_num_threads = 1
            for key, entry in config.items():
                options.add_session_config_entry(key, entry)
            session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
            out = session.run(None, feed)[0]
            passes, max_abs, rel = within_output_tolerance(reference, out)
            results[f"{config_name}/{level}"] = {
                "passes": passes, "max_abs": max_abs, "rel_to_range": rel,
            }
    return results


def write(out, name, model, example):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    onnx_path = os.path.join(folder, "model.onnx")
    ex.export_onnx(model, (example,), onnx_path, "legacy", ["x"], ["y"])
    torch.jit.trace(model, (example,)).save(os.path.join(folder, "model.pt"))
    ex.save_inputs(os.path.join(folder, "inputs.npz"), ["x"], [example])
    with torch.no_grad():
        reference = model(example).numpy()
    measured = measure(onnx_path, {"x": example.numpy()}, reference)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump({"measured_by_onnxruntime": measured}, f, indent=2)
        f.write("\n")
    return measured


def main():
    out = fresh_folder(os.path.join(REPO, "tests", "fixtures"), "production")
    torch.manual_seed(0)
    gelu = GeluHead().eval()
    gelu_measured = write(out, "gelu_head", gelu, torch.randn(8, 16, 64))

    torch.manual_seed(1)
    cnn = CleanCnn()
    recalibrate_batchnorm(cnn, lambda i: torch.randn(8, 3, 32, 32))
    cnn_measured = write(out, "clean_cnn", cnn, torch.randn(2, 3, 32, 32))

    problems = []
    for key, m in gelu_measured.items():
        # The approximation pass runs at extended and above, and only when asked for.
        should_differ = key in ("gelu_approximation/extended", "gelu_approximation/all")
        if m["passes"] == should_differ:
            problems.append(f"gelu_head {key}: passes={m['passes']} ({m['max_abs']:.3e})")
    for key, m in cnn_measured.items():
        if not m["passes"]:
            problems.append(f"clean_cnn {key} differs ({m['max_abs']:.3e})")
    for name, measured in (("gelu_head", gelu_measured), ("clean_cnn", cnn_measured)):
        for key, m in measured.items():
            print(f"{name:10s} {key:30s} pass={m['passes']!s:5s} max_abs={m['max_abs']:.3e} "
                  f"rel_to_range={m['rel_to_range']:.3e}")
    if problems:
        sys.exit("the fixtures do not behave as the tests expect: " + "; ".join(problems))
    print(f"wrote {sorted(os.listdir(out))} to {out}")


if __name__ == "__main__":
    main()
