"""The export child: builds one model, gives it trained-like statistics, and writes its files
into the model's cache folder (cache.py): `model.pt`, `inputs.npz`, `meta.json`, and per
exporter and variant a folder with `model.onnx` and `pair.json`.

It runs in its own process (`python scripts/sweep.py _export SPEC.json`) under a timeout, so a
model that crashes, hangs or eats memory costs only itself. Everything already in the folder is
kept: a rerun only makes what is missing, which is what makes the sweep resumable.

Every pair's `pair.json` says `status` (`ok` or `error`; a file ONNX Runtime cannot load or run
is an error too) and, when ok, an independent check made
here, without align-check: ONNX Runtime (optimisations off) against the TorchScript module on
the same inputs, output by output, with align-check's element tolerance for the pair's
precision (`reference`). A pair that fails it is a real divergence, not a false alarm, should
align-check report one. An export that fails is recorded with the exporter's error (its type
and first line) and never counted as a pair.
"""

import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from sweep import build, cache, calibration, overflow, variants  # noqa: E402

TOLERANCE = {"float32": (1e-5, 1e-4), "float16": (1e-2, 1e-2)}


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(err):
    text = ANSI.sub("", str(err)).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(err).__name__}: {first[:300]}"


def within_tolerance(ref, test, precision):
    atol, rtol = TOLERANCE[precision]
    ref = np.asarray(ref, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    if ref.shape != test.shape:
        return False, float("inf")
    if ref.size == 0:
        return True, 0.0
    finite = np.isfinite(ref) & np.isfinite(test)
    if not np.array_equal(np.isfinite(ref), np.isfinite(test)):
        return False, float("inf")
    r, t = ref[finite], test[finite]
    if r.size == 0:
        return True, 0.0
    peak = float(np.abs(r).max())
    diff = np.abs(t - r)
    ok = bool(np.all(diff <= atol * max(1.0, peak) + rtol * np.abs(r)))
    return ok, float(diff.max() / peak) if peak > 0 else float(diff.max())


def reference_check(pt_path, onnx_path, feeds, precision, optimised=False):
    """ONNX Runtime vs TorchScript, per output: optimisations off, as align-check compares
    layers; with `optimised`, every optimisation on, as align-check's production session
    runs it (a rewrite of ONNX Runtime's own that changes outputs is a real divergence)."""
    import onnxruntime as ort
    import torch
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimised \
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    ort_out = sess.run(None, {n: feeds[n] for n in names if n in feeds})
    ts = torch.jit.load(pt_path)
    with torch.no_grad():
        ts_out = build.flatten(ts(*[torch.from_numpy(feeds[n]) for n in feeds]))
    if len(ts_out) != len(ort_out):
        return {"outputs_within_tolerance": False,
                "note": f"{len(ts_out)} TorchScript outputs, {len(ort_out)} ONNX outputs"}
    worst, ok = 0.0, True
    for ref, test in zip(ts_out, ort_out):
        if not ref.is_floating_point():
            good = np.array_equal(ref.numpy(), test)
            rel = 0.0 if good else float("inf")
        else:
            good, rel = within_tolerance(ref.float().numpy(), test, precision)
        ok, worst = ok and good, max(worst, rel)
    return {"outputs_within_tolerance": ok, "worst_output_rel_to_range": worst}


@contextlib.contextmanager
def quiet():
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), \
            contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        yield sink


def _save_inputs(path, inputs):
    np.savez(path, **{k: v.detach().cpu().numpy() for k, v in inputs.items()})


