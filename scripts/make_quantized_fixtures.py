#!/usr/bin/env python3
"""Writes tests/fixtures/quantized/: int8 models quantised by ONNX Runtime's own tool, each
next to the float ONNX model it was quantised from and the TorchScript model both came from.

- resnet_tiny_qdq, cnn_qdq: QDQ uint8 (`quantize_static`, QuantFormat.QDQ, per-tensor uint8
  activations and weights, MinMax calibration; why unsigned: see U8U8 below) of two small
  CNNs (fixtures_lib.models' ResNetTiny and a plain Conv/BN/ReLU stack), with calibrated
  BatchNorm statistics (fixtures_lib.calibrate) so the activations are order one, as in a
  trained network.
- cnn_qoperator: the same CNN in QOperator format (QLinearConv ...).
- cnn_outlier_qdq: the same CNN, signed int8, with an outlier channel: channel 3 of
  features.1's output carries a large constant (BatchNorm bias + OUTLIER) that the next
  convolution all but ignores (its weights for that channel scaled by 1e-3), as trained
  networks sometimes have it. The per-tensor int8 scale of features.2's input is then set by
  that channel and crushes every other one: one layer introduces most of the error, and
  leaving it in float (nodes_to_exclude) brings the output back.
- cnn_outlier_qoperator: that outlier CNN in QOperator format.
- mlp_dynamic: an MLP by `quantize_dynamic` (DynamicQuantizeLinear + MatMulInteger).

Each folder: model.pt, model.onnx (quantised), float.onnx, inputs.npz (the check's input),
calibration.npz (the batches calibration saw) and expected.json with what ONNX Runtime
measured on inputs.npz (unoptimised session, as align-check captures): the output's SQNR
against the eager model, and for the QDQ fixtures each quantised node's effect when it alone
is left in float (`nodes_to_exclude=[node]`), then the greedy exclude list that brings the
output to the target SQNR, re-quantised and measured. These are the numbers the report's
estimate is compared with.

Random weights, seeded. Run with the pinned interpreter:
.venv/bin/python scripts/make_quantized_fixtures.py
It overwrites tests/fixtures/quantized/ and nothing else.
"""

import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures_lib import export as ex  # noqa: E402
from fixtures_lib import models  # noqa: E402
from fixtures_lib.calibrate import recalibrate_batchnorm  # noqa: E402
from fixtures_lib.manifest import fresh_folder  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The output SQNR the greedy exclude list aims for.
TARGET_OUTPUT_SQNR_DB = 35.0
MAX_EXCLUDED = 4
CALIBRATION_BATCHES = 8
OUTLIER = 60.0


class PlainCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()

        def block(cin, cout, stride=1):
            return torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(),
            )

        self.features = torch.nn.Sequential(
            block(3, 16), block(16, 16), block(16, 32, stride=2), block(32, 32), block(32, 64, 2)
        )
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(128, 64)
        self.fc3 = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


class Batches(CalibrationDataReader):
    def __init__(self, batches):
        self.batches = iter([{"x": b} for b in batches])

    def get_next(self):
        return next(self.batches, None)


def sqnr_db(reference, test):
    r = reference.astype(np.float64)
    noise = np.sum((test.astype(np.float64) - r) ** 2)
    return float(10 * np.log10(np.sum(r ** 2) / noise)) if noise > 0 else float("inf")


def run(path, x):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


# The clean fixtures are unsigned 8-bit throughout (U8U8). With signed int8 weights ONNX
# Runtime's x86 kernels multiply unsigned activations by signed weights with VPMADDUBSW, whose
# 16-bit sums saturate on CPUs without VNNI: on an AVX2 machine without it mlp_dynamic fell
# from 43.6 dB (the same file on a VNNI machine) to 19.5 dB, and resnet_tiny_qdq's production
# session (QLinearConv) moved its output by 0.1 of range, so a "clean" fixture failed there.
# U8U8 kernels widen to 16 bits first and give the same answer on every x86 CPU. The outlier
# fixtures keep signed int8 (quantize_static's default for QDQ): their story is a symmetric
# per-tensor scale crushed by one channel, and they fail the check either way.
U8U8 = (QuantType.QUInt8, QuantType.QUInt8)
S8S8 = (QuantType.QInt8, QuantType.QInt8)


def quantize(float_path, out_path, calibration, fmt, types, exclude=()):
    quantize_static(float_path, out_path, Batches(calibration), quant_format=fmt,
                    activation_type=types[0], weight_type=types[1],
                    nodes_to_exclude=list(exclude))


def candidate_nodes(float_model):
    """Every node quantize_static may quantise: nodes_to_exclude takes node names."""
    return [n.name for n in float_model.graph.node if n.op_type not in ("Constant", "Shape")]


