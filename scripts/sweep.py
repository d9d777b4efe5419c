#!/usr/bin/env python3
"""The registry sweep (issue #18; docs/sweep.md): builds real TorchScript/ONNX pairs from the
model registries of timm, torchvision, transformers, Ultralytics and facenet-pytorch, checks
each with align-check, injects faults into the pairs that check clean, and writes
reports/sweep.md and reports/sweep.json.

Responsible for the command line and the schedule: which models (`--family`, `--only`,
`--limit`, `--slice ci`), one pipeline per model (export in a child process under a timeout,
clean checks; then, in a second pass, fault recipes in a child and fault checks), `--jobs`
pipelines at a time, progress lines, and what is reused: exports are cached by model, results
by the binary's identity, so a rerun does only what is missing (`--recheck` re-runs the checks
of cached exports, nothing else; `--report-only` rewrites the reports). `--reference` says which
reference each clean pair and fault is checked against: the TorchScript `model.pt` (default),
the torch.export `model.pt2` written next to it (issue 51; scripts/sweep/pt2.py), or both, each
reference's results cached apart. The work itself lives in scripts/sweep/.

    python scripts/sweep.py --jobs 2                 # the full sweep (resumable)
    python scripts/sweep.py --recheck                # new binary: checks only
    python scripts/sweep.py --slice ci --check       # CI: ~10 models, exit 1 on a missed target
    python scripts/sweep.py --family hazards --reference both   # TorchScript and .pt2
    python scripts/sweep.py --calibration --no-export --jobs 1   # reports/calibration.md
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from sweep import cache, check, overlay, registries, report  # noqa: E402

PRINT_LOCK = threading.Lock()


def log(message):
    with PRINT_LOCK:
        print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", action="append", choices=sorted(registries.FAMILIES),
                   help="only models of this registry (repeatable)")
    p.add_argument("--only", metavar="REGEX", help="only model ids matching REGEX")
    p.add_argument("--model", action="append", metavar="ID",
                   help="this model (repeatable), e.g. timm/resnet50d or torchvision/resnet50, "
                        "whichever member of its family it is, instead of the registries' "
                        "selection (each family's smallest)")
    p.add_argument("--limit", type=int, help="at most N models (after --family/--only)")
    p.add_argument("--slice", choices=["ci"], help="the fixed CI slice of ~10 small models")
    p.add_argument("--jobs", type=int, default=2, help="model pipelines at a time (default 2)")
    p.add_argument("--binary", default=os.path.join(REPO, "target", "debug", "align-check"),
                   help="align-check binary (default target/debug/align-check)")
    p.add_argument("--recheck", action="store_true",
                   help="re-run the checks of cached exports (no new exports)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the reports from cached results, run nothing")
    p.add_argument("--no-export", action="store_true",
                   help="export nothing new; check what is cached (and plan its faults)")
    p.add_argument("--no-faults", action="store_true", help="clean checks only")
    p.add_argument("--export-only", action="store_true",
                   help="build the export cache (pairs, and the .pt2 with --reference pt2/both) "
                        "and stop: no binary needed, so it can run while align-check compiles")
    p.add_argument("--reference", choices=["torchscript", "pt2", "both"], default="torchscript",
                   help="the reference side of every check: the TorchScript model.pt "
                   "(default), the torch.export model.pt2 (made for each model torch.export "
                   "takes; why not, for the others), or both; the reports compare the two")
    p.add_argument("--calibration", action="store_true",
                   help="the tolerance calibration instead of the sweep: `--isolate` checks of "
                   "clean pairs (the plain export of each model and its float16 variants) "
                   "into calibration.md/.json (scripts/sweep/tolerance_calibration.py)")
    p.add_argument("--calibration-all", action="store_true",
                   help="with --calibration: every exported pair, not the subset")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a selected model misses a target (for CI)")
    p.add_argument("--out-dir", help="where sweep.md/sweep.json go (default reports/, or "
                   "the cache's ci/ folder for --slice ci)")
    p.add_argument("--splice-references", metavar="MD",
                   help="with --reference both: also write the comparison of the references "
                   "into this existing report (between markers; reports/sweep.md takes the CI "
                   "slice's this way, its other sections coming from the full registry)")
    p.add_argument("--export-timeout", type=int, default=1200, metavar="S",
                   help="seconds for one model's export child (default 1200)")
    p.add_argument("--check-timeout", type=int, default=600, metavar="S",
                   help="seconds for one clean check (default 600)")
    p.add_argument("--fault-timeout", type=int, default=300, metavar="S",
                   help="seconds for one fault check (default 300)")
    return p.parse_args(argv)


def interleave(specs):
    """Round-robin over the registries, so that a sweep stopped early still covers each."""
    by_family = {}
    for s in specs:
        by_family.setdefault(s["family"], []).append(s)
    queues = list(by_family.values())
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def select(args):
    if args.slice == "ci":
        specs = registries.ci_slice()
    elif args.model:
        specs = registries.named_specs(args.model)
    else:
        specs = interleave(registries.all_specs(args.family))
    if args.only:
        pattern = re.compile(args.only)
        specs = [s for s in specs if pattern.search(s["id"])]
    if args.limit:
        specs = specs[:args.limit]
    return specs


def pair_names(spec):
    names = list(spec["exporters"])
    for base, variants in spec["variants"].items():
        names += [f"{base}+{v}" for v in variants]
    return names


def references(args):
    return ["torchscript", "pt2"] if args.reference == "both" else [args.reference]


def run_child(argv, timeout):
    """A python child of this script; returns (exit status or 'timeout', stderr tail)."""
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), *argv],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    tail = [line for line in proc.stderr.strip().splitlines() if line.strip()][-3:]
    return proc.returncode, " | ".join(tail)[-400:]


def export_model(spec, args):
    folder = cache.model_dir(spec["id"])
    missing = [p for p in pair_names(spec)
               if cache.read_json(os.path.join(folder, p, "pair.json")) is None]
    if not missing or args.recheck or args.report_only or args.no_export:
        return
    os.makedirs(folder, exist_ok=True)
    cache.write_json(os.path.join(folder, "spec.json"), spec)
    start = time.time()
    status, tail = run_child(["_export", os.path.join(folder, "spec.json")],
                             args.export_timeout)
    for p in missing:
        path = os.path.join(folder, p, "pair.json")
        if cache.read_json(path) is None:
            what = (f"export timed out after {args.export_timeout} s" if status == "timeout"
                    else f"export child ended (exit {status}) without this pair: {tail}")
            cache.write_json(path, {"status": "error", "stage": "export", "error": what,
                                    "child_exit": status})
    log(f"exported {spec['id']} in {time.time() - start:.0f} s (child exit {status})")


def export_pt2(spec, args):
    """The model's .pt2 (and pt2.json) when the run checks against it and it was not tried yet;
    a child that dies or times out is recorded as torch.export's failure."""
    from sweep import pt2
    folder = cache.model_dir(spec["id"])
    if "pt2" not in references(args) or args.recheck or args.report_only or args.no_export \
            or cache.read_json(pt2.record_path(folder)) is not None \
            or not os.path.exists(os.path.join(folder, "spec.json")):
        return
    start = time.time()
    status, tail = run_child(["_pt2", spec["id"]], args.export_timeout)
    record = cache.read_json(pt2.record_path(folder))
    if record is None:
        record = {"status": "error", "stage": "torch.export", "child_exit": status,
                  "error": f"the .pt2 child ended (exit {status}) without a record: {tail}"}
        cache.write_json(pt2.record_path(folder), record)
    log(f".pt2 of {spec['id']}: {record['status']} in {time.time() - start:.0f} s"
        + (f" ({record.get('error')})" if record["status"] != "ok" else ""))


