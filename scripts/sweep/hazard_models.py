"""The models of the sweep's `hazards` family (issue 49; the table is `hazards.py`): small
nn.Modules built from code with random weights, of the classes of real models on which
align-check was found silently wrong and which the registries (timm, torchvision,
transformers, Ultralytics, facenet) do not contain:

1. `inplace`: in-place writes that carry dataflow (a PointPillars scatter onto a canvas made
   in forward, detection heads assembled by slice assignment, KV-cache updates by index_put /
   index_copy_ / a mutated buffer, masked_fill_, copy_ into a buffer made in forward,
   `x[mask] = 0`, a streaming ring buffer);
2. `control`: control flow kept by torch.jit.script (loops, Ifs on a value, a greedy GRU
   decoder, a streaming model whose If tests an input);
3. `subtol`: models where a fault is normalised away before the output (transformer encoders
   with attention made non-uniform, early convolutions followed by normalisation);
4. `fastpath`: nn.MultiheadAttention / nn.TransformerEncoder / torchvision's ViT traced under
   torch.no_grad() or torch.inference_mode(), so that the trace records PyTorch's fused
   `aten::_native_multi_head_attention` / `aten::_transformer_encoder_layer_fwd`;
5. `fp16`: models whose intermediate activations exceed float16's 65504 (their pairs get the
   sweep's fp16 variant).

`build(build_spec)` makes one model (eval mode), `make_inputs(inputs_spec, batch, seed)` its
inputs ({name: tensor}, deterministic in seed; the forward's argument names are the input
names). Models whose weights a trained network would have shaped differently (attention that
is not uniform) get that at build time, before the sweep's calibration (calibration.py), which
only raises vanishing parameters and so keeps it.
"""

import math
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import calibration


# Inputs --------------------------------------------------------------------------------------

def _perm(gen, n, k):
    return torch.randperm(n, generator=gen)[:k].to(torch.long)


