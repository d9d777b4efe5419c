"""The two references side by side (issue 51): the sweep's clean pairs and faults checked against
the TorchScript `model.pt` and against the torch.export `model.pt2`, from the rows
report.collect makes for each.

`compare` counts, per reference, what the sweep's targets measure (false alarms, unconfirmed
layers, coverage under 95%, faults above tolerance with exit 1, culprit module and op rates),
how many architectures torch.export takes (and why not, for the others), and lists every clean
pair and fault whose verdict differs between the references: a different exit status or
category for a clean pair; a different exit status, culprit module or culprit op verdict for a
fault. TorchScript is counted twice: over every model, and over the models that have a `.pt2`,
which is the like-for-like comparison. `render` writes the markdown section; the reason for
each difference is read from NOTES (what was found in the JSON of that check), else the two
checks' own first divergences.
"""

import os
from collections import Counter

from . import cache, causes, pt2

# Findings about differing verdicts, written after looking at both checks' JSON reports, keyed
# by a prefix of the pair (`model/pair`) or fault (`model/pair/fault`) key: the longest
# matching prefix gives a difference its reason.
NOTES = {
    "transformers/t5/": (
        "tool bug, fixed on this branch: the .pt2 reference refuses to run (exit 2, "
        "`aten::where.ScalarOther: value cannot be converted to type float without overflow`). "
        "T5's mask value torch.finfo(float32).min is -3.4028234663852886e+38 in the archive's "
        "JSON; serde_json's default float parser read it one ULP beyond float's range "
        "(bits c7efffffe0000001), src/torch/exported/translate.rs passed it on, libtorch "
        "refused the conversion. Cargo.toml: serde_json's float_roundtrip feature."),
    "hazards/greedy_manual_gru/dynamo/": (
        "the .pt2 is right where TorchScript is not: `encoder.2` is the expected module "
        "(TorchScript's scripted module reports the enclosing `encoder`, the one culprit "
        "TorchScript misses in this family)."),
}


def note_for(key):
    found = [k for k in NOTES if key.startswith(k)]
    return NOTES[max(found, key=len)] if found else "not looked at"


def _pair_metrics(rows):
    checked = [p for p in rows if p["result"] is not None]
    flags = Counter(category for p in checked for category, _ in p.get("flags") or [])
    return {"clean pairs checked": len(checked),
            "exit 0 / 1 / 2": "{} / {} / {}".format(
                *(sum(1 for p in checked if p["result"].get("exit") == e) for e in (0, 1, 2))),
            "false alarms": sum(1 for p in checked if p.get("category") == "false alarm"),
            "real divergences": sum(1 for p in checked
                                    if p.get("category") == "real divergence"),
            "refusals, kills, timeouts": sum(1 for p in checked if p.get("category") in
                                             ("refusal", "killed", "timeout")),
            "unconfirmed (pairs)": flags["unconfirmed layers"],
            "coverage < 95% (pairs)": flags["coverage under 95%"]}


def _rate(n, d):
    return f"{n} of {d} ({100.0 * n / d:.1f}%)" if d else "-"


def _fault_metrics(rows):
    above = [f for f in rows if not f["outcome"]["below_tolerance"]]
    detected = [f for f in above if f["outcome"].get("detected")]
    return {"faults checked": len(rows),
            "faults exit 1": _rate(len(detected), len(above)),
            "culprit module": _rate(sum(1 for f in detected if f["outcome"].get("module_right")),
                                    len(detected)),
            "culprit op": _rate(sum(1 for f in detected if f["outcome"].get("op_right")),
                                len(detected))}


def exported(specs):
    """(model ids torch.export took, {model id: why not}, architectures taken, all)."""
    took, refused = [], {}
    for spec in specs:
        record = cache.read_json(pt2.record_path(cache.model_dir(spec["id"])))
        if record is None:
            refused[spec["id"]] = "not tried"
        elif record.get("status") == "ok":
            took.append(spec["id"])
        else:
            refused[spec["id"]] = f"{record.get('stage')}: {record.get('error')}"
    archs = {s["arch"] for s in specs}
    took_archs = {s["arch"] for s in specs if s["id"] in took}
    return took, refused, len(took_archs), len(archs)


def _brief(result):
    if result is None:
        return "not run"
    first = result.get("first_divergence") or {}
    where = f" at {first.get('module')!r}/{first.get('onnx_node')!r}" if first else ""
    # A refusal's last line, without the command's paths and inputs: its last clause.
    message = (result.get("stderr") or [""])[-1].rsplit(": ", 2)[-2:]
    tail = "" if result.get("exit") in (0, 1) else f" ({': '.join(message)[:120]})"
    return f"exit {result.get('exit')}{where}{tail}"