def reference_model(folder, record, reference):
    """The reference file a pair is checked against, or None when it has none (no .pt2, or a
    pair with its own TorchScript, which the model's .pt2, beside another TorchScript, is no
    twin of)."""
    if reference == "torchscript":
        return record["pt"]
    from sweep import pt2
    path = pt2.pt2_path(folder)
    if path is None or os.path.dirname(os.path.abspath(record["pt"])) != \
            os.path.dirname(os.path.abspath(path)):
        return None
    return path


def clean_check(spec, pair, args, binary_id, rerun, reference="torchscript"):
    folder = cache.model_dir(spec["id"])
    record = cache.read_json(os.path.join(folder, pair, "pair.json"), {})
    if record.get("status") != "ok":
        return None
    reference_file = reference_model(folder, record, reference)
    if reference_file is None:
        return None
    key = f"{spec['id']}/{pair}"
    path = cache.result_path(binary_id, key, reference)
    result = cache.read_json(path)
    if result is None or (rerun and not args.report_only):
        if args.report_only:
            return None
        result = check.run_check(args.binary, reference_file,
                                 os.path.join(folder, pair, "model.onnx"),
                                 os.path.join(folder, "inputs.npz"), args.check_timeout)
        if result.get("environment_error"):
            log(f"check {key}: not kept, the machine failed: {result['stderr'][-1]}")
            return None
        cache.write_json(path, result)
        cov = (result.get("coverage") or {}).get("torch_ratio")
        log(f"check {key} [{reference}]: exit {result['exit']} coverage "
            f"{cov if cov is None else round(cov, 3)} ({result['wall_s']:.1f} s)")
    if not args.report_only and check.production_only_failure(result) \
            and "reference_optimised" not in record:
        # Only such a pair needs the optimised session's own check, so it is made when one
        # appears (also for exports cached before the check existed), not at every export.
        status, tail = run_child(["_reference_optimised", spec["id"], pair], 900)
        if status != 0:
            log(f"optimised reference {key} failed ({status}): {tail}")
    if not args.report_only and record.get("precision") == "float16" \
            and "float16_overflow" not in (record.get("reference") or {}):
        # Float16 exports cached before the overflow check existed get it when next checked.
        status, tail = run_child(["_reference_overflow", spec["id"], pair], 900)
        if status != 0:
            log(f"overflow reference {key} failed ({status}): {tail}")
    return result


