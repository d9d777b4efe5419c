"""Which models the sweep builds: one spec (a JSON-ready dict) per model, from each library's own
registry.

- timm: `timm.list_models()`, grouped by the module that defines each model (its architecture
  family); the variant with the fewest parameters (counted on the meta device, no memory) is
  the family's model. The listing takes minutes, so it is cached (`registry-timm.json`).
- torchvision: `torchvision.models.list_models()` of the classification, detection,
  segmentation, video and optical-flow modules, grouped by name without its size suffix
  (`resnet18`/`resnet50` -> `resnet`), the smallest of each group. Quantized models are left out:
  their quantized kernels have no float ONNX twin to compare.
- transformers: tiny configurations (hidden 32, 2 layers) of encoders, decoders,
  encoder-decoders, vision, audio and multimodal architectures, built from config classes
  offline (`TRANSFORMER_ARCHS`).
- ultralytics: the task variants' YAML files that ship with the package (detect, segment,
  pose, obb, classify, RT-DETR), exported by Ultralytics' own exporters.
- facenet: MTCNN's three networks with the weights the package ships, and InceptionResnetV1.
- hazards: small models built from code of the classes issue 49 found the tool wrong on
  (in-place dataflow, scripted control flow, faults normalised away, the fused attention fast
  path, float16 overflow); the table is `hazards.py`.

A spec says how to build the model (`build`), what inputs it takes (`inputs`), which exporters
to run and which post-export variants to derive (`variants`, chosen by a stable hash of the id
so the same models get them on every run). `ci_slice()` is the fixed set of small, fast models
that CI checks.
"""

import hashlib
import os
import re
import subprocess
import sys

from . import cache

EXPORTERS = ("legacy", "dynamo")
# Post-export steps applied to a share of the models (every one of the CI slice has some).
IMAGE_VARIANTS = ("onnxslim", "onnxsim", "ort_basic", "ort_extended", "fp16")

# Size-like name parts: `resnet18` -> `resnet`, `convnext_tiny` -> `convnext`, `efficientnet_b0`
# -> `efficientnet`; version parts (`v2`) and other words (`regnet_x`) stay in the family name.
_SIZE_WORDS = {"t", "s", "b", "l", "h", "m", "n", "tiny", "small", "base", "large", "huge",
               "medium", "nano"}


def family_of(name):
    out = []
    for token in name.split("_"):
        if re.fullmatch(r"v\d+", token):
            out.append(token)
            continue
        if token in _SIZE_WORDS:
            break
        if re.search(r"\d", token):
            letters = re.match(r"[a-z]*", token).group(0)
            if len(letters) > 1:
                out.append(letters)
            break
        out.append(token)
    return "_".join(out) or name


def _stable_share(text, modulo):
    return int(hashlib.sha1(text.encode()).hexdigest(), 16) % modulo


def _variants_for(model_id, kind):
    """About one model in three gets every image-model variant on its legacy export, and one in
    eight an onnxslim pass on its dynamo export; transformer encoders/decoders get ONNX
    Runtime's transformer optimiser (the step people apply to exactly those models)."""
    variants = {}
    if _stable_share(model_id, 3) == 0:
        variants["legacy"] = list(IMAGE_VARIANTS)
    if _stable_share(model_id + "/dynamo", 8) == 0:
        variants["dynamo"] = ["onnxslim"]
    if kind in ("text", "causal", "image_hf"):
        variants.setdefault("legacy", [])
        variants["legacy"] = variants["legacy"] + ["ort_transformer"]
    return variants


def spec(family, name, arch, build, inputs, exporters=EXPORTERS, variants=None, **extra):
    model_id = f"{family}/{name}"
    kind = inputs.get("kind")
    return {"id": model_id, "family": family, "name": name, "arch": f"{family}:{arch}",
            "build": build, "inputs": inputs, "exporters": list(exporters),
            "variants": variants if variants is not None else _variants_for(model_id, kind),
            **extra}


