"""Generates the multi-sample fault fixture: a fault that only one input sample out of eight
can see, which is exactly what a single-input check misses.

The network is conv -> ReLU6 -> conv. Its ONNX export is edited so the ReLU6's Clip caps at
7 instead of 6: identical for every activation below 6. Seven samples are small (|x| < 0.5,
activations stay far below 6); one has a bright patch that drives some activations above 6.
Writes tests/fixtures/fault_one_sample/{model.pt, model.onnx, samples/sample_0..7.npz}.

Run with the pinned interpreter: .venv/bin/python scripts/make_sample_fault.py
"""

import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "fixtures", "fault_one_sample")
TRIGGER = 5  # the one sample whose activations exceed the clamp


class ClampNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU6()
        self.conv2 = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.conv2(self.act(self.conv1(x)))


def raise_clip_max(model: onnx.ModelProto, new_max: float) -> None:
    """Opset 11+ Clip takes its bounds as inputs; replace the max initializer/constant."""
    graph = model.graph
    clip = next(n for n in graph.node if n.op_type == "Clip")
    max_name = clip.input[2]
    for init in graph.initializer:
        if init.name == max_name:
            init.CopyFrom(onnx.numpy_helper.from_array(np.array(new_max, dtype=np.float32), max_name))
            return
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == max_name:
            node.attribute[0].t.CopyFrom(onnx.numpy_helper.from_array(np.array(new_max, dtype=np.float32)))
            return
    raise SystemExit("Clip max not found")


def main() -> None:
    torch.manual_seed(7)
    model = ClampNet().eval()
    with torch.no_grad():
        model.conv1.weight.mul_(3.0)
    os.makedirs(os.path.join(OUT, "samples"), exist_ok=True)
    x0 = torch.rand(1, 3, 16, 16) - 0.5
    with torch.no_grad():
        traced = torch.jit.trace(model, (x0,))
    traced.save(os.path.join(OUT, "model.pt"))
    onnx_path = os.path.join(OUT, "model.onnx")
    torch.onnx.export(model, (x0,), onnx_path, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    m = onnx.load(onnx_path)
    raise_clip_max(m, 7.0)
    onnx.save(m, onnx_path)
    rng = np.random.default_rng(11)
    for i in range(8):
        x = (rng.random((1, 3, 16, 16), dtype=np.float32) - 0.5) * 0.5
        if i == TRIGGER:
            x[:, :, 4:12, 4:12] = 4.0
        with torch.no_grad():
            peak = float(model.conv1(torch.from_numpy(x)).max())
        if (i == TRIGGER) != (peak > 6.0):
            sys.exit(f"sample {i}: conv1 peak {peak:.2f} does not fit the design")
        np.savez(os.path.join(OUT, "samples", f"sample_{i}.npz"), x=x)
    print(f"fault_one_sample written to {OUT} (sample {TRIGGER} triggers the fault)")


if __name__ == "__main__":
    main()
