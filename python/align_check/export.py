"""Exports a user's nn.Module in one go to the three files align-check reads.

Responsible for: importing `package.module:factory` and building the model (eval mode),
making the example inputs (seeded random or given values, each named as the ONNX input will
be), writing `model.pt` (torch.jit.trace with every `torch.autograd.Function` inlined, or
torch.jit.script), with --pt2 also `model.pt2` (torch.export.export, torch.export.save: the
other reference align-check reads), `model.onnx` (legacy or dynamo exporter; custom Functions go through their
`symbolic` with the legacy exporter) and `inputs.npz` keyed by ONNX input names, then checking
that both files load and run (TorchScript through torch.jit.load, ONNX through ONNX Runtime on
CPU with optimisations disabled, as align-check runs it) and printing the command to run next.

It does not judge the numbers: a difference between the two outputs is what align-check is for,
so it is reported, not an error. Anything that stops the three files from being usable (module
not importable, bad argument, export or load failure) is one line on stderr and exit code 2;
`--debug` shows the traceback instead.

Installed with the wheel: `python -m align_check.export --help`. In a checkout,
`scripts/export_pair.py` runs this module with the pinned interpreter (.venv/bin/python); the
fixture generators (scripts/fixtures_lib/export.py) share its tracing helpers.
"""

import argparse
import contextlib
import importlib
import io
import json
import logging
import os
import re
import shlex
import sys
import tempfile
import time
import traceback
import warnings

PROG = "python -m align_check.export"

# dtype name -> (torch dtype attribute, kind). npz cannot hold bfloat16, so it is not offered.
DTYPES = {
    "float32": ("float32", "float"), "float": ("float32", "float"),
    "float16": ("float16", "float"), "half": ("float16", "float"),
    "float64": ("float64", "float"), "double": ("float64", "float"),
    "int64": ("int64", "int"), "long": ("int64", "int"),
    "int32": ("int32", "int"), "int": ("int32", "int"),
    "int16": ("int16", "int"), "int8": ("int8", "int"), "uint8": ("uint8", "int"),
    "bool": ("bool", "bool"),
}

EPILOG = """\
examples (scripts.examples.* are in align-check's repository, run from its root):
  # a model class or factory function in ./mypkg/net.py, one image input
  {cmd} mypkg.net:build --input image=1x3x224x224

  # custom op (autograd.Function with a symbolic), two inputs
  {cmd} scripts.examples.my_add:factory \\
      --input a=1x3x16x16 --input b=1x3x16x16 --out export/my_add

  # SRCNN: the scales input must hold [1,1,3,3], not random numbers
  {cmd} scripts.examples.srcnn:factory \\
      --input x=1x3x16x16 --input upscale_factor=4:float32 \\
      --value upscale_factor=1,1,3,3 --out export/srcnn

  # integer token ids, dynamic batch and sequence axes, dynamo exporter, factory kwargs
  {cmd} models.lm:Tiny --path ~/src/lm \\
      --input ids=2x16:int64 --dynamic ids=0,1 --exporter dynamo --kwargs '{"layers": 2}'

then compare:
  align-check DIR/model.pt DIR/model.onnx --inputs DIR/inputs.npz
  align-check DIR/model.pt2 DIR/model.onnx --inputs DIR/inputs.npz    (with --pt2)

custom autograd.Functions: torch.jit.trace cannot record them, so model.pt is traced with
each Function's forward inlined (its torch ops), while the legacy ONNX exporter uses the
Function's symbolic. The dynamo exporter ignores symbolic and traces forward instead.
Random inputs: float dtypes are standard normal, integer dtypes uniform in 0..7, bool 0/1,
all drawn from --seed (the model's weights too, unless the factory seeds itself).

exit codes: 0 files written and both run; 2 anything that prevents that (one line on stderr)."""


