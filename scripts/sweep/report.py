"""reports/sweep.md and reports/sweep.json from the cached exports and one binary's results.

`collect` reads everything the sweep knows about the selected models (specs, calibration
evidence, pair records, check results, fault recipes and their checks) into one JSON-ready
dict: per-pair and per-fault rows, the baseline table (problems grouped by category and cause,
causes.py), and the targets of issue #18 with the measured value of each. `write` renders it;
`slice_verdicts` is the CI slice's pass/fail per model.
"""

import os
import time
from collections import defaultdict

from . import cache, causes

TARGETS_TEXT = [
    ("clean exported pairs", ">= 200"), ("distinct architectures", ">= 120"),
    ("post-export variants", ">= 30"), ("injected faults", ">= 600"),
    ("models with normalisation layers carrying trained-like statistics", "all"),
    ("false alarms", "0"), ("refusals of a matching pair", "0"),
    ("clean pairs with TorchScript coverage < 95%", "0"),
    ("clean pairs with unconfirmed layers", "0"),
    ("faults above tolerance with exit 1", "100%"),
    ("first divergence at the right module", ">= 98%"),
    ("first divergence at the right ONNX op", ">= 95%"),
    ("full run (cached exports) on 2 cores", "< 3 h"),
]


# What a fault row keeps of its check (the report's size grows with the faults).
FAULT_RESULT_KEYS = ("exit", "signal", "timeout_s", "wall_s", "verdict", "first_divergence",
                     "origins", "failing_layers", "failing_outputs", "unconfirmed_count",
                     "stderr", "coverage")


def _pct(n, d):
    return f"{100.0 * n / d:.1f}%" if d else "-"


def collect(specs, binary_id, pair_names, reference="torchscript"):
    """Everything the sweep knows, with the checks made against `reference`."""
    pairs, fault_rows, export_errors, models = [], [], [], []
    for spec in specs:
        folder = cache.model_dir(spec["id"])
        meta = cache.read_json(os.path.join(folder, "meta.json"), {})
        calib = meta.get("calibration") or {}
        norms = calib.get("norm_layers") or {}
        models.append({"id": spec["id"], "arch": spec["arch"], "family": spec["family"],
                       "size": (meta.get("inputs_spec") or {}).get("size"),
                       "norm_layers": norms,
                       "batchnorm_recalibrated": calib.get("batchnorm_recalibrated"),
                       "frozen_norm_recalibrated": calib.get("frozen_norm_recalibrated"),
                       "vanishing_fixed": len((calib.get("vanishing_fixed") or {})
                                              .get("scales", [])),
                       "evidence": calib.get("evidence")})
        for pair in pair_names(spec):
            record = cache.read_json(os.path.join(folder, pair, "pair.json"))
            if record is None:
                continue
            if record.get("status") != "ok":
                export_errors.append({"model": spec["id"], "pair": pair,
                                      "stage": record.get("stage"),
                                      "error": record.get("error")})
                continue
            result = cache.read_json(cache.result_path(binary_id, f"{spec['id']}/{pair}",
                                                       reference))
            row = {"model": spec["id"], "arch": spec["arch"], "pair": pair,
                   "variant": "+" in pair, "precision": record.get("precision"),
                   "reference": record.get("reference"), "result": result}
            if result is not None:
                category, cause = causes.clean_category(result, record)
                row["category"], row["cause"] = category, cause
                row["flags"] = causes.clean_flags(result)
            pairs.append(row)
            recipes = cache.read_json(os.path.join(folder, pair, "faults.json")) or {}
            for recipe in recipes.get("faults", []):
                fres = cache.read_json(cache.result_path(
                    binary_id, f"{spec['id']}/{pair}/{recipe['id']}", reference))
                if fres is None:
                    continue
                fault_rows.append({"model": spec["id"], "pair": pair, "recipe": recipe,
                                   "result": {k: fres.get(k) for k in FAULT_RESULT_KEYS
                                              if k in fres},
                                   "outcome": causes.fault_outcome(fres, recipe)})
    return {"binary_id": binary_id, "generated": time.strftime("%Y-%m-%d %H:%M UTC",
                                                               time.gmtime()),
            "models": models, "pairs": pairs, "faults": fault_rows,
            "export_errors": export_errors, "summary": summarise(models, pairs, fault_rows,
                                                                 export_errors)}


