"""The calibration of the default tolerances on the sweep (issue #19, item 5):
`python scripts/sweep.py --calibration` writes reports/calibration.md and calibration.json.

Responsible for three things. Which clean pairs are measured: by default the plain export of
every selected model (its first exporter that produced a pair) and every reduced-precision
variant (the float16 conversions), a deterministic subset that fits a shared machine;
`--calibration-all` takes every exported pair. Running align-check on each with `--isolate`
(every layer's isolated error, not only a failing one's), keeping per layer its dtype and its
accumulated and isolated error both relative to range and as the atol it would need
(`max_abs / max(1, max|torch|)`, the quantity the layer atol is compared with), and per output
the same; results are cached by binary like every sweep check, so a rerun resumes. And the
distributions (count, min, median, p90, p99, max) per dtype next to the planted faults'
isolated sizes from reports/sweep.json (`faults[].recipe.isolated`, computed by the sweep from
the mutated graph) and how many of them lie below the default tolerance.
"""

import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

from . import cache, check

# The defaults of src/compare/tolerance.rs (README, Tolerances): layer atol, output atol.
DEFAULT_ATOL = {"float32": 1e-5, "float16": 1e-2}
DEFAULT_OUTPUT_ATOL = {"float32": 1e-4, "float16": 3e-2}
# float64 is judged by the float32 row; anything else (integers) is exact and not calibrated.
DTYPE_ROW = {"float32": "float32", "float64": "float32", "float16": "float16"}


def calibration_pairs(spec, pair_names, everything=False):
    """The pairs of one model that the calibration measures, in a fixed order."""
    folder = cache.model_dir(spec["id"])
    chosen, plain_found = [], False
    for pair in pair_names(spec):
        record = cache.read_json(os.path.join(folder, pair, "pair.json")) or {}
        if record.get("status") != "ok":
            continue
        reduced = record.get("precision", "float32") != "float32"
        if everything or reduced or ("+" not in pair and not plain_found):
            chosen.append(pair)
            plain_found = plain_found or "+" not in pair
    return chosen


def _scale(entry):
    """max(1, max|torch|) of a layer or output, recovered from what the report keeps."""
    required, max_abs = entry.get("required_atol"), entry.get("max_abs")
    if isinstance(required, (int, float)) and required > 0 and isinstance(max_abs, (int, float)):
        return max_abs / required
    return None


