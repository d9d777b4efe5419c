#!/usr/bin/env python3
"""Writes pairs whose two files come from different tools, for tests/signature.rs, into
tests/fixtures/signature/ (issue #21). The TorchScript and the ONNX of each pair compute the
same function with the same weights, but their signatures differ the way vendor and
toolchain exports differ:

- stream_state: a streaming recurrent cell. The TorchScript module (scripted) keeps its
  recurrent state in a buffer it updates itself and takes `forward(x: Tensor, rate: int)`;
  the ONNX model (exported from a stateless twin) takes `(input, state, rate)` and returns
  `(output, state_out)`. renamed.onnx is the same ONNX with `state` called `h0` and `rate`
  called `sample_rate`, so that neither name nor position settles the mapping (--map
  rate=sample_rate --map self.state=h0 does).
- context_window: a causal 1-d convolution stack. The TorchScript module prepends the last
  frames it saw (a context buffer) to its input itself; the ONNX model wants them prepended
  by the caller. torch_inputs.npz and onnx_inputs.npz hold each side's arrays.
- dict_inputs: a Hugging Face style scripted module, `forward(inputs: Dict[str, Tensor],
  scaled: bool = True, bias: Optional[Tensor] = None)`, against an ONNX model of
  `(input_ids, attention_mask)`: the bool takes its default, the Optional None.
- bert_optimum: a tiny BERT saved as a local checkpoint, then (a) traced as Hugging Face's
  TorchScript guide shows, the model itself returning `(last_hidden_state, pooler_output)`
  (the guide's `torchscript=True`; transformers 5 spells it `return_dict=False`), and (b) exported to ONNX in the shape optimum's
  feature-extraction export has: inputs input_ids, attention_mask, token_type_ids with
  dynamic batch/sequence axes, output last_hidden_state only. optimum itself cannot be
  installed next to the pinned transformers 5.x (it imports transformers internals that 5.x
  removed), so the export is made the way optimum makes it, with torch.onnx.export.
- wrapped_trace / wrapped_onnx: a small CNN, one file made through an export harness that
  holds it as `self.model` and the other from the bare network, so that every module path
  of one side has one more leading level (`model.conv2` against `conv2`). wrapped_trace has
  the TorchScript traced through the harness (the ONNX exported bare, as optimum does);
  wrapped_onnx the other way round.
- weights_as_inputs: a small CNN exported with `keep_initializers_as_inputs=True`, every
  weight also a graph input with its initializer as default: only `x` is a real input, for
  the check and for the production session alike.

Each pair has a clean model.onnx and a fault.onnx, exported from a copy of the network with
one planted fault (`fault_module` in the manifest: the layer the check must name).
manifest.json says what tests/signature.rs checks against. Random weights, seeded.

Run with the pinned interpreter: .venv/bin/python scripts/make_signature_fixtures.py
It overwrites tests/fixtures/signature/ and nothing else.
"""

import copy
import json
import os
import tempfile
from typing import Dict, Optional

import numpy as np
import onnx
import torch
from torch import nn

from fixtures_lib import driver
from fixtures_lib import export as ex
from fixtures_lib import library_models as lib
from fixtures_lib.manifest import fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.join(REPO, "tests", "fixtures", "signature")


def rename_inputs(src, dst, names):
    """`src` saved as `dst` with its graph inputs renamed (old -> new in `names`)."""
    model = onnx.load(src)
    for vi in model.graph.input:
        if vi.name in names:
            vi.name = names[vi.name]
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in names:
                node.input[i] = names[name]
    onnx.save(model, dst)


def plant(model, name, rows=4, scale=1.05):
    """A copy of `model` whose parameter `name` has its first `rows` rows scaled."""
    faulty = copy.deepcopy(model)
    with torch.no_grad():
        dict(faulty.named_parameters())[name][:rows] *= scale
    return faulty


# stream_state -------------------------------------------------------------------------------

FEATURES, HIDDEN = 6, 8


class Cell(nn.Module):
    """One recurrent step: h' = tanh(inp(x) + rec(h)). The two models share its weights."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(FEATURES, HIDDEN)
        self.rec = nn.Linear(HIDDEN, HIDDEN)
        self.act = nn.Tanh()
        self.head = nn.Linear(HIDDEN, 3)


class StatefulStream(Cell):
    """The vendor's TorchScript: state inside the module, two frames per call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(1, HIDDEN))

    def forward(self, x: torch.Tensor, rate: int) -> torch.Tensor:
        h = self.act(self.inp(x[:, 0]) + self.rec(self.state))
        h = self.act(self.inp(x[:, 1]) + self.rec(h))
        self.state = h
        return self.head(h) * float(rate)


