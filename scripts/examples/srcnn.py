"""SRCNN with a custom bicubic upsampling op: an example model for scripts/export_pair.py.

Written the way the deployment note (background/deployment-basics-srcnn) writes it: the
upsampling factor is a *tensor input* `[1, 1, h_scale, w_scale]`, and `NewInterpolate_op` is a
`torch.autograd.Function` whose `symbolic` maps it to an ONNX `Resize` that reads its scales
from that input. The TorchScript side sees the Function's `forward` (F.interpolate, bicubic),
inlined while tracing; `scales.tolist()` there bakes the traced factor into model.pt, so only
the factor given at export (`--value upscale_factor=1,1,3,3`) compares like with like.

Export it (from the repository root):

    .venv/bin/python scripts/export_pair.py scripts.examples.srcnn:factory \
        --input x=1x3x16x16 --input upscale_factor=4:float32 \
        --value upscale_factor=1,1,3,3 --out export/srcnn
"""

import torch
import torch.nn.functional as F
from torch import nn


class NewInterpolate_op(torch.autograd.Function):
    """Bicubic upsampling whose ONNX twin is a Resize with a dynamic scales input."""

    @staticmethod
    def symbolic(g, input, scales):
        return g.op("Resize",
                    input,
                    g.op("Constant", value_t=torch.tensor([], dtype=torch.float32)),  # roi
                    scales,
                    coordinate_transformation_mode_s="pytorch_half_pixel",
                    cubic_coeff_a_f=-0.75,
                    mode_s="cubic",
                    nearest_mode_s="floor")

    @staticmethod
    def forward(ctx, input, scales):
        # Only the last two entries (height and width factors) are spatial.
        scales = scales.tolist()[-2:]
        return F.interpolate(input, scale_factor=scales, mode="bicubic", align_corners=False)


class SuperResolutionNet(nn.Module):
    """The note's SRCNN at toy width (3 -> 16 -> 8 -> 3 channels; kernels 9, 1, 5)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=9, padding=4)
        self.conv2 = nn.Conv2d(16, 8, kernel_size=1, padding=0)
        self.conv3 = nn.Conv2d(8, 3, kernel_size=5, padding=2)
        self.relu = nn.ReLU()

    def forward(self, x, upscale_factor):
        x = NewInterpolate_op.apply(x, upscale_factor)
        out = self.relu(self.conv1(x))
        out = self.relu(self.conv2(out))
        return self.conv3(out)


def factory(seed=0):
    """A SuperResolutionNet with weights drawn from `seed` (no checkpoint needed)."""
    torch.manual_seed(seed)
    return SuperResolutionNet().eval()
