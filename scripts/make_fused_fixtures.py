#!/usr/bin/env python3
"""Regenerates tests/fixtures/fused/: an nn.TransformerEncoder traced under torch.no_grad(),
where each layer is one fused op in TorchScript (`aten::_transformer_encoder_layer_fwd`) and
the computation written out under the sub-modules' scopes in ONNX (self_attn, norm1, linear1,
linear2, norm2).

- clean_encoder/: model.pt (traced under no_grad) and model.onnx (legacy exporter, opset 17).
- fault_self_attn/: the same model.pt, and the ONNX with the in-projection weight of the first
  layer's self-attention scaled by 1.1 (the MatMul in that scope reading an initializer).
  expected.json names the module of the mutated node, read from the node's own scope in the
  mutated graph (`/encoder/layers.0/self_attn/MatMul` -> `encoder.layers.0.self_attn`), the
  node and its op: what align-check must report as the first divergence's module.

Checks that the trace holds the fused op and that ONNX Runtime agrees with PyTorch on the
clean pair within 1e-4 (exit 1 otherwise).

Run with the pinned interpreter: .venv/bin/python scripts/make_fused_fixtures.py
"""

import json
import os
import shutil
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "fused")
SEED = 11
SCALE = 1.1


class Encoder(nn.Module):
    """Linear -> 2-layer post-norm TransformerEncoder (batch_first) -> mean -> Linear."""

    def __init__(self, feat=8, dim=16, heads=2):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        # TransformerEncoder deep-copies one layer: the exporter would share each weight
        # between both layers, and a fault planted in it would sit in both.
        with torch.no_grad():
            for p in self.encoder.layers[1].parameters():
                p.mul_(1.0 + 0.1 * torch.randn_like(p))
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        return self.head(self.encoder(self.inp(x)).mean(1))


def export(model, x, directory):
    os.makedirs(directory, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            traced = torch.jit.trace(model, (x,))
        if "aten::_transformer_encoder_layer_fwd" not in str(traced.inlined_graph):
            raise SystemExit("the trace did not take the fused fast path")
        traced.save(os.path.join(directory, "model.pt"))
        torch.onnx.export(model, (x,), os.path.join(directory, "model.onnx"),
                          input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False)


def plant_fault(clean_dir, fault_dir):
    """Scales the initializer of the first MatMul inside layer 0's self_attn scope; returns
    what expected.json records, read from the mutated node."""
    os.makedirs(fault_dir, exist_ok=True)
    shutil.copy(os.path.join(clean_dir, "model.pt"), os.path.join(fault_dir, "model.pt"))
    model = onnx.load(os.path.join(clean_dir, "model.onnx"))
    inits = {t.name: i for i, t in enumerate(model.graph.initializer)}
    node = next(n for n in model.graph.node
                if n.op_type == "MatMul" and n.name.startswith("/encoder/layers.0/self_attn/")
                and n.input[1] in inits)
    tensor = model.graph.initializer[inits[node.input[1]]]
    scaled = numpy_helper.to_array(tensor) * np.float32(SCALE)
    tensor.CopyFrom(numpy_helper.from_array(scaled.astype(np.float32), tensor.name))
    onnx.save(model, os.path.join(fault_dir, "model.onnx"))
    scope = node.name.split("/")[1:-1]
    return {"fault_module": ".".join(scope), "fault_node": node.name, "fault_op": node.op_type,
            "scale": SCALE}


def main():
    torch.manual_seed(SEED)
    model = Encoder().eval()
    x = torch.randn(1, 6, 8)
    clean = os.path.join(FIXTURES, "clean_encoder")
    export(model, x, clean)
    with torch.no_grad():
        want = model(x).numpy()
    session = ort.InferenceSession(os.path.join(clean, "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    diff = float(np.abs(session.run(None, {"x": x.numpy()})[0] - want).max())
    print(f"fused/clean_encoder: max abs difference {diff:.2e}")
    if diff > 1e-4:
        raise SystemExit(f"ONNX Runtime differs from PyTorch by {diff}")
    expected = plant_fault(clean, os.path.join(FIXTURES, "fault_self_attn"))
    with open(os.path.join(FIXTURES, "fault_self_attn", "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")
    print(f"fused/fault_self_attn: {expected['fault_node']} weight x{SCALE}")


if __name__ == "__main__":
    main()
