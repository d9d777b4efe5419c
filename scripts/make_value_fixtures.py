#!/usr/bin/env python3
"""Regenerates the value-kind fixtures (tests/fixtures/vk_<name>_<exporter>/) and
tests/fixtures/value_kinds.json, the table tests/value_kinds.rs reads.

The models are in fixtures_lib/value_kinds.py: fp16/bf16/fp64 weights, integer and bool
tensors, zero-size and 0-d values, tuple/list/dict/nested outputs, an argument the forward
ignores, a non-tensor (int) output, NaN/Inf inputs. Each is exported with the legacy exporter
and, where it works, dynamo; an exporter failure is recorded with its reason (no files), like
manifest.json does. Each written pair is then run by ONNX Runtime (CPU, optimisations off, as
align-check runs it) and TorchScript; whether ORT could run it at all and the largest output
difference are recorded, so the expectations in the table rest on measured facts.

Each folder holds model.pt, model.onnx and inputs.npz (keyed by ONNX input names; none for
bf16, which numpy cannot store), plus inputs_all_arguments.npz where the ONNX export dropped a
forward argument (every argument, the dropped one included).

Run with the pinned interpreter: .venv/bin/python scripts/make_value_fixtures.py
It touches only tests/fixtures/vk_*/ and tests/fixtures/value_kinds.json.
"""

import json
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import torch

from fixtures_lib import driver
from fixtures_lib import export as ex
from fixtures_lib import value_kinds as vk
from fixtures_lib.manifest import first_line, fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


def build(spec_name):
    torch.manual_seed(driver.seed_for(spec_name))
    model, inputs = vk.SPECS[spec_name]["make"]()
    return model.eval(), inputs


def numpy_of(t):
    # numpy has no bfloat16; float32 is good enough for `measure` (ONNX Runtime refuses the
    # bf16 model before any input is read).
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.detach().cpu().numpy()


def flatten(value):
    """Tensors of a (possibly nested) tuple/list/dict output in order; other leaves as is."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flatten(v)]
    return [value]


def measure(path, feeds, ts_inputs, ts):
    """(ort_runs, ort_error, max |torch - ort| over float outputs) for one written pair."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(os.path.join(path, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as err:  # the bf16 case: no kernel
        return False, first_line(err), None
    got = sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})
    with torch.no_grad():
        ref = flatten(ts(*ts_inputs))
    diff = 0.0
    for r, g in zip(ref, got):
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point and r.numel():
            r = r.double().numpy()
            both = np.isfinite(r) & np.isfinite(g)
            if both.any():
                diff = max(diff, float(np.max(np.abs(r[both] - g[both]))))
    return True, None, diff


def make(spec_name, exporter):
    spec = vk.SPECS[spec_name]
    name = f"vk_{spec_name}_{exporter}"
    entry = {"name": name, "kind": spec_name, "exporter": exporter, "notes": spec["notes"],
             "expect": spec.get(f"expect_{exporter}", spec["expect"]), "export_error": None}
    model, inputs = build(spec_name)
    path = fresh_folder(FIXTURES, name)
    try:
        ts = driver.to_torchscript(spec, model, inputs)
        ts.save(os.path.join(path, "model.pt"))
        source = ts if spec.get("scripted") else model
        onnx_inputs = inputs
        if "onnx_source" in spec:  # an ONNX model of a different forward (used_arg)
            source = spec["onnx_source"](model)
            onnx_inputs = inputs[:1]
        ex.export_onnx(source, onnx_inputs, os.path.join(path, "model.onnx"), exporter,
                       spec["inputs"][:len(onnx_inputs)], spec["outputs"])
    except Exception as err:
        shutil.rmtree(path, ignore_errors=True)
        entry["export_error"] = first_line(err)
        return entry
    onnx_model = onnx.load(os.path.join(path, "model.onnx"))
    ins, outs = ex.onnx_signature(onnx_model)
    onnx_inputs = [i["name"] for i in ins]
    # inputs.npz holds what the ONNX model takes, keyed by its names; a TorchScript-only
    # argument (dropped by the exporter) is not in it.
    feeds = {n: numpy_of(t) for n, t in zip(spec["inputs"], inputs) if n in onnx_inputs}
    # numpy has no bfloat16: a bf16 model gets no inputs.npz and is checked on align-check's
    # own seeded inputs.
    entry["inputs_npz"] = not any(t.dtype == torch.bfloat16 for t in inputs)
    if entry["inputs_npz"]:
        np.savez(os.path.join(path, "inputs.npz"), **feeds)
    if len(onnx_inputs) < len(spec["inputs"]) and "onnx_source" not in spec:
        # Every forward argument, the dropped one too: what a user saving the Python call's
        # arguments has; align-check must take the dropped one's data from it.
        np.savez(os.path.join(path, "inputs_all_arguments.npz"),
                 **{n: numpy_of(t) for n, t in zip(spec["inputs"], inputs)})
    entry["opset"] = ex.onnx_opset(onnx_model)
    entry["onnx_inputs"] = ins
    entry["onnx_outputs"] = outs
    entry["torch_arguments"] = list(spec["inputs"])
    entry["ort_runs"], entry["ort_error"], diff = measure(path, feeds, inputs, ts)
    entry["max_output_diff"] = None if diff is None else float(f"{diff:.3g}")
    entry["size_bytes"] = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return entry


def main():
    driver.pin_hash_seed()
    torch.set_num_threads(2)
    table = []
    print(f"{'fixture':26} {'size':>6} {'ort':4} {'max diff':>9}  note")
    for spec_name, spec in vk.SPECS.items():
        for exporter in spec["exporters"]:
            e = make(spec_name, exporter)
            table.append(e)
            if e["export_error"]:
                print(f"{e['name']:26} {'-':>6} {'-':4} {'-':>9}  export failed: "
                      f"{e['export_error'][:90]}")
            else:
                diff = "-" if e["max_output_diff"] is None else f"{e['max_output_diff']:.2e}"
                print(f"{e['name']:26} {e['size_bytes']:>6} {'yes' if e['ort_runs'] else 'no':4} "
                      f"{diff:>9}  {e['ort_error'] or ''}"[:160])
    with open(os.path.join(FIXTURES, "value_kinds.json"), "w") as f:
        json.dump(table, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