class StatelessStream(Cell):
    """The vendor's ONNX: the state goes in and comes out."""

    def forward(self, input, state, rate):
        h = self.act(self.inp(input[:, 0]) + self.rec(state))
        h = self.act(self.inp(input[:, 1]) + self.rec(h))
        return self.head(h) * rate.to(torch.float32), h


def stream_state():
    folder = fresh_folder(ROOT, "stream_state")
    eager = StatefulStream().eval()
    torch.jit.save(torch.jit.script(eager), os.path.join(folder, "model.pt"))
    twin = StatelessStream().eval()
    twin.load_state_dict({k: v for k, v in eager.state_dict().items() if k != "state"})
    x = torch.randn(1, 2, FEATURES)
    state = torch.zeros(1, HIDDEN)
    rate = torch.tensor(2, dtype=torch.int64)
    for onnx_name, model, names in [
        ("model.onnx", twin, ["input", "state", "rate"]),
        ("renamed.onnx", twin, ["input", "h0", "sample_rate"]),
        ("fault.onnx", plant(twin, "rec.weight"), ["input", "state", "rate"]),
    ]:
        ex.export_onnx(model, (x, state, rate), os.path.join(folder, onnx_name), "legacy",
                       names, ["output", "state_out"])
    np.savez(os.path.join(folder, "inputs.npz"), input=x.numpy(), rate=rate.numpy())
    return {"name": "stream_state", "fault_module": "rec",
            "args": ["--inputs", "inputs.npz"],
            "ambiguous": {"onnx": "renamed.onnx", "mention": ["x, rate", "--map", "self.state"],
                          "resolve": ["--map", "rate=sample_rate", "--map", "self.state=h0"]},
            "mapping": [["x", "input", "position"], ["self.state", "state", "name"],
                        ["rate", "rate", "name"]],
            "not_compared": [["onnx", "state_out"]], "state_writes": ["state"]}


# context_window -----------------------------------------------------------------------------

CHANNELS, CONTEXT, FRAMES = 4, 2, 6


class CausalStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(CHANNELS, 8, CONTEXT + 1)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv1d(8, 8, 1)
        self.act2 = nn.ReLU()
        self.conv3 = nn.Conv1d(8, 8, 1)
        self.act3 = nn.ReLU()
        self.conv4 = nn.Conv1d(8, 8, 1)
        self.act4 = nn.Tanh()
        self.head = nn.Conv1d(8, 2, 1)

    def body(self, xc):
        y = self.act1(self.conv1(xc))
        y = self.act2(self.conv2(y))
        y = self.act3(self.conv3(y))
        y = self.act4(self.conv4(y))
        return self.head(y)


class ContextInside(CausalStack):
    """TorchScript: keeps the last CONTEXT frames itself and prepends them."""

    def __init__(self):
        super().__init__()
        self.register_buffer("context", torch.zeros(1, CHANNELS, CONTEXT))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = torch.cat([self.context, x], dim=2)
        self.context = xc[:, :, xc.size(2) - self.context.size(2):]
        return self.body(xc)


class ContextOutside(CausalStack):
    """ONNX: the caller prepends the context."""

    def forward(self, input):
        return self.body(input)


def context_window():
    folder = fresh_folder(ROOT, "context_window")
    eager = ContextInside().eval()
    torch.jit.save(torch.jit.script(eager), os.path.join(folder, "model.pt"))
    twin = ContextOutside().eval()
    twin.load_state_dict({k: v for k, v in eager.state_dict().items() if k != "context"})
    x = torch.randn(1, CHANNELS, FRAMES)
    prepended = torch.cat([torch.zeros(1, CHANNELS, CONTEXT), x], dim=2)
    for onnx_name, model in [("model.onnx", twin), ("fault.onnx", plant(twin, "conv3.weight"))]:
        ex.export_onnx(model, (prepended,), os.path.join(folder, onnx_name), "legacy",
                       ["input"], ["output"])
    np.savez(os.path.join(folder, "torch_inputs.npz"), x=x.numpy())
    np.savez(os.path.join(folder, "onnx_inputs.npz"), input=prepended.numpy())
    # Without per-side inputs both models get the ONNX model's (1x4x8) array and their
    # outputs differ in length: the error must name the flags that fix it.
    np.savez(os.path.join(folder, "inputs.npz"), input=prepended.numpy())
    return {"name": "context_window", "fault_module": "conv3",
            "args": ["--torch-inputs", "torch_inputs.npz", "--onnx-inputs", "onnx_inputs.npz"],
            "ambiguous": {"onnx": "model.onnx", "args": ["--inputs", "inputs.npz"],
                          "mention": ["1x2x8", "1x2x6", "--torch-inputs", "--onnx-inputs"],
                          "resolve": None},
            "mapping": [["x", "input", "position"]], "not_compared": [],
            "state_writes": ["context"]}