# timm ----------------------------------------------------------------------------------------

TIMM_LISTER = r'''
import json, sys, warnings
import torch, timm
from timm.models import _registry
warnings.simplefilter("ignore")
best = {}
for name in timm.list_models():
    module = _registry._model_to_module.get(name, name)
    try:
        with torch.device("meta"):
            model = timm.create_model(name, pretrained=False)
        params = sum(p.numel() for p in model.parameters())
    except Exception:
        continue
    if module not in best or params < best[module][1]:
        best[module] = (name, params)
with open(sys.argv[1], "w") as f:
    json.dump(best, f)
'''


def timm_smallest():
    """{module: (model name, parameters)}, computed in a child (it instantiates ~1400 models on
    the meta device) and cached."""
    path = os.path.join(cache.root(), "registry-timm.json")
    listing = cache.read_json(path)
    if listing is None:
        listing = _run_lister(TIMM_LISTER, path)
    return listing


def timm_specs():
    specs = []
    # Smallest first, so that a sweep stopped early has covered the most families.
    for module, (name, params) in sorted(timm_smallest().items(), key=lambda kv: kv[1][1]):
        specs.append(spec("timm", name, module, {"lib": "timm", "name": name},
                          {"kind": "image", "size": 96}, params=params))
    return specs


# torchvision ---------------------------------------------------------------------------------

TV_LISTER = r'''
import json, sys, warnings
import torch, torchvision
from torchvision import models
warnings.simplefilter("ignore")
out = {}
for task, module in (("classification", models), ("detection", models.detection),
                     ("segmentation", models.segmentation), ("video", models.video),
                     ("optical_flow", models.optical_flow)):
    for name in models.list_models(module=module):
        # weights_backbone=None too: its default is an ImageNet download.
        extra = {"weights_backbone": None} if task in ("detection", "segmentation") else {}
        try:
            with torch.device("meta"):
                m = models.get_model(name, weights=None, **extra)
            params = sum(p.numel() for p in m.parameters())
        except Exception:
            params = None
        out[name] = (task, params)
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
'''


def _run_lister(code, path):
    """Runs a listing script in a child (it instantiates many models) that writes JSON to
    path; libraries print to stdout, so the result does not travel that way."""
    tmp = path + ".partial"
    # A new machine has no cache folder yet, and the child's own error would name only the
    # file it could not open.
    os.makedirs(os.path.dirname(path), exist_ok=True)
    done = subprocess.run([sys.executable, "-c", code, tmp], capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"listing the registry for {os.path.basename(path)} failed:\n{tail}")
    os.replace(tmp, path)
    return cache.read_json(path)


def _torchvision_listing():
    """{name: (task, parameters)} of every torchvision model, computed in a child and cached."""
    path = os.path.join(cache.root(), "registry-torchvision.json")
    listing = cache.read_json(path)
    if listing is None:
        listing = _run_lister(TV_LISTER, path)
    return listing


# The inputs each torchvision task is built with (small images: the sweep runs on 2 cores).
_TV_INPUTS = {"classification": {"kind": "image", "size": 96},
              "detection": {"kind": "detection", "size": 128},
              "segmentation": {"kind": "image", "size": 96},
              "video": {"kind": "video", "size": 64, "frames": 8},
              "optical_flow": {"kind": "flow", "size": 128}}


def _torchvision_spec(name, task, params=None):
    return spec("torchvision", name, f"{task}:{family_of(name)}",
                {"lib": "torchvision", "name": name, "task": task}, _TV_INPUTS[task],
                params=params)


def torchvision_specs():
    listing = _torchvision_listing()
    best = {}
    for name, (task, params) in listing.items():
        key = (task, family_of(name))
        size = params if params is not None else float("inf")
        if key not in best or size < best[key][1]:
            best[key] = (name, size)
    return [_torchvision_spec(name, task, params)
            for (task, _), (name, params) in sorted(best.items(), key=lambda kv: kv[1][1])]


