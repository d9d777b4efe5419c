"""Planting known errors into exported ONNX models.

Each function edits one node or initializer of a clean export in place and returns the name of
the ONNX node it changed, so the fixture script can check that this node is where the faulty
model first departs from the clean one. The edits mimic real export bugs: a wrong weight, a
Resize with the wrong coordinate mode, a LayerNorm epsilon lost in export, a GELU exported with
the wrong approximation. Each asserts the structure it expects, so a change in the exporter
shows up as a loud failure here rather than as a fixture with no fault in it.
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