def make_inputs(inputs, batch, seed):
    """{name: tensor} for a hazard spec's `tensors` list of [name, kind, shape, options]."""
    gen = torch.Generator().manual_seed(seed)
    if inputs.get("batch") is not None:
        batch = inputs["batch"]
    out = {}
    for name, kind, shape, opts in inputs["tensors"]:
        if kind == "normal":
            out[name] = torch.randn(batch, *shape, generator=gen) * opts.get("scale", 1.0)
        elif kind == "image":
            channels, size = shape[0], shape[1]
            img = calibration.smooth_images(gen, batch, size, channels=channels)
            if channels == 3:
                img = (img - calibration.IMAGENET_MEAN) / calibration.IMAGENET_STD
            else:
                img = (img - 0.5) / 0.25
            out[name] = img
        elif kind == "perm":  # unique flat cell indices (no batch dimension)
            out[name] = _perm(gen, opts["cells"], shape[0])
        elif kind == "coords2d":  # unique (row, column) pairs, [2, P] (no batch dimension)
            flat = _perm(gen, opts["height"] * opts["width"], shape[0])
            out[name] = torch.stack([flat // opts["width"], flat % opts["width"]])
        elif kind == "pos":  # one position, [1] (no batch dimension)
            out[name] = torch.randint(opts["low"], opts["high"], (1,), generator=gen)
        elif kind == "tokens":
            out[name] = torch.randint(1, opts["vocab"], (batch, *shape), generator=gen)
        elif kind == "mask":  # attention / validity mask: the last quarter of each row is 0
            mask = torch.ones(batch, *shape, dtype=torch.long)
            mask[..., shape[-1] * 3 // 4:] = 0
            out[name] = mask
        elif kind == "flag":
            out[name] = torch.full((batch, 1), int(opts["value"]), dtype=torch.long)
        else:
            raise ValueError(f"unknown hazard input kind {kind!r}")
    return out


# Shared pieces -------------------------------------------------------------------------------

def conv_bn(cin, cout, stride=1, kernel=3):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def sharpen_attention(in_proj_weight, embed_dim, gain):
    """Scales the query and key rows of a packed in-projection: the scores grow by gain**2, as
    a trained network's do (random init gives nearly uniform attention)."""
    with torch.no_grad():
        in_proj_weight[:2 * embed_dim].mul_(gain)


# 1. In-place writes that carry dataflow ------------------------------------------------------

class PillarFeatureNet(nn.Module):
    """PointPillars' PFN: a Linear + BatchNorm1d + ReLU over each pillar's feature vector."""

    def __init__(self, cin, cout):
        super().__init__()
        self.linear = nn.Linear(cin, cout, bias=False)
        self.norm = nn.BatchNorm1d(cout)

    def forward(self, x):
        y = self.linear(x)
        return F.relu(self.norm(y.transpose(1, 2)).transpose(1, 2))


class PointPillarsScatter(nn.Module):
    """`canvas = torch.zeros(...); canvas[:, :, coords] = feats`, then a 2D conv backbone and
    detection heads. `two_d`: coords are (row, column) pairs indexing a [B, C, H, W] canvas;
    `neck`: a second stride-2 stage upsampled by a ConvTranspose2d and concatenated (SECOND-FPN
    style); `masked_points`: padded pillars are zeroed first with `feats[valid == 0] = 0`."""

    def __init__(self, cin=9, channels=16, grid=16, two_d=False, neck=False,
                 masked_points=False, classes=3, anchors=2):
        super().__init__()
        self.channels, self.grid, self.two_d = channels, grid, two_d
        self.masked_points = masked_points
        self.pfn = PillarFeatureNet(cin, channels)
        self.block1 = nn.Sequential(conv_bn(channels, channels), conv_bn(channels, channels))
        self.neck = neck
        if neck:
            self.block2 = nn.Sequential(conv_bn(channels, 2 * channels, stride=2),
                                        conv_bn(2 * channels, 2 * channels))
            self.up2 = nn.Sequential(nn.ConvTranspose2d(2 * channels, channels, 2, 2,
                                                        bias=False),
                                     nn.BatchNorm2d(channels), nn.ReLU())
            head_in = 2 * channels
        else:
            head_in = channels
        self.cls_head = nn.Conv2d(head_in, anchors * classes, 1)
        self.box_head = nn.Conv2d(head_in, anchors * 7, 1)
        self.dir_head = nn.Conv2d(head_in, anchors * 2, 1)

    def forward(self, pillars, coords, valid=None):
        feats = self.pfn(pillars)  # [B, P, C]
        if self.masked_points:
            feats[valid == 0] = 0
        b = feats.shape[0]
        if self.two_d:
            canvas = torch.zeros(b, self.channels, self.grid, self.grid, dtype=feats.dtype)
            canvas[:, :, coords[0], coords[1]] = feats.transpose(1, 2)
        else:
            canvas = torch.zeros(b, self.channels, self.grid * self.grid, dtype=feats.dtype)
            canvas[:, :, coords] = feats.transpose(1, 2)
            canvas = canvas.view(b, self.channels, self.grid, self.grid)
        x = self.block1(canvas)
        if self.neck:
            x = torch.cat([x, self.up2(self.block2(x))], 1)
        return self.cls_head(x), self.box_head(x), self.dir_head(x)


class SliceAssignHead(nn.Module):
    """A detector whose output rows are assembled by slice assignment into a buffer made in
    forward: `out = torch.zeros(...)` (or `torch.empty`); `out[..., :4] = boxes`,
    `out[..., 4:5] = obj.sigmoid()`, `out[..., 5:] = cls.softmax(-1)`."""

    def __init__(self, width=16, classes=6, empty=False):
        super().__init__()
        self.classes, self.empty = classes, empty
        self.backbone = nn.Sequential(conv_bn(3, width, 2), conv_bn(width, 2 * width, 2),
                                      conv_bn(2 * width, 2 * width))
        self.box = nn.Conv2d(2 * width, 4, 1)
        self.obj = nn.Conv2d(2 * width, 1, 1)
        self.cls = nn.Conv2d(2 * width, classes, 1)

    def forward(self, images):
        f = self.backbone(images)
        b, _, h, w = f.shape
        boxes = self.box(f).flatten(2).transpose(1, 2)
        obj = self.obj(f).flatten(2).transpose(1, 2)
        cls = self.cls(f).flatten(2).transpose(1, 2)
        if self.empty:
            out = torch.empty(b, h * w, 5 + self.classes, dtype=f.dtype)
        else:
            out = torch.zeros(b, h * w, 5 + self.classes, dtype=f.dtype)
        out[..., :4] = boxes
        out[..., 4:5] = obj.sigmoid()
        out[..., 5:] = cls.softmax(-1)
        return out


class InplaceDecodeDetect(nn.Module):
    """YOLOv5's Detect head: each level's sigmoid output decoded in place,
    `y[..., 0:2] = (y[..., 0:2] * 2 - 0.5 + grid) * stride`,
    `y[..., 2:4] = (y[..., 2:4] * 2) ** 2 * anchor_grid`, the levels concatenated."""

    def __init__(self, width=16, classes=4, levels=1, size=32, anchors=2):
        super().__init__()
        self.no, self.na = 5 + classes, anchors
        self.stem = conv_bn(3, width, 2)
        self.stages = nn.ModuleList()
        self.m = nn.ModuleList()
        self.strides = []
        cin, stride = width, 2
        for i in range(levels):
            self.stages.append(nn.Sequential(conv_bn(cin, 2 * cin, 2), conv_bn(2 * cin, 2 * cin)))
            cin, stride = 2 * cin, stride * 2
            self.m.append(nn.Conv2d(cin, self.no * anchors, 1))
            self.strides.append(stride)
            n = size // stride
            ys, xs = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
            self.register_buffer(f"grid{i}", torch.stack((xs, ys), 2).view(1, 1, n, n, 2).float())
            anchor = torch.tensor([[10.0, 13.0], [16.0, 30.0], [33.0, 23.0]][:anchors]) * (i + 1)
            self.register_buffer(f"anchor_grid{i}", anchor.view(1, anchors, 1, 1, 2)
                                 .expand(1, anchors, n, n, 2).contiguous())

    def forward(self, images):
        x = self.stem(images)
        z = []
        for i, (stage, head) in enumerate(zip(self.stages, self.m)):
            x = stage(x)
            y = head(x)
            b, _, ny, nx = y.shape
            y = y.view(b, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous().sigmoid()
            grid, anchor_grid = getattr(self, f"grid{i}"), getattr(self, f"anchor_grid{i}")
            y[..., 0:2] = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
            y[..., 2:4] = (y[..., 2:4] * 2) ** 2 * anchor_grid
            z.append(y.view(b, -1, self.no))
        return torch.cat(z, 1)


class KVCacheAttention(nn.Module):
    """One decoding step of causal self-attention with a KV cache. `mode`:
    - `index_put`: `k_all = past_k.clone(); k_all[:, :, pos] = k` (the cache returned);
    - `index_copy`: `past_k.clone().index_copy_(2, pos, k)`;
    - `buffer`: the cache is a registered buffer written in place, `self.cache_k[:, :, pos] = k`
      (a static cache; no past inputs);
    - `fresh`: a longer cache made in forward, `torch.zeros(...)`, the past written by slice
      assignment and the new entry by `copy_`.
    Positions after `pos` are masked with masked_fill."""

    def __init__(self, dim=32, heads=4, length=16, mode="index_put", gain=2.0):
        super().__init__()
        self.heads, self.dh, self.length, self.mode = heads, dim // heads, length, mode
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        with torch.no_grad():
            self.q.weight.mul_(gain)
            self.k.weight.mul_(gain)
        if mode == "buffer":
            gen = torch.Generator().manual_seed(7)
            self.register_buffer("cache_k", torch.randn(1, heads, length, self.dh, generator=gen))
            self.register_buffer("cache_v", torch.randn(1, heads, length, self.dh, generator=gen))

    def _split(self, t):
        b = t.shape[0]
        return t.view(b, -1, self.heads, self.dh).transpose(1, 2)

    def update(self, k, v, past_k, past_v, pos):
        if self.mode == "index_put":
            k_all, v_all = past_k.clone(), past_v.clone()
            k_all[:, :, pos] = k
            v_all[:, :, pos] = v
        elif self.mode == "index_copy":
            k_all = past_k.clone().index_copy_(2, pos, k)
            v_all = past_v.clone().index_copy_(2, pos, v)
        elif self.mode == "buffer":
            self.cache_k[:, :, pos] = k
            self.cache_v[:, :, pos] = v
            k_all, v_all = self.cache_k, self.cache_v
        else:  # fresh
            b, h, t, d = past_k.shape
            k_all = torch.zeros(b, h, t + 1, d, dtype=k.dtype)
            v_all = torch.zeros(b, h, t + 1, d, dtype=v.dtype)
            k_all[:, :, :t] = past_k
            v_all[:, :, :t] = past_v
            k_all[:, :, t:].copy_(k)
            v_all[:, :, t:].copy_(v)
        return k_all, v_all

    def forward(self, x, past_k=None, past_v=None, pos=None):
        b = x.shape[0]
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        k_all, v_all = self.update(k, v, past_k, past_v, pos)
        scores = q @ k_all.transpose(-1, -2) / math.sqrt(self.dh)
        if self.mode != "fresh":
            future = torch.arange(k_all.shape[2]) > pos
            scores = scores.masked_fill(future.view(1, 1, 1, -1), -1e4)
        attn = scores.softmax(-1)
        out = (attn @ v_all).transpose(1, 2).reshape(b, -1, self.heads * self.dh)
        return self.o(out), k_all, v_all


class StaticKVCache(KVCacheAttention):
    """KVCacheAttention in `buffer` mode: the cache is module state, the inputs the new token's
    features and its position."""

    def __init__(self, dim=32, heads=4, length=16, gain=2.0):
        super().__init__(dim, heads, length, "buffer", gain)
        # An inference model's frozen weights: a cache written under grad from trainable
        # projections would itself start to require grad.
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x, pos):
        return super().forward(x, None, None, pos)


class KVDecoderStep(nn.Module):
    """Two decoder layers (LayerNorm, KV-cache attention, MLP) over one token, the per-layer
    caches stacked in one input ([B, layers, H, T, dh]) and updated by index_put."""

    def __init__(self, dim=32, heads=4, length=16, layers=2, vocab=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.attns = nn.ModuleList([KVCacheAttention(dim, heads, length, "index_put")
                                    for _ in range(layers)])
        self.mlps = nn.ModuleList([nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim),
                                                 nn.GELU(), nn.Linear(2 * dim, dim))
                                   for _ in range(layers)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, past_k, past_v, pos):
        x = self.embed(tokens)
        new_k, new_v = [], []
        for i, (norm, attn, mlp) in enumerate(zip(self.norms, self.attns, self.mlps)):
            a, k_all, v_all = attn(norm(x), past_k[:, i], past_v[:, i], pos)
            x = x + a
            x = x + mlp(x)
            new_k.append(k_all)
            new_v.append(v_all)
        return self.head(x), torch.stack(new_k, 1), torch.stack(new_v, 1)


class MaskedFillEncoder(nn.Module):
    """Token embedding and self-attention whose padded keys are masked in place:
    `scores.masked_fill_(attention_mask[:, None, None, :] == 0, -1e4)`."""

    def __init__(self, vocab=128, dim=32, heads=4, gain=2.0):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        with torch.no_grad():
            self.qkv.weight[:2 * dim].mul_(gain)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 4)

    def forward(self, input_ids, attention_mask):
        x = self.embed(input_ids)
        b, s, d = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        scores.masked_fill_(attention_mask[:, None, None, :] == 0, -1e4)
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = self.norm(x + self.proj(y))
        x = x + self.mlp(x)
        return self.head(x[:, 0])


class ThresholdConvNet(nn.Module):
    """Conv features with in-place writes on activations: `mode` `masked_fill` zeroes small
    activations with `y.masked_fill_(y < 0.1, 0.0)`, `bool_index` writes `y[y < 0.1] = 0`
    (index_put with a boolean mask)."""

    def __init__(self, width=16, mode="masked_fill", classes=10):
        super().__init__()
        self.mode = mode
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width))
        self.body = conv_bn(width, 2 * width, 2)
        self.conv = nn.Conv2d(2 * width, 2 * width, 3, 1, 1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, input):
        y = self.stem(input)
        if self.mode == "masked_fill":
            y.masked_fill_(y < 0.1, 0.0)
        else:
            y[y < 0.1] = 0
        y = self.conv(self.body(y))
        if self.mode == "masked_fill":
            y.masked_fill_(y.abs() > 3.0, 3.0)
        else:
            y[y.abs() > 3.0] = 3.0
        return self.fc(y.mean((2, 3)))