def summarise(models, pairs, faults, export_errors):
    checked = [p for p in pairs if p["result"] is not None]
    archs = {p["arch"] for p in pairs}
    with_bn = [m for m in models if any("BatchNorm" in k for k in m["norm_layers"])]
    bn_ok = [m for m in with_bn if (m["batchnorm_recalibrated"] or 0) +
             (m["frozen_norm_recalibrated"] or 0) > 0]
    problems = defaultdict(lambda: defaultdict(list))
    for p in checked:
        if p.get("category"):
            problems[p["category"]][p["cause"]].append(f"{p['model']} [{p['pair']}]")
        for category, cause in p.get("flags") or []:
            problems[category][cause].append(f"{p['model']} [{p['pair']}]")
    above = [f for f in faults if not f["outcome"]["below_tolerance"]]
    for f in faults:
        o = f["outcome"]
        if o.get("category") and (not o["below_tolerance"] or o["category"].startswith(
                ("fault refused", "fault killed", "fault timeout"))):
            problems[o["category"]][o["cause"]].append(
                f"{f['model']} [{f['pair']}] {f['recipe']['detail']}")
    detected = [f for f in above if f["outcome"].get("detected")]
    module_right = [f for f in detected if f["outcome"].get("module_right")]
    module_exact = [f for f in detected if f["outcome"].get("module_exact")]
    op_right = [f for f in detected if f["outcome"].get("op_right")]
    wall = sum((p["result"] or {}).get("wall_s") or 0 for p in checked) + \
        sum(f["result"].get("wall_s") or 0 for f in faults)
    count = {c: sum(len(v) for v in causes_.values()) for c, causes_ in problems.items()}
    return {
        "models": len(models), "models_with_pairs": len({p["model"] for p in pairs}),
        "clean_pairs": len(pairs), "clean_pairs_checked": len(checked),
        "exported_pairs_not_variants": sum(1 for p in pairs if not p["variant"]),
        "variants": sum(1 for p in pairs if p["variant"]),
        "architectures": len(archs), "export_errors": len(export_errors),
        "models_with_batchnorm": len(with_bn), "models_with_batchnorm_recalibrated": len(bn_ok),
        "faults": len(faults), "faults_below_tolerance": len(faults) - len(above),
        "faults_above_tolerance": len(above), "faults_detected": len(detected),
        "faults_module_right": len(module_right), "faults_module_exact": len(module_exact),
        "faults_op_right": len(op_right),
        "clean_exit": _tally(str((p["result"] or {}).get("exit")) for p in checked),
        "check_wall_s": round(wall, 1), "problem_counts": count,
        "problems": {c: dict(v) for c, v in problems.items()},
    }


def _tally(values):
    out = defaultdict(int)
    for v in values:
        out[v] += 1
    return dict(out)


def slice_verdicts(data):
    """(passed ids, {failed id: reasons}) with the issue's targets applied to each model.
    A pair whose export failed is not counted (the exporter's limit, not align-check's); a
    model with no pair at all fails."""
    reasons = defaultdict(list)
    ids = [m["id"] for m in data["models"]]
    for p in data["pairs"]:
        r = p["result"]
        if r is None:
            reasons[p["model"]].append(f"{p['pair']}: not checked")
            continue
        if p.get("category") and p["category"] != "real divergence":
            reasons[p["model"]].append(f"{p['pair']}: {p['category']} ({p['cause']})")
        for category, cause in p.get("flags") or []:
            reasons[p["model"]].append(f"{p['pair']}: {category} ({cause})")
    for f in data["faults"]:
        o = f["outcome"]
        if o.get("category") == "fault not applicable" or (
                o["below_tolerance"] and not str(o.get("category", "")).startswith("fault re")):
            continue
        if o.get("category"):
            reasons[f["model"]].append(f"{f['pair']} {f['recipe']['id']}: {o['category']} "
                                       f"({o['cause']})")
    for model in ids:
        if not any(p["model"] == model for p in data["pairs"]) and model not in reasons:
            reasons[model].append("no pair exported")
    passed = [m for m in ids if m not in reasons]
    return passed, {m: reasons[m] for m in ids if m in reasons}


def _fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}e}" if isinstance(x, float) else str(x)


