#!/usr/bin/env python3
"""Regenerates tests/fixtures/library_op_legacy/: a model that calls an operator of a library
users already have installed (torchvision's `torchvision::roi_align`).

model.pt is traced, so it holds the call to `torchvision::roi_align`, which libtorch alone
does not register: align-check must find torchvision's library in an installed Python
environment (src/app/op_libraries.rs) or be told with --torch-ops. model.onnx (legacy
exporter, opset 16) holds ONNX's RoiAlign. Writes model.pt, model.onnx and inputs.npz (keyed by
ONNX input names), then checks that ONNX Runtime agrees with PyTorch within 1e-4 at the output
(exit 1 otherwise).

Run with the pinned interpreter: .venv/bin/python scripts/make_library_op_fixture.py
"""

import os
import warnings

import numpy as np
import onnxruntime as ort
import torch
from torch import nn
from torchvision.ops import roi_align

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "library_op_legacy")
SEED = 7


class RoiHead(nn.Module):
    """conv -> roi_align over fixed boxes -> linear: the library op between two layers."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 5)
        # Boxes as (batch index, x1, y1, x2, y2), fixed: a buffer the exporter folds.
        self.register_buffer("boxes", torch.tensor([[0.0, 1.0, 1.0, 9.0, 9.0],
                                                    [0.0, 4.0, 2.0, 14.0, 12.0]]))

    def forward(self, image):
        feats = torch.relu(self.conv(image))
        pooled = roi_align(feats, self.boxes, output_size=(4, 4), spatial_scale=1.0,
                           sampling_ratio=2, aligned=True)
        return self.fc(pooled.flatten(1))


def main():
    torch.manual_seed(SEED)
    model = RoiHead().eval()
    image = torch.randn(1, 3, 16, 16)
    os.makedirs(FIXTURE, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, (image,))
        traced.save(os.path.join(FIXTURE, "model.pt"))
        torch.onnx.export(model, (image,), os.path.join(FIXTURE, "model.onnx"),
                          input_names=["image"], output_names=["scores"], opset_version=16,
                          dynamo=False)
    np.savez(os.path.join(FIXTURE, "inputs.npz"), image=image.numpy())
    with torch.no_grad():
        want = model(image).numpy()
    session = ort.InferenceSession(os.path.join(FIXTURE, "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {"image": image.numpy()})[0]
    diff = float(np.abs(got - want).max())
    print(f"library_op_legacy: torchvision::roi_align, max abs difference {diff:.2e}")
    if diff > 1e-4:
        raise SystemExit(f"ONNX Runtime differs from PyTorch by {diff}")


if __name__ == "__main__":
    main()
