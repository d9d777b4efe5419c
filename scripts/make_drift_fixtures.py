#!/usr/bin/env python3
"""Writes the accumulated-drift pairs for tests/isolation.rs into tests/fixtures/drift/.

A deep MLP (16 blocks of Linear + ReLU). In the ONNX file, every block's Linear weights and
bias are scaled by 1 + 1.5e-5: each block alone stays well within the float32 tolerance
(rtol 1e-4), but the error compounds, block after block, until it crosses the tolerance
around block 7. That is drift: no block is wrong on its own, yet a report of accumulated
error names the first block where the sum shows.

- drift_and_fault: the drift above plus one real fault further on (one output channel of
  blocks.12.fc scaled by 1.05). The first layer failing with accumulated error is a drift
  block; the first layer failing in isolation, the first divergence, must be blocks.12.fc.
- drift_only: the drift alone. No layer fails in isolation, the outputs do: the verdict
  must be accumulated drift, not a culprit.
- rounding_only: a clean export of another network, 32 tanh blocks in the chaotic regime
  (weights at 3x the steady gain). Nothing is planted: float32 rounding alone, amplified
  block after block, moves ONNX Runtime's output beyond the default output tolerance, and
  PyTorch's own float32 output is as far from its float64 one (expected.json records both).

expected.json in each folder says what tests/isolation.rs checks against. Random weights,
seeded. Run with the pinned interpreter: .venv/bin/python scripts/make_drift_fixtures.py
It overwrites tests/fixtures/drift/ and nothing else.
"""

import json
import os
import warnings

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from fixtures_lib import export as ex
from fixtures_lib.manifest import fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKS = 16
DRIFT = 1.5e-5
FAULT_BLOCK = 12
FAULT_SCALE = 1.05
# The chaotic network: tanh blocks whose weights have 3x the gain that keeps activations
# steady, so that a difference of one rounding grows by orders of magnitude through them.
CHAOTIC_BLOCKS = 32
CHAOTIC_GAIN = 3.0


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class DeepMlp(torch.nn.Module):
    """Kaiming-scaled blocks, so activations keep about the same size all the way down."""

    def __init__(self, width=32):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(BLOCKS))
        self.head = torch.nn.Linear(width, 4)
        with torch.no_grad():
            for b in self.blocks:
                torch.nn.init.kaiming_normal_(b.fc.weight, nonlinearity="relu")
                b.fc.bias.uniform_(-0.1, 0.1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class ChaoticMlp(torch.nn.Module):
    """A random network in its chaotic regime: it amplifies float32 rounding by itself."""

    def __init__(self, width=64):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())
            for _ in range(CHAOTIC_BLOCKS))
        self.head = torch.nn.Linear(width, 4)
        with torch.no_grad():
            for b in self.blocks:
                torch.nn.init.normal_(b[0].weight, std=CHAOTIC_GAIN / width ** 0.5)
                b[0].bias.zero_()

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def export_both(model, example, folder):
    """Writes folder/model.onnx (legacy exporter) and folder/model.pt; returns the ONNX path."""
    onnx_path = os.path.join(folder, "model.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.export_onnx(model, example, onnx_path, "legacy", ["x"], ["y"])
        torch.jit.trace(model, example).save(os.path.join(folder, "model.pt"))
    return onnx_path


def write_rounding_only(out):
    """A clean export of ChaoticMlp: ONNX Runtime's output differs from PyTorch's beyond the
    default output tolerance, yet no more than PyTorch's own float32 result differs from its
    float64 one (both are recorded, computed here without align-check)."""
    folder = os.path.join(out, "rounding_only")
    os.makedirs(folder)
    torch.manual_seed(0)
    model = ChaoticMlp().eval()
    example = (torch.randn(4, 64),)
    onnx_path = export_both(model, example, folder)
    import onnxruntime as ort
    with torch.no_grad():
        float32 = model(*example).numpy()
        float64 = model.double()(example[0].double()).numpy()
    runtime = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    onnx_out = runtime.run(None, {"x": example[0].numpy()})[0]
    expected = {"drift_per_block": 0.0, "fault_module": None,
                "onnx_max_abs": float(np.abs(onnx_out - float32).max()),
                "float64_max_abs": float(np.abs(float64 - float32).max())}
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")


def gemm_of_block(model, index):
    """The Gemm node exported for blocks.INDEX.fc."""
    for node in model.graph.node:
        if node.op_type == "Gemm" and f"blocks.{index}/" in node.name + "/":
            return node
    raise SystemExit(f"no Gemm for blocks.{index}.fc in the export")


def scale_initializers(model, names, factor, rows=None):
    """Multiplies the named initializers by `factor` (only rows `rows` when given)."""
    for init in model.graph.initializer:
        if init.name in names:
            array = numpy_helper.to_array(init).copy()
            if rows is None:
                array = (array * np.float32(factor)).astype(array.dtype)
            else:
                array[rows] = (array[rows] * np.float32(factor)).astype(array.dtype)
            init.CopyFrom(numpy_helper.from_array(array, init.name))


def write_pair(out, name, fault):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    torch.manual_seed(0)
    model = DeepMlp().eval()
    example = (torch.randn(4, 32),)
    onnx_path = export_both(model, example, folder)
    exported = onnx.load(onnx_path)
    for i in range(BLOCKS):
        gemm = gemm_of_block(exported, i)
        scale_initializers(exported, set(gemm.input[1:3]), 1.0 + DRIFT)
    expected = {"drift_per_block": DRIFT, "fault_module": None}
    if fault:
        gemm = gemm_of_block(exported, FAULT_BLOCK)
        # Gemm's B is [out, in] with transB=1: row k is output channel k.
        scale_initializers(exported, {gemm.input[1]}, FAULT_SCALE, rows=[3])
        expected["fault_module"] = f"blocks.{FAULT_BLOCK}.fc"
    onnx.save(exported, onnx_path)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")


def main():
    out = fresh_folder(os.path.join(REPO, "tests", "fixtures"), "drift")
    write_pair(out, "drift_and_fault", fault=True)
    write_pair(out, "drift_only", fault=False)
    write_rounding_only(out)
    print(f"wrote {sorted(os.listdir(out))} to {out}")


if __name__ == "__main__":
    main()