def fault_checks(spec, pair, args, binary_id, reference="torchscript"):
    folder = cache.model_dir(spec["id"])
    record = cache.read_json(os.path.join(folder, pair, "pair.json"), {})
    reference_file = reference_model(folder, record, reference)
    if reference_file is None:
        return
    recipes_path = os.path.join(folder, pair, "faults.json")
    recipes = cache.read_json(recipes_path)
    if recipes is None:
        if args.report_only:
            return
        status, tail = run_child(["_faults", spec["id"], pair, record.get("precision",
                                                                          "float32")], 900)
        recipes = cache.read_json(recipes_path)
        if recipes is None:
            cache.write_json(recipes_path, {"error": f"fault planning failed ({status}): "
                                                     f"{tail}", "faults": []})
            return
    from sweep import faults, module_tree

    def modules():
        if module_tree.read_modules(folder) is None:
            run_child(["_modules", spec["id"]], 600)
        return module_tree.read_modules(folder)
    if faults.refresh_expected(recipes, os.path.join(folder, pair, "model.onnx"), modules):
        cache.write_json(recipes_path, recipes)
    for recipe in recipes.get("faults", []):
        key = f"{spec['id']}/{pair}/{recipe['id']}"
        path = cache.result_path(binary_id, key, reference)
        if cache.read_json(path) is not None and not args.recheck:
            continue
        if args.report_only:
            continue
        with tempfile.TemporaryDirectory(prefix="sweep-fault-") as tmp:
            onnx_path = os.path.join(tmp, "model.onnx")
            faults.materialise(os.path.join(folder, pair, "model.onnx"), recipe, onnx_path)
            result = check.run_check(args.binary, reference_file, onnx_path,
                                     os.path.join(folder, "inputs.npz"), args.fault_timeout)
        if result.get("environment_error"):
            log(f"fault {key}: not kept, the machine failed: {result['stderr'][-1]}")
            continue
        cache.write_json(path, result)
        first = result.get("first_divergence") or {}
        log(f"fault {key} [{reference}] ({recipe['detail']}): exit {result['exit']} at "
            f"{first.get('module')!r}/{first.get('onnx_node')!r}, expected "
            f"{recipe['expected_module']!r}/{recipe['node']!r} ({result['wall_s']:.1f} s)")