class CopyIntoBuffer(nn.Module):
    """Two branches written into a buffer made in forward with `copy_` (a concatenation by
    hand), then more convolutions."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.width = width
        self.stem = conv_bn(3, width, 2)
        self.branch_a = conv_bn(width, width)
        self.branch_b = nn.Sequential(nn.Conv2d(width, width, 1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.Conv2d(width, width, 3, 1, 2, dilation=2))
        self.fuse = conv_bn(2 * width, 2 * width, 2)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, input):
        x = self.stem(input)
        a, b = self.branch_a(x), self.branch_b(x)
        buf = torch.zeros(x.shape[0], 2 * self.width, x.shape[2], x.shape[3], dtype=x.dtype)
        buf[:, :self.width].copy_(a)
        buf[:, self.width:].copy_(b)
        return self.fc(self.fuse(buf).mean((2, 3)))


class RingBufferStream(nn.Module):
    """A streaming 1D conv network: each layer's context is the previous call's state plus the
    new chunk, written into a buffer made in forward by slice assignment; the next state is
    the buffer's tail. Returns the output and the new states."""

    def __init__(self, channels=16, kernel=5, hidden=32, out=8):
        super().__init__()
        self.k = kernel
        self.conv1 = nn.Conv1d(channels, hidden, kernel)
        self.norm1 = nn.BatchNorm1d(hidden)
        self.conv2 = nn.Conv1d(hidden, hidden, kernel)
        self.proj = nn.Conv1d(hidden, out, 1)

    def _context(self, state, chunk):
        b, c, t = chunk.shape
        buf = torch.zeros(b, c, self.k - 1 + t, dtype=chunk.dtype)
        buf[:, :, :self.k - 1] = state
        buf[:, :, self.k - 1:] = chunk
        return buf, buf[:, :, t:].clone()

    def forward(self, chunk, state1, state2):
        buf1, new1 = self._context(state1, chunk)
        h = F.relu(self.norm1(self.conv1(buf1)))
        buf2, new2 = self._context(state2, h)
        y = self.proj(torch.tanh(self.conv2(buf2)))
        return y, new1, new2