# dict_inputs --------------------------------------------------------------------------------

VOCAB, WIDTH = 50, 16


class TextHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.act = nn.GELU()
        self.out = nn.Linear(WIDTH, 4)

    def pooled(self, input_ids, attention_mask):
        h = self.act(self.proj(self.embed(input_ids)))
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return self.out((h * m).sum(1) / m.sum(1))


class DictInputs(TextHead):
    """Keyword-style inputs, plus the optional arguments Hugging Face models carry that the
    ONNX export leaves out (a flag with a default, an Optional tensor)."""

    def forward(self, inputs: Dict[str, torch.Tensor], scaled: bool = True,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        out = self.pooled(inputs["input_ids"], inputs["attention_mask"])
        if not scaled:
            out = out * 0.5
        if bias is not None:
            out = out + bias
        return out


class PlainInputs(TextHead):
    def forward(self, input_ids, attention_mask):
        return self.pooled(input_ids, attention_mask)


def dict_inputs():
    folder = fresh_folder(ROOT, "dict_inputs")
    eager = DictInputs().eval()
    torch.jit.save(torch.jit.script(eager), os.path.join(folder, "model.pt"))
    twin = PlainInputs().eval()
    twin.load_state_dict(eager.state_dict())
    ids, mask = lib.padded_text_inputs(vocab=VOCAB)
    for onnx_name, model in [("model.onnx", twin), ("fault.onnx", plant(twin, "proj.weight"))]:
        ex.export_onnx(model, (ids, mask), os.path.join(folder, onnx_name), "legacy",
                       ["input_ids", "attention_mask"], ["logits"])
    # The inputs under other names: the dict's keys match none, and position settles them.
    rename_inputs(os.path.join(folder, "model.onnx"), os.path.join(folder, "renamed.onnx"),
                  {"input_ids": "ids", "attention_mask": "mask"})
    np.savez(os.path.join(folder, "inputs.npz"), input_ids=ids.numpy(),
             attention_mask=mask.numpy())
    np.savez(os.path.join(folder, "renamed_inputs.npz"), ids=ids.numpy(), mask=mask.numpy())
    return {"name": "dict_inputs", "fault_module": "proj",
            "args": ["--inputs", "inputs.npz"],
            "ambiguous": None,
            "by_position": {"onnx": "renamed.onnx", "args": ["--inputs", "renamed_inputs.npz"]},
            "mapping": [["inputs.input_ids", "input_ids", "name"],
                        ["inputs.attention_mask", "attention_mask", "name"],
                        ["scaled", None, "torch_only"], ["bias", None, "torch_only"]],
            "not_compared": [], "state_writes": []}


# bert_optimum -------------------------------------------------------------------------------

def bert_optimum():
    import transformers
    transformers.logging.set_verbosity_error()
    from transformers import BertConfig, BertModel

    folder = fresh_folder(ROOT, "bert_optimum")
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16,
                     initializer_range=lib.HF_INIT_STD, attn_implementation="eager")
    ids, mask = lib.padded_text_inputs()
    with tempfile.TemporaryDirectory() as ckpt:
        lib.finish(BertModel(cfg)).save_pretrained(ckpt)
        # Hugging Face's TorchScript guide: the model returning tuples, traced itself.
        # transformers 5 dropped the `torchscript=True` flag the guide sets; return_dict=False
        # is what it did to the outputs.
        direct = BertModel.from_pretrained(ckpt, return_dict=False).eval()
        traced = torch.jit.trace(direct, [ids, mask])
        torch.jit.save(traced, os.path.join(folder, "model.pt"))

        # optimum's feature-extraction export: the bare model, last_hidden_state only.
        class FeatureExtraction(BertModel):
            def forward(self, input_ids, attention_mask, token_type_ids):
                return super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                       token_type_ids=token_type_ids,
                                       return_dict=True).last_hidden_state

        bare = FeatureExtraction.from_pretrained(ckpt).eval()
    types = torch.zeros_like(ids)
    axes = {"batch_size": 0, "sequence_length": 1}
    names = ["input_ids", "attention_mask", "token_type_ids"]
    for onnx_name, model in [
        ("model.onnx", bare),
        ("fault.onnx", plant(bare, "encoder.layer.1.intermediate.dense.weight")),
    ]:
        torch.onnx.export(model, (ids, mask, types), os.path.join(folder, onnx_name),
                          dynamo=False, opset_version=17, input_names=names,
                          output_names=["last_hidden_state"],
                          dynamic_axes={n: {v: k for k, v in axes.items()}
                                        for n in names + ["last_hidden_state"]})
    # Inputs named by another convention: no name matches, and two arguments among three
    # inputs is more than position settles.
    rename_inputs(os.path.join(folder, "model.onnx"), os.path.join(folder, "renamed.onnx"),
                  {"input_ids": "ids", "attention_mask": "mask", "token_type_ids": "types"})
    np.savez(os.path.join(folder, "inputs.npz"), input_ids=ids.numpy(),
             attention_mask=mask.numpy())
    return {"name": "bert_optimum", "fault_module": "encoder.layer.1.intermediate.dense",
            "args": ["--inputs", "inputs.npz"],
            "ambiguous": {"onnx": "renamed.onnx",
                          "mention": ["input_ids, attention_mask", "ids, mask, types", "--map"],
                          "resolve": ["--map", "input_ids=ids", "--map", "attention_mask=mask"]},
            "mapping": [["input_ids", "input_ids", "name"],
                        ["attention_mask", "attention_mask", "name"],
                        [None, "token_type_ids", "onnx_only"]],
            "not_compared": [["torch", "1"]], "state_writes": []}