def clean_pipeline(spec, args, binary_id):
    try:
        export_model(spec, args)
        export_pt2(spec, args)
        for pair in pair_names(spec):
            for reference in references(args):
                clean_check(spec, pair, args, binary_id, args.recheck, reference)
    except Exception as err:  # one model's trouble never stops the sweep
        log(f"pipeline {spec['id']} failed: {type(err).__name__}: {err}")


def fault_pipeline(spec, args, binary_id):
    try:
        for pair in pair_names(spec):
            # Faults are planted in pairs that check clean against TorchScript (against the
            # .pt2 when only it is run and TorchScript's result is not cached), and then
            # checked against each reference: both check the same faults.
            result = clean_check(spec, pair, args, binary_id, False) \
                if "torchscript" in references(args) else \
                cache.read_json(cache.result_path(binary_id, f"{spec['id']}/{pair}")) or \
                clean_check(spec, pair, args, binary_id, False, "pt2")
            if result is not None and result.get("exit") == 0:
                for reference in references(args):
                    fault_checks(spec, pair, args, binary_id, reference)
    except Exception as err:
        log(f"fault pipeline {spec['id']} failed: {type(err).__name__}: {err}")


def plan_faults(model_id, pair, precision):
    """Child: writes faults.json (recipes, expected culprits, isolated sizes) for one pair."""
    import numpy as np
    import onnx
    from sweep import faults, module_tree
    folder = cache.model_dir(model_id)
    clean = onnx.load(os.path.join(folder, pair, "model.onnx"))
    if module_tree.read_modules(folder) is None:
        module_tree.write_modules(folder)
    recipes = faults.plan(clean, f"{model_id}/{pair}", module_tree.read_modules(folder))
    with np.load(os.path.join(folder, "inputs.npz")) as z:
        feeds = {k: z[k] for k in z.files}
    faults.isolated_sizes(clean, recipes, feeds, precision)
    cache.write_json(os.path.join(folder, pair, "faults.json"),
                     {"faults": recipes, "derivation": faults.DERIVATION})


def calibrate(specs, args, binary_id, start):
    from sweep import tolerance_calibration
    rows = tolerance_calibration.run(specs, pair_names, args, binary_id, log)
    which = "every exported pair" if args.calibration_all else \
        "the plain export of each model and its float16 variants"
    selection = f"{which} of {len(specs)} models ({len(rows)} pairs" + (
        f"; --family {args.family} --only {args.only} --limit {args.limit})"
        if args.family or args.only or args.limit else ")")
    out_dir = args.out_dir or os.path.join(REPO, "reports")
    tolerance_calibration.write(rows, binary_id, selection, out_dir,
                                os.path.join(REPO, "reports", "sweep.json"))
    log(f"calibration of {len(rows)} pairs written to {out_dir} "
        f"({time.time() - start:.0f} s)")
    return 0


def export_only(args):
    try:
        specs = select(args)
    except ValueError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    overlay.ensure(log)
    log(f"{len(specs)} models, exports only, cache {cache.root()}")

    def build(spec):
        try:
            export_model(spec, args)
            export_pt2(spec, args)
        except Exception as err:  # one model's trouble never stops the sweep
            log(f"export of {spec['id']} failed: {type(err).__name__}: {err}")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(build, specs))
    return 0


