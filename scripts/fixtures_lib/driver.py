"""The one driver of the fixture families written as specs: the zoo (scripts/make_fixtures.py,
tests/fixtures/) and the library models (scripts/make_library_fixtures.py, tests/fixtures/lib/).

Responsible for everything those families do the same way: the seed of a spec, its eager model,
its TorchScript (traced with autograd.Functions inlined, or scripted), the clean exports, the
manifest entry read back from the written files, planting a fault into a copy of a clean
fixture, the numerical check of every fixture against TorchScript, the results table and
manifest.json. A family module states only what is its own: a `Family` (folder, model specs,
notes, rules), the fixtures no spec describes, and its faults.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import onnx
import torch

from fixtures_lib import export as ex
from fixtures_lib import verify
from fixtures_lib.manifest import entry, first_line, folder_size, fresh_folder


@dataclass
class Family:
    """One fixture family: where it is written and the rules its fixtures are made and checked by.

    `specs` maps a spec name to dict(make, inputs, outputs, exporters, exercises, notes) and
    optionally seed_of (share another spec's weights), scripted, trace_kwargs, opset,
    dynamic_batch, check (called on the eager model and inputs before export).
    """

    root: str
    specs: dict
    dynamo_notes: dict = field(default_factory=dict)
    # Why the expected dynamo failures happen (the exception text alone is cryptic).
    dynamo_failure_notes: dict = field(default_factory=dict)
    # (model, example inputs) -> the model: applied to every freshly built eager model (the
    # zoo recalibrates BatchNorm statistics on the inputs).
    prepare: Callable = lambda model, inputs: model
    # The opset of legacy exports when a spec names none (None: export_onnx's default).
    legacy_opset: Optional[int] = None
    # (model.pt path, eager model) -> the manifest fields naming TorchScript's module paths.
    modules: Callable = None
    # ONNX model of a dynamo export -> its manifest field dynamo_name_scopes.
    dynamo_scopes: Callable = None
    # The library family's manifest also states each fault's kind, planted op and whether it
    # is visible at the outputs (tests/library_fixtures.rs reads them).
    full_fault_fields: bool = False
    clean_atol: float = 1e-4
    # Clean tolerance scaled by max(1, max |output|) and recorded as clean_tolerance.
    clean_relative: bool = False
    fault_min_out: float = 1e-3
    fault_min_rel: float = 0.0
    # True when the family owns its whole folder (cleared first), not a share of tests/fixtures.
    owns_root: bool = False
    max_total_bytes: Optional[int] = None
    name_width: int = 28
    # Filled while the family is made.
    manifest: list = field(default_factory=list)
    # fixture name -> (spec name, builder if not the spec's): the eager model a fixture came
    # from, so that a fault derived from it can rebuild that model for its expected_modules.
    origin: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)

    def entry_named(self, name):
        return next(e for e in self.manifest if e["name"] == name)

    def path(self, name, file=None):
        return os.path.join(self.root, name, file) if file else os.path.join(self.root, name)


def pin_hash_seed():
    """Re-executes the script with PYTHONHASHSEED=0 unless it already runs with it.

    Why: torch.jit.script writes a module's constants in set order, which follows Python's
    per-process string hash seed: without a fixed seed a scripted model.pt differs every run.
    """
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)


def seed_for(spec_name, spec=None):
    """The RNG seed of a spec: a function of its name (or of `seed_of`) alone, so every variant
    of a model and every fault derived from it share weights and inputs exactly."""
    return zlib.crc32((spec or {}).get("seed_of", spec_name).encode()) & 0x7FFFFFFF


def build_model(family, spec_name, make=None):
    """Fresh eager model + inputs, deterministic for the spec, in eval mode."""
    spec = family.specs[spec_name]
    torch.manual_seed(seed_for(spec_name, spec))
    model, inputs = (make or spec["make"])()
    return family.prepare(model, inputs).eval(), inputs


def to_torchscript(spec, model, inputs):
    """torch.jit.script for a scripted spec, else a trace with autograd.Functions inlined."""
    if spec.get("scripted"):
        return torch.jit.script(model)
    return ex.trace_inlining_autograd_functions(model, inputs, **spec.get("trace_kwargs", {}))


def describe(family, e, path, eager_model):
    """Fills the manifest fields that are read back from the files written."""
    model = onnx.load(os.path.join(path, "model.onnx"))
    onnx.checker.check_model(model)
    e["opset"] = ex.onnx_opset(model)
    ins, outs = ex.onnx_signature(model)
    feeds = ex.load_inputs(os.path.join(path, "inputs.npz"))
    e["inputs"] = [{"name": i["name"], "shape": list(feeds[i["name"]].shape),
                    "dtype": str(feeds[i["name"]].dtype), "onnx_shape": i["onnx_shape"]}
                   for i in ins]
    e["outputs"] = [o["name"] for o in outs]
    e.update(family.modules(os.path.join(path, "model.pt"), eager_model))
    e["onnx_ops"] = sorted({n.op_type for n in model.graph.node})
    if e["exporter"] == "dynamo":
        e["dynamo_name_scopes"] = family.dynamo_scopes(e["name"], model)
    e["size_bytes"] = folder_size(path)
    return e


def make_clean(family, spec_name, exporter):
    """One clean fixture `<spec>_<exporter>`; a failed dynamo export is recorded, not fatal."""
    spec = family.specs[spec_name]
    name = f"{spec_name}_{exporter}"
    family.origin[name] = (spec_name, None)
    notes = spec["notes"] + (family.dynamo_notes.get(spec_name, "")
                             if exporter == "dynamo" else "")
    spec = dict(spec, notes=notes)
    model, inputs = build_model(family, spec_name)
    if "check" in spec:
        spec["check"](model, inputs)
    path = fresh_folder(family.root, name)
    try:
        ts = to_torchscript(spec, model, inputs)
        ts.save(os.path.join(path, "model.pt"))
        # The legacy exporter takes the ScriptModule itself for scripted models (that is the
        # case to exercise: ONNX Loop/If); dynamo needs an eager module. That one is a fresh
        # copy (same seed, same weights): tracing runs forward, and modules that cache state
        # there (Ultralytics' Detect keeps the traced input shape and anchors) would hand the
        # exporter traced values.
        if spec.get("scripted") and exporter == "legacy":
            source = ts
        else:
            source = build_model(family, spec_name)[0]
        opset = spec.get("opset", family.legacy_opset if exporter == "legacy" else None)
        ex.export_onnx(source, inputs, os.path.join(path, "model.onnx"), exporter,
                       spec["inputs"], spec["outputs"], opset=opset,
                       dynamic_batch=spec.get("dynamic_batch", False))
    except Exception as err:  # only dynamo failures are tolerated (recorded in the manifest)
        shutil.rmtree(path, ignore_errors=True)
        if exporter != "dynamo":
            raise
        reason = f"{type(err).__name__}: {first_line(err)}"
        if spec_name in family.dynamo_failure_notes:
            reason += " -- " + family.dynamo_failure_notes[spec_name]
        return entry(name, exporter, spec, export_error=reason)
    ex.save_inputs(os.path.join(path, "inputs.npz"), spec["inputs"], inputs)
    e = describe(family, entry(name, exporter, spec), path, model)
    if "bn_fusion" in spec["exercises"]:
        fused = "BatchNormalization" not in e["onnx_ops"]
        assert fused or exporter == "dynamo", f"{name}: legacy export did not fuse BN"
        if not fused:
            e["notes"] += " BatchNormalization nodes were NOT fused by this exporter."
    return e


def copy_pair(family, name, source):
    """A fresh folder `name` holding `source`'s model.pt and inputs.npz."""
    path = fresh_folder(family.root, name)
    for f in ("model.pt", "inputs.npz"):
        shutil.copyfile(family.path(source, f), os.path.join(path, f))
    return path


def make_fault(family, name, source, description, expected_module, edit=None, export=None,
               kind=None, extra=None, invisible=False, min_out=None, min_rel=None):
    """A planted fault: `source`'s model.pt and inputs.npz with a changed model.onnx.

    `edit(model) -> planted ONNX node name` edits a copy of the clean ONNX; `export(path)`
    instead writes a fresh, wrongly exported model.onnx and returns the planted node's name.
    The check later requires that node to be the first ONNX node departing from the clean
    export, the outputs to move by more than `min_out` (the family's default) and the node by
    more than `min_rel` of its range; an `invisible` fault must instead vanish at the outputs.
    """
    path = copy_pair(family, name, source)
    onnx_path = os.path.join(path, "model.onnx")
    if export is None:
        model = onnx.load(family.path(source, "model.onnx"))
        planted = edit(model)
        onnx.save(model, onnx_path)
    else:
        planted = export(onnx_path)
        model = onnx.load(onnx_path)
    base = family.entry_named(source)
    fault = {"description": description}
    if family.full_fault_fields:
        fault["kind"] = kind
    fault.update(expected_module=expected_module, source_fixture=source, onnx_node=planted)
    op = next(n.op_type for n in model.graph.node if n.name == planted)
    if family.full_fault_fields:
        fault["expected_onnx_op"] = op
    fault.update(extra or {})
    if "completing_onnx_op" in fault:
        # align-check may report the node that completes the decomposed torch op rather than
        # the partial node that was changed; either names the right place.
        fault["expected_onnx_ops_any"] = [op, fault["completing_onnx_op"]]
    if family.full_fault_fields:
        fault["invisible_at_outputs"] = invisible
    spec_name, make = family.origin[source]
    spec = dict(family.specs[spec_name], notes=f"Planted fault on {source}: {description}")
    eager, _ = build_model(family, spec_name, make=make)
    e = describe(family, entry(name, base["exporter"], spec, fault=fault), path, eager)
    e["exercises"] = list(base["exercises"])
    if "pipeline" in base:
        e["pipeline"] = base["pipeline"]
    for m in [expected_module] + fault.get("expected_modules_any", []):
        # An empty module path is a top-level op, which has no module to list.
        assert m == "" or m in e["expected_modules"], \
            f"{name}: {m!r} not among TorchScript module paths"
    family.thresholds[name] = dict(
        invisible=invisible,
        min_out=family.fault_min_out if min_out is None else min_out,
        min_rel=family.fault_min_rel if min_rel is None else min_rel)
    return e


# Checks ---------------------------------------------------------------------------------------

# At the outputs, for the fault designed to vanish there, and at its planted node (absolute).
INVISIBLE_MAX_DIFF = 1e-4
INVISIBLE_MIN_NODE = 1e-2


def check(family, e):
    """(ok, max output diff, message) for one produced manifest entry.

    Clean: ONNX Runtime (both optimisation levels) agrees with TorchScript at the outputs.
    Fault: the planted node is the first ONNX node departing from the clean export, and the
    fault is visible at the outputs (or, for the one designed to be, invisible there).
    """
    path = family.path(e["name"])
    feeds = ex.load_inputs(os.path.join(path, "inputs.npz"))
    names = [i["name"] for i in e["inputs"]]
    model_pt, model_onnx = os.path.join(path, "model.pt"), os.path.join(path, "model.onnx")
    diff = verify.max_output_diff(model_pt, model_onnx, feeds, names)
    if e["fault"] is None:
        if not family.clean_relative:
            return diff <= family.clean_atol, diff, ""
        # Relative to the output's magnitude when that exceeds 1 (YOLO's boxes are in
        # pixels, up to 64): float32 sums of that size round at ~1e-6 relative.
        ref_max = max(float(np.max(np.abs(r)))
                      for r in verify.run_torchscript(model_pt, feeds, names))
        tol = family.clean_atol * max(1.0, ref_max)
        e["clean_tolerance"] = {"max_abs_diff": float(f"{diff:.3g}"),
                                "output_max_abs": float(f"{ref_max:.3g}"),
                                "tolerance": float(f"{tol:.3g}")}
        return diff <= tol, diff, f"tol {tol:.1e}"
    f = e["fault"]
    th = family.thresholds[e["name"]]
    clean = family.path(f["source_fixture"], "model.onnx")
    # Masked attention scores are -inf in both graphs: their difference is NaN, which
    # first_divergent_node rightly does not count as a divergence; no need to warn about it.
    with np.errstate(invalid="ignore"):
        node, node_diff, node_range = verify.first_divergent_node(clean, model_onnx, feeds)
    rel = node_diff / node_range if node_range else float("inf")
    # Recorded so tests can size their expectations: how loud the fault is where it starts.
    f["measured_at_onnx_node"] = {"max_abs_diff": float(f"{node_diff:.3g}"),
                                  "rel_to_range": float(f"{rel:.3g}")}
    f["measured_at_outputs"] = {"max_abs_diff": float(f"{diff:.3g}")}
    if th["invisible"]:
        ok = diff < INVISIBLE_MAX_DIFF and node_diff > INVISIBLE_MIN_NODE
    else:
        ok = diff > th["min_out"] and rel > th["min_rel"]
    ok = ok and node == f["onnx_node"]
    return ok, diff, (f"first divergent ONNX node {node} ({node_diff:.2e}, {rel:.1e} of "
                      f"range){' [invisible at outputs]' if th['invisible'] else ''}")


def check_all(family):
    """Checks every fixture made, prints one line each; returns the number that failed."""
    w = family.name_width
    failures = 0
    print(f"{'fixture':{w}} {'exp':6} {'opset':5} {'size':>8} {'max|torch-ort|':>14}  result")
    for e in family.manifest:
        if e["export_error"]:
            print(f"{e['name']:{w}} {e['exporter']:6} {'-':5} {'-':>8} {'-':>14}  "
                  f"SKIPPED export failed: {e['export_error'][:90]}")
            continue
        try:
            ok, diff, msg = check(family, e)
        except Exception:
            ok, diff, msg = False, float("nan"), traceback.format_exc().splitlines()[-1]
        failures += not ok
        kind = "fault" if e["fault"] else "clean"
        print(f"{e['name']:{w}} {e['exporter']:6} {e['opset']:<5} {e['size_bytes']:>8} "
              f"{diff:>14.3e}  {'ok' if ok else 'FAIL'} ({kind}) {msg}")
    return failures


def run(family, extras=(), faults=lambda: []):
    """Makes the family: every spec with each of its exporters, then `extras` (callables
    returning one entry each: fixtures no spec describes), then `faults()` (a list of
    entries); checks them all, writes manifest.json. Returns the exit status (1: a check
    failed)."""
    torch.set_num_threads(2)
    t0 = time.time()
    if family.owns_root:
        shutil.rmtree(family.root, ignore_errors=True)
    os.makedirs(family.root, exist_ok=True)
    for spec_name, spec in family.specs.items():
        for exporter in spec["exporters"]:
            family.manifest.append(make_clean(family, spec_name, exporter))
    for make in extras:
        family.manifest.append(make())
    family.manifest.extend(faults())
    failures = check_all(family)
    # Written after the checks, which add the measured fault sizes.
    with open(os.path.join(family.root, "manifest.json"), "w") as f:
        json.dump(family.manifest, f, indent=2)
        f.write("\n")
    made = [e for e in family.manifest if not e["export_error"]]
    if family.owns_root:
        total = int(subprocess.run(["du", "-sb", family.root], capture_output=True, text=True,
                                   check=True).stdout.split()[0])
    else:
        total = sum(e["size_bytes"] for e in made)
    if family.max_total_bytes is not None and total > family.max_total_bytes:
        print(f"FAIL: {family.root} holds {total} bytes, over {family.max_total_bytes}")
        failures += 1
    print(f"total size {total} bytes ({total / 2**20:.2f} MiB) in {len(made)} fixtures; "
          f"{time.time() - t0:.0f} s; {failures} check(s) failed")
    return 1 if failures else 0
