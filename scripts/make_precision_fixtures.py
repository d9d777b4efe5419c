#!/usr/bin/env python3
"""Writes the reduced-precision pairs for tests/precision.rs into tests/fixtures/precision/:
a float32 TorchScript model against its ONNX export converted to float16 by
onnxconverter-common, the way users ship smaller models.

- cnn_fp16_keepio, cnn_fp16: ResNetTiny, converted with and without keep_io_types (float32
  or float16 graph inputs and outputs); clean, must pass under the float16 tolerance.
- attention_fp16_keepio: one transformer block (LayerNorm, attention, GELU MLP); clean.
- overflow_fp16: an MLP whose fc2 outputs reach about 1e5, beyond float16's 65504: ONNX
  Runtime produces inf there, and the first divergence must be fc2, named as an overflow.
- half_torchscript: the CNN traced after model.half() against its float32 ONNX export.
- bf16_torchscript: the transformer block traced after model.bfloat16() against its
  float32 ONNX export (bfloat16 inputs and values cross into libtorch as bfloat16).

Each folder holds model.pt and model.onnx. Random weights, seeded. Run with the pinned
interpreter: .venv/bin/python scripts/make_precision_fixtures.py
It overwrites tests/fixtures/precision/ and nothing else.
"""

import os
import warnings

import onnx
import torch
from onnxconverter_common import float16

from fixtures_lib import export as ex
from fixtures_lib.manifest import fresh_folder
from fixtures_lib.models import AttentionBlock, ResNetTiny, randomize_norm_stats

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BigMlp(torch.nn.Module):
    """fc2's weights are scaled so that its outputs reach about 1e5: fine in float32,
    infinite in float16."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(32, 8)
        self.out = torch.nn.Linear(8, 4)
        with torch.no_grad():
            self.fc2.weight.mul_(2e5)

    def forward(self, x):
        return self.out(self.fc2(self.act(self.fc1(x))) * 1e-4)


def write_pair(out, name, model, example, keep_io_types=True, convert=True,
               reduced=torch.float16):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    model = model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.export_onnx(model.float(), example, os.path.join(folder, "model.onnx"), "legacy",
                       ["x"], ["y"])
        if convert:
            converted = float16.convert_float_to_float16(
                onnx.load(os.path.join(folder, "model.onnx")), keep_io_types=keep_io_types)
            onnx.save(converted, os.path.join(folder, "model.onnx"))
            torch.jit.trace(model, example).save(os.path.join(folder, "model.pt"))
        else:
            reduced_model = model.to(reduced)
            torch.jit.trace(reduced_model, tuple(t.to(reduced) for t in example)).save(
                os.path.join(folder, "model.pt"))


def main():
    out = fresh_folder(os.path.join(REPO, "tests", "fixtures"), "precision")
    torch.manual_seed(0)
    image = (torch.randn(1, 3, 16, 16),)
    write_pair(out, "cnn_fp16_keepio", randomize_norm_stats(ResNetTiny()), image)
    torch.manual_seed(0)
    write_pair(out, "cnn_fp16", randomize_norm_stats(ResNetTiny()), image, keep_io_types=False)
    torch.manual_seed(1)
    write_pair(out, "attention_fp16_keepio", AttentionBlock(), (torch.randn(1, 8, 16),))
    torch.manual_seed(2)
    write_pair(out, "overflow_fp16", BigMlp(), (torch.randn(2, 16),))
    torch.manual_seed(0)
    write_pair(out, "half_torchscript", randomize_norm_stats(ResNetTiny()), image,
               convert=False)
    torch.manual_seed(1)
    write_pair(out, "bf16_torchscript", AttentionBlock(), (torch.randn(1, 8, 16),),
               convert=False, reduced=torch.bfloat16)
    print(f"wrote {sorted(os.listdir(out))} to {out}")


if __name__ == "__main__":
    main()
