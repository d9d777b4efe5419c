"""Tiny models for every kind of value and odd model align-check must handle or refuse clearly.

Responsible for: the eager models and example inputs of the `vk_*` fixtures (issue 6): fp16,
bf16 and fp64 weights, integer and bool intermediates (argmax, comparison masks), zero-size
and 0-d tensors, outputs that are tuples, lists, dicts or nested containers of tensors, a
forward that ignores one argument (the legacy exporter drops it from the ONNX graph), a
scripted model returning a Python int next to a tensor, and inputs holding NaN and infinity.
Each spec also says what align-check must do with the pair (`expect`), which
scripts/make_value_fixtures.py writes to tests/fixtures/value_kinds.json for tests/value_kinds.rs.

Every model is a few dozen parameters: the fixtures are KBs, not MBs.
"""

from typing import Tuple

import torch
import torch.nn as nn


class Mlp(nn.Module):
    """Linear -> ReLU -> Linear: only ops ONNX Runtime's CPU provider has float16 kernels for
    (Gemm, Relu), so the fp16 model runs end to end; in bfloat16 the same Gemm has no kernel."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class IntBoolMasks(nn.Module):
    """An argmax (int64) and a comparison mask (bool) in the middle of the model, both also
    returned, so integer and bool tensors are compared as layers and as outputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        h = self.fc(x)
        index = h.argmax(dim=-1)
        mask = h > 0
        y = h * mask.to(h.dtype)
        return y, index, mask


class ZeroBatch(nn.Module):
    """Run on a batch of zero rows: every tensor after the input has a dimension of 0."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


class ZeroSizeInside(nn.Module):
    """Ordinary input and output, but an empty slice (2x0) concatenated in the middle."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        empty = x[:, 4:] * 2.0
        return torch.cat([self.fc(x), empty], dim=1)


class ScalarValues(nn.Module):
    """0-d intermediates (sum, max) and a 0-d output next to a normalised tensor."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        total = h.sum()
        peak = h.abs().max()
        return h / peak, total


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return h, torch.relu(h)


class ListOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return [h, torch.sigmoid(h)]


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return {"logits": h, "probs": torch.softmax(h, dim=-1)}


class NestedOut(nn.Module):
    """A tuple holding a tensor and a tuple of two tensors."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return h, (torch.relu(h), torch.tanh(h))


class UnusedArgument(nn.Module):
    """forward(x, mask) that never reads `mask`: the legacy exporter drops it from the ONNX
    inputs, the TorchScript forward still takes it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, mask):
        return torch.relu(self.fc(x))


class UsedExtraArgument(nn.Module):
    """forward(x, bias) that does read `bias`; its ONNX twin (`FirstArgumentOnly`) takes only
    `x`, so align-check has no data for `bias` and must say so."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, bias):
        return self.fc(x) + bias


class FirstArgumentOnly(nn.Module):
    def __init__(self, fc):
        super().__init__()
        self.fc = fc

    def forward(self, x):
        return self.fc(x)


