"""The sweep's own check for float16 overflow inside a converted graph, made without align-check.

A float16 conversion of a network whose intermediate activations exceed 65504 (float16's
largest finite value) has values its graph cannot hold. An output-only check with ONNX
Runtime's optimisations off can miss it: the CPU provider runs float16 nodes it has no kernel
for in float32 between casts, and on the hazards family's float16 models the outputs stay finite
with optimisations off while they hold NaN from the basic level up (the level users ship), as
with any run that reads the intermediate value or a float16 kernel. The pair's `reference` records which float16-typed values of the converted graph
the float32 source graph computes beyond that limit on the pair's inputs (`float16_overflow`); a
clean pair with such a value is a real divergence when align-check fails it, not a false alarm.
"""

import os
import tempfile

import numpy as np

FLOAT16_MAX = 65504.0


def float16_values(fp16_path):
    """Names of the values the converted graph types float16 (shape inference fills in those
    the converter left untyped)."""
    import onnx
    model = onnx.shape_inference.infer_shapes(onnx.load(fp16_path))
    graph = model.graph
    typed = list(graph.value_info) + list(graph.output)
    half = onnx.TensorProto.FLOAT16
    return {v.name for v in typed if v.type.tensor_type.elem_type == half}


def float16_overflow(fp16_path, source_path, feeds):
    """[{name, max_abs}] of the float16 values of `fp16_path` that `source_path` (the float32
    graph it was converted from, same value names) computes beyond 65504 on `feeds`."""
    import onnx
    import onnxruntime as ort
    half = float16_values(fp16_path)
    source = onnx.load(source_path)
    produced = {out for node in source.graph.node for out in node.output}
    existing = {o.name for o in source.graph.output}
    watched = sorted((half & produced) - existing)
    for name in watched:
        source.graph.output.append(onnx.ValueInfoProto(name=name))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory() as folder:
        # Through a file: a serialised model over 2 GB cannot be handed over as bytes.
        path = os.path.join(folder, "watched.onnx")
        onnx.save(source, path, save_as_external_data=source.ByteSize() > 1 << 30)
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        inputs = {i.name: feeds[i.name] for i in sess.get_inputs() if i.name in feeds}
        values = sess.run(None, inputs)
    found = []
    for name, value in zip(names, values):
        if name not in half or not isinstance(value, np.ndarray) or value.size == 0:
            continue
        if not np.issubdtype(value.dtype, np.floating):
            continue
        finite = value[np.isfinite(value)]
        peak = float(np.abs(finite).max()) if finite.size else 0.0
        if peak > FLOAT16_MAX:
            found.append({"name": name, "max_abs": peak})
    return found