# 2. Control flow kept by torch.jit.script ----------------------------------------------------

class LoopIf(nn.Module):
    """A residual block run `steps` times (a Final attribute: a constant trip count once
    scripted), each step followed by an If on the hidden state's mean."""
    steps: torch.jit.Final[int]

    def __init__(self, dim=32, steps=3):
        super().__init__()
        self.steps = steps
        self.inp = nn.Linear(16, dim)
        self.block = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 8)

    def forward(self, x):
        h = self.inp(x)
        for _ in range(self.steps):
            h = self.block(h) + h
            if bool(h.mean() > 0):
                h = h * 0.5
            else:
                h = h + 0.25
        return self.head(self.norm(h))


class ConstLoop(nn.Module):
    """A loop with a literal trip count (`for _ in range(4)`) over a shared conv block, an
    image model: the same module called four times inside one Loop."""

    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = conv_bn(3, width, 2)
        self.shared = nn.Sequential(nn.Conv2d(width, width, 3, 1, 1), nn.GroupNorm(4, width),
                                    nn.ReLU())
        self.fc = nn.Linear(width, classes)

    def forward(self, input):
        x = self.stem(input)
        for _ in range(4):
            x = x + self.shared(x)
        return self.fc(x.mean((2, 3)))


class ManualGRUCell(nn.Module):
    """A GRU cell written with two Linear layers (exportable where aten::gru_cell is not)."""

    def __init__(self, dim):
        super().__init__()
        self.ih = nn.Linear(dim, 3 * dim)
        self.hh = nn.Linear(dim, 3 * dim)

    def forward(self, x, h):
        gi, gh = self.ih(x), self.hh(h)
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * h


