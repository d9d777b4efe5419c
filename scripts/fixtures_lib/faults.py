"""Planting known errors into exported ONNX models.

Each function edits one node or initializer of a clean export in place and returns the name of
the ONNX node it changed, so the fixture script can check that this node is where the faulty
model first departs from the clean one. The edits mimic real export bugs: a wrong weight, a
Resize with the wrong coordinate mode, a LayerNorm epsilon lost in export, a GELU exported with
the wrong approximation. Each asserts the structure it expects, so a change in the exporter
shows up as a loud failure here rather than as a fixture with no fault in it. The second half
serves the library fixtures: weight and bias slices, a LayerNorm epsilon by node, a SiLU turned
hard-swish, a torch.roll undone, an attention scale changed, GELU's Erf swapped for the tanh
approximation, and removing node metadata (a scope-less graph).
"""

import numpy as np
import onnx
from onnx import numpy_helper


def _node(model, predicate, what):
    found = [n for n in model.graph.node if predicate(n)]
    if not found:
        raise AssertionError(f"no ONNX node for {what}; nodes: "
                             f"{[n.name for n in model.graph.node]}")
    return found[0]


def _attr(node, name):
    for a in node.attribute:
        if a.name == name:
            return a
    raise AssertionError(f"{node.name} has no attribute {name}")


def scale_conv_out_channel(model, node_name, channel=0, factor=1.05):
    """Multiplies one output channel of a Conv's weight initializer by `factor`."""
    node = _node(model, lambda n: n.name == node_name and n.op_type == "Conv", node_name)
    weight_name = node.input[1]
    users = [n.name for n in model.graph.node if weight_name in n.input]
    assert users == [node.name], f"weight {weight_name} shared by {users}"
    init = next(i for i in model.graph.initializer if i.name == weight_name)
    w = numpy_helper.to_array(init).copy()
    w[channel] *= np.float32(factor)
    init.CopyFrom(numpy_helper.from_array(w, weight_name))
    return node.name


def set_resize_coordinate_mode(model, mode_value, new_mode):
    """Sets coordinate_transformation_mode of the first Resize with the given `mode`."""
    node = _node(model, lambda n: n.op_type == "Resize"
                 and _attr(n, "mode").s.decode() == mode_value, f"Resize mode={mode_value}")
    attr = _attr(node, "coordinate_transformation_mode")
    before = attr.s.decode()
    assert before != new_mode, f"{node.name} already uses {new_mode}"
    attr.s = new_mode.encode()
    return node.name, before


def set_first_layernorm_epsilon(model, eps):
    """Sets epsilon of the first LayerNormalization node (opset >= 17 exports a single node)."""
    node = _node(model, lambda n: n.op_type == "LayerNormalization", "LayerNormalization")
    try:
        attr = _attr(node, "epsilon")
        before = attr.f
        attr.f = eps
    except AssertionError:  # attribute omitted means the default 1e-5
        before = 1e-5
        node.attribute.append(onnx.helper.make_attribute("epsilon", eps))
    return node.name, before


def set_gelu_approximate(model, value):
    """Sets `approximate` of the single Gelu node (opset 20)."""
    nodes = [n for n in model.graph.node if n.op_type == "Gelu"]
    assert len(nodes) == 1, f"expected one Gelu node, found {[n.name for n in nodes]}"
    node = nodes[0]
    attrs = [a for a in node.attribute if a.name == "approximate"]
    before = attrs[0].s.decode() if attrs else "none"
    if attrs:
        attrs[0].s = value.encode()
    else:
        node.attribute.append(onnx.helper.make_attribute("approximate", value))
    return node.name, before


# Faults for the library fixture family (scripts/make_library_fixtures.py) -------------------
#
# Same idea as above: edit one node (or the initializer only it reads) so that this node's
# output is the first to differ; most return its name, the two that take a node name return
# the value they replaced instead. A changed Constant node would itself be the first divergent
# node, so replacement constants are added as new initializers.

def _init(model, name):
    found = [i for i in model.graph.initializer if i.name == name]
    assert found, f"no initializer {name}"
    return found[0]


def _sole_user(model, value, node):
    users = [n.name for n in model.graph.node if value in n.input]
    assert users == [node.name], f"{value} is read by {users}, not only {node.name}"


def _constant_value(model, value):
    """numpy value of a Constant node output or initializer named `value`."""
    for n in model.graph.node:
        if n.op_type == "Constant" and value in n.output:
            return numpy_helper.to_array(_attr(n, "value").t)
    return numpy_helper.to_array(_init(model, value))


def scale_initializer_slice(model, node_name, input_index, factor, axis=None, index=None):
    """Multiplies an initializer input of a node by `factor`, whole or one index along `axis`
    (e.g. one output column of a MatMul weight, which is stored [in, out])."""
    node = _node(model, lambda n: n.name == node_name, node_name)
    name = node.input[input_index]
    _sole_user(model, name, node)
    init = _init(model, name)
    w = numpy_helper.to_array(init).copy()
    if axis is None:
        w *= np.float32(factor)
    else:
        sl = [slice(None)] * w.ndim
        sl[axis] = index
        w[tuple(sl)] *= np.float32(factor)
    init.CopyFrom(numpy_helper.from_array(w, name))
    return node.name


