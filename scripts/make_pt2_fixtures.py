#!/usr/bin/env python3
"""Regenerates tests/fixtures/pt2/: torch.export archives (.pt2) of zoo networks, the second
kind of reference align-check reads (issue 51), next to the zoo's ONNX files.

For each listed zoo fixture the eager network is rebuilt exactly as scripts/make_fixtures.py
builds it (same spec, seed and BatchNorm calibration), exported with torch.export.export and
saved with torch.export.save as tests/fixtures/pt2/<fixture>/model.pt2. The zoo folder keeps
the ONNX model and inputs the tests pair it with; a fault fixture's ONNX holds the planted
fault, its .pt2 is the clean network.

Beside each archive, values.npz holds what PyTorch itself computes from the fixture's inputs
with the saved program, `torch.export.load(model.pt2).module()`, run by torch.fx.Interpreter
so that every call node's tensor results are kept (keyed by node name, `name.k` for the k-th
tensor of a node returning several; outputs as `output.k`) at two threads, as the tests run
libtorch: the expectation the
integration tests hold align-check's captured values to, computed without align-check. They
are not committed (their last bits depend on the CPU): scripts/make_pt2_values.py makes them
again from the committed archives on each machine.
manifest.json lists the archives with their source fixture and, for faults, the module where
the first divergence must be. custom_op_lib_legacy/model.pt2 is the zoo's real custom-op
network (scripts/make_custom_op_fixture.py: `my_ops::my_add` from a C++ operator library,
which align-check loads with --torch-ops), exported with a fake kernel registered in Python;
it pairs with that zoo fixture's ONNX. dynamic/ is a program with a dynamic batch dimension
(torch.export.Dim, range [2, 8], exported at batch 3) with its own legacy-exported ONNX (batch
axis dynamic) and inputs.npz: the range constraints align-check checks inputs against. encoder_block/ is a program of ops the zoo lacks, with its own
inputs.npz and values but no ONNX pair; wrapped/ likewise, a program whose disabled autocast
region and no_grad block torch.export keeps as higher-order ops wrapping subgraphs. shared_siblings/ is a network holding one module
under three attributes of a block (CoaT's shape), with its trace model.pt, its legacy and
dynamo ONNX exports (model.onnx, dynamo.onnx), and a copy of each whose Gemm in the call
through the last attribute has a weight of its own (fault.onnx, fault_dynamo.onnx; the
manifest's module for each is read from that node's scope). cond/model.pt2 is a program with a torch.cond, which align-check
refuses in one line naming the op. The script checks that the program's outputs equal the
fixture's TorchScript model.pt outputs within 1e-5 (the same weights) and exits 1 otherwise.

Run with the pinned interpreter (needs scripts/make_fixtures.py's output first):
.venv/bin/python scripts/make_pt2_fixtures.py
"""

import json
import os
import warnings

import numpy as np
import torch

import make_fixtures
from fx_recorder import Recorder
from fixtures_lib import driver
from fixtures_lib.manifest import fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(REPO, "tests", "fixtures")

# (zoo fixture, spec it is built from): two clean pairs (conv+bn, an attention block) and two
# planted faults (a conv weight inside a residual network, a GELU approximation).
FIXTURES = [
    ("conv_bn_dynamo", "conv_bn"),
    ("attention_dynamo", "attention"),
    ("fault_conv_weight", "resnet_tiny"),
    ("fault_gelu", "attention_opset20"),
    # No zoo pair: values only (its inputs.npz is written beside the archive, in0, in1, ...).
    ("encoder_block", None),
]


class Branching(torch.nn.Module):
    """A data-dependent branch as torch.export writes it: a torch.cond higher-order op, which
    the reader refuses by name (its subgraphs are not run yet)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.fc(x), lambda x: x * 2, (x,))


class EncoderBlock(torch.nn.Module):
    """Ops the zoo's networks do not have, in one program: a batch-first transformer encoder
    layer (its attention's input projection is a linear on a transposed, non-contiguous 3-D
    input, whose kernel path depends on how the weight is held), an embedding, an LSTM,
    tensor indexing and dtype casts."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 16)
        self.enc = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
        self.lstm = torch.nn.LSTM(16, 8, batch_first=True)

    def forward(self, x, ids):
        y, _ = self.lstm(self.enc(x + self.emb(ids)))
        picked = y[:, torch.tensor([0, 2])] * 2
        return torch.cat([picked.flatten(1), y.mean(1)], 1).double().float().clamp(min=-1.0)