class GreedyGRUDecoder(nn.Module):
    """Encoder features pooled into a hidden state, then a greedy decoder: a loop of a fixed
    number of steps, each embedding the previous argmax token, a GRU cell step and the logits;
    the logits are collected in a list and stacked."""
    steps: torch.jit.Final[int]

    def __init__(self, feat=16, dim=32, vocab=24, steps=4, manual=False):
        super().__init__()
        self.steps = steps
        self.encoder = nn.Sequential(nn.Linear(feat, dim), nn.Tanh(), nn.Linear(dim, dim))
        self.embed = nn.Embedding(vocab, dim)
        self.cell = ManualGRUCell(dim) if manual else nn.GRUCell(dim, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, features):
        h = torch.tanh(self.encoder(features).mean(1))
        tok = torch.zeros(features.shape[0], dtype=torch.long)
        logits_all: List[Tensor] = []
        for _ in range(self.steps):
            h = self.cell(self.embed(tok), h)
            logits = self.out(h)
            tok = logits.argmax(-1)
            logits_all.append(logits)
        return torch.stack(logits_all, 1), h


class StreamingReset(nn.Module):
    """A streaming recurrent model whose state is reset when the input flag says so
    (`if bool(flag.sum() > 0): h = state * 0.0`), then a loop over the chunk's frames (trip count
    from the input's shape) with a GRU cell written by hand."""

    def __init__(self, feat=16, dim=32, out=8):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        self.cell = ManualGRUCell(dim)
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, out))

    def forward(self, chunk, state, flag):
        if bool(flag.sum() > 0):
            h = state * 0.0
        else:
            h = state
        x = self.inp(chunk)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return self.head(h), h


