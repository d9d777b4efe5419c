"""Turning an eager PyTorch model into the three files align-check reads, and describing them.

Responsible for: tracing/scripting to TorchScript (with `torch.autograd.Function` ops inlined,
see `trace_inlining_autograd_functions`, which with `save_inputs` it takes from the export
helper python/align_check/export.py so that fixtures and users' exports trace alike), exporting to ONNX with the legacy or dynamo exporter,
writing inputs.npz keyed by ONNX input names, and reading back what a fixture's manifest entry
states about it (ONNX signature, opset, dynamo scope metadata, the TorchScript module paths).
Other export helpers in scripts/ reuse `trace_inlining_autograd_functions` and `export_onnx`.
For the library fixture family it also resolves TorchScript module paths through iterated
containers and shared modules (`expected_modules_resolved`) and reproduces the dynamo
exporter's old JIT-trace fallback (`export_dynamo_with_jit_fallback`).
"""

import contextlib
import io
import logging
import os
import re
import sys
import warnings

import numpy as np
import onnx
import torch

# Tracing with autograd.Functions inlined and writing inputs.npz are the export helper's
# (python/align_check/export.py, shipped in the wheel); the fixtures use the same code.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from align_check.export import (  # noqa: E402,F401  (re-exported for the generators)
    inline_autograd_functions, save_inputs, trace_inlining_autograd_functions)

_SKIP_KINDS = ("prim::Constant", "prim::GetAttr", "prim::ListConstruct", "prim::TupleConstruct",
               "prim::ListUnpack", "prim::TupleUnpack", "prim::NumToTensor")


@contextlib.contextmanager
def patched_symbolic(function_cls, symbolic):
    """Temporarily replaces an autograd.Function's `symbolic` (to plant a wrong mapping)."""
    original = function_cls.__dict__["symbolic"]
    function_cls.symbolic = staticmethod(symbolic)
    try:
        yield
    finally:
        function_cls.symbolic = original


@contextlib.contextmanager
def _quiet_logging():
    """torch.export logs warnings through handlers bound to the real stderr (redirecting
    sys.stderr does not reach them); a failing dynamo export would litter the output."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def export_onnx(model, inputs, path, exporter, input_names, output_names, opset=None,
                dynamic_batch=False):
    """Exports with the legacy (TorchScript-based) or dynamo exporter; returns the opset used.

    dynamo keeps `optimize=True` (its default): it fuses BN into Conv like the legacy exporter
    and, as checked, the fused nodes keep `pkg.torch.onnx.name_scopes` of the BN module.
    Console chatter of the exporters is swallowed; errors propagate.
    """
    inputs = tuple(inputs)
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), \
            contextlib.redirect_stderr(sink), _quiet_logging():
        warnings.simplefilter("ignore")
        if exporter == "legacy":
            dynamic_axes = None
            if dynamic_batch:
                dynamic_axes = {n: {0: "batch"} for n in list(input_names) + list(output_names)}
            torch.onnx.export(model, inputs, path, dynamo=False, opset_version=opset or 17,
                              input_names=list(input_names), output_names=list(output_names),
                              dynamic_axes=dynamic_axes, do_constant_folding=True)
        elif exporter == "dynamo":
            dynamic_shapes = None
            if dynamic_batch:
                batch = torch.export.Dim("batch", min=1, max=1024)
                dynamic_shapes = tuple({0: batch} for _ in inputs)
            kwargs = {} if opset is None else {"opset_version": opset}
            torch.onnx.export(model, inputs, path, dynamo=True, optimize=True,
                              external_data=False, input_names=list(input_names),
                              output_names=list(output_names), dynamic_shapes=dynamic_shapes,
                              verbose=False, report=False, **kwargs)
        else:
            raise ValueError(f"unknown exporter {exporter!r}")
    if os.path.exists(path + ".data"):
        raise RuntimeError("exporter wrote external data; fixtures must be self-contained")
    return onnx_opset(onnx.load(path))


def load_inputs(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def onnx_opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def onnx_signature(model):
    """Graph inputs (initializers excluded) and outputs as manifest-ready dicts."""
    inits = {i.name for i in model.graph.initializer}

    def describe(vi):
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
        return {"name": vi.name, "onnx_shape": dims, "dtype": dtype}

    ins = [describe(v) for v in model.graph.input if v.name not in inits]
    outs = [describe(v) for v in model.graph.output]
    return ins, outs


def dynamo_scope_summary(model):
    """How many nodes carry `pkg.torch.onnx.name_scopes`, and one example's metadata."""
    nodes = list(model.graph.node)
    with_scopes = [n for n in nodes
                   if any(p.key == "pkg.torch.onnx.name_scopes" for p in n.metadata_props)]
    example = None
    for n in with_scopes:
        props = {p.key: p.value for p in n.metadata_props}
        if props["pkg.torch.onnx.name_scopes"].count(",") >= 3:  # prefer a nested one
            example = {"node": n.name, "op_type": n.op_type, "metadata_props": props}
            break
    if example is None and with_scopes:
        n = with_scopes[0]
        example = {"node": n.name, "op_type": n.op_type,
                   "metadata_props": {p.key: p.value for p in n.metadata_props}}
    return {"nodes": len(nodes), "nodes_with_name_scopes": len(with_scopes), "example": example}