def _number(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def summarise(report):
    """What the calibration keeps of one `--isolate` report: per compared layer
    [dtype, accumulated rel/range, accumulated required atol, isolated rel/range, isolated
    required atol, module] (isolated None where the layer could not be isolated), per output
    [dtype, rel/range, required atol, name]."""
    layers = []
    for layer in report.get("layers") or []:
        if layer.get("unconfirmed"):
            continue  # its error says nothing about what the layer computes (docs/json.md)
        iso = layer.get("isolated") or {}
        iso_abs, scale = _number(iso.get("max_abs")), _scale(layer)
        iso_required = None
        if iso_abs is not None:
            iso_required = 0.0 if iso_abs == 0 else (iso_abs / scale if scale else None)
        layers.append([layer.get("precision"), _number(layer.get("rel_to_range")),
                       _number(layer.get("required_atol")), _number(iso.get("rel_to_range")),
                       iso_required, layer.get("module")])
    outputs = [[o.get("precision"), _number(o.get("rel_to_range")),
                _number(o.get("required_atol")), o.get("name")]
               for o in report.get("outputs") or []]
    first = report.get("first_divergence") or {}
    return {"verdict": report.get("verdict"), "layers": layers, "outputs": outputs,
            "first_divergence": first.get("module"),
            "isolation_error": (report.get("isolation") or {}).get("error")}


def isolated_check(binary, pt, onnx, inputs, timeout):
    """One `align-check --isolate` run as check.py runs a clean check (one thread, a private
    working folder, a library operator's library found as the sweep finds it, the exit status
    as it is), kept as `summarise` says; never raises."""
    return check.run_check(binary, pt, onnx, inputs, timeout, ("--isolate",), keep=summarise)


def _model_rows(spec, pair_names, args, binary_id, log):
    rows = []
    folder = cache.model_dir(spec["id"])
    for pair in calibration_pairs(spec, pair_names, args.calibration_all):
        record = cache.read_json(os.path.join(folder, pair, "pair.json"))
        key = f"calibration/{spec['id']}/{pair}"
        path = cache.result_path(binary_id, key)
        result = cache.read_json(path)
        if result is None and not args.report_only:
            result = isolated_check(args.binary, record["pt"],
                                    os.path.join(folder, pair, "model.onnx"),
                                    os.path.join(folder, "inputs.npz"), args.check_timeout)
            if result.get("environment_error"):
                log(f"calibration {key}: not kept, the machine failed")
                continue
            cache.write_json(path, result)
            log(f"calibration {key}: exit {result['exit']} "
                f"{len(result.get('layers') or [])} layers ({result['wall_s']:.1f} s)")
        if result is not None:
            rows.append({"model": spec["id"], "pair": pair,
                         "precision": record.get("precision", "float32"), "result": result})
    return rows


def run(specs, pair_names, args, binary_id, log):
    """Runs (or reads from the cache) every selected pair's `--isolate` check, `--jobs`
    models at a time; rows in the order of `specs` whatever finishes first."""
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        per_model = list(pool.map(
            lambda spec: _model_rows(spec, pair_names, args, binary_id, log), specs))
    return [row for rows in per_model for row in rows]


def _is_nan(x):
    return isinstance(x, float) and math.isnan(x)


def distribution(values):
    """count, min, median, p90, p99, max (nearest rank) of the values that are numbers: a NaN
    (a planted fault whose isolated error is not a number) is left out, since it would leave
    the sort unordered and the ranks meaningless."""
    v = sorted(x for x in values if x is not None and not _is_nan(x))
    if not v:
        return {"count": 0}

    def rank(q):
        return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]
    return {"count": len(v), "min": v[0], "median": rank(0.5), "p90": rank(0.9),
            "p99": rank(0.99), "max": v[-1]}


def _worst(rows, dtype, column, n=5, above=None):
    """The n largest values of one layer column (or all above `above`), with where."""
    found = []
    for row in rows:
        for layer in row["result"].get("layers") or []:
            if DTYPE_ROW.get(layer[0]) == dtype and layer[column] is not None \
                    and (above is None or layer[column] > above):
                found.append((layer[column], f"{row['model']} [{row['pair']}] "
                                             f"{layer[5] or '(top level)'} (pair exit "
                                             f"{row['result'].get('exit')})"))
    found.sort(reverse=True)
    return [{"value": v, "where": w} for v, w in (found if above is not None else found[:n])]


