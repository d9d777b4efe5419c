"""Generates the memory-budget fixture: a network whose activations dwarf its weights.

Twenty residual blocks (1x1 conv -> ReLU -> add) on a 1x8x512x512 input: every activation is
8 MiB, about 60 of them per side, so one run of both runtimes produces roughly 1 GB of
captured tensors from a model file of a few kilobytes. tests/memory_budget.rs checks that
`--max-memory` keeps such a run under a budget far below that, with statistics identical to
the unbounded run. Writes tests/fixtures/big_activations_legacy/{model.pt, model.onnx}.

Run with the pinned interpreter: .venv/bin/python scripts/make_memory_fixture.py
"""

import os

import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "fixtures", "big_activations_legacy")
CHANNELS, SIDE, BLOCKS = 8, 512, 20


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 1)
        self.act = nn.ReLU()

    def forward(self, x):
        return x + self.act(self.conv(x))


class BigActivations(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(CHANNELS) for _ in range(BLOCKS)])
        self.head = nn.Conv2d(CHANNELS, 1, 1)

    def forward(self, x):
        return self.head(self.blocks(x))


def main() -> None:
    torch.manual_seed(3)
    model = BigActivations().eval()
    # Small weights keep the residual sum from growing block after block.
    with torch.no_grad():
        for block in model.blocks:
            block.conv.weight.mul_(0.2)
    os.makedirs(OUT, exist_ok=True)
    x = torch.rand(1, CHANNELS, SIDE, SIDE)
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,))
    traced.save(os.path.join(OUT, "model.pt"))
    torch.onnx.export(model, (x,), os.path.join(OUT, "model.onnx"), dynamo=False,
                      opset_version=17, input_names=["x"], output_names=["y"])
    per_side = (3 * BLOCKS + 2) * x.numel() * 4
    print(f"big_activations_legacy written to {OUT} (~{per_side >> 20} MiB of activations per side)")


if __name__ == "__main__":
    main()