# wrapped_trace / wrapped_onnx ------------------------------------------------------------

class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.conv2(y))
        return self.fc(y.mean(dim=(2, 3)))


class Harness(nn.Module):
    """An export tool's wrapper: the network as its `model` attribute."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)


def small_cnn_and_input():
    """A SmallCnn in eval mode with BatchNorm statistics of its own, and an input."""
    net = SmallCnn()
    with torch.no_grad():
        net.bn1.running_mean.uniform_(-0.5, 0.5)
        net.bn1.running_var.uniform_(0.5, 2.0)
    net.eval()
    return net, torch.rand(1, 3, 16, 16)


def wrapped(name, trace_wrapped):
    folder = fresh_folder(ROOT, name)
    net, x = small_cnn_and_input()
    traced = torch.jit.trace(Harness(net) if trace_wrapped else net, x)
    torch.jit.save(traced, os.path.join(folder, "model.pt"))
    faulty = plant(net, "conv2.weight")
    for onnx_name, model in [("model.onnx", net), ("fault.onnx", faulty)]:
        exported = model if trace_wrapped else Harness(model)
        torch.onnx.export(exported, (x,), os.path.join(folder, onnx_name), dynamo=False,
                          input_names=["x"], output_names=["logits"])
    np.savez(os.path.join(folder, "inputs.npz"), x=x.numpy())
    # The planted layer as the TorchScript side names it: the harness adds `model.`.
    return {"name": name, "fault_module": "model.conv2" if trace_wrapped else "conv2",
            "args": ["--inputs", "inputs.npz"],
            "mapping": [["x", "x", "name"]], "not_compared": [], "state_writes": []}


def weights_as_inputs():
    """A network exported with `keep_initializers_as_inputs=True` (older toolchains, and
    exports meant for runtimes that take weights as inputs): every weight is also listed
    among the graph inputs, with its initializer as the default."""
    folder = fresh_folder(ROOT, "weights_as_inputs")
    net, x = small_cnn_and_input()
    torch.jit.save(torch.jit.trace(net, x), os.path.join(folder, "model.pt"))
    faulty = plant(net, "conv2.weight")
    for onnx_name, model in [("model.onnx", net), ("fault.onnx", faulty)]:
        torch.onnx.export(model, (x,), os.path.join(folder, onnx_name), dynamo=False,
                          input_names=["x"], output_names=["logits"],
                          keep_initializers_as_inputs=True)
    np.savez(os.path.join(folder, "inputs.npz"), x=x.numpy())
    return {"name": "weights_as_inputs", "fault_module": "conv2",
            "args": ["--inputs", "inputs.npz"],
            "mapping": [["x", "x", "name"]], "not_compared": [], "state_writes": []}


def main():
    driver.pin_hash_seed()  # scripted models: constants in hash order
    torch.manual_seed(0)
    os.makedirs(ROOT, exist_ok=True)
    manifest = [stream_state(), context_window(), dict_inputs(), bert_optimum(),
                wrapped("wrapped_trace", True), wrapped("wrapped_onnx", False),
                weights_as_inputs()]
    for entry in manifest:
        folder = os.path.join(ROOT, entry["name"])
        for f in sorted(os.listdir(folder)):
            if f.endswith(".onnx"):
                onnx.checker.check_model(onnx.load(os.path.join(folder, f)))
    with open(os.path.join(ROOT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"wrote {len(manifest)} signature fixtures to {ROOT}")


if __name__ == "__main__":
    main()
