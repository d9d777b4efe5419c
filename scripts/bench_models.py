#!/usr/bin/env python3
"""Builds and caches the networks that scripts/bench.py times.

Responsible for: constructing each benchmark network with seeded random weights (nothing is
downloaded; BatchNorm statistics and affine parameters randomised so that the exporter's
BatchNorm folding matters numerically), in eval mode, and writing into
`${ALIGN_CHECK_CACHE:-~/.cache/align-check}/bench/<name>/`:

    model.pt             torch.jit.trace of the network (what align-check takes as reference)
    model.onnx           legacy TorchScript-based exporter, opset 17 (what align-check checks)
    model.pt2            torch.export.export of the network, torch.export.save'd: bench.py's
                         (g), the .pt2 reference (issue 51)
    inputs.npz           the one input, keyed by the ONNX input name
    dynamo/model.onnx    the dynamo exporter's ONNX (ONNXProgram.save)
    dynamo/program.pt2   that ONNXProgram's ExportedProgram (torch.export.save), so that
                         bench.py can rebuild the ONNXProgram that verify_onnx_program needs
                         in a fresh process, without paying for (or measuring) the export
    manifest.json        what was built, export times, file sizes; its presence marks the
                         folder complete

The dynamo files are only for bench.py's (c) (verify_onnx_program): `--no-dynamo` leaves
them out, which halves the disk a large model takes (ViT-L/16: 2.4 GB instead of 4.8 GB)
and skips its slowest export. A folder whose manifest matches the current recipe
(RECIPE_VERSION, shape, seed) and holds the dynamo files when they are asked for is reused.
Run directly to build (or list) the models:

    .venv/bin/python scripts/bench_models.py [--models resnet50,vit_b_16,fpn_r18] [--force]
        [--no-dynamo]
"""

import argparse
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

# Bump when the way a model is built or exported changes: cached folders are then rebuilt.
RECIPE_VERSION = 1
SEED = 0


def cache_root() -> Path:
    base = os.environ.get("ALIGN_CHECK_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "align-check")
    return Path(base) / "bench"


# --- the networks ---------------------------------------------------------------------------

def _randomise_batchnorm(model, torch):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)


def build_resnet50(torch, torchvision):
    model = torchvision.models.resnet50(weights=None, num_classes=1000)
    return model, (1, 3, 224, 224), ["logits"]


def build_vit_b_16(torch, torchvision):
    model = torchvision.models.vit_b_16(weights=None, image_size=224, num_classes=1000)
    return model, (1, 3, 224, 224), ["logits"]


def build_vit_l_16(torch, torchvision):
    """The large model of the bench: 304M parameters, 1.2 GB of float32 weights per file."""
    model = torchvision.models.vit_l_16(weights=None, image_size=224, num_classes=1000)
    return model, (1, 3, 224, 224), ["logits"]


def build_fpn_r18(torch, torchvision):
    """A detector-like body: ResNet-18 trunk (layer1..layer4) + FeaturePyramidNetwork with the
    usual extra max-pooled level, returning the five 256-channel maps as a tuple (strides 4 to
    64; at 512x512 the largest is 1x256x128x128)."""
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.ops import FeaturePyramidNetwork
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

    class FPNBody(torch.nn.Module):
        def __init__(self):
            super().__init__()
            trunk = torchvision.models.resnet18(weights=None)
            self.body = IntermediateLayerGetter(
                trunk, return_layers={"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"})
            self.fpn = FeaturePyramidNetwork(
                in_channels_list=[64, 128, 256, 512], out_channels=256,
                extra_blocks=LastLevelMaxPool())

        def forward(self, x):
            maps = self.fpn(self.body(x))
            return tuple(maps.values())

    return FPNBody(), (1, 3, 512, 512), ["p2", "p3", "p4", "p5", "pool"]


MODELS = {
    "resnet50": build_resnet50,
    "vit_b_16": build_vit_b_16,
    "fpn_r18": build_fpn_r18,
    "vit_l_16": build_vit_l_16,
}
# The large model is opt-in (bench.py --models ...,vit_l_16): 2.4 GB of disk and about a
# minute per run on 2 cores.
DEFAULT_MODELS = ["resnet50", "vit_b_16", "fpn_r18"]