def render(data):
    s = data["summary"]
    faults_above = s["faults_above_tolerance"]
    measured = {
        "clean exported pairs": s["clean_pairs"],
        "distinct architectures": s["architectures"], "post-export variants": s["variants"],
        "injected faults": f"{s['faults']} ({s['faults_below_tolerance']} below tolerance at "
                           f"their layer, counted apart)",
        "models with normalisation layers carrying trained-like statistics":
            f"{s['models_with_batchnorm_recalibrated']} of {s['models_with_batchnorm']} "
            f"models with BatchNorm recalibrated",
        "false alarms": s["problem_counts"].get("false alarm", 0),
        "refusals of a matching pair": s["problem_counts"].get("refusal", 0),
        "clean pairs with TorchScript coverage < 95%":
            s["problem_counts"].get("coverage under 95%", 0),
        "clean pairs with unconfirmed layers": s["problem_counts"].get("unconfirmed layers", 0),
        "faults above tolerance with exit 1":
            f"{s['faults_detected']} of {faults_above} "
            f"({_pct(s['faults_detected'], faults_above)})",
        "first divergence at the right module":
            f"{s['faults_module_right']} of {s['faults_detected']} detected "
            f"({_pct(s['faults_module_right'], s['faults_detected'])}; exact module path "
            f"{_pct(s['faults_module_exact'], s['faults_detected'])})",
        "first divergence at the right ONNX op":
            f"{s['faults_op_right']} of {s['faults_detected']} "
            f"({_pct(s['faults_op_right'], s['faults_detected'])})",
        "full run (cached exports) on 2 cores":
            f"{s['check_wall_s'] / 3600 / 2:.2f} h (sum of check times {s['check_wall_s']:.0f} "
            f"s over 2 jobs)",
    }
    lines = [
        "# Registry sweep: baseline", "",
        f"Generated {data['generated']} by `python scripts/sweep.py` (see docs/sweep.md) "
        f"against align-check binary `{data['binary_id']}`. {s['models']} models selected, "
        f"{s['models_with_pairs']} with at least one exported pair; {s['export_errors']} "
        "exports or variants failed (listed at the end, not counted).", "",
        "## Targets", "", "| target | wanted | measured |", "|---|---|---|"]
    for name, wanted in TARGETS_TEXT:
        lines.append(f"| {name} | {wanted} | {measured[name]} |")
    lines += ["", f"Clean checks by exit status: {s['clean_exit']} "
                  f"({s['clean_pairs_checked']} of {s['clean_pairs']} pairs checked).", "",
              "## Baseline table, grouped by cause", "",
              "Each row: category, cause (from the tool's own message or from the first "
              "divergence's ops and pairing), how many, and examples as model [exporter+variant]. "
              "`real divergence` is not a false alarm: ONNX Runtime's outputs differ from "
              "TorchScript's beyond tolerance by the sweep's own check, or a float16 "
              "conversion holds a value the float32 graph computes beyond 65504.", "",
              "| category | cause | count | examples |", "|---|---|---|---|"]
    order = ["false alarm", "refusal", "killed", "timeout", "coverage under 95%",
             "unconfirmed layers", "fault missed", "fault refused", "fault killed",
             "fault timeout", "wrong culprit module", "wrong op", "real divergence",
             "fault not applicable"]
    for category in order:
        groups = s["problems"].get(category, {})
        for cause, examples in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            shown = "; ".join(examples[:3]) + (f"; +{len(examples) - 3} more"
                                               if len(examples) > 3 else "")
            lines.append(f"| {category} | {cause.replace('|', '/')} | {len(examples)} | "
                         f"{shown.replace('|', '/')} |")
    if data.get("references"):
        from . import references
        lines += ["", *references.render(data["references"])]
    lines += ["", "## Clean pairs", "",
              "| model | pair | exit | coverage | worst layer (rel. to range) | unconfirmed | "
              "time (s) |", "|---|---|---|---|---|---|---|"]
    for p in data["pairs"]:
        r = p["result"] or {}
        worst = r.get("worst_layer") or {}
        cov = (r.get("coverage") or {}).get("torch_ratio")
        wall = "-" if r.get("wall_s") is None else f"{r['wall_s']:.1f}"
        lines.append(f"| {p['model']} | {p['pair']} | {r.get('exit', 'not run')} | "
                     f"{'-' if cov is None else f'{100 * cov:.1f}%'} | "
                     f"{worst.get('module') or '-'} {_fmt(worst.get('rel_to_range'))} | "
                     f"{r.get('unconfirmed_count', '-')} | {wall} |")
    lines += ["", "## Export errors (not counted)", "", "| model | pair | stage | error |",
              "|---|---|---|---|"]
    for e in data["export_errors"]:
        lines.append(f"| {e['model']} | {e['pair']} | {e['stage']} | "
                     f"{str(e['error']).replace('|', '/')[:200]} |")
    return "\n".join(lines) + "\n"


def write(data, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cache.write_json(os.path.join(out_dir, "sweep.json"), data)
    with open(os.path.join(out_dir, "sweep.md"), "w") as f:
        f.write(render(data))
