"""A model that produces NaN inside, for align-check's non-finite reporting: `torch.log` of a
convolution's output is NaN wherever the convolution is negative, on both runtimes alike.
Export with: .venv/bin/python scripts/export_pair.py scripts.examples.nan_model:factory
                 --input x=1x3x8x8
"""

import torch
from torch import nn


class LogOfConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.head(torch.log(self.conv(x)))


def factory():
    torch.manual_seed(0)
    return LogOfConv().eval()
