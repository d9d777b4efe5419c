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
two references disagree before any ONNX is involved is known as such. Ultralytics pairs carry
the library's own fused TorchScript, which no rebuilt module reproduces: they are recorded as
not attempted.
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
    path = os.path.join(folder, PT2)
    return path if record.get("status") == "ok" and os.path.exists(path) else None


def _load_weights(model, pt_path):
    """Copies the TorchScript's parameters and buffers into the rebuilt module; returns what
    did not match (an empty list when every tensor came from model.pt)."""
    import torch
    ts = torch.jit.load(pt_path)
    result = model.load_state_dict(ts.state_dict(), strict=False)
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
    if spec["build"]["lib"] == "ultralytics":
        cache.write_json(record_path(folder), {
            "status": "error", "stage": "not attempted",
            "error": "the TorchScript of the pair is the fused export Ultralytics writes"})
        return
    log = []
    start = time.time()
    try:
        with export.quiet():
            model, _, _, _ = export._prepare(spec, log)
            unmatched = _load_weights(model, os.path.join(folder, "model.pt"))
            with np.load(os.path.join(folder, "inputs.npz")) as z:
                names = (cache.read_json(os.path.join(folder, "meta.json")) or {}).get(
                    "input_names") or list(z.files)
                args = tuple(torch.from_numpy(z[n]) for n in names)
            from sweep import hazard_models
            with hazard_models.trace_context(spec["build"].get("trace_mode")):
                program = torch.export.export(model, args)
            torch.export.save(program, os.path.join(folder, PT2))
    except Exception as err:  # torch.export's many failure types all mean "not exportable"
        cache.write_json(record_path(folder), {"status": "error", "stage": "torch.export",
                                               "error": export.one_line(err),
                                               "export_s": time.time() - start})
        return
    with torch.no_grad():
        ts_out = build.flatten(torch.jit.load(os.path.join(folder, "model.pt"))(*args))
        ep_out = build.flatten(torch.export.load(os.path.join(folder, PT2)).module()(*args))
    cache.write_json(record_path(folder), {
        "status": "ok", "export_s": time.time() - start, "unmatched_weights": unmatched,
        "torch": torch.__version__, "vs_torchscript": _compare(ts_out, ep_out)})