class UserError(Exception):
    """A problem the user can fix; its message is the whole story (no traceback)."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line instead of the usage block: the contract is one line on stderr, exit 2.
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# --- argument parsing ---------------------------------------------------------------------

def _split_assignment(text, what):
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME={what}, got {text!r}")
    return name, value.strip()


def parse_input(text):
    """`NAME=1x3x224x224[:dtype]` -> (name, shape tuple, dtype name). `scalar` is shape ()."""
    name, value = _split_assignment(text, "SHAPE[:DTYPE]")
    shape_text, _, dtype = value.partition(":")
    dtype = (dtype or "float32").strip().lower()
    if dtype not in DTYPES:
        raise argparse.ArgumentTypeError(
            f"unknown dtype {dtype!r} in {text!r}; one of {', '.join(sorted(DTYPES))}")
    shape_text = shape_text.strip().lower()
    if shape_text == "scalar":
        shape = ()
    elif re.fullmatch(r"\d+(x\d+)*", shape_text):
        shape = tuple(int(d) for d in shape_text.split("x"))
    else:
        raise argparse.ArgumentTypeError(
            f"bad shape {shape_text!r} in {text!r}; expected dimensions joined by 'x' "
            f"(1x3x224x224) or 'scalar'")
    return name, shape, DTYPES[dtype][0]


def parse_value(text):
    """`NAME=1,1,3,3` -> (name, [numbers]) in row-major order."""
    name, value = _split_assignment(text, "V1,V2,...")
    try:
        numbers = [float(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad values in {text!r}; expected comma-separated numbers") from None
    return name, numbers


def parse_dynamic(text):
    """`NAME=0,2` -> (name, [0, 2])."""
    name, value = _split_assignment(text, "AXIS[,AXIS...]")
    if not re.fullmatch(r"\d+(,\d+)*", value):
        raise argparse.ArgumentTypeError(
            f"bad axes in {text!r}; expected comma-separated axis numbers (0,2)")
    return name, sorted({int(a) for a in value.split(",")})


def parse_kwargs(text):
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"--kwargs is not valid JSON: {err}") from None
    if not isinstance(kwargs, dict):
        raise argparse.ArgumentTypeError("--kwargs must be a JSON object ({\"name\": value})")
    return kwargs


def build_parser(prog=PROG, cmd=PROG):
    """`prog` names the command in messages, `cmd` is how the examples run it."""
    p = Parser(
        prog=prog,
        description="Export a PyTorch nn.Module to model.pt (TorchScript), model.onnx and\n"
                    "inputs.npz for align-check, and check that both files load and run.",
        epilog=EPILOG.replace("{cmd}", cmd), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="package.module:factory",
                   help="what builds the model: a function returning an nn.Module, an "
                        "nn.Module subclass (instantiated) or an nn.Module instance; "
                        "imported with the current directory and --path entries on sys.path")
    p.add_argument("--input", dest="inputs", action="append", type=parse_input, default=[],
                   metavar="NAME=SHAPE[:DTYPE]", required=True,
                   help="one per forward() argument, in order; becomes the ONNX input name. "
                        "SHAPE like 1x3x224x224 or 'scalar'; DTYPE float32 (default), "
                        "float16, float64, int64, int32, int16, int8, uint8, bool")
    p.add_argument("--value", dest="values", action="append", type=parse_value, default=[],
                   metavar="NAME=V1,V2,...",
                   help="give input NAME these values (row-major, as many as its shape "
                        "holds) instead of random ones, e.g. --value scales=1,1,3,3")
    p.add_argument("--out", default="export", metavar="DIR",
                   help="output folder, created if missing (default: ./export)")
    p.add_argument("--exporter", choices=("legacy", "dynamo"), default="legacy",
                   help="torch.onnx.export flavour: legacy (TorchScript-based, uses "
                        "autograd.Function symbolics; default) or dynamo (torch.export)")
    p.add_argument("--opset", type=int, metavar="N",
                   help="ONNX opset (default: 17 for legacy, the exporter's own for dynamo)")
    p.add_argument("--dynamic", action="append", type=parse_dynamic, default=[],
                   metavar="NAME=AXIS[,AXIS...]",
                   help="make these axes of input NAME dynamic in the ONNX model (e.g. "
                        "--dynamic image=0 for the batch); model.pt from tracing stays "
                        "specialised to the example shape where the model computes with sizes")
    p.add_argument("--pt2", action="store_true",
                   help="also write model.pt2: torch.export.export(model, inputs) saved by "
                        "torch.export.save, the reference PyTorch now recommends (align-check "
                        "takes it in place of model.pt); --dynamic axes become Dim.AUTO")
    p.add_argument("--seed", type=int, default=0,
                   help="seed for random inputs and for building the model (default: 0)")
    p.add_argument("--script", action="store_true",
                   help="torch.jit.script instead of torch.jit.trace (keeps control flow; "
                        "the legacy exporter then exports the scripted module)")
    p.add_argument("--kwargs", type=parse_kwargs, default={}, metavar="JSON",
                   help="keyword arguments for the factory, as a JSON object")
    p.add_argument("--path", action="append", default=[], metavar="DIR",
                   help="add DIR to sys.path before importing (repeatable)")
    p.add_argument("--debug", action="store_true",
                   help="show tracebacks and the exporters' own output")
    return p


def resolve_specs(args):
    """Checks that --value and --dynamic name known inputs and fit their shapes."""
    names = [n for n, _, _ in args.inputs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(f"input name given twice: {', '.join(dupes)}")
    shapes = {n: s for n, s, _ in args.inputs}
    values = {}
    for name, numbers in args.values:
        if name not in shapes:
            raise UserError(f"--value {name}: no --input named {name!r} (inputs: {', '.join(names)})")
        count = 1
        for d in shapes[name]:
            count *= d
        if len(numbers) != count:
            raise UserError(f"--value {name}: {len(numbers)} values given, but shape "
                            f"{'x'.join(map(str, shapes[name])) or 'scalar'} holds {count}")
        values[name] = numbers
    dynamic = {}
    for name, axes in args.dynamic:
        if name not in shapes:
            raise UserError(f"--dynamic {name}: no --input named {name!r} (inputs: {', '.join(names)})")
        rank = len(shapes[name])
        bad = [a for a in axes if a >= rank]
        if bad:
            raise UserError(f"--dynamic {name}: axis {bad[0]} out of range for a rank-{rank} input")
        dynamic[name] = sorted(set(dynamic.get(name, [])) | set(axes))
    return values, dynamic


# --- tracing (shared with the fixture generators, scripts/fixtures_lib/export.py) --------

class _NullCtx:
    """Stands in for autograd's ctx: forward may call save_for_backward etc.; we need none."""

    def save_for_backward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