_HIER_PART = re.compile(r"([^.()]+)\([^()]*\)")


# Scripted models add pseudo-instances: `SELF(Conv2d)` when a module calls its own method
# (Conv2d.forward -> self._conv_forward) and `UNKNOWN_INSTANCE(UNKNOWN_TYPE)` inside free
# functions (F.relu, F.batch_norm). Neither is a module path component.
_PSEUDO_INSTANCES = ("SELF", "UNKNOWN_INSTANCE")


def hierarchy_to_path(hierarchy):
    """`layer1(Sequential).0(BasicBlock).conv1(Conv2d)` -> `layer1.0.conv1`;
    `body(LoopIfBody).conv(Conv2d).SELF(Conv2d)` -> `body.conv`."""
    return ".".join(p for p in _HIER_PART.findall(hierarchy) if p not in _PSEUDO_INSTANCES)


def torch_module_listing(model_pt):
    """(kind, module path, hierarchy string, block depth) of every computing TorchScript node.

    Uses the same view align-check's C++ side has: the loaded `forward` graph, inlined, with
    `getModuleHierarchy` per node, recursing into prim::If / prim::Loop blocks (depth > 0).
    """
    module = torch.jit.load(model_pt)
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    rows = []

    def walk(block, depth):
        for node in block.nodes():
            if node.kind() not in _SKIP_KINDS:
                h = node.getModuleHierarchy()
                rows.append((node.kind(), hierarchy_to_path(h), h, depth))
            for sub in node.blocks():
                walk(sub, depth + 1)

    walk(graph, 0)
    return rows


def expected_modules(model_pt, eager_model):
    """Module paths that TorchScript nodes really carry (and that exist in the eager model).

    Only paths that are some node's own (deepest) module are listed: a container such as a
    Sequential with no op of its own never shows up as a node's module, so it is not listed.
    """
    names = {n for n, _ in eager_model.named_modules()}
    seen = []
    for _, path, _, _ in torch_module_listing(model_pt):
        if path and path not in seen:
            if path not in names:
                raise AssertionError(f"TorchScript module path {path!r} not in named_modules")
            seen.append(path)
    return seen


# Qualified module paths through iterated containers and shared instances ---------------------
#
# libtorch names a node's module by its inlined call stack, one frame per CallMethod, each
# named after the *last* GetAttr that produced the callee. A container that is iterated rather
# than called (`for layer in self.layer`, Ultralytics' `for m in self.model`) is only a GetAttr
# on the way, so its name is lost: `encoder.0.attention` for `encoder.layer.0.attention`. A
# module that torch.jit.trace hands to its caller as an argument (Ultralytics' shared
# `Conv.default_act`) has no GetAttr at all: INSTANCE_NAME_UNKNOWN. The functions below walk the
# un-inlined method graphs of the loaded model.pt instead, following every GetAttr chain, so
# each node gets the path `named_modules()` (and the legacy exporter) would give it; a module
# received as an argument is named by the attribute of the receiving module that holds the
# same type, i.e. by the path it was called through (`model.4.cv1.act`).