def main(argv):
    if argv and argv[0] == "_export":
        from sweep import export
        export.main(argv[1])
        return 0
    if argv and argv[0] == "_reference_optimised":
        from sweep import export
        export.add_optimised_reference(cache.model_dir(argv[1]), argv[2])
        return 0
    if argv and argv[0] == "_reference_overflow":
        from sweep import export
        export.add_overflow_reference(cache.model_dir(argv[1]), argv[2])
        return 0
    if argv and argv[0] == "_pt2":
        import torch
        from sweep import pt2
        torch.set_num_threads(1)
        pt2.make(argv[1])
        return 0
    if argv and argv[0] == "_faults":
        plan_faults(*argv[1:4])
        return 0
    if argv and argv[0] == "_modules":
        from sweep import module_tree
        module_tree.write_modules(cache.model_dir(argv[1]))
        return 0
    args = parse_args(argv)
    if args.export_only:
        return export_only(args)
    if not os.path.exists(args.binary) and not args.report_only:
        print(f"sweep: no align-check binary at {args.binary} (build it, or pass --binary)",
              file=sys.stderr)
        return 2
    if os.path.exists(args.binary):
        binary_id, args.binary = cache.pin_binary(args.binary)
    else:  # --report-only without a binary: the results of the last one that ran
        binary_id = (cache.read_json(os.path.join(cache.root(), "last-binary.json")) or {})\
            .get("id")
    if not args.calibration:  # --report-only reads the last sweep's binary, not this one
        cache.write_json(os.path.join(cache.root(), "last-binary.json"),
                         {"id": binary_id, "path": args.binary})
    try:
        specs = select(args)
    except ValueError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    if not (args.report_only or args.no_export):
        overlay.ensure(log)
    log(f"{len(specs)} models, binary {binary_id}, cache {cache.root()}")
    start = time.time()
    if args.calibration:
        return calibrate(specs, args, binary_id, start)
    if not args.report_only:
        # Two passes: every model's exports and clean checks first, then the faults, so that a
        # sweep stopped early has the breadth (architectures, pairs) before the depth.
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(lambda s: clean_pipeline(s, args, binary_id), specs))
            if not args.no_faults:
                list(pool.map(lambda s: fault_pipeline(s, args, binary_id), specs))
    out_dir = args.out_dir or (os.path.join(cache.root(), "ci") if args.slice
                               else os.path.join(REPO, "reports"))
    data = report.collect(specs, binary_id, pair_names, references(args)[0])
    if args.reference == "both":
        from sweep import references as refs
        data["references"] = refs.compare_all(specs, binary_id, pair_names)
        if args.splice_references:
            what = f"--slice {args.slice}" if args.slice else \
                " ".join(f"--family {f}" for f in args.family or []) + \
                (f" --limit {args.limit}" if args.limit else "")
            refs.splice(args.splice_references, data["references"],
                        f"This section covers `{what}` alone ({len(specs)} models), not the "
                        "selection the rest of this report is about: `python scripts/sweep.py "
                        f"{what} --reference both --splice-references ...`, binary "
                        f"`{binary_id}`, {data['generated']}.")
    data["run"] = {"wall_s": round(time.time() - start, 1), "jobs": args.jobs,
                   "selection": {"family": args.family, "model": args.model, "only": args.only,
                                 "limit": args.limit, "slice": args.slice}}
    report.write(data, out_dir)
    log(f"reports written to {out_dir}")
    if args.check:
        passed, failed = report.slice_verdicts(data)
        for model_id, reasons in failed.items():
            print(f"FAILED {model_id}: {'; '.join(reasons)}")
        print(f"{len(passed)} passed, {len(failed)} failed")
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
