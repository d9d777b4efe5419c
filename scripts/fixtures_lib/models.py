"""The small PyTorch networks of align-check's fixture zoo.

Each class reproduces, at toy size, one structure that makes pairing TorchScript values with
ONNX values hard: BatchNorm folded into Conv, in-place ReLU aliasing, a module called twice,
functional ops outside any module, Resize coordinate modes, LayerNorm / GELU export, several
inputs and outputs, scripted control flow, and `torch.autograd.Function` ops with a custom
`symbolic`. Module attribute names are part of the contract: the manifest and the planted
faults refer to them by dotted path (`layer1.1.bn2`), so rename nothing without updating
scripts/make_fixtures.py.

`randomize_norm_stats` gives BatchNorm/LayerNorm non-trivial statistics and affine parameters;
with the defaults (mean 0, var 1, weight 1, bias 0) BN is the identity in eval mode and a
pairing that confuses conv1 with bn1 would go unnoticed.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def randomize_norm_stats(model: nn.Module) -> nn.Module:
    """Draws BN running stats and norm affine params from the (already seeded) global RNG."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn_like(m.running_mean) * 0.5)
                # Keep var well away from 0 so the fused weights stay moderate.
                m.running_var.copy_(torch.rand_like(m.running_var) * 1.5 + 0.5)
                m.weight.copy_(1.0 + 0.4 * torch.randn_like(m.weight))
                m.bias.copy_(0.3 * torch.randn_like(m.bias))
            elif isinstance(m, nn.LayerNorm):
                m.weight.copy_(1.0 + 0.3 * torch.randn_like(m.weight))
                m.bias.copy_(0.2 * torch.randn_like(m.bias))
    return model


# 1. conv_bn ---------------------------------------------------------------------------------

class ConvBn(nn.Module):
    """Conv-BN-ReLU twice; relu1 is in place, so it overwrites bn1's output buffer."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu2 = nn.ReLU()

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        return self.relu2(self.bn2(self.conv2(x)))


# 2. resnet_tiny -----------------------------------------------------------------------------

class BasicBlock(nn.Module):
    """torchvision's BasicBlock in miniature: one `relu` module called twice per forward."""

    def __init__(self, cin, cout, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out = out + identity
        return self.relu(out)


class ResNetTiny(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        down = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False), nn.BatchNorm2d(16))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2, downsample=down))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


# 3. functional ------------------------------------------------------------------------------

class Functional(nn.Module):
    """interpolate, cat and + at the top level, i.e. with an empty module path on both sides."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.branch1 = nn.Conv2d(4, 4, 3, padding=1)
        self.branch2 = nn.Conv2d(4, 4, 1)
        self.skip = nn.Conv2d(4, 8, 1)
        self.head = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, x):
        x = self.stem(x)
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        y = torch.cat([self.branch1(x), self.branch2(x)], dim=1)
        y = y + self.skip(x)
        return self.head(y)


# 4. attention -------------------------------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        h = self.heads
        q = self.q(x).reshape(b, n, h, c // h).transpose(1, 2)
        k = self.k(x).reshape(b, n, h, c // h).transpose(1, 2)
        v = self.v(x).reshape(b, n, h, c // h).transpose(1, 2)
        attn = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(out)


class Mlp(nn.Module):
    def __init__(self, dim=16, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class AttentionBlock(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def widen_gelu_range(block: AttentionBlock) -> AttentionBlock:
    """Scales the MLP weights up so GELU sees inputs of magnitude ~2-4.

    Why: the tanh GELU differs from the erf GELU by at most 4.7e-4 (near |x| = 2), so with
    default-init weights the planted `approximate="tanh"` fault stays under 1e-3 at the output.
    fc1 x2 puts many activations near |x| = 2 without inflating the layer's range (the fault
    is ~1.2e-4 of it; larger fc1 scales only lower that ratio); fc2 x8 sums the differences to
    ~1.8e-3 at the output.
    """
    with torch.no_grad():
        block.mlp.fc1.weight.mul_(2.0)
        block.mlp.fc2.weight.mul_(8.0)
    return block


# 5. multi_io --------------------------------------------------------------------------------

class MultiIO(nn.Module):
    """Image + vector in, feature map + vector out; batch is dynamic in the ONNX export."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.vec_fc = nn.Linear(4, 8)
        self.head = nn.Linear(16, 5)

    def forward(self, image, vec):
        feat = self.relu(self.bn(self.conv(image)))
        pooled = feat.mean(dim=(2, 3))
        v = torch.cat([pooled, self.vec_fc(vec)], dim=1)
        return feat, self.head(v)


