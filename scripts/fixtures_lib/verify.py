"""Numerical checks of fixtures: TorchScript (torch.jit.load) against ONNX Runtime on CPU.

A clean fixture must agree within 1e-4 at every output, a planted fault must differ by more
than 1e-3 somewhere, otherwise the fixture does not test what the manifest says. ONNX Runtime
is run both with its default optimisations and with all of them disabled, because align-check
runs it disabled (to keep intermediates) and a fixture must behave the same either way.

`first_divergent_node` exposes every top-level node output of two ONNX models that share their
structure (a clean export and its faulty twin) and finds the first node, in graph order, whose
output differs: the place the fault was planted, which is what align-check must point at.
"""

import numpy as np
import onnx
import onnxruntime as ort
import torch


def _session(model_bytes_or_path, optimise=True):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 2
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_bytes_or_path, so, providers=["CPUExecutionProvider"])


def run_onnx(path, feeds, optimise=True):
    sess = _session(path, optimise)
    names = [i.name for i in sess.get_inputs()]
    assert sorted(names) == sorted(feeds), f"ONNX inputs {names} != npz keys {sorted(feeds)}"
    return sess.run(None, feeds)


def run_torchscript(path, feeds, input_names):
    module = torch.jit.load(path)
    module.eval()
    with torch.no_grad():
        out = module(*[torch.from_numpy(feeds[n]) for n in input_names])
    if isinstance(out, torch.Tensor):
        out = (out,)
    return [o.numpy() for o in out]


def max_output_diff(model_pt, model_onnx, feeds, input_names):
    """Largest |torch - ort| over all outputs, for both ORT optimisation settings."""
    ref = run_torchscript(model_pt, feeds, input_names)
    worst = 0.0
    for optimise in (True, False):
        got = run_onnx(model_onnx, feeds, optimise)
        assert len(got) == len(ref), f"{len(got)} ONNX outputs vs {len(ref)} TorchScript"
        for r, g in zip(ref, got):
            assert r.shape == g.shape, f"output shape {g.shape} vs TorchScript {r.shape}"
            worst = max(worst, float(np.max(np.abs(r.astype(np.float64) - g))))
    return worst


def _all_node_outputs(path, feeds):
    model = onnx.load(path)
    graph_outputs = {o.name for o in model.graph.output}
    order = []
    for node in model.graph.node:
        for o in node.output:
            if o and o not in graph_outputs:
                # ORT accepts a name-only ValueInfoProto as an extra output.
                model.graph.output.append(onnx.ValueInfoProto(name=o))
            if o:
                order.append((node.name, o))
    sess = _session(model.SerializeToString(), optimise=False)
    names = [o.name for o in sess.get_outputs()]
    values = dict(zip(names, sess.run(None, feeds)))
    return order, values


def first_divergent_node(clean_onnx, fault_onnx, feeds, atol=1e-6):
    """(name, max abs diff, clean max |value|) of the first node of `fault_onnx` whose output
    differs from the same-named output of `clean_onnx`; (None, 0, 0) when none does."""
    _, clean = _all_node_outputs(clean_onnx, feeds)
    order, fault = _all_node_outputs(fault_onnx, feeds)
    for node_name, out in order:
        if out in clean and clean[out].shape == fault[out].shape:
            ref = clean[out].astype(np.float64)
            d = float(np.max(np.abs(ref - fault[out]), initial=0.0))
            if d > atol:
                return node_name, d, float(np.max(np.abs(ref), initial=0.0))
    return None, 0.0, 0.0
