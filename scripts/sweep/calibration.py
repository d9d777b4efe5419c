"""Trained-like state for randomly initialised models, and the inputs they expect.

A random network is a poor test subject: default BatchNorm statistics (mean 0, var 1) let deep
activations shrink to ~1e-9 or explode, zero-initialised residual gammas and layer-scale gammas
of 1e-5 make whole branches vanish, and timm/HF's Linear init (std 0.02) makes attention uniform
and GELU linear. A fault planted there would hide under `atol` for reasons no trained model has.
So before export, every model goes through `calibrate`:

1. Parameters that are (near) zero where a trained model's are not: a 1-D or per-channel
   parameter that is not a bias with max |p| < 1e-3 (zero-init residual BN gamma, layer-scale
   gamma of 1e-5/1e-6) is drawn from U(0.5, 1.0); an all-zero bias (BN beta included) from
   N(0, 0.1); a Conv/Linear weight that is all (near) zero from N(0, 1/fan_in).
   A normalisation layer's weight that is one constant (the init's ones) is drawn from
   U(0.75, 1.25), as trained gammas differ per channel.
2. nn.Linear weights drawn with std below 0.5/sqrt(fan_in) (timm's and HF's 0.02) are redrawn
   with std 1/sqrt(fan_in), which keeps each projection's output of the order of its input.
3. BatchNorm recalibration: running stats reset, momentum None (a cumulative average), the
   BatchNorm layers alone in train mode (everything else in eval: dropout off, heads in their
   inference path), a few forward passes of realistic inputs under no_grad, then eval. Norm
   layers that keep statistics in buffers without a train mode (FrozenBatchNorm2d) get the
   mean and variance of their inputs over the same passes through a forward pre-hook.
4. Evidence: the RMS of every leaf module's output over one eval pass, reported at 25/50/75/90%
   of the execution order and at the last module, plus the median |activation| at 90% depth.

Inputs (`make_inputs`) are in the range each model expects: images smooth in [0, 1] and then
normalised with ImageNet statistics (timm, torchvision), in [-1, 1] (Hugging Face vision,
MTCNN) or left in [0, 1] (Ultralytics, torchvision detection); token ids in 1..vocab-1 with an
attention mask; audio as a few sines plus noise in [-1, 1]; log-mel-like features for Whisper.
"""

import math

import torch
from torch import nn

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
CALIBRATION_BATCHES = 4
CALIBRATION_BATCH_SIZE = 2


# Inputs --------------------------------------------------------------------------------------

