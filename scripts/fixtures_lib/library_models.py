"""Small networks built from the libraries people actually deploy, for align-check's second
fixture family (tests/fixtures/lib, written by scripts/make_library_fixtures.py).

Responsible for: building each model from a tiny configuration with random weights (never a
download), deterministic under the caller's torch seed, in eval mode, with the weights drawn so
that BatchNorm fusion, LayerNorm affine parameters and bias terms all matter (library inits
leave running stats at 0/1 and biases at 0, which would let a wrong fusion or a dropped bias go
unnoticed). Hugging Face models are subclassed, not wrapped, so `named_modules()` paths stay
those of the library (`encoder.layer.1.attention.output.dense`, not `model.encoder...`), and
their `forward` takes tensors and returns a tuple of tensors (what tracing and both exporters
need). Ultralytics' own export flow (its Exporter, Conv+BN fusion, onnxslim) lives here too, in
`ultralytics_export`, because it must run the library's code path rather than ours.

Every builder returns (model, example inputs); the caller seeds torch before calling it.
"""

import contextlib
import datetime as _dt
import os
import shutil
import tempfile

import torch
from torch import nn

from . import models

# Offline everywhere: these models are built from configs; nothing may reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_VERBOSE", "False")

# Hidden size 32: weights with std ~1/sqrt(32) keep activations O(1), so GELU and softmax work
# in their non-linear range (HF's default 0.02 makes every attention uniform and every GELU
# linear, and a planted GELU or softmax fault would vanish).
HF_INIT_STD = 0.2


def randomize_biases(model: nn.Module, std: float = 0.1) -> nn.Module:
    """Draws every all-zero bias from the seeded RNG.

    Why: HF and timm initialise biases to zero; a fault that drops or changes a bias in the
    ONNX graph would then change nothing. Norm layers are left to randomize_norm_stats.
    """
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and not p.any():
                p.normal_(0.0, std)
    return model


