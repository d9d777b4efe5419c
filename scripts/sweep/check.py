"""Runs the align-check binary on one pair (clean or faulted) under a timeout and keeps a small
summary of its JSON report: what the sweep's report needs, not the whole report (which for a
large model is megabytes of histograms and scatter samples).

An exit status is recorded as it is: 0 pass, 1 a gate failed, 2 the tool could not do its job,
a negative status (killed by a signal, -9 when the kernel's OOM killer ended it) and `timeout`
each as their own category, with the last lines of stderr when the run did not end in a report.

A model refused for calling an operator libtorch lacks is checked again with the library that
registers it (`--torch-ops`, as the refusal advises; see op_libraries.py), and the result
records the library it needed.
"""

import json
import os
import subprocess
import tempfile
import time

from sweep import op_libraries

STDERR_LINES = 6


def _layer_brief(layer):
    return {k: layer.get(k) for k in ("index", "module", "module_type", "torch_op", "onnx_node",
                                      "onnx_op", "paired_by", "precision", "rel_to_range",
                                      "max_abs", "pass", "unconfirmed")}


def summarise(report):
    layers = report.get("layers") or []
    coverage = report.get("coverage") or {}
    first = report.get("first_divergence")
    if first is not None and first.get("layer_index") is not None \
            and first["layer_index"] < len(layers):
        first = dict(first, paired_by=layers[first["layer_index"]].get("paired_by"),
                     precision=layers[first["layer_index"]].get("precision"))
    finite = [layer for layer in layers if isinstance(layer.get("rel_to_range"), (int, float))]
    worst = max(finite, key=lambda layer: layer["rel_to_range"], default=None)
    unconfirmed = [layer for layer in layers if layer.get("unconfirmed")]
    failing = [layer for layer in layers if layer.get("pass") is False]
    outputs = report.get("outputs") or []
    return {
        "verdict": report.get("verdict"),
        "gate_failures": report.get("gate_failures") or [],
        "coverage": {k: coverage.get(k) for k in ("torch_ratio", "onnx_ratio",
                                                  "torch_layers_total", "torch_layers_paired")},
        "unpaired_torch": [{k: u.get(k) for k in ("name", "op", "module", "reason")}
                           for u in coverage.get("unpaired") or []
                           if u.get("side") == "torch" and not u.get("accounted")][:8],
        "first_divergence": first,
        "origins": [o.get("module") for o in report.get("divergence_origins") or []][:5],
        "worst_layer": _layer_brief(worst) if worst else None,
        "unconfirmed": [_layer_brief(layer) for layer in unconfirmed][:8],
        "unconfirmed_count": len(unconfirmed),
        "failing_layers": len(failing),
        "failing_outputs": sum(1 for o in outputs if o.get("pass") is False),
        "layers": len(layers),
        "accumulated_drift": report.get("accumulated_drift") is not None,
        "total_s": (report.get("timing") or {}).get("total_s"),
        "peak_rss_bytes": (report.get("memory") or {}).get("peak_rss_bytes"),
    }


def production_only_failure(result):
    """Whether a check failed on its production-session gate alone (no layer, no output of
    the unoptimised comparison fails): the sweep then asks its own optimised reference."""
    gates = result.get("gate_failures") or []
    return result.get("exit") == 1 and not result.get("failing_layers") \
        and not result.get("failing_outputs") and bool(gates) \
        and all(g.startswith("production session") for g in gates)


def run_check(binary, pt, onnx, inputs, timeout, extra_args=(), keep=None):
    """One align-check run; returns what `keep` (default `summarise`) keeps of its report,
    with its exit status (never raises for the run's outcome). A TorchScript model that
    calls a library's operator is run again with that library (`--torch-ops`)."""
    keep = keep or summarise
    result = _run_once(binary, pt, onnx, inputs, timeout, extra_args, {}, keep)
    refused = result.get("exit") == 2 and op_libraries.refused_operator(result.get("stderr", []))
    found = refused and op_libraries.library_for(*refused)
    if found:
        library, env = found
        result = _run_once(binary, pt, onnx, inputs, timeout,
                           ("--torch-ops", library, *extra_args), env, keep)
        result["torch_ops"] = library
    return result


def _run_once(binary, pt, onnx, inputs, timeout, extra_args, env, keep):
    with tempfile.TemporaryDirectory(prefix="sweep-check-") as tmp:
        json_path = os.path.join(tmp, "report.json")
        cmd = [binary, pt, onnx, "--inputs", inputs, "--threads", "1", "--json", json_path,
               *extra_args]
        start = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=tmp, env=dict(os.environ, **env))
        except subprocess.TimeoutExpired:
            return {"exit": "timeout", "wall_s": time.time() - start, "timeout_s": timeout}
        result = {"exit": proc.returncode, "wall_s": time.time() - start}
        if proc.returncode < 0:
            result["signal"] = -proc.returncode
        report = None
        if os.path.exists(json_path):
            try:
                with open(json_path) as f:
                    report = json.load(f)
            except ValueError as err:
                result["json_error"] = str(err)
        if report is not None:
            result.update(keep(report))
        if proc.returncode not in (0, 1) or report is None:
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            result["stderr"] = lines[-STDERR_LINES:]
            # The machine, not the pair: such a result is not kept (the sweep re-runs it).
            result["environment_error"] = any("No space left on device" in line
                                              for line in lines)
        return result
