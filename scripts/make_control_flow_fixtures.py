#!/usr/bin/env python3
"""Writes scripted control-flow pairs (ONNX `Loop` and `If`) into tests/fixtures/control_flow/.

One network, scripted with torch.jit.script and exported by the legacy exporter:

    x = stem(x)
    for _ in range(x.size(0) + 1):      # two trips for batch 1
        x = x + 0.5 * block(x)          # block = Conv 3x3 + ReLU
    if x.mean() > 0: x = pos(x)         # data-dependent branch
    else:            x = neg(x)
    return head(x)

Why `x.size(0) + 1`: a trip count the script compiler cannot see (it unrolls `range(2)` and
`range(self.steps)` itself, and then the ONNX has no Loop), but that the exporter folds to a
Constant because the input's shape is static. The ONNX therefore holds a `Loop` whose trip
count is a constant 2 and whose condition is constant true, and an `If` whose condition is
computed from the data. Both are checked with onnx below; the script fails if they are not
there.

- scripted_loop_if: the clean pair.
- fault_loop_body: the same ONNX with the weight of one output channel of the Conv inside
  the Loop body scaled by 1.05. The expected culprit is read from the mutated graph: the
  module scope of the node that reads the changed initializer, in its first iteration.
- dynamic_loop: the same archive exported with a dynamic batch: the trip count is now
  computed from the input's shape (Shape, Gather, Add), so the Loop stays a Loop; checked
  with `--shape input=1x3x16x16` (expected.json's `shape`).

expected.json in each folder says what tests/it/control_flow.rs checks against. Random
weights, seeded. Run with the pinned interpreter:
.venv/bin/python scripts/make_control_flow_fixtures.py
It overwrites tests/fixtures/control_flow/ and nothing else.
"""

import json
import os
import shutil
import warnings

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from fixtures_lib import export as ex
from fixtures_lib.manifest import fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULT_SCALE = 1.05
FAULT_CHANNEL = 2


class Block(torch.nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = torch.nn.Conv2d(ch, ch, 3, padding=1)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.conv(x))


class LoopIfNet(torch.nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, ch, 3, padding=1)
        self.block = Block(ch)
        self.pos = torch.nn.Conv2d(ch, ch, 1)
        self.neg = torch.nn.Conv2d(ch, ch, 3, padding=1)
        self.head = torch.nn.Conv2d(ch, 4, 1)

    def forward(self, x):
        x = self.stem(x)
        for _ in range(x.size(0) + 1):
            x = x + 0.5 * self.block(x)
        if x.mean() > 0:
            x = self.pos(x)
        else:
            x = self.neg(x)
        return self.head(x)


def subgraph_nodes(graph):
    """Every node of `graph` and of its subgraphs, outermost first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from subgraph_nodes(attr.g)


def check_control_flow(model):
    """The export must keep a Loop and an If in the main graph: that is the point."""
    ops = {n.op_type for n in model.graph.node}
    missing = {"Loop", "If"} - ops
    if missing:
        raise SystemExit(f"the export has no {sorted(missing)} in its main graph: {sorted(ops)}")


def loop_body_conv(model):
    """The Conv node inside the Loop body."""
    for node in model.graph.node:
        if node.op_type == "Loop":
            body = next(a.g for a in node.attribute if a.name == "body")
            for inner in body.node:
                if inner.op_type == "Conv":
                    return inner
    raise SystemExit("no Conv inside the Loop body")


def legacy_module(node_name):
    """`/block/conv/Conv` -> `block.conv` (no Sequential in this network)."""
    return ".".join(node_name.strip("/").split("/")[:-1])


def plant_fault(model):
    """Scales one output channel of the loop body's Conv weight; returns the culprit read
    back from the mutated graph (every node that reads the changed initializer)."""
    weight = loop_body_conv(model).input[1]
    for init in model.graph.initializer:
        if init.name == weight:
            array = numpy_helper.to_array(init).copy()
            array[FAULT_CHANNEL] *= np.float32(FAULT_SCALE)
            init.CopyFrom(numpy_helper.from_array(array, init.name))
    readers = [n for n in subgraph_nodes(model.graph) if weight in n.input]
    modules = sorted({legacy_module(n.name) for n in readers})
    if len(modules) != 1:
        raise SystemExit(f"the changed weight {weight} is read in {modules}")
    return modules[0], readers[0].name


EXAMPLE_SHAPE = (1, 3, 16, 16)


def export_onnx(model_pt, folder, dynamic_batch):
    """Exports the archive `model_pt` into `folder`/model.onnx; returns the ONNX model.

    Exported from the loaded archive, not the scripted module: exporting a ScriptModule
    inlines its graph in place (its module hierarchy is gone afterwards), and a module
    scripted again from the same class shares that compiled graph."""
    onnx_path = os.path.join(folder, "model.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.export_onnx(torch.jit.load(model_pt), (torch.randn(*EXAMPLE_SHAPE),), onnx_path,
                       "legacy", ["input"], ["output"], dynamic_batch=dynamic_batch)
    exported = onnx.load(onnx_path)
    check_control_flow(exported)
    return exported


def trip_count_is_constant(model):
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    producer = [n for n in model.graph.node if loop.input[0] in n.output]
    return bool(producer) and producer[0].op_type == "Constant"


def export(folder):
    """Scripts the network into `folder`/model.pt and exports it with a static batch;
    returns the ONNX model and the branch PyTorch takes on the seeded input (the data
    decides it)."""
    torch.manual_seed(0)
    model = LoopIfNet().eval()
    example = (torch.randn(*EXAMPLE_SHAPE),)
    torch.jit.script(model).save(os.path.join(folder, "model.pt"))
    exported = export_onnx(os.path.join(folder, "model.pt"), folder, dynamic_batch=False)
    if not trip_count_is_constant(exported):
        raise SystemExit("the static export's Loop has no constant trip count")
    with torch.no_grad():
        x = model.stem(example[0])
        for _ in range(2):
            x = x + 0.5 * model.block(x)
        branch = "pos" if bool(x.mean() > 0) else "neg"
    return exported, branch


def write_expected(folder, expected):
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")


def main():
    out = fresh_folder(os.path.join(REPO, "tests", "fixtures"), "control_flow")
    clean = os.path.join(out, "scripted_loop_if")
    os.makedirs(clean)
    exported, branch = export(clean)
    expected = {"fault_module": None, "fault_node": None, "loop_trips": 2,
                "branch_taken": branch}
    write_expected(clean, expected)
    fault = os.path.join(out, "fault_loop_body")
    os.makedirs(fault)
    shutil.copy(os.path.join(clean, "model.pt"), os.path.join(fault, "model.pt"))
    expected["fault_module"], expected["fault_node"] = plant_fault(exported)
    onnx.save(exported, os.path.join(fault, "model.onnx"))
    write_expected(fault, expected)
    dynamic = os.path.join(out, "dynamic_loop")
    os.makedirs(dynamic)
    shutil.copy(os.path.join(clean, "model.pt"), os.path.join(dynamic, "model.pt"))
    if trip_count_is_constant(export_onnx(os.path.join(dynamic, "model.pt"), dynamic, True)):
        raise SystemExit("the dynamic-batch export's Loop has a constant trip count")
    write_expected(dynamic, {"fault_module": None, "fault_node": None, "loop_trips": 2,
                             "branch_taken": branch, "shape": "input=1x3x16x16"})
    print(f"wrote {sorted(os.listdir(out))} to {out}: {expected}")


if __name__ == "__main__":
    main()