def offset_initializer_range(model, node_name, input_index, start, stop, offset):
    """Adds `offset` to elements start:stop of a 1-D initializer input (a bias slice)."""
    node = _node(model, lambda n: n.name == node_name, node_name)
    name = node.input[input_index]
    _sole_user(model, name, node)
    init = _init(model, name)
    b = numpy_helper.to_array(init).copy()
    assert b.ndim == 1 and stop <= b.shape[0], b.shape
    b[start:stop] += np.float32(offset)
    init.CopyFrom(numpy_helper.from_array(b, name))
    return node.name


def set_layernorm_epsilon(model, node_name, eps):
    """Sets epsilon of the named LayerNormalization node; returns the old value."""
    node = _node(model, lambda n: n.name == node_name and n.op_type == "LayerNormalization",
                 node_name)
    attrs = [a for a in node.attribute if a.name == "epsilon"]
    before = attrs[0].f if attrs else 1e-5
    if attrs:
        attrs[0].f = eps
    else:
        node.attribute.append(onnx.helper.make_attribute("epsilon", eps))
    return before


def sigmoid_to_hardsigmoid(model, node_name):
    """Turns one Sigmoid into HardSigmoid(alpha=1/6, beta=0.5): that SiLU becomes hard-swish,
    the classic close approximation (mobile exports substitute it)."""
    node = _node(model, lambda n: n.name == node_name and n.op_type == "Sigmoid", node_name)
    node.op_type = "HardSigmoid"
    node.attribute.extend([onnx.helper.make_attribute("alpha", 1.0 / 6.0),
                           onnx.helper.make_attribute("beta", 0.5)])
    return node.name


def swap_concat_inputs(model, node_name):
    """Swaps the two inputs of a Concat. For the Concat that completes a torch.roll
    decomposition (Slice tail, Slice head, Concat) this undoes the shift along that axis."""
    node = _node(model, lambda n: n.name == node_name and n.op_type == "Concat", node_name)
    assert len(node.input) == 2, list(node.input)
    a, b = node.input
    node.input[0], node.input[1] = b, a
    return node.name


def replace_mul_constant(model, node_name, value):
    """Points a Mul's constant operand at a new initializer holding `value`; returns the old
    value. (Editing the Constant node would make that Constant the first divergent node.)"""
    node = _node(model, lambda n: n.name == node_name and n.op_type == "Mul", node_name)
    names = {i.name for i in model.graph.initializer}
    consts = {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    idx = [i for i, v in enumerate(node.input) if v in consts or v in names]
    assert len(idx) == 1, f"{node.name}: constant operand not unique ({list(node.input)})"
    old = _constant_value(model, node.input[idx[0]])
    new_name = f"{node.name}/fault_constant"
    model.graph.initializer.append(
        numpy_helper.from_array(np.asarray(value, dtype=old.dtype).reshape(old.shape), new_name))
    node.input[idx[0]] = new_name
    return old


def erf_to_tanh_approximation(model, node_name):
    """Replaces Erf(u) inside an exact GELU decomposition by the tanh approximation's
    equivalent, tanh(2/sqrt(pi) * (u + 0.044715 * 2 * u^3)) with u = x / sqrt(2): the GELU then
    computes gelu(x, approximate="tanh"). The final Tanh keeps the Erf's name and output, so the
    planted node is that Tanh; the helper nodes before it are new (absent from the clean graph).
    """
    from onnx import helper
    idx, node = next((i, n) for i, n in enumerate(model.graph.node)
                     if n.name == node_name and n.op_type == "Erf")
    u, out = node.input[0], node.output[0]
    c1 = float(2.0 / np.sqrt(np.pi))
    c3 = float(2.0 / np.sqrt(np.pi) * 0.044715 * 2.0)
    p = node_name + "/tanh_approx"
    model.graph.initializer.extend([
        numpy_helper.from_array(np.asarray(c1, np.float32), p + "/c1"),
        numpy_helper.from_array(np.asarray(c3, np.float32), p + "/c3")])
    new = [
        helper.make_node("Mul", [u, u], [p + "/u2"], name=p + "/Mul_u2"),
        helper.make_node("Mul", [p + "/u2", u], [p + "/u3"], name=p + "/Mul_u3"),
        helper.make_node("Mul", [u, p + "/c1"], [p + "/a"], name=p + "/Mul_a"),
        helper.make_node("Mul", [p + "/u3", p + "/c3"], [p + "/b"], name=p + "/Mul_b"),
        helper.make_node("Add", [p + "/a", p + "/b"], [p + "/s"], name=p + "/Add"),
        helper.make_node("Tanh", [p + "/s"], [out], name=node_name),
    ]
    del model.graph.node[idx]
    for k, n in enumerate(new):
        model.graph.node.insert(idx + k, n)
    return node_name


def strip_node_metadata(model):
    """Removes every node's metadata_props (pkg.torch.onnx.name_scopes, class_hierarchy,
    stack_trace, fx_node, namespace, onnxscript rewriter notes); returns how many were removed."""
    removed = 0
    for n in model.graph.node:
        removed += len(n.metadata_props)
        del n.metadata_props[:]
    return removed