@contextlib.contextmanager
def inline_autograd_functions():
    """While active, `SomeFunction.apply(...)` runs `SomeFunction.forward` directly.

    Why: torch.jit.trace cannot record a Python autograd.Function ("Could not export Python
    function call"), but it can record the torch ops inside its forward. The TorchScript model
    then holds the forward's ops, while the ONNX export (outside this context) still goes
    through the Function's `symbolic`: exactly the pair of files a deployment engineer has.
    """
    import torch

    base = torch.autograd.function._SingleLevelFunction
    original = torch.autograd.Function.__dict__["apply"]

    def inlined_apply(cls, *args, **kwargs):
        # New-style Functions (forward without ctx, separate setup_context) take no ctx.
        if getattr(cls.setup_context, "__func__", cls.setup_context) is not base.setup_context:
            return cls.forward(*args, **kwargs)
        return cls.forward(_NullCtx(), *args, **kwargs)

    torch.autograd.Function.apply = classmethod(inlined_apply)
    try:
        yield
    finally:
        torch.autograd.Function.apply = original


def trace_inlining_autograd_functions(model, inputs, **trace_kwargs):
    """torch.jit.trace(model, inputs) with every autograd.Function's forward inlined."""
    import torch

    with inline_autograd_functions(), warnings.catch_warnings():
        # Tracer warnings (tolist, shape to int) are expected for these models; the fixture
        # check against ONNX Runtime is what decides whether the trace is usable.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return torch.jit.trace(model, tuple(inputs), **trace_kwargs)


def save_inputs(path, names, inputs):
    import numpy as np

    np.savez(path, **{n: t.detach().cpu().numpy() for n, t in zip(names, inputs)})


# --- building the model -------------------------------------------------------------------

def one_line(err):
    """One line saying why something failed, from an exception that may span paragraphs.

    The dynamo exporter wraps the real error in a banner and chains the cause; the legacy
    exporter's symbolic errors carry the TorchScript graph after the first line.
    """
    cause = err
    while cause.__cause__ is not None and "torch.onnx" in str(type(cause)) + str(cause)[:200]:
        cause = cause.__cause__
    lines = [l.strip() for l in str(cause).strip().splitlines() if l.strip()]
    text = lines[0] if lines else repr(cause)
    return f"{type(cause).__name__}: {text}"[:400]