class IntInOutput(nn.Module):
    """Returns (tensor, Python int): a non-tensor output. Scripted, since tracing refuses
    non-tensor outputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x) -> Tuple[torch.Tensor, int]:
        return self.fc(x), 3


class ScaleShift(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([0.5, -2.0, 1.5, 3.0]))

    def forward(self, x):
        return x * self.scale + 1.0


class NanSafe(nn.Module):
    """Elementwise only (scale, add, abs), so a NaN or infinity in the input stays in its own
    element and both runtimes must agree on where the non-finite values are. The scale and
    shift are a submodule so that the exported graph carries a module scope."""

    def __init__(self):
        super().__init__()
        self.affine = ScaleShift()

    def forward(self, x):
        return torch.abs(self.affine(x)) - 0.5


def _nan_inf_input():
    x = torch.randn(3, 4)
    x[0, 1] = float("nan")
    x[1, 2] = float("inf")
    x[2, 0] = float("-inf")
    return x


# Each spec: `make` returns (model, example inputs); `inputs`/`outputs` are ONNX names;
# `exporters` the exporters tried; `scripted` if TorchScript comes from torch.jit.script;
# `expect` what align-check must do: {"exit": 0|1|2, "mention": [words of the one-line
# error], "facts": {...}} (facts are read by tests/value_kinds.rs).
SPECS = {
    "fp16": dict(
        make=lambda: (Mlp().half(), [torch.randn(2, 8).half()]),
        inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"dtype": "float16"}},
        notes="fp16 weights and input; Gemm/Relu have fp16 CPU kernels in ONNX Runtime; "
              "judged by the float16 tolerance."),
    "bf16": dict(
        make=lambda: (Mlp().bfloat16(), [torch.randn(2, 8).bfloat16()]),
        inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 2, "mention": ["Gemm", "bfloat16"]},
        notes="ONNX Runtime's CPU provider has no bfloat16 Gemm: the session cannot be made; "
              "align-check must say which op and which element type."),
    "fp64": dict(
        make=lambda: (Mlp().double(), [torch.randn(2, 8).double()]),
        inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"dtype": "float64"}},
        notes="fp64 weights and input end to end."),
    "int_bool": dict(
        make=lambda: (IntBoolMasks(), [torch.randn(3, 6)]),
        inputs=["input"], outputs=["y", "index", "mask"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"output_dtypes": ["float32", "int64", "bool"],
                                    "exact_layers": 2}},
        notes="argmax (int64) and h > 0 (bool) inside the model and among the outputs; "
              "compared exactly."),
    "zero_batch": dict(
        make=lambda: (ZeroBatch(), [torch.randn(0, 4)]),
        inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"output_shape": [0, 3]}},
        notes="input of shape 0x4: every value after it is empty."),
    "zero_inside": dict(
        make=lambda: (ZeroSizeInside(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"output_shape": [2, 3]}},
        # Known limit: dynamo's optimiser removes the empty slice and the concat, and pairing
        # cannot yet tell that a concat with an empty operand is an identity; every compared
        # value agrees, only the coverage gate fails.
        expect_dynamo={"exit": 1, "facts": {"output_shape": [2, 3], "only_coverage_fails": True}},
        notes="an empty 2x0 slice concatenated to a 2x3 tensor."),
    "scalar": dict(
        make=lambda: (ScalarValues(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["normalised", "total"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"scalar_outputs": 1}},
        notes="sum and max are 0-d intermediates; `total` is a 0-d output."),
    "tuple_out": dict(
        make=lambda: (TupleOut(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["a", "b"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"outputs": 2}},
        notes="forward returns a tuple of two tensors."),
    "list_out": dict(
        make=lambda: (ListOut(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["a", "b"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"outputs": 2}},
        notes="forward returns a list of two tensors."),
    "dict_out": dict(
        make=lambda: (DictOut(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["logits", "probs"], exporters=["legacy", "dynamo"],
        trace_kwargs={"strict": False},
        expect={"exit": 0, "facts": {"outputs": 2}},
        notes="forward returns a dict of two tensors (traced with strict=False)."),
    "nested_out": dict(
        make=lambda: (NestedOut(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["a", "b", "c"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"outputs": 3}},
        notes="forward returns (tensor, (tensor, tensor))."),
    "unused_arg": dict(
        make=lambda: (UnusedArgument(), [torch.randn(2, 4), torch.randn(2, 5)]),
        inputs=["x", "mask"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"unused_by_onnx": ["mask"]}},
        # dynamo keeps the unused input in the ONNX graph: nothing is TorchScript-only.
        expect_dynamo={"exit": 0, "facts": {"unused_by_onnx": []}},
        notes="forward(x, mask) ignores mask; the legacy exporter drops it from the ONNX "
              "inputs (dynamo keeps it)."),
    "used_arg": dict(
        make=lambda: (UsedExtraArgument(), [torch.randn(2, 4), torch.randn(2, 3)]),
        inputs=["x", "bias"], outputs=["output"], exporters=["legacy"],
        onnx_source=lambda model: FirstArgumentOnly(model.fc).eval(),
        expect={"exit": 2, "mention": ["bias", "--input bias="]},
        notes="TorchScript forward(x, bias) reads bias; the ONNX model (of fc(x) alone) takes "
              "only x: no data exists for bias."),
    "int_output": dict(
        make=lambda: (IntInOutput(), [torch.randn(2, 4)]),
        inputs=["input"], outputs=["output", "three"], exporters=["legacy"], scripted=True,
        expect={"exit": 0, "facts": {"outputs": 2, "output_dtypes": ["float32", "int64"]}},
        notes="scripted forward returns (tensor, int): a non-tensor output. The legacy "
              "exporter makes the int a 0-d int64 Constant output; align-check compares it "
              "as a 0-d int64 tensor."),
    "nan_inputs": dict(
        make=lambda: (NanSafe(), [_nan_inf_input()]),
        inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        expect={"exit": 0, "facts": {"input_nonfinite": True}},
        notes="the input holds NaN, +inf and -inf in three elements; elementwise ops keep "
              "them in place on both sides."),
}
