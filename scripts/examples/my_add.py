"""A model around the `my_add` custom op: an example model for scripts/export_pair.py.

From the custom-op note (background/export-and-custom-ops-notes): `my_add(a, b) = 2*a + b` is
a C++ extension wrapped in a `torch.autograd.Function` whose `symbolic` emits ONNX
`Mul(a, Constant 2.0)` then `Add`. Here plain torch ops stand in for the compiled extension,
so nothing needs building. TorchScript gets the Function's `forward` inlined while tracing;
the ONNX export goes through `symbolic`.

Export it (from the repository root):

    .venv/bin/python scripts/export_pair.py scripts.examples.my_add:factory \
        --input a=1x3x16x16 --input b=1x3x16x16 --out export/my_add
"""

import torch
from torch import nn


class MyAddFunction(torch.autograd.Function):
    """my_add(a, b) = 2*a + b."""

    @staticmethod
    def forward(ctx, a, b):
        return 2 * a + b

    @staticmethod
    def symbolic(g, a, b):
        # The note multiplies by torch.tensor([2]) (int64); ONNX Mul needs both operands of
        # one type, so the constant is float.
        two = g.op("Constant", value_t=torch.tensor([2.0]))
        a = g.op("Mul", a, two)
        return g.op("Add", a, b)


def my_add(a, b):
    return MyAddFunction.apply(a, b)


class MyAddNet(nn.Module):
    """conv -> my_add(conv(a), b) -> conv."""

    def __init__(self, channels=3, out_channels=4):
        super().__init__()
        self.conv_in = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv_out = nn.Conv2d(channels, out_channels, 3, padding=1)

    def forward(self, a, b):
        x = self.conv_in(a)
        y = my_add(x, b)
        return self.conv_out(y)


def factory(seed=0, channels=3, out_channels=4):
    """A MyAddNet with weights drawn from `seed`."""
    torch.manual_seed(seed)
    return MyAddNet(channels, out_channels).eval()