def smooth_images(gen, batch, size, channels=3, frames=None):
    """Images in [0, 1] that look more like photographs than white noise: a coarse random
    field upsampled bilinearly, a gradient and a little pixel noise."""
    shape = (batch, channels, frames, size, size) if frames else (batch, channels, size, size)
    coarse_shape = shape[:-2] + (max(2, size // 8), max(2, size // 8))
    coarse = torch.rand(coarse_shape, generator=gen)
    if frames:
        flat = coarse.flatten(0, 2)
        img = nn.functional.interpolate(flat.unsqueeze(1), size=(size, size), mode="bilinear",
                                        align_corners=False).view(shape)
    else:
        img = nn.functional.interpolate(coarse, size=(size, size), mode="bilinear",
                                        align_corners=False)
    ramp = torch.linspace(0, 0.3, size).view(*([1] * (len(shape) - 1)), size)
    img = 0.7 * img + ramp + 0.05 * torch.randn(shape, generator=gen)
    return img.clamp(0, 1)


def _tokens(gen, batch, seq, vocab, pad_last_row):
    ids = torch.randint(1, vocab, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.long)
    if pad_last_row and batch > 1:
        mask[-1, seq * 3 // 4:] = 0
    return ids, mask


def make_inputs(inputs, batch, seed):
    """{name: tensor} for the spec's input kind, deterministic in `seed`."""
    gen = torch.Generator().manual_seed(seed)
    kind, size = inputs["kind"], inputs.get("size")
    calibrating = batch > 1
    if kind == "image":
        return {"input": (smooth_images(gen, batch, size) - IMAGENET_MEAN) / IMAGENET_STD}
    if kind in ("image01", "detection"):
        return {"images": smooth_images(gen, batch, size)}
    if kind in ("image_pm1", "image_hf"):
        name = "pixel_values" if kind == "image_hf" else "input"
        return {name: smooth_images(gen, batch, size) * 2 - 1}
    if kind == "video":
        clip = smooth_images(gen, batch, size, frames=inputs["frames"])
        mean, std = IMAGENET_MEAN.unsqueeze(2), IMAGENET_STD.unsqueeze(2)
        return {"video": (clip - mean) / std}
    if kind == "flow":
        first = smooth_images(gen, batch, size)
        second = torch.roll(first, shifts=(2, 3), dims=(2, 3))
        return {"image1": first * 2 - 1, "image2": second * 2 - 1}
    if kind in ("text", "causal"):
        ids, mask = _tokens(gen, batch, inputs["seq"], inputs["vocab"], calibrating)
        return {"input_ids": ids, "attention_mask": mask}
    if kind == "seq2seq":
        ids, mask = _tokens(gen, batch, inputs["seq"], inputs["vocab"], calibrating)
        dec = torch.randint(1, inputs["vocab"], (batch, inputs["seq"] // 2), generator=gen)
        return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": dec}
    if kind == "audio":
        n = inputs["samples"]
        t = torch.arange(n).float() / 16000
        freqs = torch.rand(batch, 3, 1, generator=gen) * 2000 + 100
        wave = torch.sin(2 * math.pi * freqs * t).sum(1) / 3
        wave = 0.8 * wave + 0.1 * torch.randn(batch, n, generator=gen)
        return {"input_values": wave.clamp(-1, 1)}
    if kind == "whisper":
        feats = torch.rand(batch, inputs["mel_bins"], inputs["mel_frames"], generator=gen)
        dec = torch.randint(1, inputs["vocab"], (batch, 4), generator=gen)
        return {"input_features": feats * 2 - 0.8, "decoder_input_ids": dec}
    if kind == "clip":
        ids, mask = _tokens(gen, batch, inputs["seq"], inputs["vocab"], calibrating)
        return {"input_ids": ids, "attention_mask": mask,
                "pixel_values": smooth_images(gen, batch, size) * 2 - 1}
    raise ValueError(f"unknown input kind {kind!r}")


# Parameters ----------------------------------------------------------------------------------

_WEIGHTED = (nn.modules.conv._ConvNd, nn.Linear)


def _is_norm(module):
    return isinstance(module, (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)) or \
        "norm" in type(module).__name__.lower()


def fix_vanishing_parameters(model, gen):
    """Step 1 of the module docstring; returns what it changed, by kind."""
    changed = {"scales": [], "biases": 0, "weights": []}
    with torch.no_grad():
        for mod_name, module in model.named_modules():
            for p_name, p in module.named_parameters(recurse=False):
                if not p.is_floating_point() or p.numel() == 0:
                    continue
                full = f"{mod_name}.{p_name}" if mod_name else p_name
                small = p.abs().max().item() < 1e-3
                if p_name.endswith("bias"):
                    if not p.any():
                        p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
                        changed["biases"] += 1
                elif isinstance(module, _WEIGHTED) and p_name == "weight":
                    if small:
                        fan_in = p[0].numel()
                        p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
                        changed["weights"].append(full)
                elif small and (p.dim() == 1 or sum(d > 1 for d in p.shape) <= 1):
                    p.copy_(torch.rand(p.shape, generator=gen) * 0.5 + 0.5)
                    changed["scales"].append(full)
    return changed


def vary_constant_norm_weights(model, gen):
    """A normalisation layer's affine weight that is one constant (the init's ones) is drawn
    from U(0.75, 1.25): trained gammas differ per channel, and identical ones let an optimiser
    de-duplicate them into one initializer that every LayerNorm shares."""
    count = 0
    with torch.no_grad():
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if _is_norm(module) and isinstance(weight, nn.Parameter) and weight.numel() > 1 \
                    and bool((weight == weight.flatten()[0]).all()):
                weight.copy_(torch.rand(weight.shape, generator=gen) * 0.5 + 0.75)
                count += 1
    return count


def rescale_small_linear(model, gen):
    count = 0
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear) and module.weight.numel():
                fan_in = module.in_features
                if module.weight.std().item() < 0.5 / math.sqrt(fan_in):
                    module.weight.copy_(torch.randn(module.weight.shape, generator=gen)
                                        / math.sqrt(fan_in))
                    count += 1
    return count


# BatchNorm -----------------------------------------------------------------------------------

def _frozen_stat_modules(model):
    """Norm layers holding running_mean/running_var buffers without nn's train mode."""
    return [m for m in model.modules()
            if not isinstance(m, nn.modules.batchnorm._NormBase)
            and isinstance(getattr(m, "running_mean", None), torch.Tensor)
            and isinstance(getattr(m, "running_var", None), torch.Tensor)]


def recalibrate_batchnorm(model, run_batch, batches):
    """Step 3 of the module docstring. `run_batch(inputs)` runs the model on one batch."""
    norms = [m for m in model.modules()
             if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats]
    frozen = _frozen_stat_modules(model)
    sums = {id(m): [0, 0.0, 0.0] for m in frozen}

    def pre_hook(module, args):
        x = args[0].detach().double()
        dims = [d for d in range(x.dim()) if d != 1]
        acc = sums[id(module)]
        acc[0] += 1
        acc[1] = acc[1] + x.mean(dims)
        acc[2] = acc[2] + x.var(dims, unbiased=False)

    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.eval()
    for m in norms:
        m.train()
    handles = [m.register_forward_pre_hook(pre_hook) for m in frozen]
    try:
        with torch.no_grad():
            for batch in batches:
                run_batch(batch)
    finally:
        for h in handles:
            h.remove()
        model.eval()
    with torch.no_grad():
        for m in frozen:
            n, mean, var = sums[id(m)]
            if n:
                m.running_mean.copy_((mean / n).to(m.running_mean.dtype))
                m.running_var.copy_((var / n).to(m.running_var.dtype))
    return {"batchnorm_recalibrated": len(norms),
            "frozen_norm_recalibrated": sum(1 for m in frozen if sums[id(m)][0]),
            "frozen_norm_unreached": sum(1 for m in frozen if not sums[id(m)][0])}


# Evidence ------------------------------------------------------------------------------------

def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(value, dict):
        return _first_tensor(list(value.values()))
    return None


def activation_evidence(model, run_batch, batch):
    """RMS of each leaf module's floating output over one eval pass, summarised by depth."""
    rms = []

    def hook(module, args, out):
        t = _first_tensor(out)
        if t is not None and t.is_floating_point() and t.numel():
            rms.append((t.detach().double().pow(2).mean().sqrt().item(),
                        t.detach().abs().median().item()))

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    try:
        with torch.no_grad():
            run_batch(batch)
    finally:
        for h in handles:
            h.remove()
    if not rms:
        return {"leaf_outputs": 0}

    def at(q):
        return rms[min(len(rms) - 1, int(q * (len(rms) - 1)))]

    return {"leaf_outputs": len(rms),
            "rms_by_depth": {f"p{int(q * 100)}": at(q)[0] for q in (0.25, 0.5, 0.75, 0.9, 1.0)},
            "median_abs_at_90pct_depth": at(0.9)[1],
            "min_rms": min(r for r, _ in rms), "max_rms": max(r for r, _ in rms)}


def count_norms(model):
    kinds = {}
    for m in model.modules():
        if _is_norm(m) and not list(m.children()):
            kinds[type(m).__name__] = kinds.get(type(m).__name__, 0) + 1
    return kinds


def calibrate(model, run_batch, batch_inputs, seed=0):
    """Steps 1-4 of the module docstring; returns the record that goes into meta.json."""
    gen = torch.Generator().manual_seed(seed)
    record = {"vanishing_fixed": fix_vanishing_parameters(model, gen)}
    record["norm_weights_varied"] = vary_constant_norm_weights(model, gen)
    record["linear_rescaled"] = rescale_small_linear(model, gen)
    record["vanishing_fixed"]["scales"] = record["vanishing_fixed"]["scales"][:20]
    record["vanishing_fixed"]["weights"] = record["vanishing_fixed"]["weights"][:20]
    record.update(recalibrate_batchnorm(model, run_batch, batch_inputs))
    record["norm_layers"] = count_norms(model)
    record["evidence"] = activation_evidence(model, run_batch, batch_inputs[0])
    return record
