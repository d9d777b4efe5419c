"""Sorting what went wrong in a sweep into the baseline table's categories, and each problem
into a cause as far as the results tell it.

Categories (clean pairs): `false alarm` (exit 1 while ONNX Runtime's outputs agree with
TorchScript's within tolerance by the sweep's own check), `real divergence` (exit 1 and the
outputs do differ: the tool was right), `refusal` (exit 2), `killed` (a signal: -9 is the OOM
killer), `timeout`, `coverage under 95%`, `unconfirmed layers`. Faults: `fault missed` (exit 0
on a fault above tolerance at its layer), `fault refused`/`fault killed`/`fault timeout`,
`wrong culprit module`, `wrong op`.

A cause is a signature built from the tool's own words with the variable parts (numbers, paths,
quoted names) taken out, or from what the first divergence was (its TorchScript and ONNX ops,
how it was paired, its precision), so rows with the same cause group together. Nothing here
names a model or a library.
"""

import re

from sweep import check

NUMBER = re.compile(r"\d+(\.\d+)?(e-?\d+)?")
QUOTED = re.compile(r"(['`\"]).*?\1")
PATH = re.compile(r"(/[^\s:,]+)+")


def normalise(text):
    text = PATH.sub("PATH", text or "")
    text = QUOTED.sub("'…'", text)
    text = NUMBER.sub("N", text)
    return re.sub(r"\s+", " ", text).strip()[:160]


def _divergence(result):
    first = result.get("first_divergence") or {}
    if not first:
        if result.get("failing_outputs") and not result.get("failing_layers"):
            return "an output fails, no layer does"
        if result.get("accumulated_drift"):
            return "accumulated drift (no layer fails in isolation)"
        gates = "; ".join(result.get("gate_failures") or [])
        return normalise(gates) or "no first divergence"
    return (f"first divergence {first.get('torch_op')} -> {first.get('onnx_op')} "
            f"(paired_by {first.get('paired_by')}, {first.get('precision')})")


def clean_category(result, pair):
    """(category or None, cause) of one clean pair's check."""
    status = result.get("exit")
    if status == "timeout":
        return "timeout", f"over {result.get('timeout_s')} s"
    if isinstance(status, int) and status < 0:
        return "killed", f"signal {-status}"
    if status == 2:
        return "refusal", normalise((result.get("stderr") or ["no message"])[-1])
    if status == 1:
        reference = pair.get("reference") or {}
        if reference.get("outputs_within_tolerance") is False:
            return "real divergence", _divergence(result)
        overflow = reference.get("float16_overflow") or []
        if overflow:
            # The float16 graph cannot hold a value the float32 one computes (overflow.py):
            # a float16 kernel gives infinity there, whatever ONNX Runtime's CPU casts hide.
            return "real divergence", ("float16 overflow inside the converted graph (a float16 "
                                       "value the float32 graph computes beyond 65504)")
        optimised = (pair.get("reference_optimised") or {}).get("outputs_within_tolerance")
        if optimised is False and check.production_only_failure(result):
            # ONNX Runtime's own optimiser changes the outputs by the sweep's own run of it:
            # the production gate is right to fail.
            return "real divergence", "ONNX Runtime's optimised session changes the outputs " \
                "(the sweep's own run with every optimisation on)"
        return "false alarm", _divergence(result)
    return None, None


def clean_flags(result):
    """Problems a check can have besides its exit status: [(category, cause)]."""
    flags = []
    cov = (result.get("coverage") or {}).get("torch_ratio")
    if isinstance(cov, (int, float)) and cov < 0.95:
        # The op left unpaired most often (among the first ones kept) and why: fine enough
        # to tell causes apart, coarse enough that one cause makes one row.
        unpaired = result.get("unpaired_torch") or []
        counts = {}
        for u in unpaired:
            key = (u.get("op") or "?", normalise(u.get("reason")))
            counts[key] = counts.get(key, 0) + 1
        op, reason = max(counts, key=counts.get) if counts else ("?", "?")
        flags.append(("coverage under 95%", f"{op} unpaired: {reason}"))
    if result.get("unconfirmed_count"):
        first = result["unconfirmed"][0]
        flags.append(("unconfirmed layers",
                      f"at {first.get('torch_op')} -> {first.get('onnx_op')} "
                      f"(paired_by {first.get('paired_by')})"))
    return flags