def _load_inputs(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _record_pair(folder, record):
    cache.write_json(os.path.join(folder, "pair.json"), record)


def make_inputs(inputs_spec, batch, seed):
    """calibration.make_inputs, and the hazards family's own inputs (hazard_models.py)."""
    if inputs_spec.get("kind") == "hazard":
        from sweep import hazard_models
        return hazard_models.make_inputs(inputs_spec, batch, seed)
    return calibration.make_inputs(inputs_spec, batch, seed)


def _prepare(spec, log):
    """Builds the model at the first size it accepts and calibrates it; returns
    (model, inputs spec, calibration record, export inputs)."""
    import torch
    errors = []
    names = list(make_inputs(spec["inputs"], 1, 0))
    for size, frames in build.size_candidates(spec):
        try:
            torch.manual_seed(0)
            with quiet():
                model, inputs_spec = build.build_model(spec, size, frames, names)
                batches = [make_inputs(inputs_spec, calibration.CALIBRATION_BATCH_SIZE, s)
                           for s in range(1, calibration.CALIBRATION_BATCHES + 1)]

                def run_batch(b):
                    return model(*b.values())

                record = calibration.calibrate(model, run_batch, batches)
                export_inputs = make_inputs(inputs_spec, 1, 100)
                with torch.no_grad():
                    model(*export_inputs.values())
            return model, inputs_spec, record, export_inputs
        except Exception as err:  # the next size may work; all errors are reported
            errors.append(f"size {size}: {one_line(err)}")
            log.append(traceback.format_exc(limit=3))
    raise RuntimeError("model could not run: " + " | ".join(errors))


def _torchscript(model, inputs, build_spec):
    """The TorchScript module: torch.jit.script when the spec says `script`, else
    torch.jit.trace, under the grad mode of `trace_mode` (hazards family: PyTorch's fused
    attention fast path is only taken under no_grad / inference_mode)."""
    import torch
    from fixtures_lib.export import trace_inlining_autograd_functions
    if build_spec.get("script"):
        return torch.jit.script(model)
    from sweep import hazard_models
    with hazard_models.trace_context(build_spec.get("trace_mode")):
        return trace_inlining_autograd_functions(model, list(inputs.values()),
                                                 check_trace=False, strict=False)


def export_torch_side(spec, folder, log):
    """model.pt, inputs.npz, meta.json of a library whose pairs share one TorchScript.
    Returns (model, inputs, scripted module or None): the legacy exporter takes the scripted
    module where there is one, so that its Loop/If reach the ONNX file."""
    import torch
    model, inputs_spec, record, inputs = _prepare(spec, log)
    start = time.time()
    with quiet():
        ts = _torchscript(model, inputs, spec["build"])
        torch.jit.save(ts, os.path.join(folder, "model.pt"))
    _save_inputs(os.path.join(folder, "inputs.npz"), inputs)
    meta = {"spec": spec, "inputs_spec": inputs_spec, "calibration": record,
            "trace_s": time.time() - start, "input_names": list(inputs),
            **{k: spec["build"][k] for k in ("script", "trace_mode") if k in spec["build"]}}
    cache.write_json(os.path.join(folder, "meta.json"), meta)
    return model, inputs, (ts if spec["build"].get("script") else None)


def export_onnx_pair(model, inputs, exporter, pair_folder):
    from fixtures_lib.export import export_onnx
    os.makedirs(pair_folder, exist_ok=True)
    start = time.time()
    out_names = [f"output_{i}" for i in range(len(model(*inputs.values())))]
    path = os.path.join(pair_folder, "model.onnx")
    opset = export_onnx(model, list(inputs.values()), path, exporter, list(inputs), out_names)
    return {"exporter": exporter, "opset": opset, "export_s": time.time() - start}


def calibrated_ultralytics(spec):
    """The Ultralytics model object of a spec, seeded and with its BatchNorm recalibrated
    (the calibration record beside it); its exporters fuse Conv+BN themselves."""
    import torch
    from ultralytics import RTDETR, YOLO
    build_spec = spec["build"]
    torch.manual_seed(0)
    if build_spec["yaml"].startswith("rtdetr"):
        yolo = RTDETR(build_spec["yaml"])  # its own class; it takes no task
    else:
        yolo = YOLO(build_spec["yaml"], task=build_spec["task"])
    model = yolo.model
    batches = [calibration.make_inputs(spec["inputs"], 2, s) for s in range(1, 5)]
    return yolo, calibration.calibrate(model, lambda b: model(b["images"]), batches)


def ultralytics_pair(spec, folder, log):
    """Ultralytics' own exporters, on the calibrated model: format=torchscript and format=onnx
    (Conv+BN fused by the library before tracing; onnxslim applied by the library)."""
    size = spec["inputs"]["size"]
    pair_folder = os.path.join(folder, "ultralytics")
    os.makedirs(pair_folder, exist_ok=True)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp, quiet():
        os.chdir(tmp)  # the exporter writes next to the yaml's name, in the working directory
        try:
            yolo, record = calibrated_ultralytics(spec)
            start = time.time()
            ts = yolo.export(format="torchscript", imgsz=size, device="cpu")
            ox = yolo.export(format="onnx", imgsz=size, device="cpu")
            shutil.move(ts, os.path.join(pair_folder, "model.pt"))
            shutil.move(ox, os.path.join(pair_folder, "model.onnx"))
        finally:
            os.chdir(cwd)
    inputs = calibration.make_inputs(spec["inputs"], 1, 100)
    _save_inputs(os.path.join(folder, "inputs.npz"), inputs)
    cache.write_json(os.path.join(folder, "meta.json"),
                     {"spec": spec, "inputs_spec": spec["inputs"], "calibration": record,
                      "input_names": list(inputs)})
    return {"exporter": "ultralytics", "export_s": time.time() - start,
            "pt": os.path.join(pair_folder, "model.pt")}


def add_optimised_reference(folder, pair):
    """Child: adds `reference_optimised` (reference_check with every optimisation on) to a
    cached pair.json."""
    path = os.path.join(folder, pair, "pair.json")
    record = cache.read_json(path)
    feeds = _load_inputs(os.path.join(folder, "inputs.npz"))
    record["reference_optimised"] = reference_check(
        record["pt"], os.path.join(folder, pair, "model.onnx"), feeds,
        record.get("precision", "float32"), optimised=True)
    cache.write_json(path, record)


def add_overflow_reference(folder, pair):
    """Child: adds `reference.float16_overflow` (overflow.py) to a cached float16 variant's
    pair.json, made from the float32 export it was converted from."""
    path = os.path.join(folder, pair, "pair.json")
    record = cache.read_json(path)
    feeds = _load_inputs(os.path.join(folder, "inputs.npz"))
    record.setdefault("reference", {})["float16_overflow"] = overflow.float16_overflow(
        os.path.join(folder, pair, "model.onnx"),
        os.path.join(folder, record["exporter"], "model.onnx"), feeds)
    cache.write_json(path, record)


def finish_pair(folder, pair_folder, record, precision="float32", source=None):
    """Adds the independent output check and writes pair.json; a float16 variant's check also
    lists what overflows float16 inside it, computed from `source`, its float32 export."""
    pt = record.get("pt") or os.path.join(folder, "model.pt")
    feeds = _load_inputs(os.path.join(folder, "inputs.npz"))
    try:
        onnx_path = os.path.join(pair_folder, "model.onnx")
        record["reference"] = reference_check(pt, onnx_path, feeds, precision)
        if precision == "float16" and source is not None:
            record["reference"]["float16_overflow"] = overflow.float16_overflow(
                onnx_path, source, feeds)
    except Exception as err:
        # ONNX Runtime cannot load or run what the exporter or variant wrote (a float16
        # conversion that left a float32 Gather output): an export error, not a pair.
        record.update(status="error", stage="onnxruntime", error=one_line(err))
        _record_pair(pair_folder, record)
        return
    record.update(status="ok", precision=precision, pt=pt)
    _record_pair(pair_folder, record)


def run(spec):
    folder = cache.model_dir(spec["id"])
    os.makedirs(folder, exist_ok=True)
    log = []
    pairs = list(spec["exporters"])
    done = {p for p in pairs
            if cache.read_json(os.path.join(folder, p, "pair.json")) is not None}
    if spec["build"]["lib"] == "ultralytics":
        if "ultralytics" not in done:
            try:
                record = ultralytics_pair(spec, folder, log)
                finish_pair(folder, os.path.join(folder, "ultralytics"), record)
            except Exception as err:
                _record_pair(os.path.join(folder, "ultralytics"),
                             {"status": "error", "stage": "export", "error": one_line(err)})
    elif set(pairs) - done:
        try:
            model, inputs, scripted = export_torch_side(spec, folder, log)
        except Exception as err:
            for p in set(pairs) - done:
                _record_pair(os.path.join(folder, p),
                             {"status": "error", "stage": "build/trace", "error": one_line(err)})
            model = None
        for exporter in pairs:
            if model is None or exporter in done:
                continue
            pair_folder = os.path.join(folder, exporter)
            try:
                source = scripted if exporter == "legacy" and scripted is not None else model
                record = export_onnx_pair(source, inputs, exporter, pair_folder)
                finish_pair(folder, pair_folder, record)
            except Exception as err:
                _record_pair(pair_folder, {"status": "error", "stage": "export",
                                           "exporter": exporter, "error": one_line(err)})
    for base, names in spec["variants"].items():
        base_record = cache.read_json(os.path.join(folder, base, "pair.json"), {})
        for name in names:
            pair_folder = os.path.join(folder, f"{base}+{name}")
            if cache.read_json(os.path.join(pair_folder, "pair.json")) is not None:
                continue
            if base_record.get("status") != "ok":
                _record_pair(pair_folder, {"status": "error", "stage": "variant",
                                           "error": f"no {base} export to derive it from"})
                continue
            try:
                os.makedirs(pair_folder, exist_ok=True)
                start = time.time()
                with quiet():
                    precision = variants.apply(name, os.path.join(folder, base, "model.onnx"),
                                               os.path.join(pair_folder, "model.onnx"), spec)
                record = {"exporter": base, "variant": name, "variant_s": time.time() - start}
                finish_pair(folder, pair_folder, record, precision,
                            os.path.join(folder, base, "model.onnx"))
            except Exception as err:
                _record_pair(pair_folder, {"status": "error", "stage": "variant",
                                           "exporter": base, "variant": name,
                                           "error": one_line(err)})
    if log:
        with open(os.path.join(folder, "export.log"), "a") as f:
            f.write("\n".join(log))


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    import torch
    torch.set_num_threads(1)
    run(spec)