_UNKNOWN_INSTANCE_NAME = "INSTANCE_NAME_UNKNOWN"


def _join(*parts):
    return ".".join(p for p in parts if p)


def _child_modules(module):
    return dict(getattr(module, "_modules", {}) or {})


_MANGLE = re.compile(r"___torch_mangle_\d+\.")


def _type_name(t):
    """Class name without TorchScript's mangling: tracing gives every instance whose
    attributes differ its own `___torch_mangle_N` type, so the shared SiLU passed as an
    argument and the receiving Conv's `act` attribute can have different mangled types."""
    return _MANGLE.sub("", str(t))


def _method_graph(module, name):
    return module._c._get_method(name).graph


def resolved_module_listing(model_pt):
    """(kind, resolved path, call-stack path, block depth) of every computing TorchScript node,
    in the order of the inlined graph. The call-stack path is what libtorch's
    getModuleHierarchy gives after `hierarchy_to_path` (pseudo frames SELF and
    UNKNOWN_INSTANCE dropped); prim::CallFunction bodies are one row at the caller's path
    (their inlined nodes carry the caller's path plus a dropped UNKNOWN_INSTANCE frame)."""
    root = torch.jit.load(model_pt)
    rows = []

    def frame(module, method, resolved, raw, arg_values):
        graph = _method_graph(module, method)
        inputs = list(graph.inputs())
        # env: Value.unique() -> (module object, resolved path, last GetAttr name or marker)
        env = {inputs[0].unique(): (module, resolved, "SELF")}
        for v, arg in zip(inputs[1:], arg_values):
            if arg is None:
                continue
            # A module passed in as an argument: name it by the receiving module's attribute
            # of the same type (the path it was called through), else by where it came from.
            type_str = _type_name(v.type())
            owners = [(n, m) for n, m in _child_modules(module).items()
                      if _type_name(m._c._type()) == type_str]
            if len(owners) == 1:
                # Keep the passed object for its methods: the attribute's own type may have
                # been left uncompiled (only the instance that was traced has a forward).
                env[v.unique()] = (arg[0], _join(resolved, owners[0][0]), None)
            else:
                env[v.unique()] = (arg[0], arg[1], None)
        walk(graph.block(), env, module, resolved, raw, 0)

    def walk(block, env, module, resolved, raw, depth):
        for node in block.nodes():
            kind = node.kind()
            if kind == "prim::GetAttr":
                src = env.get(node.inputsAt(0).unique())
                if src is not None:
                    name = node.s("name")
                    child = _child_modules(src[0]).get(name)
                    if child is not None:
                        env[node.output().unique()] = (child, _join(src[1], name), name)
                continue
            if kind == "prim::CallMethod":
                callee = env.get(node.inputsAt(0).unique())
                if callee is None:
                    raise AssertionError(f"cannot resolve the module called by {node}")
                cmod, cpath, last = callee
                if last == "SELF":
                    craw = raw  # a method of the same module: pseudo frame, dropped
                else:
                    craw = _join(raw, last if last else _UNKNOWN_INSTANCE_NAME)
                args = [env.get(v.unique()) for v in list(node.inputs())[1:]]
                frame(cmod, node.s("name"), cpath, craw, args)
                continue
            if kind not in _SKIP_KINDS:
                rows.append((kind, resolved, raw, depth))
            for sub in node.blocks():
                walk(sub, env, module, resolved, raw, depth + 1)

    frame(root, "forward", "", "", [])
    return rows


def _ordered_unique(items):
    seen = []
    for i in items:
        if i and i not in seen:
            seen.append(i)
    return seen