class Wrapped(torch.nn.Module):
    """Mode regions torch.export keeps as higher-order ops wrapping a subgraph: attention in a
    disabled autocast region (as timm's EfficientViT keeps it in float32), which becomes
    `wrap_with_autocast`, and a `torch.no_grad()` block, `wrap_with_set_grad_enabled`. The
    reader runs their subgraphs' nodes in place of the wrappers. It is exported with two
    keyword arguments, in an order other than forward's, which the program takes after `x`
    in the order given (the archive's sample inputs are fed that way)."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, scale=None, shift=None):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
            q, k, v = q.float(), k.float(), v.float()
            attention = (q @ k.transpose(-1, -2)).softmax(-1) @ v
        with torch.no_grad():
            scaled = attention * scale + x + shift
        return self.proj(scaled)


class Dynamic(torch.nn.Module):
    """Two linear layers on a batch whose size may vary within a declared range."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class SiblingMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SharedSiblingsBlock(torch.nn.Module):
    """One module held under three attributes of the block (timm's CoaT parallel block:
    `self.mlp2 = self.mlp3 = self.mlp4 = Mlp(...)`), called once through each."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(24)
        self.mlp2 = self.mlp3 = self.mlp4 = SiblingMlp()

    def forward(self, x):
        a, b, c = self.norm(x).chunk(3, dim=1)
        return x + torch.cat([self.mlp2(a), self.mlp3(b), self.mlp4(c)], dim=1)


class SharedSiblings(torch.nn.Module):
    """Two such blocks and a head: torch.export names each call by the attribute it went
    through (`mlp3.fc1`), TorchScript and the legacy exporter by the first (`mlp2`,
    `mlp2/fc1_1`)."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(SharedSiblingsBlock(), SharedSiblingsBlock())
        self.head = torch.nn.Linear(24, 3)

    def forward(self, x):
        return self.head(self.blocks(x))


# The dynamic fixture's batch range and the batch its sample inputs have.
DYNAMIC_RANGE = (2, 8)
DYNAMIC_BATCH = 3


def record(model_path, inputs, folder):
    """Runs the saved program by node, writes values.npz; returns outputs and value count."""
    saved = torch.export.load(model_path).module()
    recorder = Recorder(saved)
    with torch.no_grad():
        outputs = recorder.run(*inputs)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    # C order: an array numpy would save in Fortran order (a permute's result) reads back the same.
    arrays = {k: v.detach().contiguous().numpy() for k, v in recorder.values.items()}
    arrays.update({f"output.{k}": o.detach().numpy() for k, o in enumerate(outputs)})
    np.savez_compressed(os.path.join(folder, "values.npz"), **arrays)
    return outputs, len(recorder.values)