# 6. upsample --------------------------------------------------------------------------------

class Interpolate(nn.Module):
    """F.interpolate wrapped in a module, so the Resize gets a module scope of its own."""

    def __init__(self, mode, scale_factor=2):
        super().__init__()
        self.mode = mode
        self.scale_factor = scale_factor

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.scale_factor, mode=self.mode,
                             align_corners=False)


class Upsample(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up_bilinear = Interpolate("bilinear")
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.up_bicubic = Interpolate("bicubic")
        self.conv3 = nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, x):
        x = self.up_bilinear(self.conv1(x))
        x = self.up_bicubic(self.conv2(x))
        return self.conv3(x)


# 7. srcnn (background note: deployment-basics-srcnn) -----------------------------------------

class NewInterpolate_op(torch.autograd.Function):
    """Bicubic upsampling whose ONNX twin is a Resize with a *dynamic* scales input."""

    @staticmethod
    def symbolic(g, input, scales):
        return g.op("Resize",
                    input,
                    g.op("Constant", value_t=torch.tensor([], dtype=torch.float32)),
                    scales,
                    coordinate_transformation_mode_s="pytorch_half_pixel",
                    cubic_coeff_a_f=-0.75,
                    mode_s="cubic",
                    nearest_mode_s="floor")

    @staticmethod
    def forward(ctx, input, scales):
        # tolist() makes the factor a Python constant: the TorchScript trace bakes it in,
        # while the ONNX Resize keeps reading it from the graph input.
        scales = scales.tolist()[-2:]
        return F.interpolate(input, scale_factor=scales, mode="bicubic", align_corners=False)


class SuperResolutionNet(nn.Module):
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


# 8. custom_op (background note: export-and-custom-ops-notes, my_add) --------------------------

class MyAddFunction(torch.autograd.Function):
    """The note's my_add = 2*a + b; torch ops stand in for the compiled my_lib extension."""

    @staticmethod
    def forward(ctx, a, b):
        return 2 * a + b

    @staticmethod
    def symbolic(g, a, b):
        # The note uses torch.tensor([2]) (int64); ONNX Mul needs matching types, so float.
        two = g.op("Constant", value_t=torch.tensor([2.0]))
        a = g.op("Mul", a, two)
        return g.op("Add", a, b)


def wrong_my_add_symbolic(g, a, b):
    """The planted fault: a symbolic that forgot the factor 2."""
    return g.op("Add", a, b)


class CustomOpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(3, 3, 3, padding=1)
        self.conv_out = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, a, b):
        x = self.conv_in(a)
        y = MyAddFunction.apply(x, b)
        return self.conv_out(y)


# 9. scripted_control ------------------------------------------------------------------------

class LoopIfBody(nn.Module):
    """Scripted control flow: a data-dependent if and a fixed-trip-count loop."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Conv2d(8, 8, 1)
        self.neg = nn.Conv2d(8, 8, 1)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        if x.sum() > 0:
            x = self.pos(x)
        else:
            x = self.neg(x) * 0.5
        for _ in range(3):
            x = self.relu(self.conv(x))
        return x


class ScriptedControl(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.body = LoopIfBody()
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        x = self.bn(self.stem(x))
        x = self.body(x)
        return self.head(x)
