"""The sweep's second reference (issue 51): a torch.export `.pt2` of each model, written next to
its `model.pt` as `model.pt2`, with `pt2.json` saying whether torch.export took the model and,
when it did not, why (the report counts the architectures it exports).

It runs as a child (`python scripts/sweep.py _pt2 MODEL_ID`) like the export, and also for
models whose exports were cached before the sweep had this reference: the model is rebuilt from
its spec (export._prepare) and then given the cached TorchScript's parameters and buffers
(`load_state_dict` of `model.pt`), so that the program holds the very weights the TorchScript
and the ONNX files were made from. The export runs under the grad mode the TorchScript was
traced under (`trace_mode`), on the inputs the checks use (`inputs.npz`).

`pt2.json` also holds an independent check made here, without align-check: `ep.module()` against
the TorchScript module on those inputs, output by output (`vs_torchscript`), so a pair whose
two references disagree before any ONNX is involved is known as such.

Ultralytics pairs carry the library's own TorchScript, traced from the module its exporter
prepares (Conv+BN fused, the head in export mode), which no rebuilt module reproduces. Their
program is exported from that same prepared module: the library's `format="torchscript"`
export runs again with its tracing step wrapped, so that `torch.export.export(model, (im,))`
(what the library's own ExecuTorch and Core AI exports call) sees the module and example input
the trace sees, with the cached TorchScript's weights loaded into it. The archive sits beside
that TorchScript (`ultralytics/model.pt2`); `file` in pt2.json says where.
"""

import os
import time

import numpy as np

from sweep import build, cache, export

PT2 = "model.pt2"


def record_path(folder):
    return os.path.join(folder, "pt2.json")


def pt2_path(folder):
    """The model's .pt2 when torch.export took it, else None."""
    record = cache.read_json(record_path(folder)) or {}
    path = os.path.join(folder, record.get("file", PT2))
    return path if record.get("status") == "ok" and os.path.exists(path) else None


def _load_weights(model, pt_path):
    """Copies the TorchScript's parameters and buffers into the rebuilt module; returns what
    did not match (an empty list when every tensor came from model.pt)."""
    import collections

    import torch
    weights = collections.OrderedDict(torch.jit.load(pt_path).state_dict())
    # A TorchScript module's state_dict carries no module versions; a module whose loader
    # reads its version (torchvision's MNASNet rewrites a version-1 checkpoint's channel
    # counts) must see the rebuilt module's own, which the TorchScript was traced from.
    weights._metadata = model.state_dict()._metadata
    result = model.load_state_dict(weights, strict=False)
    return list(result.missing_keys) + list(result.unexpected_keys)


def _compare(ts_out, ep_out):
    if len(ts_out) != len(ep_out):
        return {"outputs_equal": False, "note": f"{len(ts_out)} TorchScript outputs, "
                                                f"{len(ep_out)} .pt2 outputs"}
    worst = 0.0
    for ref, test in zip(ts_out, ep_out):
        if ref.shape != test.shape:
            return {"outputs_equal": False, "note": f"shape {list(ref.shape)} vs "
                                                    f"{list(test.shape)}"}
        if ref.numel():
            worst = max(worst, float((ref.double() - test.double()).abs().max()))
    return {"outputs_equal": worst == 0.0, "max_abs_difference": worst}


def make(model_id):
    """Writes model.pt2 and pt2.json for one cached model."""
    import torch
    folder = cache.model_dir(model_id)
    spec = cache.read_json(os.path.join(folder, "spec.json"))
    # Where the archive goes: beside the TorchScript it is the twin of.
    file = os.path.join("ultralytics", PT2) if spec["build"]["lib"] == "ultralytics" else PT2
    pt_path = os.path.join(folder, os.path.dirname(file), "model.pt")
    log = []
    start = time.time()
    try:
        with np.load(os.path.join(folder, "inputs.npz")) as z:
            names = (cache.read_json(os.path.join(folder, "meta.json")) or {}).get(
                "input_names") or list(z.files)
            args = tuple(torch.from_numpy(z[n]) for n in names)
        with export.quiet():
            if spec["build"]["lib"] == "ultralytics":
                unmatched = _ultralytics_program(spec, pt_path, os.path.join(folder, file))
            else:
                model, _, _, _ = export._prepare(spec, log)
                unmatched = _load_weights(model, pt_path)
                from sweep import hazard_models
                with hazard_models.trace_context(spec["build"].get("trace_mode")):
                    program = torch.export.export(model, args)
                torch.export.save(program, os.path.join(folder, file))
    except Exception as err:  # torch.export's many failure types all mean "not exportable"
        cache.write_json(record_path(folder), {"status": "error", "stage": "torch.export",
                                               "error": export.one_line(err),
                                               "export_s": time.time() - start})
        return
    with torch.no_grad():
        ts_out = build.flatten(torch.jit.load(pt_path)(*args))
        ep_out = build.flatten(torch.export.load(os.path.join(folder, file)).module()(*args))
    cache.write_json(record_path(folder), {
        "status": "ok", "file": file, "export_s": time.time() - start,
        "unmatched_weights": unmatched, "torch": torch.__version__,
        "vs_torchscript": _compare(ts_out, ep_out)})


def _ultralytics_program(spec, pt_path, out_path):
    """Saves the program of the module Ultralytics' TorchScript export traces (see the top of
    this file); returns the weights the cached TorchScript did not supply."""
    import tempfile

    import torch
    import ultralytics.utils.export.torchscript as library_torchscript
    found = {}
    trace = library_torchscript.torch2torchscript

    def export_program_then_trace(model, im, output_file, **kwargs):
        found["unmatched"] = _load_weights(model, pt_path)
        torch.export.save(torch.export.export(model, (im,)), out_path)
        return trace(model, im, output_file, **kwargs)

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the exporter writes next to the yaml's name, in the working directory
        library_torchscript.torch2torchscript = export_program_then_trace
        try:
            yolo, _ = export.calibrated_ultralytics(spec)
            yolo.export(format="torchscript", imgsz=spec["inputs"]["size"], device="cpu")
        finally:
            library_torchscript.torch2torchscript = trace
            os.chdir(cwd)
    if "unmatched" not in found:
        raise RuntimeError("Ultralytics' TorchScript export did not reach its tracing step")
    return found["unmatched"]