class StreamingConvReset(nn.Module):
    """A streaming conv model: the left context is the cached one or zeros, chosen by an If on
    the input flag, concatenated with the chunk; the If's branches call different modules."""

    def __init__(self, channels=16, hidden=32, kernel=3):
        super().__init__()
        self.k = kernel
        self.warm = nn.Conv1d(channels, channels, 1)
        self.conv = nn.Conv1d(channels, hidden, kernel)
        self.norm = nn.BatchNorm1d(hidden)
        self.proj = nn.Conv1d(hidden, 8, 1)

    def forward(self, chunk, context, flag):
        if bool(flag.sum() > 0):
            ctx = context * 0.0
        else:
            ctx = self.warm(context)
        x = torch.cat([ctx, chunk], 2)
        y = self.proj(F.relu(self.norm(self.conv(x))))
        return y, chunk[:, :, -(self.k - 1):]


class StreamingZerosLike(nn.Module):
    """StreamingConvReset's If with `torch.zeros_like(context)` in the reset branch: the legacy
    exporter (torch 2.13) folds the whole If to a constant computed from the example inputs and
    drops the `context` and `flag` inputs (measured; `context * 0.0` keeps the If)."""

    def __init__(self, channels=16, hidden=32, kernel=3):
        super().__init__()
        self.k = kernel
        self.warm = nn.Conv1d(channels, channels, 1)
        self.conv = nn.Conv1d(channels, hidden, kernel)
        self.proj = nn.Conv1d(hidden, 8, 1)

    def forward(self, chunk, context, flag):
        if bool(flag.sum() > 0):
            ctx = torch.zeros_like(context)
        else:
            ctx = self.warm(context)
        return self.proj(torch.tanh(self.conv(torch.cat([ctx, chunk], 2))))


class BranchModules(nn.Module):
    """An image model whose If on the features' mean picks one of two conv blocks."""

    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = conv_bn(3, width, 2)
        self.branch_a = conv_bn(width, width)
        self.branch_b = nn.Sequential(nn.Conv2d(width, width, 1), nn.BatchNorm2d(width),
                                      nn.Hardswish())
        self.fc = nn.Linear(width, classes)

    def forward(self, input):
        x = self.stem(input)
        if bool(x.mean() > 0.3):
            y = self.branch_a(x)
        else:
            y = self.branch_b(x)
        return self.fc(y.mean((2, 3)))


class LoopStack(nn.Module):
    """A recurrence over the sequence's steps (trip count from the input's shape) whose outputs
    are appended to a list and stacked (ONNX SequenceInsert / ConcatFromSequence)."""

    def __init__(self, feat=16, dim=32, out=8):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        self.mix = nn.Linear(2 * dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, out)

    def forward(self, x):
        x = self.inp(x)
        h = torch.zeros(x.shape[0], x.shape[2], dtype=x.dtype)
        outs: List[Tensor] = []
        for t in range(x.shape[1]):
            h = torch.tanh(self.mix(torch.cat([x[:, t], h], 1)))
            outs.append(self.norm(h))
        return self.out(torch.stack(outs, 1))


class EarlyExitLoop(nn.Module):
    """A refinement loop with a data-dependent exit: up to `max_steps` iterations, `break` once
    the update is small (an ONNX Loop whose condition is computed)."""
    max_steps: torch.jit.Final[int]

    def __init__(self, dim=32, max_steps=6):
        super().__init__()
        self.max_steps = max_steps
        self.inp = nn.Linear(16, dim)
        self.update = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, dim))
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        h = self.inp(x)
        for _ in range(self.max_steps):
            delta = self.update(h) * 0.5
            h = h + delta
            if bool(delta.abs().mean() < 0.05):
                break
        return self.head(h)


# 3. Faults below the output tolerance but beyond a layer's own -------------------------------

class TransformerEncoderModel(nn.Module):
    """nn.TransformerEncoder (traced with grad enabled: PyTorch's unfused path) between an input
    projection and a head, attention sharpened as a trained model's."""

    def __init__(self, feat=16, dim=32, heads=4, layers=2, norm_first=False, activation="relu",
                 gain=2.5):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0,
                                           activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        for mod in self.encoder.layers:
            sharpen_attention(mod.self_attn.in_proj_weight, dim, gain)
        self.head = nn.Linear(dim, 6)

    def forward(self, x):
        return self.head(self.encoder(self.inp(x)))


