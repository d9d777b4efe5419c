#!/usr/bin/env python3
"""Writes deep detectors with trained-like activations into tests/fixtures/deep/ (not
committed: about 25 MB a model; scripts/test.sh runs this when the folder is missing).

Why these exist: a random network with default BatchNorm statistics lets deep activations
shrink to 1e-9, where float32 drift and planted faults both hide under the absolute
tolerance. Here every BatchNorm is recalibrated on real forward passes
(fixtures_lib/calibrate.py), so activations are of order one and the DFL softmax of a YOLO
head amplifies float32 rounding to about 3e-4 of range: the case that made the verdict judge
what a layer introduces rather than what it accumulates (tests/isolation.rs).

Each model is exported by Ultralytics' own exporters (TorchScript with Conv+BN fused in
PyTorch, ONNX through the legacy exporter), then one fault is planted in a copy of the ONNX
file: the weights of the Conv node at 60% of the graph's Convs scaled by 1.05. The expected
culprit is computed from that node's own scope, never from align-check.

Run with the pinned interpreter: .venv/bin/python scripts/make_deep_fixtures.py
"""

import json
import os
import shutil
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from fixtures_lib.calibrate import recalibrate_batchnorm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "fixtures", "deep")
MODELS = ["yolov8n", "yolo11n"]
IMGSZ = 320
FAULT_SCALE = 1.05


def module_of(node_name):
    """The module path a legacy-exported node belongs to: `/model.8/m/m.0/cv1/conv/Conv` ->
    `model.8.m.0.cv1.conv` (a component that extends the previous one replaces it)."""
    path = []
    for part in node_name.strip("/").split("/")[:-1]:
        if path and "." in part and part.rsplit(".", 1)[0] == path[-1]:
            path[-1] = part
        else:
            path.append(part)
    return ".".join(path)


def plant_fault(clean, faulty):
    """Scales the weight of the Conv at 60% of the graph's Convs; returns what was changed."""
    model = onnx.load(clean)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    node = convs[int(len(convs) * 0.6)]
    inits = {i.name: i for i in model.graph.initializer}
    weight = inits[node.input[1]]
    w = numpy_helper.to_array(weight) * np.float32(FAULT_SCALE)
    weight.CopyFrom(numpy_helper.from_array(w.astype(np.float32), weight.name))
    onnx.save(model, faulty)
    return {"onnx_node": node.name, "module": module_of(node.name), "scale": FAULT_SCALE}


def export(name, folder):
    from ultralytics import YOLO

    torch.manual_seed(0)
    yolo = YOLO(f"{name}.yaml")

    def batch(i):
        g = torch.Generator().manual_seed(i)
        return torch.rand((2, 3, IMGSZ, IMGSZ), generator=g)

    bns = recalibrate_batchnorm(yolo.model, batch, passes=4)
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            ts = yolo.export(format="torchscript", imgsz=IMGSZ)
            ox = yolo.export(format="onnx", imgsz=IMGSZ)
        finally:
            os.chdir(cwd)
        # The exporters answer with paths relative to the folder they wrote in.
        shutil.move(os.path.join(tmp, ts), os.path.join(folder, "model.pt"))
        shutil.move(os.path.join(tmp, ox), os.path.join(folder, "model.onnx"))
    return bns


def main():
    os.environ.setdefault("YOLO_OFFLINE", "1")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    manifest = []
    for name in MODELS:
        folder = os.path.join(OUT, name)
        os.makedirs(folder)
        bns = export(name, folder)
        fault_dir = os.path.join(OUT, name + "_fault")
        os.makedirs(fault_dir)
        shutil.copy(os.path.join(folder, "model.pt"), os.path.join(fault_dir, "model.pt"))
        fault = plant_fault(os.path.join(folder, "model.onnx"), os.path.join(fault_dir, "model.onnx"))
        manifest.append({"name": name, "fault": None, "batchnorms_recalibrated": bns})
        manifest.append({"name": name + "_fault", "fault": fault, "batchnorms_recalibrated": bns})
        print(f"{name}: {bns} BatchNorms recalibrated; fault at {fault['onnx_node']}")
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)


if __name__ == "__main__":
    main()