# --- export ---------------------------------------------------------------------------------

def _file_size(path: Path) -> int:
    total = path.stat().st_size
    data = Path(str(path) + ".data")
    if data.exists():
        total += data.stat().st_size
    return total


def build(name: str, force: bool = False, log=print, dynamo: bool = True) -> Path:
    """Returns the folder holding `name`'s files, building it unless a complete one is cached.
    `dynamo` asks for the dynamo exporter's files too (bench.py's verify needs them)."""
    folder = cache_root() / name
    manifest_path = folder / "manifest.json"
    if manifest_path.exists() and not force:
        try:
            manifest = json.loads(manifest_path.read_text())
            # Manifests from before `--no-dynamo` always had the dynamo files.
            has_dynamo = manifest.get("dynamo", True)
            # A folder from before the .pt2 reference (issue 51) lacks model.pt2.
            if manifest.get("recipe_version") == RECIPE_VERSION and (has_dynamo or not dynamo) \
                    and (folder / "model.pt2").exists():
                return folder
        except (OSError, ValueError):
            pass
    import numpy as np
    import torch
    import torchvision

    if folder.exists():
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "dynamo").mkdir(parents=True)

    log(f"[bench_models] building {name} into {folder}")
    torch.manual_seed(SEED)
    model, shape, output_names = MODELS[name](torch, torchvision)
    _randomise_batchnorm(model, torch)
    model.eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(*shape, generator=gen)
    times = {}

    # nn.MultiheadAttention's inference fast path (aten::_native_multi_head_attention, taken
    # under no_grad in eval mode) has no ONNX symbolic: the ViT's legacy export fails with it.
    # Off for tracing too, so that both files hold the same decomposed attention.
    if hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        traced = torch.jit.trace(model, (x,), check_trace=False)
        traced.save(str(tmp / "model.pt"))
        times["trace_s"] = time.perf_counter() - t

        t = time.perf_counter()
        torch.onnx.export(model, (x,), str(tmp / "model.onnx"), dynamo=False, opset_version=17,
                          input_names=["input"], output_names=output_names,
                          do_constant_folding=True)
        times["legacy_export_s"] = time.perf_counter() - t

    # The torch.export reference (issue 51): the program a user following PyTorch's advice
    # has, exported from the same module (fast path off, as for the trace).
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(model, (x,)), str(tmp / "model.pt2"))
    times["pt2_export_s"] = time.perf_counter() - t

    np.savez(tmp / "inputs.npz", input=x.numpy())

    if dynamo:
        # Dynamo export, as a user of torch.onnx.verification would run it (default optimize).
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(model, (x,), dynamo=True, input_names=["input"],
                                        output_names=output_names, verbose=False, report=False)
        times["dynamo_export_s"] = time.perf_counter() - t
        program.save(str(tmp / "dynamo" / "model.onnx"))
        torch.export.save(program.exported_program, str(tmp / "dynamo" / "program.pt2"))
        del program

    manifest = {
        "recipe_version": RECIPE_VERSION,
        "name": name,
        "seed": SEED,
        "input_name": "input",
        "input_shape": list(shape),
        "output_names": output_names,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dynamo": dynamo,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "sizes": {
            "model.pt": _file_size(tmp / "model.pt"),
            "model.onnx": _file_size(tmp / "model.onnx"),
            "model.pt2": _file_size(tmp / "model.pt2"),
        },
        "times": times,
    }
    if dynamo:
        manifest["sizes"]["dynamo/model.onnx"] = _file_size(tmp / "dynamo" / "model.onnx")
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
    tmp.rename(folder)
    log(f"[bench_models] {name}: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--no-dynamo", action="store_true",
                    help="leave out the dynamo export (only bench.py's verify reads it)")
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        if name not in MODELS:
            print(f"bench_models.py: unknown model {name!r}", file=sys.stderr)
            return 2
        print(build(name, force=args.force, dynamo=not args.no_dynamo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