class ScaledAttentionBlock(nn.Module):
    """Hand-written attention with an explicit `scores * self.scale` Mul."""

    def __init__(self, dim, heads, gain):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.scale = self.dh ** -0.5
        self.norm1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        with torch.no_grad():
            self.q.weight.mul_(gain)
            self.k.weight.mul_(gain)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        y = self.norm1(x)
        q = self.q(y).view(b, s, self.heads, self.dh).transpose(1, 2)
        k = self.k(y).view(b, s, self.heads, self.dh).transpose(1, 2)
        v = self.v(y).view(b, s, self.heads, self.dh).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * self.scale
        attn = scores.softmax(-1)
        y = (attn @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ScaledAttentionNet(nn.Module):
    def __init__(self, feat=16, dim=32, heads=4, depth=2, gain=2.5, classes=6):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        self.blocks = nn.Sequential(*[ScaledAttentionBlock(dim, heads, gain)
                                      for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.inp(x))).mean(1))


class ChannelsLastLayerNorm(nn.Module):
    """ConvNeXt's LayerNorm over channels: permute, LayerNorm, permute back."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=1e-6)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class EarlyConvNorm(nn.Module):
    """A stem convolution followed by normalisation (`norm`: batch, group, instance or layer),
    then a few more stages and a classifier: a fault in the stem conv is partly (BatchNorm: not
    at all; group/instance/layer norm: mostly) normalised away."""

    def __init__(self, norm="batch", width=16, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, 2, 1)
        self.stem_norm = {"batch": lambda: nn.BatchNorm2d(width),
                          "group": lambda: nn.GroupNorm(4, width),
                          "instance": lambda: nn.InstanceNorm2d(width, affine=True),
                          "layer": lambda: ChannelsLastLayerNorm(width)}[norm]()
        self.act = nn.GELU() if norm == "layer" else nn.ReLU()
        self.stage1 = conv_bn(width, 2 * width, 2)
        self.stage2 = conv_bn(2 * width, 2 * width)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, input):
        x = self.act(self.stem_norm(self.stem(input)))
        return self.fc(self.stage2(self.stage1(x)).mean((2, 3)))


# 4. PyTorch's fused attention fast path (traced under no_grad / inference_mode) --------------

class MHAModel(nn.Module):
    """Self-attention with nn.MultiheadAttention (batch_first) and a residual LayerNorm; under
    no_grad/inference_mode in eval it runs `aten::_native_multi_head_attention`.
    `need_weights`: return the averaged attention weights too."""

    def __init__(self, feat=16, dim=32, heads=4, need_weights=False, gain=2.5):
        super().__init__()
        self.need_weights = need_weights
        self.inp = nn.Linear(feat, dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=0.0, batch_first=True)
        sharpen_attention(self.attn.in_proj_weight, dim, gain)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 6)

    def forward(self, x):
        h = self.inp(x)
        a, w = self.attn(h, h, h, need_weights=self.need_weights)
        y = self.head(self.norm(h + a))
        if self.need_weights:
            return y, w
        return y


class FastEncoder(nn.Module):
    """nn.TransformerEncoder (batch_first, relu or gelu); under no_grad/inference_mode in eval
    each layer runs `aten::_transformer_encoder_layer_fwd`."""

    def __init__(self, feat=16, dim=32, heads=4, layers=2, norm_first=False, activation="relu",
                 gain=2.5):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0,
                                           activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        for mod in self.encoder.layers:
            sharpen_attention(mod.self_attn.in_proj_weight, dim, gain)
        self.head = nn.Linear(dim, 6)

    def forward(self, x):
        return self.head(self.encoder(self.inp(x)).mean(1))


def tiny_vit(image_size=32, patch=8, layers=2, heads=2, dim=32, gain=2.0):
    """torchvision's VisionTransformer (EncoderBlocks of nn.MultiheadAttention), tiny."""
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=image_size, patch_size=patch, num_layers=layers,
                              num_heads=heads, hidden_dim=dim, mlp_dim=2 * dim,
                              num_classes=10)
    for block in model.encoder.layers:
        sharpen_attention(block.self_attention.in_proj_weight, dim, gain)
    return model


# 5. float16 overflow ---------------------------------------------------------------------------

class LargeLinearLayerNorm(nn.Module):
    """A Linear with large weights (activations past 65504) followed by a LayerNorm that brings
    them back: fine in float32, inf/NaN in float16."""

    def __init__(self, feat=16, dim=32, factor=1e5):
        super().__init__()
        self.big = nn.Linear(feat, dim)
        with torch.no_grad():
            self.big.weight.mul_(factor)
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 6))

    def forward(self, x):
        return self.fc(self.norm(self.big(x)))