# transformers --------------------------------------------------------------------------------

_TEXT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 64, "vocab_size": 128, "max_position_embeddings": 64}
_VISION = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64, "image_size": 32, "patch_size": 8, "num_channels": 3}
_CNN = {"num_channels": 3, "hidden_sizes": [16, 32], "depths": [1, 1]}
_AUDIO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "conv_dim": [32, 32], "conv_stride": [5, 4],
          "conv_kernel": [10, 8], "num_conv_pos_embeddings": 16,
          "num_conv_pos_embedding_groups": 2, "vocab_size": 32}

# (model_type, auto class, input kind, config overrides). Kinds: text (encoder: input_ids +
# attention_mask), causal (decoder LM), seq2seq (+ decoder_input_ids), image_hf
# (pixel_values), audio (input_values in [-1, 1]), whisper (log-mel input_features), clip
# (input_ids + attention_mask + pixel_values).
TRANSFORMER_ARCHS = [
    ("bert", "AutoModel", "text", {}),
    ("roberta", "AutoModel", "text", {"pad_token_id": 1}),
    ("distilbert", "AutoModel", "text", {"dim": 32, "n_layers": 2, "n_heads": 2,
                                         "hidden_dim": 64}),
    ("albert", "AutoModel", "text", {"embedding_size": 16}),
    ("electra", "AutoModel", "text", {"embedding_size": 16}),
    ("deberta", "AutoModel", "text", {}),
    ("deberta-v2", "AutoModel", "text", {}),
    ("mpnet", "AutoModel", "text", {}),
    ("xlm-roberta", "AutoModel", "text", {"pad_token_id": 1}),
    ("convbert", "AutoModel", "text", {"embedding_size": 32}),
    ("squeezebert", "AutoModel", "text", {"embedding_size": 32, "q_groups": 2, "k_groups": 2,
                                          "v_groups": 2, "post_attention_groups": 2,
                                          "intermediate_groups": 2, "output_groups": 2}),
    ("roformer", "AutoModel", "text", {"embedding_size": 32}),
    ("mobilebert", "AutoModel", "text", {"embedding_size": 16, "intra_bottleneck_size": 32,
                                         "true_hidden_size": 32, "num_feedforward_networks": 1}),
    ("modernbert", "AutoModel", "text", {"global_attn_every_n_layers": 2,
                                         "local_attention": 16, "pad_token_id": 0,
                                         "bos_token_id": 1, "eos_token_id": 2,
                                         "cls_token_id": 1, "sep_token_id": 2}),
    ("gpt2", "AutoModelForCausalLM", "causal", {}),
    ("gpt_neo", "AutoModelForCausalLM", "causal", {"attention_types": [[["global", "local"], 1]],
                                                    "num_layers": 2, "window_size": 8}),
    ("gptj", "AutoModelForCausalLM", "causal", {"rotary_dim": 8}),
    ("opt", "AutoModelForCausalLM", "causal", {"ffn_dim": 64, "word_embed_proj_dim": 32}),
    ("bloom", "AutoModelForCausalLM", "causal", {"n_layer": 2, "n_head": 2}),
    ("llama", "AutoModelForCausalLM", "causal", {"num_key_value_heads": 1}),
    ("mistral", "AutoModelForCausalLM", "causal", {"num_key_value_heads": 1,
                                                   "sliding_window": None}),
    ("qwen2", "AutoModelForCausalLM", "causal", {"num_key_value_heads": 1}),
    ("qwen3", "AutoModelForCausalLM", "causal", {"num_key_value_heads": 1, "head_dim": 16}),
    ("phi", "AutoModelForCausalLM", "causal", {}),
    ("falcon", "AutoModelForCausalLM", "causal", {"new_decoder_architecture": False}),
    ("gemma", "AutoModelForCausalLM", "causal", {"num_key_value_heads": 1, "head_dim": 16}),
    ("codegen", "AutoModelForCausalLM", "causal", {"rotary_dim": 8, "n_ctx": 64}),
    ("gpt_neox", "AutoModelForCausalLM", "causal", {}),
    ("stablelm", "AutoModelForCausalLM", "causal", {"num_key_value_heads": 2}),
    ("olmo", "AutoModelForCausalLM", "causal", {}),
    ("biogpt", "AutoModelForCausalLM", "causal", {}),
    ("xglm", "AutoModelForCausalLM", "causal", {"d_model": 32, "ffn_dim": 64,
                                                "num_layers": 2}),
    ("t5", "AutoModelForSeq2SeqLM", "seq2seq", {"d_ff": 64, "d_kv": 16, "num_layers": 2,
                                                "num_decoder_layers": 2}),
    ("bart", "AutoModelForSeq2SeqLM", "seq2seq", {"encoder_layers": 2, "decoder_layers": 2,
                                                  "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
                                                  "encoder_attention_heads": 2,
                                                  "decoder_attention_heads": 2}),
    ("marian", "AutoModelForSeq2SeqLM", "seq2seq", {"encoder_layers": 2, "decoder_layers": 2,
                                                    "encoder_ffn_dim": 64,
                                                    "decoder_ffn_dim": 64,
                                                    "encoder_attention_heads": 2,
                                                    "decoder_attention_heads": 2,
                                                    "decoder_start_token_id": 0,
                                                    "pad_token_id": 0}),
    ("pegasus", "AutoModelForSeq2SeqLM", "seq2seq", {"encoder_layers": 2, "decoder_layers": 2,
                                                     "encoder_ffn_dim": 64,
                                                     "decoder_ffn_dim": 64,
                                                     "encoder_attention_heads": 2,
                                                     "decoder_attention_heads": 2}),
    ("mt5", "AutoModelForSeq2SeqLM", "seq2seq", {"d_ff": 64, "d_kv": 16, "num_layers": 2,
                                                 "num_decoder_layers": 2}),
    ("vit", "AutoModel", "image_hf", {}),
    ("deit", "AutoModel", "image_hf", {}),
    ("beit", "AutoModel", "image_hf", {}),
    ("dinov2", "AutoModel", "image_hf", {}),
    # Swin reads num_attention_heads as its per-stage num_heads: the list, not the default.
    ("swin", "AutoModel", "image_hf", {"embed_dim": 16, "depths": [1, 1],
                                       "num_heads": [1, 2], "num_attention_heads": [1, 2],
                                       "window_size": 2, "patch_size": 4}),
    # ConvNeXt counts its stages apart from hidden_sizes (default 4).
    ("convnext", "AutoModel", "image_hf", dict(_CNN, num_stages=2)),
    ("convnextv2", "AutoModel", "image_hf", dict(_CNN, num_stages=2)),
    ("resnet", "AutoModel", "image_hf", dict(_CNN, embedding_size=16)),
    ("regnet", "AutoModel", "image_hf", dict(_CNN, embedding_size=16, groups_width=8)),
    ("mobilevit", "AutoModel", "image_hf", {"image_size": 64, "hidden_sizes": [32, 32, 32],
                                            "neck_hidden_sizes": [8, 8, 16, 16, 32, 32, 64],
                                            "num_attention_heads": 2}),
    ("segformer", "AutoModel", "image_hf", {"num_encoder_blocks": 2, "depths": [1, 1],
                                            "sr_ratios": [2, 1], "hidden_sizes": [16, 32],
                                            "num_attention_heads": [1, 2],
                                            "patch_sizes": [7, 3], "strides": [4, 2],
                                            "mlp_ratios": [2, 2]}),
    ("poolformer", "AutoModel", "image_hf", {"depths": [1, 1], "hidden_sizes": [16, 32],
                                             "num_encoder_blocks": 2,
                                             "patch_sizes": [7, 3], "strides": [4, 2],
                                             "padding": [2, 1]}),
    # LeViT's patch embedding always downsamples 16x; its patch_size must say so.
    ("levit", "AutoModel", "image_hf", {"image_size": 64, "patch_size": 16,
                                        "hidden_sizes": [32, 48],
                                        "num_attention_heads": [2, 3], "depths": [1, 1],
                                        "key_dim": [8, 8], "drop_path_rate": 0,
                                        "mlp_ratio": [2, 2], "attention_ratio": [2, 2],
                                        "down_ops": [["Subsample", 8, 2, 2, 2, 2]]}),
    ("wav2vec2", "AutoModel", "audio", dict(_AUDIO)),
    ("hubert", "AutoModel", "audio", dict(_AUDIO)),
    ("wavlm", "AutoModel", "audio", dict(_AUDIO, num_buckets=16, max_bucket_distance=32)),
    ("data2vec-audio", "AutoModel", "audio", dict(_AUDIO)),
    ("whisper", "AutoModel", "whisper", {"d_model": 32, "encoder_layers": 2,
                                         "decoder_layers": 2, "encoder_attention_heads": 2,
                                         "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
                                         "decoder_ffn_dim": 64, "num_mel_bins": 16,
                                         "max_source_positions": 16,
                                         "max_target_positions": 32, "vocab_size": 128,
                                         "decoder_start_token_id": 1, "pad_token_id": 0,
                                         "bos_token_id": 1, "eos_token_id": 2,
                                         "suppress_tokens": None,
                                         "begin_suppress_tokens": None}),
    ("clip", "AutoModel", "clip", {"text_config": dict(_TEXT, max_position_embeddings=16),
                                   "vision_config": dict(_VISION), "projection_dim": 16}),
    ("siglip", "AutoModel", "clip", {"text_config": dict(_TEXT, max_position_embeddings=16),
                                     "vision_config": dict(_VISION)}),
]


