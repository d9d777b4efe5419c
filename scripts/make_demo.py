"""Exports the bundled demo network to TorchScript and ONNX for `scripts/demo.sh`.

The demo is torchvision's MobileNetV3-Small, a real deployment network (BatchNorm folded by
the exporter, hardswish, squeeze-excitation, a classifier head), built with seeded random
weights because nothing may be downloaded here; BatchNorm statistics are randomised too so
that fusing matters numerically. Writes model.pt, model.onnx and inputs.npz into the folder
given as the only argument.
"""

import sys
from pathlib import Path

import numpy as np
import torch
import torchvision


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=1000)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,))
    traced.save(str(out / "model.pt"))
    torch.onnx.export(
        model, (x,), str(out / "model.onnx"), dynamo=False, opset_version=17,
        input_names=["images"], output_names=["logits"],
    )
    np.savez(out / "inputs.npz", images=x.numpy())
    print(f"demo models written to {out}")


if __name__ == "__main__":
    main()