def load_target(target, torch):
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"expected package.module:factory, got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise UserError(f"cannot import {module_name!r}: no module named {missing!r} "
                            f"(looked in the current directory {os.getcwd()!r} and --path "
                            f"entries)") from err
        raise UserError(f"importing {module_name!r} failed: {one_line(err)}") from err
    except Exception as err:
        raise UserError(f"importing {module_name!r} failed: {one_line(err)}") from err
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def build_model(obj, target, kwargs, torch):
    nn = torch.nn
    if isinstance(obj, nn.Module):
        if kwargs:
            raise UserError(f"{target} is a module instance; --kwargs needs a factory or class")
        model = obj
    elif callable(obj):
        try:
            model = obj(**kwargs)
        except Exception as err:
            raise UserError(f"calling {target}(**kwargs) failed: {one_line(err)}") from err
    else:
        raise UserError(f"{target} is a {type(obj).__name__}, not a factory or nn.Module")
    if not isinstance(model, nn.Module):
        raise UserError(f"{target} returned a {type(model).__name__}, not a torch.nn.Module")
    return model.eval()


def make_inputs(specs, values, seed, torch):
    """Example inputs in --input order; randomness from a generator of their own, so that
    they do not depend on how many random numbers the factory drew."""
    gen = torch.Generator().manual_seed(seed)
    tensors = []
    for name, shape, dtype_name in specs:
        dtype = getattr(torch, dtype_name)
        kind = next(k for t, k in DTYPES.values() if t == dtype_name)
        if name in values:
            t = torch.tensor(values[name], dtype=torch.float64).reshape(shape).to(dtype)
        elif kind == "float":
            t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
        elif kind == "int":
            t = torch.randint(0, 8, shape, generator=gen, dtype=torch.int64).to(dtype)
        else:
            t = torch.randint(0, 2, shape, generator=gen, dtype=torch.int64).to(torch.bool)
        tensors.append(t)
    return tensors


@contextlib.contextmanager
def recording_autograd_functions(torch, seen):
    """While active, records the class of every user autograd.Function that is applied."""
    original = torch.autograd.Function.__dict__["apply"]

    def recording_apply(cls, *args, **kwargs):
        if not cls.__module__.startswith("torch.") and cls.__name__ not in seen:
            seen.append(cls.__name__)
        return original.__get__(None, cls)(*args, **kwargs)

    torch.autograd.Function.apply = classmethod(recording_apply)
    try:
        yield
    finally:
        torch.autograd.Function.apply = original


def flatten_tensors(value, torch):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten_tensors(v, torch)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flatten_tensors(v, torch)]
    return []


# --- exporting ----------------------------------------------------------------------------

@contextlib.contextmanager
def quiet(debug):
    """Swallows exporter chatter (prints, warnings, torch.export's log handlers) unless --debug."""
    if debug:
        yield
        return
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), \
            contextlib.redirect_stderr(sink), _fds_silenced():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


@contextlib.contextmanager
def _fds_silenced():
    """Points file descriptors 1 and 2 at a scratch file: the legacy exporter's C++ side
    writes straight to them (`Torch IR graph at exception: ...`, pages long), past
    sys.stdout/sys.stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        with tempfile.TemporaryFile() as scratch:
            os.dup2(scratch.fileno(), 1)
            os.dup2(scratch.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def export_onnx(source, eager, inputs, path, args, input_names, output_names, dynamic, torch):
    """torch.onnx.export with per-input dynamic axes; returns a description of what ran.

    fixtures_lib.export.export_onnx only knows a dynamic batch on every input and refuses
    external data (fixtures must be small); a user's model needs neither restriction.
    """
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")  # a stale weight file would be read with the new graph
    weight_bytes = sum(t.numel() * t.element_size()
                       for t in list(eager.parameters()) + list(eager.buffers()))
    if args.exporter == "legacy":
        opset = args.opset or 17
        dynamic_axes = {n: {a: f"{n}_dim{a}" for a in axes} for n, axes in dynamic.items()}
        torch.onnx.export(source, tuple(inputs), path, dynamo=False, opset_version=opset,
                          input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes or None, do_constant_folding=True)
    else:
        dynamic_shapes = None
        if dynamic:
            dynamic_shapes = tuple(
                {a: torch.export.Dim(f"{n}_dim{a}") for a in dynamic.get(n, [])} or None
                for n in input_names)
        kwargs = {} if args.opset is None else {"opset_version": args.opset}
        # Weights inline unless the file would pass protobuf's 2 GB limit.
        torch.onnx.export(eager, tuple(inputs), path, dynamo=True, optimize=True,
                          external_data=weight_bytes > 1_500_000_000,
                          input_names=input_names, output_names=output_names,
                          dynamic_shapes=dynamic_shapes, verbose=False, report=False, **kwargs)


def export_program(model, inputs, input_names, dynamic, path, torch):
    """torch.export.export(model, inputs) saved to `path` by torch.export.save, then loaded
    back and run: the .pt2 reference. Dynamic axes (`--dynamic`) are Dim.AUTO, so that
    torch.export decides their ranges itself. Returns the loaded program's outputs."""
    shapes = None
    if dynamic:
        shapes = tuple({axis: torch.export.Dim.AUTO for axis in dynamic.get(name, [])} or None
                       for name in input_names)
    program = torch.export.export(model, tuple(inputs), dynamic_shapes=shapes)
    torch.export.save(program, path)
    loaded = torch.export.load(path).module()
    with torch.no_grad():
        return [t.numpy() for t in flatten_tensors(loaded(*inputs), torch)]