def sensitivity(float_path, calibration, x, reference, base_db, types):
    """Each node's effect when it alone stays float, then the greedy exclude list: at each
    step the node whose exclusion (with those already chosen) raises the output SQNR most,
    re-quantised and measured, until the output reaches the target (at most MAX_EXCLUDED)."""
    names = candidate_nodes(onnx.load(float_path))
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.onnx")

        def output_db(exclude):
            quantize(float_path, probe, calibration, QuantFormat.QDQ, types, exclude=exclude)
            return sqnr_db(reference, run(probe, x))

        gains = {name: output_db([name]) - base_db for name in names}
        excluded, steps, current = [], [], base_db
        while current < TARGET_OUTPUT_SQNR_DB and len(excluded) < MAX_EXCLUDED:
            trial = {n: output_db(excluded + [n]) for n in names if n not in excluded}
            best = max(trial, key=trial.get)
            excluded.append(best)
            current = trial[best]
            steps.append({"nodes_to_exclude": list(excluded), "output_sqnr_db": current})
    ranked = sorted(names, key=lambda n: -gains[n])
    return {"gain_db_when_left_float": gains, "ranked": ranked, "greedy": steps}


def write(out, name, model, example, calibration, fmt, types=U8U8):
    folder = os.path.join(out, name)
    os.makedirs(folder)
    float_path = os.path.join(folder, "float.onnx")
    quant_path = os.path.join(folder, "model.onnx")
    # Opset 17 keeps the float graph free of ops quantize_static leaves unquantised.
    ex.export_onnx(model, (example,), float_path, "legacy", ["x"], ["y"])
    torch.jit.trace(model, (example,)).save(os.path.join(folder, "model.pt"))
    ex.save_inputs(os.path.join(folder, "inputs.npz"), ["x"], [example])
    np.savez(os.path.join(folder, "calibration.npz"), *calibration)
    if fmt == "dynamic":
        quantize_dynamic(float_path, quant_path, weight_type=types[1])
    else:
        quantize(float_path, quant_path, calibration, fmt, types)
    x = example.numpy()
    with torch.no_grad():
        reference = model(example).numpy()
    base_db = sqnr_db(reference, run(quant_path, x))
    expected = {"format": str(fmt), "output_sqnr_db": base_db,
                "float_output_sqnr_db": sqnr_db(reference, run(float_path, x)),
                "target_output_sqnr_db": TARGET_OUTPUT_SQNR_DB}
    if fmt == QuantFormat.QDQ:
        expected["sensitivity"] = sensitivity(float_path, calibration, x, reference, base_db,
                                                types)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")
    return expected


def calibrated(model, shape, seed):
    torch.manual_seed(seed)
    recalibrate_batchnorm(model, lambda i: torch.randn(*shape))
    gen = torch.Generator().manual_seed(seed + 100)
    calibration = [torch.randn(*shape, generator=gen).numpy() for _ in range(CALIBRATION_BATCHES)]
    example = torch.randn(*shape, generator=gen)
    return model.eval(), calibration, example


def main():
    out = fresh_folder(os.path.join(REPO, "tests", "fixtures"), "quantized")
    results = {}
    torch.manual_seed(0)
    resnet, cal, x = calibrated(models.ResNetTiny(), (4, 3, 32, 32), 0)
    results["resnet_tiny_qdq"] = write(out, "resnet_tiny_qdq", resnet, x, cal, QuantFormat.QDQ)
    torch.manual_seed(1)
    cnn, cal, x = calibrated(PlainCnn(), (4, 3, 32, 32), 1)
    results["cnn_qdq"] = write(out, "cnn_qdq", cnn, x, cal, QuantFormat.QDQ)
    results["cnn_qoperator"] = write(out, "cnn_qoperator", cnn, x, cal, QuantFormat.QOperator)
    with torch.no_grad():
        cnn.features[1][1].bias[3] += OUTLIER
        cnn.features[2][0].weight[:, 3] *= 1e-3
    results["cnn_outlier_qdq"] = write(out, "cnn_outlier_qdq", cnn, x, cal, QuantFormat.QDQ,
                                       S8S8)
    results["cnn_outlier_qoperator"] = write(out, "cnn_outlier_qoperator", cnn, x, cal,
                                             QuantFormat.QOperator, S8S8)
    torch.manual_seed(2)
    mlp = Mlp().eval()
    gen = torch.Generator().manual_seed(2)
    cal = [torch.randn(8, 64, generator=gen).numpy() for _ in range(CALIBRATION_BATCHES)]
    results["mlp_dynamic"] = write(out, "mlp_dynamic", mlp, torch.randn(8, 64, generator=gen),
                                   cal, "dynamic")
    for name, r in results.items():
        line = f"{name:16s} output SQNR {r['output_sqnr_db']:.1f} dB (float {r['float_output_sqnr_db']:.1f})"
        s = r.get("sensitivity")
        if s:
            best = s["ranked"][0]
            line += f"; best single exclusion {best} +{s['gain_db_when_left_float'][best]:.1f} dB"
            for step in s["greedy"]:
                line += f"\n    exclude {step['nodes_to_exclude']} -> {step['output_sqnr_db']:.1f} dB"
        print(line)
    print(f"wrote {sorted(os.listdir(out))} to {out}")


if __name__ == "__main__":
    main()