def expected_modules_resolved(model_pt, eager_model):
    """(expected_modules, call_paths) for models whose containers are iterated or whose
    modules are shared.

    expected_modules: resolved module paths that TorchScript nodes carry, in order; each is
    checked against `named_modules(remove_duplicate=False)` of the eager model (a shared
    instance is listed there under every parent). call_paths: {resolved: call-stack path} for
    every path where libtorch's call stack says something else. The walk is cross-checked
    against libtorch's own getModuleHierarchy: both must list the same call-stack paths in
    the same order, otherwise the walk does not mirror inlining and this raises.
    """
    rows = resolved_module_listing(model_pt)
    walk_raw = _ordered_unique(r[2] for r in rows)
    lib_raw = _ordered_unique(r[1] for r in torch_module_listing(model_pt))
    if walk_raw != lib_raw:
        raise AssertionError("module walk does not mirror libtorch's call stacks:\n"
                             f"walk: {walk_raw}\nlibtorch: {lib_raw}")
    names = {n for n, _ in eager_model.named_modules(remove_duplicate=False)}
    paths = _ordered_unique(r[1] for r in rows)
    for p in paths:
        if p not in names:
            raise AssertionError(f"resolved TorchScript module path {p!r} not in named_modules")
    call_paths = {}
    for _, resolved, raw, _ in rows:
        if resolved and resolved != raw:
            call_paths.setdefault(resolved, raw)
    return paths, call_paths


# The dynamo exporter's old JIT-trace fallback ------------------------------------------------

def export_dynamo_with_jit_fallback(model, inputs, path, input_names, output_names):
    """Dynamo export that falls back the way torch.onnx did up to 2.10 when torch.export fails.

    torch.onnx.export(dynamo=True) tries torch.export non-strict, then strict. Up to torch 2.10
    it then fell back to JitTraceConvertStrategy: torch.jit.trace, converted to an
    ExportedProgram by torch._export.converter.TS2EPConverter, whose FX nodes carry no
    nn_module_stack (so no module scopes reach the ONNX nodes). torch 2.11 removed the
    `fallback` option and the strategy, but not the converter: this runs the same two captures,
    and only when both fail, the same conversion, then exports that ExportedProgram with the
    dynamo exporter (optimize=True, like export_onnx).
    Returns (strategy, [capture errors]); raises if torch.export succeeds (nothing fell back).
    """
    from torch._export.converter import TS2EPConverter
    inputs = tuple(inputs)
    errors = []
    with warnings.catch_warnings(), _quiet_logging(), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        for strict in (False, True):
            try:
                torch.export.export(model, inputs, strict=strict)
            except Exception as err:  # the failure is the point
                cause = err.__cause__ or err
                errors.append(f"torch.export(strict={strict}): {type(cause).__name__}: "
                              f"{str(cause).strip().splitlines()[0][:200]}")
            else:
                raise AssertionError(f"torch.export(strict={strict}) captured the model: "
                                     "the dynamo exporter would not fall back")
        traced = torch.jit.trace(model, inputs, check_trace=False, strict=False)
        program = TS2EPConverter(traced, inputs).convert()
        torch.onnx.export(program, inputs, path, dynamo=True, optimize=True,
                          external_data=False, input_names=list(input_names),
                          output_names=list(output_names), verbose=False, report=False)
    if os.path.exists(path + ".data"):
        raise RuntimeError("exporter wrote external data; fixtures must be self-contained")
    return "jit_trace_convert (torch._export.converter.TS2EPConverter)", errors


def module_scope_summary(model):
    """Nodes carrying any pkg.torch.onnx.name_scopes, and those whose scopes name a module
    (more than the root '' plus the node's own name)."""
    import ast
    nodes = list(model.graph.node)
    with_scopes = with_module = 0
    for n in nodes:
        props = {p.key: p.value for p in n.metadata_props}
        if "pkg.torch.onnx.name_scopes" in props:
            with_scopes += 1
            scopes = ast.literal_eval(props["pkg.torch.onnx.name_scopes"])
            if any(s and not s.startswith("_empty_nn_module_stack") for s in scopes[:-1]):
                with_module += 1
    return {"nodes": len(nodes), "nodes_with_name_scopes": with_scopes,
            "nodes_with_module_scopes": with_module}
