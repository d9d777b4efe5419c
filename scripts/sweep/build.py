"""Constructs one model from its spec (registries.py), offline, with random or package-shipped
weights, and makes its forward take positional tensors and return a tuple of tensors.

Why the forward is changed by swapping the instance's class for a subclass, not by wrapping:
a wrapper module would prefix every module path (`model.layer1.0.conv1`) on both sides, and the
paths would no longer be those users see in `named_modules()`. The subclass calls the library's
own forward with the keyword arguments it needs (Hugging Face's `input_ids=...`, torchvision
detection's list of images, RAFT's `num_flow_updates`) and flattens whatever comes back (dicts,
ModelOutputs, lists of dicts) into tensors, in order, dropping None.

Sizes: every model first gets the spec's small input (96 px for classification); a model that
refuses it (fixed-size position embeddings, window sizes) is retried at its own default size,
and `size_candidates` lists what is tried.
"""

import os
import sys

import torch

# Where `pip install --target` put onnxsim and facenet-pytorch (docs/sweep.md); fixed, not under
# ALIGN_CHECK_CACHE, so that a sweep into a fresh cache still finds them.
OVERLAY = os.environ.get("ALIGN_CHECK_SWEEP_OVERLAY") or os.path.join(
    os.path.expanduser("~"), ".cache", "align-check", "sweep-overlay")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_VERBOSE", "False")


def use_overlay():
    """Packages pip could only install --no-deps (facenet-pytorch pins an old torch) or that
    are not in the pinned environment (onnxsim) live in the overlay; appended, so they never
    shadow the pinned ones."""
    if os.path.isdir(OVERLAY) and OVERLAY not in sys.path:
        sys.path.append(OVERLAY)


def flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if value is None:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(flatten(v))
        return out
    return []


def with_positional_forward(model, call):
    """Swaps model's class for a subclass whose forward(*tensors) returns
    tuple(flatten(call(original_forward, *tensors)))."""
    base = type(model)

    def forward(self, *tensors):
        return tuple(flatten(call(lambda *a, **k: base.forward(self, *a, **k), *tensors)))

    model.__class__ = type(base.__name__, (base,), {"forward": forward})
    return model


def keyword_call(names, **fixed):
    def call(original, *tensors):
        return original(**dict(zip(names, tensors)), **fixed)
    return call


# Builders ------------------------------------------------------------------------------------

def build_timm(build, inputs, size):
    import timm
    kwargs = {"pretrained": False}
    try:
        model = timm.create_model(build["name"], img_size=size, **kwargs)
    except TypeError:
        model = timm.create_model(build["name"], **kwargs)
    return model, dict(inputs, size=size)


def timm_default_size(build):
    import timm
    cfg = timm.models.get_pretrained_cfg(build["name"])
    size = (cfg.input_size if cfg else (3, 224, 224))[-1]
    return size


def build_torchvision(build, inputs, size, frames=None):
    from torchvision import models
    task = build["task"]
    kwargs = {"weights": None}
    if task == "detection":
        kwargs.update(weights_backbone=None)
        if not build["name"].startswith("ssd"):
            kwargs.update(min_size=size, max_size=size)
    elif task == "segmentation":
        kwargs.update(weights_backbone=None)
    model = models.get_model(build["name"], **kwargs)
    spec_inputs = dict(inputs, size=size)
    if frames:
        spec_inputs["frames"] = frames
    if task == "detection":
        with_positional_forward(model, lambda original, x: original(list(x.unbind(0))))
    elif task == "optical_flow":
        with_positional_forward(model, lambda original, a, b: original(a, b,
                                                                       num_flow_updates=4)[-1])
    elif task == "segmentation":
        with_positional_forward(model, lambda original, x: original(x))
    return model, spec_inputs


def build_transformers(build, inputs, names):
    import transformers
    from transformers import CONFIG_MAPPING
    config = CONFIG_MAPPING[build["model_type"]](**build["config"])
    for attr in ("use_cache",):
        if hasattr(config, attr):
            setattr(config, attr, False)
    for sub in ("text_config", "vision_config"):
        sub_config = getattr(config, sub, None)
        if sub_config is not None and hasattr(sub_config, "use_cache"):
            sub_config.use_cache = False
    model = getattr(transformers, build["auto"]).from_config(config)
    with_positional_forward(model, keyword_call(names, return_dict=True))
    return model, inputs


def build_facenet(build, inputs):
    use_overlay()
    from facenet_pytorch.models.inception_resnet_v1 import InceptionResnetV1
    from facenet_pytorch.models.mtcnn import ONet, PNet, RNet
    name = build["name"]
    if name == "inception_resnet_v1":
        return InceptionResnetV1(pretrained=None, classify=False), inputs
    # The package ships these three networks' trained weights (facenet_pytorch/data/*.pt).
    return {"pnet": PNet, "rnet": RNet, "onet": ONet}[name](pretrained=True), inputs


def size_candidates(spec):
    """(size, frames) tried in order: the spec's small input, then the model's own default."""
    build, inputs = spec["build"], spec["inputs"]
    first = (inputs.get("size"), inputs.get("frames"))
    if build["lib"] == "timm":
        return [first, (timm_default_size(build), None)]
    if build["lib"] == "torchvision":
        task = build["task"]
        fallback = {"classification": (224, None), "segmentation": (224, None),
                    "detection": (320, None), "video": (224, 16),
                    "optical_flow": (224, None)}[task]
        return [first, fallback]
    return [first]


def build_model(spec, size, frames, input_names):
    """(model in eval mode, inputs spec with the size used)."""
    build, inputs = spec["build"], dict(spec["inputs"])
    lib = build["lib"]
    if lib == "timm":
        model, inputs = build_timm(build, inputs, size)
    elif lib == "torchvision":
        model, inputs = build_torchvision(build, inputs, size, frames)
    elif lib == "transformers":
        model, inputs = build_transformers(build, inputs, input_names)
    elif lib == "facenet":
        model, inputs = build_facenet(build, inputs)
    elif lib == "hazards":
        from . import hazard_models
        model = hazard_models.build(build)
    else:
        raise ValueError(f"no builder for {lib!r}")
    return model.eval(), inputs
