"""The expected culprit's module path, read against the TorchScript model's own modules.

A fault's expected module comes from the ONNX graph alone (faults.expected_module). Some
exports name a module by a path that is not the TorchScript one: the legacy exporter drops the
level of a module run through a method other than forward (timm's `rel_pos.get_bias()` runs
its MLP, named `blocks.0.attn.mlp.fc2` for TorchScript's `blocks.0.attn.rel_pos.mlp.fc2`),
or the levels of a loop over a ModuleList (`encoder.post_attention.layernorm` for
`encoder.layers.1.post_attention.layernorm`), and an export of the bare model lacks the
wrapper's leading level (`decoder.layers.0` for `model.decoder.layers.0`). The judge then
counted a culprit found at the right module as misplaced.

So the TorchScript model's modules are listed once per model (`modules.json` in the model's
cache folder, from `torch.jit.load(...).named_modules()`: the model itself, never
align-check), and an expected path that names no module is read as the modules whose path
holds it with one contiguous run of levels added: one such module is the expected module;
several (the ONNX names do not say which layer) are all accepted (`expected_candidates`).
"""

import json
import os

FILE = "modules.json"


def list_modules(model_pt):
    """Every module path of a TorchScript file (`""` is the root)."""
    import torch
    return sorted(name for name, _ in torch.jit.load(model_pt, map_location="cpu")
                  .named_modules())


def write_modules(folder):
    """Writes the model folder's modules.json from its model.pt (run in a child)."""
    with open(os.path.join(folder, FILE), "w") as f:
        json.dump(list_modules(os.path.join(folder, "model.pt")), f)


def read_modules(folder):
    """The model's module paths, or None when they were not listed."""
    try:
        with open(os.path.join(folder, FILE)) as f:
            return set(json.load(f))
    except (OSError, ValueError):
        return None


def fitting(expected, modules):
    """The modules whose path is `expected` with one contiguous run of levels added; None
    when `expected` is unknown, the top level, or a module itself."""
    if not expected or not modules or expected in modules:
        return None
    want = expected.split(".")
    fits = []
    for module in modules:
        parts = module.split(".")
        extra = len(parts) - len(want)
        if extra > 0 and any(parts[:i] == want[:i] and parts[i + extra:] == want[i:]
                             for i in range(len(want) + 1)):
            fits.append(module)
    return sorted(fits) or None


def resolve(recipe, modules):
    """Reads a recipe's expected module against the model's modules (see above)."""
    recipe.pop("expected_candidates", None)
    fits = fitting(recipe.get("expected_module"), modules)
    if not fits:
        return
    if len(fits) == 1:
        recipe["expected_module"] = fits[0]
        recipe["expected_module_from"] = f"{recipe.get('expected_module_from')}+module_tree"
    else:
        recipe["expected_candidates"] = fits
