"""Trained-like activations for randomly initialised networks.

A freshly built network keeps BatchNorm's default statistics (mean 0, variance 1), which do
not describe the activations it actually computes: through a deep network the activations
then shrink (or grow) by orders of magnitude, so float32 drift and planted faults both hide
under the absolute tolerance. `recalibrate_batchnorm` gives every BatchNorm the statistics
of the activations it really sees, as training leaves them: a few forward passes with the
BatchNorm layers in train mode, momentum None (a plain average over the passes), everything
else in eval mode, then eval. `revive_vanishing_scales` gives order-one values to parameters
that were initialised to (near) zero so that a branch would vanish (zero-init residual
BatchNorm gammas, layer-scale gammas of 1e-5): a trained network's branches contribute.
"""

import torch

# A parameter whose every value is below this is taken as "initialised to vanish".
VANISHING = 1e-3


def _is_batchnorm(m):
    return isinstance(m, torch.nn.modules.batchnorm._BatchNorm)


@torch.no_grad()
def revive_vanishing_scales(model, value=0.5):
    """Sets BatchNorm weights and layer-scale style gammas that are all (near) zero to
    `value`; returns how many tensors were changed."""
    changed = 0
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        is_scale = leaf in ("weight", "gamma", "scale") or "gamma" in leaf or "ls" in leaf
        if not is_scale or p.numel() == 0 or not p.dtype.is_floating_point:
            continue
        if p.abs().max().item() < VANISHING:
            p.fill_(value)
            changed += 1
    return changed


@torch.no_grad()
def recalibrate_batchnorm(model, make_batch, passes=4):
    """Replaces every BatchNorm's running statistics by those of `passes` batches from
    `make_batch(i)` (a tensor, or a tuple of forward arguments). Returns the number of
    BatchNorm layers recalibrated; the model is left in eval mode."""
    bns = [m for m in model.modules() if _is_batchnorm(m)]
    model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    for i in range(passes):
        batch = make_batch(i)
        if isinstance(batch, tuple):
            model(*batch)
        else:
            model(batch)
    for m in bns:
        m.momentum = 0.1
    model.eval()
    return len(bns)


def image_batches(shape, seed=0):
    """`make_batch` for image models: images in [0, 1] normalised with ImageNet's mean and
    std, as torchvision and timm models expect them; a different batch each pass."""
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def make(i):
        g = torch.Generator().manual_seed(seed * 1000 + i)
        x = torch.rand(shape, generator=g)
        if shape[1] == 3:
            x = (x - mean) / std
        return x

    return make