def transformers_specs():
    specs = []
    for model_type, auto, kind, overrides in TRANSFORMER_ARCHS:
        config = dict(overrides) if kind in ("clip",) else dict(
            _VISION if kind == "image_hf" else _AUDIO if kind == "audio" else _TEXT, **overrides)
        if kind == "image_hf" and "hidden_sizes" in overrides:
            # Convolutional vision configs have no hidden_size/num_attention_heads of their own.
            config = {k: v for k, v in config.items()
                      if k not in ("hidden_size", "num_hidden_layers", "intermediate_size")}
        size = config.get("image_size", 32) if kind in ("image_hf", "clip") else None
        if kind == "clip":
            size = config["vision_config"]["image_size"]
        inputs = {"kind": kind, "seq": 16, "vocab": 128, "size": size,
                  "mel_bins": config.get("num_mel_bins"),
                  "mel_frames": 2 * config.get("max_source_positions", 0), "samples": 1600}
        specs.append(spec("transformers", model_type, model_type,
                          {"lib": "transformers", "model_type": model_type, "auto": auto,
                           "config": config}, inputs))
    return specs


# ultralytics ---------------------------------------------------------------------------------

ULTRALYTICS_YAMLS = [
    ("yolov8n.yaml", "detect", 128), ("yolov8n-seg.yaml", "segment", 128),
    ("yolov8n-pose.yaml", "pose", 128), ("yolov8n-obb.yaml", "obb", 128),
    ("yolov8n-cls.yaml", "classify", 64), ("yolo11n.yaml", "detect", 128),
    ("yolo11n-seg.yaml", "segment", 128), ("yolo11n-pose.yaml", "pose", 128),
    ("yolo11n-obb.yaml", "obb", 128), ("yolo11n-cls.yaml", "classify", 64),
    ("yolov10n.yaml", "detect", 128), ("yolov5nu.yaml", "detect", 128),
    ("yolov9t.yaml", "detect", 128), ("rtdetr-l.yaml", "detect", 128),
]


