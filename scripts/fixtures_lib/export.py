"""Turning an eager PyTorch model into the three files align-check reads, and describing them.

Responsible for: tracing/scripting to TorchScript (with `torch.autograd.Function` ops inlined,
see `trace_inlining_autograd_functions`), exporting to ONNX with the legacy or dynamo exporter,
writing inputs.npz keyed by ONNX input names, and reading back what a fixture's manifest entry
states about it (ONNX signature, opset, dynamo scope metadata, the TorchScript module paths).
Other export helpers in scripts/ reuse `trace_inlining_autograd_functions` and `export_onnx`.
"""

import contextlib
import io
import logging
import os
import re
import warnings

import numpy as np
import onnx
import torch

_SKIP_KINDS = ("prim::Constant", "prim::GetAttr", "prim::ListConstruct", "prim::TupleConstruct",
               "prim::ListUnpack", "prim::TupleUnpack", "prim::NumToTensor")


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
    with inline_autograd_functions(), warnings.catch_warnings():
        # Tracer warnings (tolist, shape to int) are expected for these models; the fixture
        # check against ONNX Runtime is what decides whether the trace is usable.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return torch.jit.trace(model, tuple(inputs), **trace_kwargs)


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


def save_inputs(path, names, inputs):
    np.savez(path, **{n: t.detach().cpu().numpy() for n, t in zip(names, inputs)})


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