def tables(rows, sweep):
    """The calibration's JSON: per dtype the distributions, the worst layers and the faults."""
    precision_of = {(p["model"], p["pair"]): p.get("precision") or "float32"
                    for p in sweep.get("pairs") or []}
    # Why a clean pair fails, as the sweep classified it (reports/sweep.md's baseline table).
    cause_of = {(p["model"], p["pair"]): f"{p.get('category')}: {p.get('cause')}"
                for p in sweep.get("pairs") or [] if p.get("category")}
    out = {}
    for dtype in ("float32", "float16"):
        layers = [layer for row in rows for layer in row["result"].get("layers") or []
                  if DTYPE_ROW.get(layer[0]) == dtype]
        outputs = [o for row in rows for o in row["result"].get("outputs") or []
                   if DTYPE_ROW.get(o[0]) == dtype]
        faults = [f["recipe"]["isolated"] for f in sweep.get("faults") or []
                  if DTYPE_ROW.get(precision_of.get((f["model"], f["pair"]))) == dtype
                  and "rel_to_range" in (f["recipe"].get("isolated") or {})]
        must_fail = [f for f in sweep.get("faults") or []
                     if DTYPE_ROW.get(precision_of.get((f["model"], f["pair"]))) == dtype
                     and not (f["recipe"].get("isolated") or {}).get("below_tolerance", True)]
        pairs = [row for row in rows if DTYPE_ROW.get(row["precision"]) == dtype]
        # The margin is measured on the pairs that pass: a clean pair that fails is a false
        # alarm to explain (listed with its layers beyond the atol), not the clean baseline.
        passing = [row for row in rows if row["result"].get("exit") == 0]
        passing_layers = [layer for row in passing for layer in row["result"].get("layers")
                          or [] if DTYPE_ROW.get(layer[0]) == dtype]
        out[dtype] = {
            "pairs": len(pairs),
            "pairs_exit": _tally(str(row["result"].get("exit")) for row in pairs),
            "not_passing": [f"{row['model']} [{row['pair']}]: exit {row['result'].get('exit')}"
                            f", first divergence {row['result'].get('first_divergence')}; the "
                            f"sweep: {cause_of.get((row['model'], row['pair']), '-')}"
                            for row in pairs if row["result"].get("exit") != 0],
            "layers_not_isolated": sum(1 for layer in layers if layer[3] is None),
            "isolated_rel_to_range": distribution(layer[3] for layer in layers),
            "isolated_required_atol": distribution(layer[4] for layer in layers),
            "isolated_required_atol_passing_pairs": distribution(
                layer[4] for layer in passing_layers),
            "isolated_beyond_atol": _worst(rows, dtype, 4, above=DEFAULT_ATOL[dtype]),
            "accumulated_rel_to_range": distribution(layer[1] for layer in layers),
            "accumulated_required_atol": distribution(layer[2] for layer in layers),
            "output_rel_to_range": distribution(o[1] for o in outputs),
            "output_required_atol": distribution(o[2] for o in outputs),
            "fault_isolated_rel_to_range": distribution(f["rel_to_range"] for f in faults),
            "faults": len(faults),
            "faults_isolated_nan": sum(1 for f in faults if _is_nan(f["rel_to_range"])),
            "faults_below_default_tolerance": sum(1 for f in faults if f.get("below_tolerance")),
            "faults_that_must_fail": len(must_fail),
            "faults_that_must_fail_detected": sum(1 for f in must_fail
                                                  if f["outcome"].get("detected")),
            "smallest_fault_that_must_fail": distribution(
                f["recipe"]["isolated"]["rel_to_range"] for f in must_fail).get("min"),
            "worst_isolated": _worst(passing, dtype, 4),
            "worst_accumulated": _worst(rows, dtype, 2),
            "default_atol": DEFAULT_ATOL[dtype], "default_output_atol": DEFAULT_OUTPUT_ATOL[dtype],
        }
    return out