class LargeConvBatchNorm(nn.Module):
    """A convolution with large weights whose BatchNorm (statistics calibrated) normalises it:
    the conv output overflows float16."""

    def __init__(self, width=16, factor=5e4, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, 1, 1)
        with torch.no_grad():
            self.conv.weight.mul_(factor)
        self.bn = nn.BatchNorm2d(width)
        self.body = conv_bn(width, width, 2)
        self.fc = nn.Linear(width, classes)

    def forward(self, input):
        # BatchNorm after an explicit non-foldable op so that the big activation exists in
        # the ONNX graph too (a Conv+BN fold would hide it).
        x = F.relu(self.bn(self.conv(input) + 1.0))
        return self.fc(self.body(x).mean((2, 3)))


class LargeScoresAttention(nn.Module):
    """Attention whose pre-softmax scores exceed 65504 (queries and keys with large weights)."""

    def __init__(self, feat=16, dim=32, factor=300.0):
        super().__init__()
        self.q = nn.Linear(feat, dim)
        self.k = nn.Linear(feat, dim)
        self.v = nn.Linear(feat, dim)
        with torch.no_grad():
            self.q.weight.mul_(factor)
            self.k.weight.mul_(factor)
        self.out = nn.Linear(dim, 6)

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(-1, -2)
        return self.out(scores.softmax(-1) @ self.v(x))


class RMSNorm(nn.Module):
    """T5's RMSNorm: `x * rsqrt(mean(x ** 2) + eps)` (the square overflows float16 first)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LargeRMSNorm(nn.Module):
    def __init__(self, feat=16, dim=32, factor=600.0):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        with torch.no_grad():
            self.inp.weight.mul_(factor)
        self.norm = RMSNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 6)

    def forward(self, x):
        h = self.norm(self.inp(x))
        return self.head(h + self.mlp(h))


class ExpNormaliser(nn.Module):
    """A softmax written by hand without subtracting the maximum, `exp(x) / exp(x).sum()`, over
    logits of ~12: exp overflows float16."""

    def __init__(self, feat=16, dim=32, factor=11.0):
        super().__init__()
        self.logits = nn.Linear(feat, dim)
        with torch.no_grad():
            self.logits.weight.mul_(factor)
        self.out = nn.Linear(dim, 6)

    def forward(self, x):
        e = torch.exp(self.logits(x))
        return self.out(e / e.sum(-1, keepdim=True))


# Builder ---------------------------------------------------------------------------------------

CLASSES = {
    "PointPillarsScatter": PointPillarsScatter, "SliceAssignHead": SliceAssignHead,
    "InplaceDecodeDetect": InplaceDecodeDetect, "KVCacheAttention": KVCacheAttention,
    "KVDecoderStep": KVDecoderStep, "StaticKVCache": StaticKVCache, "MaskedFillEncoder": MaskedFillEncoder,
    "ThresholdConvNet": ThresholdConvNet, "CopyIntoBuffer": CopyIntoBuffer,
    "RingBufferStream": RingBufferStream, "LoopIf": LoopIf, "ConstLoop": ConstLoop,
    "GreedyGRUDecoder": GreedyGRUDecoder, "StreamingReset": StreamingReset,
    "StreamingConvReset": StreamingConvReset, "StreamingZerosLike": StreamingZerosLike, "BranchModules": BranchModules,
    "LoopStack": LoopStack, "EarlyExitLoop": EarlyExitLoop,
    "TransformerEncoderModel": TransformerEncoderModel, "ScaledAttentionNet": ScaledAttentionNet,
    "EarlyConvNorm": EarlyConvNorm, "MHAModel": MHAModel, "FastEncoder": FastEncoder,
    "tiny_vit": tiny_vit, "LargeLinearLayerNorm": LargeLinearLayerNorm,
    "LargeConvBatchNorm": LargeConvBatchNorm, "LargeScoresAttention": LargeScoresAttention,
    "LargeRMSNorm": LargeRMSNorm, "ExpNormaliser": ExpNormaliser,
}


def build(build_spec):
    """The model of a hazards spec's `build` ({"lib": "hazards", "cls": ..., "kwargs": ...}),
    in eval mode."""
    torch.manual_seed(build_spec.get("seed", 0))
    return CLASSES[build_spec["cls"]](**build_spec.get("kwargs", {})).eval()


def trace_context(mode):
    """The grad mode a spec's TorchScript is traced under (`trace_mode`): None (grad enabled,
    the sweep's default), `no_grad` or `inference_mode`."""
    if mode == "no_grad":
        return torch.no_grad()
    if mode == "inference_mode":
        return torch.inference_mode()
    if mode is None:
        import contextlib
        return contextlib.nullcontext()
    raise ValueError(f"unknown trace_mode {mode!r}")