def make_dynamic(out):
    """dynamic/: model.pt2 with a ranged batch dimension, model.onnx, inputs.npz."""
    torch.manual_seed(0)
    model = Dynamic().eval()
    x = torch.randn(DYNAMIC_BATCH, 4)
    folder = os.path.join(out, "dynamic")
    os.makedirs(folder)
    batch = torch.export.Dim("batch", min=DYNAMIC_RANGE[0], max=DYNAMIC_RANGE[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
        torch.onnx.export(model, (x,), os.path.join(folder, "model.onnx"), dynamo=False,
                          opset_version=17, input_names=["x"], output_names=["out"],
                          dynamic_axes={"x": {0: "batch"}, "out": {0: "batch"}})
    path = os.path.join(folder, "model.pt2")
    torch.export.save(program, path)
    np.savez(os.path.join(folder, "inputs.npz"), x=x.numpy())
    outputs, values = record(path, (x,), folder)
    with torch.no_grad():
        worst = float((outputs[0] - model(x)).abs().max())
    return worst, values


def make_wrapped(out):
    """wrapped/: model.pt2 with mode-wrapping higher-order ops, its inputs.npz and values."""
    torch.manual_seed(0)
    model = Wrapped().eval()
    x = torch.randn(2, 5, 8)
    keywords = {"shift": torch.randn(8), "scale": torch.full((1,), 0.5)}
    folder = os.path.join(out, "wrapped")
    os.makedirs(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(model, (x,), kwargs=keywords)
    targets = {str(n.target) for n in program.graph.nodes}
    for hop in ("wrap_with_autocast", "wrap_with_set_grad_enabled"):
        assert any(hop in t for t in targets), f"torch.export no longer writes {hop}"
    path = os.path.join(folder, "model.pt2")
    torch.export.save(program, path)
    # The program's order: x, then the keywords as given (shift, scale).
    flat = [x, keywords["shift"], keywords["scale"]]
    np.savez(os.path.join(folder, "inputs.npz"), **{f"in{k}": t.numpy() for k, t in enumerate(flat)})
    outputs, values = record(path, flat, folder)
    with torch.no_grad():
        worst = float((outputs[0] - model(x, **keywords)).abs().max())
    return worst, values


def plant_in_last_call(model, onnx_path, fault_path):
    """A copy of the ONNX export at fault_path whose last Gemm of the first block's fc1 calls
    (the call through the last attribute) has a weight of its own, scaled by 1.5. Returns the
    module the fault is in: the node's module path (the legacy exporter's scope without its
    call suffixes, `/blocks/blocks.0/mlp2/fc1_2/Gemm`; the dynamo exporter's name_scopes,
    `blocks.0.mlp4.fc1`) read as the eager module it names, by that module's first name
    (`named_modules()`, which is the parent's first attribute: `blocks.0.mlp2.fc1`)."""
    import ast
    import re
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(onnx_path)

    def module_path(node):
        scopes = {p.key: p.value for p in node.metadata_props}.get("pkg.torch.onnx.name_scopes")
        if scopes:  # the dynamo exporter: the innermost module, then the node itself
            return ast.literal_eval(scopes)[-2]
        return ".".join(re.sub(r"_\d+$", "", s) for s in node.name.strip("/").split("/")[1:-1])

    gemms = [n for n in graph.graph.node if n.op_type == "Gemm"
             and module_path(n).startswith("blocks.0.") and module_path(n).endswith(".fc1")]
    target = gemms[-1]
    weights = {t.name: t for t in graph.graph.initializer}
    planted = numpy_helper.to_array(weights[target.input[1]]) * 1.5
    graph.graph.initializer.append(numpy_helper.from_array(planted, "planted_fc1_weight"))
    target.input[1] = "planted_fc1_weight"
    onnx.save(graph, fault_path)
    first_names = {id(m): name for name, m in model.named_modules()}
    return first_names[id(model.get_submodule(module_path(target)))]


def make_shared_siblings(out):
    """shared_siblings/: model.pt2, the trace model.pt, the legacy model.onnx and the dynamo
    export dynamo.onnx, each also with a fault in a call through a later attribute
    (fault.onnx, fault_dynamo.onnx), inputs.npz. Returns the faults with their modules."""
    torch.manual_seed(0)
    model = SharedSiblings().eval()
    x = torch.randn(2, 24)
    folder = os.path.join(out, "shared_siblings")
    os.makedirs(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(model, (x,))
        torch.jit.trace(model, (x,)).save(os.path.join(folder, "model.pt"))
        torch.onnx.export(model, (x,), os.path.join(folder, "model.onnx"), dynamo=False,
                          opset_version=17, input_names=["x"], output_names=["out"])
        torch.onnx.export(model, (x,), os.path.join(folder, "dynamo.onnx"), dynamo=True,
                          input_names=["x"], output_names=["out"], verbose=False,
                          external_data=False)
    path = os.path.join(folder, "model.pt2")
    torch.export.save(program, path)
    np.savez(os.path.join(folder, "inputs.npz"), x=x.numpy())
    faults = []
    for clean, fault in [("model.onnx", "fault.onnx"), ("dynamo.onnx", "fault_dynamo.onnx")]:
        module = plant_in_last_call(model, os.path.join(folder, clean),
                                    os.path.join(folder, fault))
        faults.append({"onnx": fault, "clean_onnx": clean, "module": module})
    outputs, values = record(path, (x,), folder)
    with torch.no_grad():
        worst = float((outputs[0] - model(x)).abs().max())
    return worst, values, faults


def make_custom_op(out):
    """custom_op_lib_legacy/model.pt2: the zoo's custom-op network, as a program."""
    import make_custom_op_fixture as custom
    libs = custom.build_libraries()
    torch.ops.load_library(libs["torch_ops"])

    # torch.export traces with fake tensors: the C++ library registers only a CPU kernel.
    @torch.library.register_fake(f"{custom.DOMAIN}::{custom.OP}")
    def _(a, b):
        return torch.empty_like(a)

    torch.manual_seed(custom.SEED)
    model = custom.RealCustomOpNet().eval()
    inputs = inputs_of("custom_op_lib_legacy")
    folder = os.path.join(out, "custom_op_lib_legacy")
    os.makedirs(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(model, tuple(inputs))
    path = os.path.join(folder, "model.pt2")
    torch.export.save(program, path)
    outputs, values = record(path, inputs, folder)
    traced = torch.jit.load(os.path.join(ZOO, "custom_op_lib_legacy", "model.pt"))
    with torch.no_grad():
        worst = float((outputs[0] - traced(*inputs)).abs().max())
    return worst, values


def inputs_of(fixture):
    with np.load(os.path.join(ZOO, fixture, "inputs.npz")) as z:
        return [torch.from_numpy(z[k]) for k in z.files]


def make(fixture, spec, out):
    if spec is None:
        torch.manual_seed(0)
        model = EncoderBlock().eval()
        inputs = [torch.randn(2, 5, 16), torch.randint(0, 10, (2, 5))]
        os.makedirs(os.path.join(out, fixture))
        np.savez(os.path.join(out, fixture, "inputs.npz"),
                 **{f"in{k}": t.numpy() for k, t in enumerate(inputs)})
    else:
        model, _ = driver.build_model(make_fixtures.FAMILY, spec)
        inputs = inputs_of(fixture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(model, tuple(inputs))
    folder = os.path.join(out, fixture)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.pt2")
    torch.export.save(program, path)
    outputs, values = record(path, inputs, folder)
    if spec is None:
        return 0.0, values
    traced = torch.jit.load(os.path.join(ZOO, fixture, "model.pt"))
    with torch.no_grad():
        reference = traced(*inputs)
    reference = reference if isinstance(reference, (tuple, list)) else (reference,)
    worst = max(float((a - b).abs().max()) for a, b in zip(outputs, reference))
    return worst, values


def main():
    # The thread count the integration tests run libtorch with: a linear's sums split by
    # thread, so its last bits depend on the count (each side is exact at equal counts).
    torch.set_num_threads(2)
    out = fresh_folder(ZOO, "pt2")
    zoo = {e["name"]: e for e in json.load(open(os.path.join(ZOO, "manifest.json")))}
    manifest, status = [], 0
    for fixture, spec in FIXTURES:
        worst, values = make(fixture, spec, out)
        ok = worst <= 1e-5
        status |= 0 if ok else 1
        fault = zoo[fixture].get("fault") if spec else None
        manifest.append({
            "name": fixture, "spec": spec, "onnx": spec is not None,
            "expected_module": fault["expected_module"] if fault else None,
            "captured_values": values,
        })
        print(f"{fixture:24} {values:4} values  |program - TorchScript| {worst:.1e} "
              f"{'ok' if ok else 'DIFFERS'}")
    # Programs with needs of their own: an operator library (--torch-ops), a ranged batch
    # with its own ONNX and inputs (compared with the eager module).
    for fixture, build, extra in [
        ("custom_op_lib_legacy", make_custom_op, {"onnx": True, "torch_ops": True}),
        ("dynamic", make_dynamic, {"onnx": False, "own_onnx": True,
                                   "batch_range": list(DYNAMIC_RANGE),
                                   "sample_batch": DYNAMIC_BATCH}),
        ("wrapped", make_wrapped, {"onnx": False}),
    ]:
        worst, values = build(out)
        ok = worst <= 1e-5
        status |= 0 if ok else 1
        manifest.append({"name": fixture, "spec": None, "expected_module": None,
                         "captured_values": values, **extra})
        print(f"{fixture:24} {values:4} values  |program - reference| {worst:.1e} "
              f"{'ok' if ok else 'DIFFERS'}")
    worst, values, faults = make_shared_siblings(out)
    status |= 0 if worst <= 1e-5 else 1
    manifest.append({"name": "shared_siblings", "spec": None, "expected_module": None,
                     "captured_values": values, "onnx": False, "own_onnx": True,
                     "faults": faults})
    print(f"{'shared_siblings':24} {values:4} values  |program - eager| {worst:.1e} "
          f"faults in {', '.join(f['module'] for f in faults)}")
    os.makedirs(os.path.join(out, "cond"))
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(Branching().eval(), (torch.randn(2, 4),)),
                          os.path.join(out, "cond", "model.pt2"))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