def ultralytics_specs():
    specs = []
    for yaml, task, size in ULTRALYTICS_YAMLS:
        name = yaml[:-5]
        arch = re.sub(r"n(u)?(-\w+)?$|t$|-l$", "", name) + f"-{task}"
        specs.append(spec("ultralytics", name, arch,
                          {"lib": "ultralytics", "yaml": yaml, "task": task},
                          {"kind": "image01", "size": size}, exporters=["ultralytics"],
                          variants={}))
    return specs


# facenet-pytorch -----------------------------------------------------------------------------

def facenet_specs():
    out = []
    for net, size, trained in (("pnet", 24, True), ("rnet", 24, True), ("onet", 48, True),
                               ("inception_resnet_v1", 96, False)):
        out.append(spec("facenet", net, net, {"lib": "facenet", "name": net,
                                               "trained": trained},
                        {"kind": "image_pm1", "size": size}))
    return out


# hazards ---------------------------------------------------------------------------------------

def hazards_specs():
    """Model classes the registries miss (issue 49), built from code: scripts/sweep/hazards.py."""
    from . import hazards
    return hazards.specs(spec)


FAMILIES = {"timm": timm_specs, "torchvision": torchvision_specs,
            "transformers": transformers_specs, "ultralytics": ultralytics_specs,
            "facenet": facenet_specs, "hazards": hazards_specs}