def _tally(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return counts


def _e(x):
    return "-" if x is None else ("0" if x == 0 else f"{x:.1e}")


def render(data):
    lines = [
        "# Tolerance calibration on the sweep",
        "",
        f"Generated {data['generated']} by `python scripts/sweep.py --calibration` "
        f"(binary {data['binary_id']}; faults from reports/sweep.json, binary "
        f"{data['faults_binary_id']}); what it means: docs/tolerances.md. Pairs: "
        f"{data['selection']}. Errors are per layer: relative to the tensor's range, and as "
        "the atol the layer would need (`max_abs / max(1, max|torch|)`, what the layer atol is "
        "compared with; at rtol 0, so a value above the atol can still pass by the rtol part). "
        "Isolated = the layer's own ONNX computation fed PyTorch's values (what it "
        "introduces); accumulated = what it carries from the whole network. Range is "
        "max|torch| of the tensor.",
        "",
    ]
    for dtype, t in data["dtypes"].items():
        lines += [f"## {dtype}", "",
                  f"{t['pairs']} clean pairs (exit {json.dumps(t['pairs_exit'], sort_keys=True)})"
                  f", {t['isolated_rel_to_range'].get('count', 0)} isolated layers "
                  f"({t['layers_not_isolated']} compared layers could not be isolated). Default "
                  f"layer atol {t['default_atol']:g}, output atol {t['default_output_atol']:g}.",
                  "", "| quantity | count | min | median | p90 | p99 | max |",
                  "|---|---|---|---|---|---|---|"]
        for label, key in (("(a) isolated error, of range", "isolated_rel_to_range"),
                           ("(a) isolated error, required atol", "isolated_required_atol"),
                           ("(a) the same, in the pairs that pass",
                            "isolated_required_atol_passing_pairs"),
                           ("(b) accumulated error, of range", "accumulated_rel_to_range"),
                           ("(b) accumulated error, required atol",
                            "accumulated_required_atol"),
                           ("(c) outputs, of range", "output_rel_to_range"),
                           ("(c) outputs, required atol", "output_required_atol"),
                           ("(d) planted faults, isolated, of range",
                            "fault_isolated_rel_to_range")):
            d = t[key]
            lines.append(f"| {label} | {d.get('count', 0)} | " + " | ".join(
                _e(d.get(k)) for k in ("min", "median", "p90", "p99", "max")) + " |")
        worst = t["isolated_required_atol_passing_pairs"].get("max")
        margin = (f"{t['default_atol'] / worst:.1f}x above the worst isolated error of the "
                  "clean pairs that pass" if worst else "over no measured isolated error")
        smallest = t["smallest_fault_that_must_fail"]
        if smallest:
            margin += f" and {smallest / t['default_atol']:.1f}x below the smallest fault " \
                      "that must fail"
        lines += ["", f"Planted faults: {t['faults']} ({t['faults_isolated_nan']} whose isolated "
                  "error is not a number, left out of (d)), "
                  f"{t['faults_below_default_tolerance']} of them below the default tolerance "
                  f"in isolation; of the {t['faults_that_must_fail']} that must fail, "
                  f"{t['faults_that_must_fail_detected']} exit 1, the smallest "
                  f"{_e(t['smallest_fault_that_must_fail'])} of range. The layer atol sits "
                  f"{margin}.", "", "Largest isolated errors in the clean pairs that pass "
                  "(required atol):", ""]
        lines += [f"- {_e(w['value'])} {w['where']}" for w in t["worst_isolated"]]
        beyond = t["isolated_beyond_atol"]
        lines += ["", f"Clean layers beyond the layer atol in isolation: {len(beyond)}"
                  + (" (the rounding floor decides those, docs/tolerances.md):" if beyond
                     else "."), ""]
        lines += [f"- {_e(w['value'])} {w['where']}" for w in beyond[:12]]
        if len(beyond) > 12:
            lines.append(f"- ... {len(beyond) - 12} more in calibration.json")
        lines += ["", "Largest accumulated errors (required atol):", ""]
        lines += [f"- {_e(w['value'])} {w['where']}" for w in t["worst_accumulated"]]
        if t["not_passing"]:
            lines += ["", f"Clean pairs that do not pass ({len(t['not_passing'])}):", ""]
            lines += [f"- {line}" for line in t["not_passing"]]
        lines.append("")
    return "\n".join(lines)


def write(rows, binary_id, selection, out_dir, sweep_json):
    sweep = cache.read_json(sweep_json, {})
    data = {"generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "binary_id": binary_id, "faults_binary_id": sweep.get("binary_id"),
            "selection": selection, "dtypes": tables(rows, sweep)}
    os.makedirs(out_dir, exist_ok=True)
    cache.write_json(os.path.join(out_dir, "calibration.json"), data)
    with open(os.path.join(out_dir, "calibration.md"), "w") as f:
        f.write(render(data))
    return data