def _differences(ts, p2):
    out = []
    ts_pairs = {f"{p['model']}/{p['pair']}": p for p in ts["pairs"]}
    for p in p2["pairs"]:
        key = f"{p['model']}/{p['pair']}"
        t = ts_pairs.get(key)
        if p["result"] is None or t is None or t["result"] is None:
            continue
        if (t["result"].get("exit"), t.get("category")) != (p["result"].get("exit"),
                                                            p.get("category")):
            out.append({"key": key, "kind": "clean", "torchscript": _brief(t["result"]),
                        "pt2": _brief(p["result"])})
    ts_faults = {f"{f['model']}/{f['pair']}/{f['recipe']['id']}": f for f in ts["faults"]}
    for f in p2["faults"]:
        key = f"{f['model']}/{f['pair']}/{f['recipe']['id']}"
        t = ts_faults.get(key)
        if t is None:
            continue
        verdict = [(x["outcome"].get("exit"), x["outcome"].get("module_right"),
                    x["outcome"].get("op_right")) for x in (t, f)]
        if verdict[0] != verdict[1]:
            out.append({"key": key, "kind": f"fault ({f['recipe']['detail']})",
                        "torchscript": _brief(t["result"]), "pt2": _brief(f["result"])})
    return out


def compare(specs, ts, p2):
    """The comparison of report.collect's rows for TorchScript (`ts`) and .pt2 (`p2`)."""
    took, refused, took_archs, archs = exported(specs)
    taken = set(took)

    def only(rows):
        return [r for r in rows if r["model"] in taken]
    columns = {
        "TorchScript, every model": {**_pair_metrics(ts["pairs"]),
                                     **_fault_metrics(ts["faults"])},
        "TorchScript, models with a .pt2": {**_pair_metrics(only(ts["pairs"])),
                                            **_fault_metrics(only(ts["faults"]))},
        ".pt2": {**_pair_metrics(p2["pairs"]), **_fault_metrics(p2["faults"])},
    }
    return {"exported_models": len(took), "models": len(specs),
            "exported_architectures": took_archs, "architectures": archs,
            "refused": refused, "refusal_causes": dict(Counter(
                causes.normalise(why) for why in refused.values()).most_common()),
            "columns": columns, "differences": _differences(ts, p2)}


def render(ref):
    cols = list(ref["columns"])
    lines = ["## The two references: TorchScript and torch.export (.pt2)", "",
             f"Architectures torch.export exports: {ref['exported_architectures']} of "
             f"{ref['architectures']} ({ref['exported_models']} of {ref['models']} models). "
             "Every clean pair and every fault of those models is checked against both; the "
             "faults are planted in the ONNX graph, so their expected culprits are the same. "
             "A clean pair's category (false alarm or real divergence) uses the sweep's own "
             "check of ONNX Runtime against TorchScript; `.pt2` programs whose `ep.module()` "
             "differs from the TorchScript module are listed below.", "",
             "| | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    rows = ["architectures"] + list(ref["columns"][cols[0]])
    for name in rows:
        if name == "architectures":
            values = [str(ref["architectures"]), str(ref["exported_architectures"]),
                      str(ref["exported_architectures"])]
        else:
            values = [str(ref["columns"][c][name]) for c in cols]
        lines.append(f"| {name} | " + " | ".join(values) + " |")
    lines += ["", f"**Verdicts that differ between the references: "
                  f"{len(ref['differences'])}.**", ""]
    if ref["differences"]:
        lines += ["| pair or fault | what | TorchScript | .pt2 | reason |", "|---|---|---|---|---|"]
        for d in ref["differences"]:
            reason = note_for(d["key"])
            lines.append(" | ".join(["", d["key"], d["kind"], d["torchscript"], d["pt2"],
                                     reason, ""]).strip().replace("\n", " "))
    if ref["refusal_causes"]:
        lines += ["", "Why torch.export refused the others (by cause; pt2.json of each model "
                      "holds its whole message):", "", "| cause | models |", "|---|---|"]
    for cause, n in ref["refusal_causes"].items():
        lines.append(f"| {cause.replace('|', '/')} | {n} |")
    mismatched = ref.get("ep_mismatch") or []
    if mismatched:
        lines += ["", "`.pt2` whose `ep.module()` outputs differ from the TorchScript module's "
                      "on the sweep's inputs (pt2.json): " + ", ".join(mismatched) + "."]
    return lines


def ep_mismatch(specs):
    """Models whose .pt2 gives other outputs than their TorchScript (pt2.json)."""
    out = []
    for spec in specs:
        record = cache.read_json(pt2.record_path(cache.model_dir(spec["id"]))) or {}
        check = record.get("vs_torchscript") or {}
        if record.get("status") == "ok" and not check.get("outputs_equal"):
            out.append(f"{spec['id']} (max abs {check.get('max_abs_difference', '?')})")
    return out


def compare_all(specs, binary_id, pair_names):
    """report.collect for both references and their comparison."""
    from . import report
    ts = report.collect(specs, binary_id, pair_names, "torchscript")
    p2 = report.collect(specs, binary_id, pair_names, "pt2")
    out = compare(specs, ts, p2)
    out["ep_mismatch"] = ep_mismatch(specs)
    return out


BEGIN, END = "<!-- references:begin -->", "<!-- references:end -->"


def splice(path, ref, note):
    """Writes the section into an existing report between markers (replacing a previous one),
    for reports/sweep.md, whose other sections come from runs this machine cannot repeat."""
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    section = "\n".join([BEGIN, *render(ref), "", note, END])
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        marker = "\n## Baseline table"
        at = text.find(marker)
        text = (text[:at] + "\n" + section + "\n" + text[at:]) if at >= 0 else \
            text + "\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)