def run_onnxruntime(path, feeds, ort):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    # align-check runs ONNX Runtime with every optimisation off (to keep intermediates).
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return names, sess.run(None, {n: feeds[n] for n in names if n in feeds})


def describe(array):
    return f"{array.dtype}[{', '.join(map(str, array.shape))}]"


# --- the run ------------------------------------------------------------------------------

def run(args):
    for d in reversed([os.getcwd()] + [os.path.abspath(os.path.expanduser(p)) for p in args.path]):
        if d not in sys.path:
            sys.path.insert(0, d)
    values, dynamic = resolve_specs(args)
    input_names = [n for n, _, _ in args.inputs]

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time deprecation notes are not the user's
        try:
            import numpy as np
            import onnx
            import onnxruntime as ort
            import torch
        except ModuleNotFoundError as err:
            raise UserError(
                f"found no {err.name} for {sys.executable}, needs it to export; fix: "
                f"pip install 'align-check[export]' (torch, onnxruntime, onnx, onnxscript "
                f"as the wheel pins them), or use the environment of scripts/requirements.txt"
            ) from err

    obj = load_target(args.target, torch)
    torch.manual_seed(args.seed)
    model = build_model(obj, args.target, args.kwargs, torch)
    inputs = make_inputs(args.inputs, values, args.seed, torch)

    print(f"{args.prog}: {args.target} -> {type(model).__name__}")
    for (name, _, _), t in zip(args.inputs, inputs):
        how = "given values" if name in values else f"random, seed {args.seed}"
        dyn = f", dynamic axes {dynamic[name]}" if name in dynamic else ""
        print(f"  input  {name}: {describe(t.numpy())} ({how}{dyn})")

    functions = []
    try:
        with torch.no_grad(), recording_autograd_functions(torch, functions):
            eager_out = flatten_tensors(model(*inputs), torch)
    except Exception as err:
        raise UserError(f"model forward failed on the example inputs: {one_line(err)}") from err
    if not eager_out:
        raise UserError("model forward returned no tensors")
    output_names = [f"output{i}" for i in range(len(eager_out))]
    if functions:
        onnx_way = ("its symbolic" if args.exporter == "legacy"
                    else "dynamo ignores symbolic and traces forward")
        print(f"  custom autograd.Function: {', '.join(functions)} "
              f"(model.pt: forward inlined while tracing; model.onnx: {onnx_way})")

    os.makedirs(args.out, exist_ok=True)
    pt_path = os.path.join(args.out, "model.pt")
    onnx_path = os.path.join(args.out, "model.onnx")
    npz_path = os.path.join(args.out, "inputs.npz")

    t1 = time.perf_counter()
    how = "torch.jit.script" if args.script else "torch.jit.trace"
    try:
        with quiet(args.debug):
            if args.script:
                ts = torch.jit.script(model)
            else:
                ts = trace_inlining_autograd_functions(model, inputs)
            ts.save(pt_path)
    except Exception as err:
        hint = ""
        if functions and args.script:
            hint = (f" (torch.jit.script cannot compile autograd.Function "
                    f"{', '.join(functions)}; drop --script to trace with its forward inlined)")
        raise UserError(f"TorchScript export ({how}) failed: {one_line(err)}{hint}") from err
    t2 = time.perf_counter()
    print(f"  wrote  {pt_path} ({how}, {t2 - t1:.1f} s)")

    # The legacy exporter takes the scripted module itself (ONNX If/Loop from prim::If/Loop);
    # dynamo only takes eager modules.
    source = ts if args.script and args.exporter == "legacy" else model
    what = f"{args.exporter} exporter" + (f", opset {args.opset}" if args.opset else "")
    try:
        with torch.no_grad(), quiet(args.debug):
            export_onnx(source, model, inputs, onnx_path, args, input_names, output_names,
                        dynamic, torch)
    except Exception as err:
        hint = ""
        if functions and args.exporter == "dynamo":
            hint = (f" (dynamo ignores the symbolic of {', '.join(functions)}; "
                    f"try --exporter legacy)")
        raise UserError(f"ONNX export ({what}) failed: {one_line(err)}{hint}") from err
    t3 = time.perf_counter()
    proto = onnx.load(onnx_path, load_external_data=False)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    print(f"  wrote  {onnx_path} ({args.exporter} exporter, opset {opset}, {t3 - t2:.1f} s)")

    save_inputs(npz_path, input_names, inputs)
    print(f"  wrote  {npz_path} ({', '.join(input_names)})")

    pt2_path = os.path.join(args.out, "model.pt2")
    if args.pt2:
        t5 = time.perf_counter()
        try:
            with quiet(args.debug):
                pt2_out = export_program(model, inputs, input_names, dynamic, pt2_path, torch)
        except Exception as err:
            raise UserError(f"torch.export failed: {one_line(err)} (model.pt and model.onnx "
                            f"are written; drop --pt2 to use them)") from err
        print(f"  wrote  {pt2_path} (torch.export, {time.perf_counter() - t5:.1f} s; "
              f"{len(pt2_out)} output(s) after torch.export.load)")

    # Both files must load and run; their numbers are align-check's business.
    feeds = {n: t.numpy() for n, t in zip(input_names, inputs)}
    try:
        loaded = torch.jit.load(pt_path).eval()
        with torch.no_grad():
            ts_out = [t.numpy() for t in flatten_tensors(loaded(*inputs), torch)]
    except Exception as err:
        raise UserError(f"model.pt does not run after torch.jit.load: {one_line(err)}") from err
    try:
        onnx_inputs, ort_out = run_onnxruntime(onnx_path, feeds, ort)
    except Exception as err:
        raise UserError(f"ONNX Runtime cannot run model.onnx: {one_line(err)}") from err
    t4 = time.perf_counter()

    print("check (TorchScript vs ONNX Runtime CPU, optimisations off):")
    missing = [n for n in input_names if n not in onnx_inputs]
    if missing:
        print(f"  note: model.onnx has no input {', '.join(missing)} (unused by the model, "
              f"dropped by the exporter); model.pt still takes it, so inputs.npz keeps it")
    if len(ts_out) != len(ort_out):
        print(f"  note: TorchScript has {len(ts_out)} outputs, ONNX {len(ort_out)}")
    for i, (r, g) in enumerate(zip(ts_out, ort_out)):
        line = f"  {output_names[i] if i < len(output_names) else i}: TorchScript " \
               f"{describe(r)}, ONNX Runtime {describe(g)}"
        if r.shape == g.shape and r.size:
            diff = float(np.max(np.abs(r.astype(np.float64) - g.astype(np.float64))))
            scale = float(np.max(np.abs(r.astype(np.float64))))
            line += f", max abs diff {diff:.3g} (max |output| {scale:.3g})"
        elif r.shape != g.shape:
            line += ", SHAPES DIFFER"
        print(line)
    print(f"  ({t4 - t3:.1f} s; total {t4 - t0:.1f} s including imports)")
    print("next:")
    q = shlex.quote
    print(f"  align-check {q(pt_path)} {q(onnx_path)} --inputs {q(npz_path)}")
    if args.pt2:
        print(f"  align-check {q(pt2_path)} {q(onnx_path)} --inputs {q(npz_path)}")


def main(argv=None, prog=PROG, cmd=PROG):
    args = build_parser(prog, cmd).parse_args(argv)
    args.prog = prog
    try:
        run(args)
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        message = str(err) if isinstance(err, UserError) else f"unexpected {one_line(err)}"
        print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