def rescale_linear_init(model: nn.Module) -> nn.Module:
    """Redraws every nn.Linear weight with std 1/sqrt(fan_in), from the seeded RNG.

    Why: timm initialises Linear layers with std 0.02. At these widths that makes attention
    uniform, GELU linear and the logits ~1e-2, so a planted fault upstream would reach the
    outputs scaled down by ~50 and drown in the 1e-3 threshold.
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, m.in_features ** -0.5)
    return model


def finish(model: nn.Module) -> nn.Module:
    """Random norm statistics and biases, eval mode: the state every fixture model is in."""
    models.randomize_norm_stats(model)
    randomize_biases(model)
    return model.eval()


def padded_text_inputs(vocab=100, batch=2, seq=8, pad_from=5):
    """input_ids (1..vocab-1) and an attention_mask whose second row is padded from `pad_from`."""
    ids = torch.randint(1, vocab, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, pad_from:] = 0
    return ids, mask


# Hugging Face transformers ------------------------------------------------------------------

def _hf():
    import transformers  # imported lazily: slow, and only needed here
    # Tiny configs trip informational messages (unrecognised loss_type); keep errors only.
    transformers.logging.set_verbosity_error()
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, ViTConfig, ViTModel
    return BertConfig, BertModel, GPT2Config, GPT2Model, ViTConfig, ViTModel


def _tuple(out):
    return tuple(o for o in out if isinstance(o, torch.Tensor))


def bert(attn_implementation="sdpa"):
    """BERT encoder, 2 layers, hidden 32, 2 heads; outputs (last_hidden_state, pooler_output).

    sdpa by default: with a padding mask, the attention goes through
    scaled_dot_product_attention with a boolean/additive mask (a decomposition case: the legacy
    exporter writes MatMul/Mul/Softmax/MatMul plus IsNaN/Where for fully masked rows).
    """
    BertConfig, BertModel, *_ = _hf()

    class BertTuple(BertModel):
        def forward(self, input_ids, attention_mask):
            return _tuple(super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                          return_dict=False))

    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16,
                     initializer_range=HF_INIT_STD, attn_implementation=attn_implementation)
    model = finish(BertTuple(cfg))
    return model, list(padded_text_inputs())


def _gpt2_config(attn_implementation):
    _, _, GPT2Config, *_ = _hf()
    # bos/eos inside the tiny vocabulary (the default 50256 makes transformers warn).
    return GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=16,
                      n_inner=64, initializer_range=HF_INIT_STD, bos_token_id=0, eos_token_id=0,
                      attn_implementation=attn_implementation)


def gpt2():
    """GPT-2 decoder, 2 layers, hidden 32, eager attention; output (last_hidden_state,).

    Eager attention keeps matmul/softmax as separate TorchScript ops (the other models use
    sdpa). GPT-2's Conv1D is addmm (ONNX Gemm) and its c_attn produces q, k, v in one tensor
    that is split; the activation is gelu_new, written out with tanh and pow.
    """
    _, _, _, GPT2Model, *_ = _hf()

    class GPT2Tuple(GPT2Model):
        def forward(self, input_ids, attention_mask):
            return _tuple(super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                          use_cache=False, return_dict=False))

    model = finish(GPT2Tuple(_gpt2_config("eager")))
    return model, list(padded_text_inputs())


def gpt2_padding_branch():
    """The GPT-2 of `gpt2` behind a data-dependent branch that torch.export cannot capture.

    `if (attention_mask == 0).any()` (pass the mask only for padded batches, a common
    serving-code pattern) is a guard on data: both torch.export strategies the dynamo exporter
    tries (non-strict and strict) fail with GuardOnDataDependentSymNode, while torch.jit.trace
    records the branch taken. With the same seed it has the same weights as `gpt2`.
    """
    _, _, _, GPT2Model, *_ = _hf()

    class GPT2PaddingBranch(GPT2Model):
        def forward(self, input_ids, attention_mask):
            if bool((attention_mask == 0).any()):
                out = super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                      use_cache=False, return_dict=False)
            else:
                out = super().forward(input_ids=input_ids, use_cache=False, return_dict=False)
            return _tuple(out)

    model = finish(GPT2PaddingBranch(_gpt2_config("eager")))
    return model, list(padded_text_inputs())


def vit():
    """HF ViT, image 32, patch 8 (16 patches + CLS), 2 layers, hidden 32, sdpa attention;
    outputs (last_hidden_state, pooler_output)."""
    *_, ViTConfig, ViTModel = _hf()

    class ViTTuple(ViTModel):
        def forward(self, pixel_values):
            return _tuple(super().forward(pixel_values=pixel_values, return_dict=False))

    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                    num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    initializer_range=HF_INIT_STD, attn_implementation="sdpa")
    model = finish(ViTTuple(cfg))
    return model, [torch.randn(1, 3, 32, 32)]


# timm ---------------------------------------------------------------------------------------

def swin():
    """timm Swin: image 32, patch 2 (16x16 tokens), window 4, depths (2, 2), embed dim 16.

    The second block of each stage is shifted (shift 2): torch.roll before and after window
    attention, which every exporter decomposes into Slice/Concat pairs.
    """
    from timm.models.swin_transformer import SwinTransformer
    model = SwinTransformer(img_size=32, patch_size=2, in_chans=3, num_classes=10,
                            embed_dim=16, depths=(2, 2), num_heads=(1, 2), window_size=4)
    return finish(rescale_linear_init(model)), [torch.randn(1, 3, 32, 32)]


def mobilevit():
    """timm MobileViT (v1 blocks) with reduced widths and three stages, image 32: inverted
    residuals with BatchNormAct2d (a BatchNorm2d subclass that also applies SiLU), then a
    MobileViT block whose two transformer blocks use timm's fused attention
    (F.scaled_dot_product_attention)."""
    from timm.models.byobnet import ByobNet, ByoModelCfg
    from timm.models.mobilevit import _inverted_residual_block, _mobilevit_block
    cfg = ByoModelCfg(
        blocks=(
            _inverted_residual_block(d=1, c=16, s=1, br=2.0),
            _inverted_residual_block(d=1, c=24, s=2, br=2.0),
            _mobilevit_block(d=1, c=32, s=2, transformer_dim=32, transformer_depth=2,
                             patch_size=2, br=2.0),
        ),
        stem_chs=16, stem_type="3x3", stem_pool="", downsample="", act_layer="silu",
        num_features=64,
    )
    model = ByobNet(cfg, num_classes=10)
    return finish(rescale_linear_init(model)), [torch.randn(1, 3, 32, 32)]


def xcit():
    """timm XCiT: image 32, patch 8 (16 tokens), one block and one class-attention block,
    embed dim 32. Its patch embedding returns the token grid's size next to the tokens
    (`x, (Hp, Wp)`), and the Fourier positional encoding is computed from that size alone:
    constant with static shapes, so a simplifier folds all of it into one initializer.
    Cross-covariance attention normalises queries and keys with F.normalize (a vector norm,
    then a clamp holding the same values)."""
    from timm.models.xcit import Xcit
    model = Xcit(img_size=32, patch_size=8, in_chans=3, num_classes=10, embed_dim=32, depth=1,
                 num_heads=2, cls_attn_layers=1, eta=1.0)
    return finish(rescale_linear_init(model)), [torch.randn(1, 3, 32, 32)]


# Ultralytics --------------------------------------------------------------------------------

YOLO_IMGSZ = 64
# yolov8n.yaml with width 0.0625 instead of 0.25 and max_channels 256 (channels 8..16), 8
# classes and 4 DFL bins instead of 16 (reg_max, a yaml key parse_model reads): the same graph
# (Conv, C2f with Bottlenecks, SPPF, upsample/concat neck, Detect with its box and class
# branches and DFL) with 59 k parameters instead of 3.2 M, so the YOLO fixtures stay small.
YOLO_SCALE = [0.33, 0.0625, 256]
YOLO_NC = 8
YOLO_REG_MAX = 4


def _yolo_cfg():
    from ultralytics.nn.tasks import yaml_model_load
    cfg = yaml_model_load("yolov8n.yaml")  # ships with the package; nothing is downloaded
    cfg["scales"] = {"n": list(YOLO_SCALE)}
    cfg["nc"] = YOLO_NC
    cfg["reg_max"] = YOLO_REG_MAX
    return cfg


def yolo_detection_model():
    """The Ultralytics DetectionModel of yolov8n.yaml (scaled down), random weights, unfused.

    Detect.export is set, as Ultralytics' exporter does, so forward returns one tensor
    (1, 4 + nc, anchors) instead of (tensor, [feature maps]).
    """
    from ultralytics.nn.modules import Detect
    from ultralytics.nn.tasks import DetectionModel
    model = DetectionModel(_yolo_cfg(), verbose=False)
    finish(model)
    for m in model.modules():
        if isinstance(m, Detect):
            m.export = True
            m.format = "onnx"
    return model, [torch.rand(1, 3, YOLO_IMGSZ, YOLO_IMGSZ)]  # images are 0..1


@contextlib.contextmanager
def _fixed_export_date():
    """Ultralytics stamps datetime.now() into both exported files' metadata; pin it so the
    fixtures are byte-identical from run to run."""
    import ultralytics.engine.exporter as exporter_mod

    class FixedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2024, 1, 1, tzinfo=_dt.timezone.utc)

    original = exporter_mod.datetime
    exporter_mod.datetime = FixedDatetime
    try:
        yield
    finally:
        exporter_mod.datetime = original


def ultralytics_export(model, ts_path, onnx_path):
    """Runs Ultralytics' own exporter (YOLO(...).export) on `model`, twice: format=torchscript
    and format=onnx, and moves the two files to ts_path / onnx_path.

    What the library does (ultralytics/engine/exporter.py, 8.4): deep-copies the model,
    `model.fuse()` (Conv+BN folded in PyTorch: Conv.forward_fuse, no BatchNorm left), sets
    Detect.export and C2f.forward = forward_split, then torchscript: torch.jit.trace(strict=False)
    saved with a config.txt extra file; onnx: the legacy exporter at its best opset for the
    installed onnx, then onnxslim.slim. It runs offline: YOLO("yolov8n.yaml") only reads the
    packaged yaml, and the requirement checks find everything installed.
    Returns the ONNX opset the exporter chose.
    """
    import onnx
    from ultralytics import YOLO
    yolo = YOLO("yolov8n.yaml", task="detect")
    model.args = yolo.model.args
    model.task = "detect"
    yolo.model = model
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp, _fixed_export_date():
        os.chdir(tmp)  # the exporter writes next to the model's yaml name, in the cwd
        try:
            ts = yolo.export(format="torchscript", imgsz=YOLO_IMGSZ, device="cpu")
            ox = yolo.export(format="onnx", imgsz=YOLO_IMGSZ, device="cpu")
            shutil.move(os.path.join(tmp, ts), ts_path)
            shutil.move(os.path.join(tmp, ox), onnx_path)
        finally:
            os.chdir(cwd)
    return next(o.version for o in onnx.load(onnx_path).opset_import if o.domain in ("", "ai.onnx"))


# Scripted control flow ----------------------------------------------------------------------

class Gate(nn.Module):
    """Conv + ReLU; one instance is applied three times by the loop below."""

    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))


class LoopIfNet(nn.Module):
    """For torch.jit.script: a `for` loop with a trip count (prim::Loop), a data-dependent
    `if` (prim::If), and a ModuleList iterated with `for blk in self.blocks` (which scripting
    unrolls at compile time, so its members appear as `blocks.0`, `blocks.1`)."""

    def __init__(self, ch=8, steps=3):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, padding=1)
        self.bn = nn.BatchNorm2d(ch)
        self.gate = Gate(ch)
        self.blocks = nn.ModuleList([nn.Conv2d(ch, ch, 1), nn.Conv2d(ch, ch, 1)])
        self.pos = nn.Conv2d(ch, ch, 3, padding=1)
        self.neg = nn.Conv2d(ch, ch, 1)
        self.head = nn.Conv2d(ch, 4, 1)
        self.steps = steps

    def forward(self, x):
        x = self.bn(self.stem(x))
        for _ in range(self.steps):
            x = x + 0.5 * self.gate(x)
        for blk in self.blocks:
            x = torch.tanh(blk(x))
        if x.mean() > 0:
            x = self.pos(x)
        else:
            x = self.neg(x)
        return self.head(x)


def loop_if():
    model = finish(LoopIfNet())
    return model, [torch.randn(1, 3, 16, 16)]