def module_relation(expected, reported):
    if reported is None:
        return "no module"
    if expected is None:
        return "expected unknown"
    if reported == expected:
        return "same"
    if reported.startswith(expected + ".") or expected == "":
        return "inside the expected module"
    if expected.startswith(reported + ".") or reported == "":
        return "an enclosing module"
    parent = expected.rsplit(".", 1)[0] if "." in expected else ""
    if (reported.rsplit(".", 1)[0] if "." in reported else "") == parent:
        return "a sibling module"
    return "elsewhere"


RELATIONS = ["same", "inside the expected module", "an enclosing module", "a sibling module",
             "elsewhere", "no module", "expected unknown"]


def expected_relation(recipe, reported):
    """`module_relation` to the expected module, or to the nearest of the candidates when
    the ONNX names fit several modules of the model (module_tree.py)."""
    expected = recipe.get("expected_candidates") or [recipe.get("expected_module")]
    return min((module_relation(e, reported) for e in expected), key=RELATIONS.index)


def fault_outcome(result, recipe):
    """Judges one fault's check: dict with detected, module_right, op_right, category, cause."""
    iso = recipe.get("isolated") or {}
    below = iso.get("below_tolerance") is True
    status = result.get("exit")
    first = result.get("first_divergence") or {}
    out = {"below_tolerance": below, "exit": status}
    if status == "timeout":
        out.update(category="fault timeout", cause=f"over {result.get('timeout_s')} s")
        return out
    if isinstance(status, int) and status < 0:
        out.update(category="fault killed", cause=f"signal {-status}")
        return out
    if status == 2 and "error" in iso:
        # The mutated node could not even run alone: the recipe made an invalid model.
        out.update(category="fault not applicable", cause=normalise(iso["error"]))
        return out
    if status == 2:
        out.update(category="fault refused",
                   cause=normalise((result.get("stderr") or ["no message"])[-1]))
        return out
    out["detected"] = status == 1
    if status == 0:
        if not below:
            why = ("its failing layer was marked unconfirmed (not gated)"
                   if result.get("failing_layers") and result.get("unconfirmed_count")
                   else "no layer beyond tolerance")
            out.update(category="fault missed",
                       cause=f"{recipe['kind']} on {recipe['op_type']}: {why}")
        return out
    node = first.get("onnx_node")
    relation = expected_relation(recipe, first.get("module"))
    # A culprit the graph knows only up to an enclosing module (faults.py, `enclosing_scope`)
    # is found by any module inside it.
    enclosing = recipe.get("expected_module_from") == "enclosing_scope"
    # A culprit the graph names no module for (a renamed node in a graph without scopes) is
    # known only as the nodes that hold its output (faults.py, `accepted_nodes`).
    accepted = recipe.get("accepted_nodes", [recipe["node"]])
    unknown = recipe.get("expected_module") is None
    out["module_right"] = (relation == "same" or node == recipe["node"]
                           or (enclosing and relation == "inside the expected module")
                           or (unknown and node in accepted))
    out["module_exact"] = relation == "same"
    out["op_right"] = node in accepted
    if not out["module_right"]:
        out.update(category="wrong culprit module",
                   cause=f"{recipe['kind']} on {recipe['op_type']}: reported {relation} "
                         f"({first.get('torch_op')} -> {first.get('onnx_op')}, "
                         f"paired_by {first.get('paired_by')})")
    elif not out["op_right"]:
        out.update(category="wrong op",
                   cause=f"{recipe['kind']} on {recipe['op_type']}: reported at "
                         f"{first.get('onnx_op')} (paired_by {first.get('paired_by')})")
    return out