def all_specs(families=None):
    specs = []
    for name, make in FAMILIES.items():
        if families and name not in families:
            continue
        specs.extend(make())
    return specs


def named_specs(model_ids):
    """Specs of the models named by id (`timm/NAME`, `torchvision/NAME`, or the id of a
    transformers, Ultralytics or facenet spec), whichever member of its family each is: the
    sweep's own selection takes each family's smallest, so a named larger member is a model
    the fixes were not made against. Raises ValueError for an id no registry knows."""
    out = []
    for model_id in model_ids:
        family, _, name = model_id.partition("/")
        if family == "timm":
            out.append(spec(family, name, family_of(name), {"lib": "timm", "name": name},
                            {"kind": "image", "size": 96}))
        elif family == "torchvision":
            listing = _torchvision_listing()
            if name not in listing:
                raise ValueError(f"torchvision has no model {name!r}")
            out.append(_torchvision_spec(name, *listing[name]))
        elif family in FAMILIES:
            found = [s for s in FAMILIES[family]() if s["id"] == model_id]
            if not found:
                raise ValueError(f"no sweep spec {model_id!r} in {family}")
            out.extend(found)
        else:
            raise ValueError(f"{model_id!r}: the family must be one of {', '.join(FAMILIES)}")
    return out


# The CI slice: about ten small models that build and check in seconds, covering both
# exporters, Ultralytics' own, four post-export variants and every fault kind.
CI_SLICE = {"torchvision/resnet18": ["onnxslim", "fp16", "ort_extended"],
            "torchvision/mobilenet_v3_small": [], "timm/resnet10t": [],
            "timm/vit_tiny_patch16_224": [], "transformers/bert": ["ort_transformer"],
            "transformers/gpt2": [], "transformers/t5": [], "transformers/vit": [],
            "ultralytics/yolov8n": [], "facenet/pnet": []}


def ci_slice():
    """The slice's specs, built directly (not through the slow registry listings), with the
    variants above on their legacy exports."""
    out = []
    for model_id, variants in CI_SLICE.items():
        family, name = model_id.split("/", 1)
        if family == "torchvision":
            s = spec(family, name, f"classification:{family_of(name)}",
                     {"lib": "torchvision", "name": name, "task": "classification"},
                     {"kind": "image", "size": 64})
        elif family == "timm":
            s = spec(family, name, family_of(name), {"lib": "timm", "name": name},
                     {"kind": "image", "size": 64})
        else:
            s = next(x for x in FAMILIES[family]() if x["id"] == model_id)
        s["variants"] = {"legacy": list(variants)} if variants else {}
        s["ci"] = True
        out.append(s)
    return out
