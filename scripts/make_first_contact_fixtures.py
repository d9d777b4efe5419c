#!/usr/bin/env python3
"""Writes the files a new user passes by mistake as the TorchScript model, for
tests/first_contact.rs: a `torch.save` of a state_dict (zip and legacy pickle format), a
`torch.save` of a whole pickled module, and a `torch.export.save` archive (.pt2), all of one
tiny network, plus the matching TorchScript and ONNX exports so the mistaken file is the only
thing wrong; and that ONNX model saved with external data, then moved without its `.data`
file (moved_external.onnx); and other_weights.onnx, the same network exported from another
random initialisation (two files from different checkpoints).

A second network with BatchNorm and Dropout gives the training-mode mistakes: bn.pt and
bn.onnx are its correct pair, train_mode.pt was traced without model.eval(), and
train_mode.onnx was exported with training=TrainingMode.TRAINING; batch_stats.pt and
batch_stats.onnx are a correct pair whose BatchNorm keeps no running statistics (it uses the
batch's in eval mode too, and must not be taken for training mode). cuda.pt is TorchScript
whose graph puts a tensor on cuda:0, as a trace made on a GPU does (scripted here, since
tracing on a GPU needs one). newer_format.pt, newer_ir.onnx and newer_opset.onnx are the
good files stamped with versions newer than any runtime reads. batch1.pt fails inside
libtorch on the batch size of batch2.onnx's inputs (a trace fixes `view`'s sizes).

Run with the pinned interpreter: .venv/bin/python scripts/make_first_contact_fixtures.py
It overwrites tests/fixtures/first_contact/ and nothing else.
"""

import contextlib
import io
import os
import shutil
import zipfile
import tempfile
import warnings

import onnx
import torch

from fixtures_lib import driver
from fixtures_lib import export as ex
from fixtures_lib.manifest import fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 8)
        self.fc3 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc(x)))))


class BnNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.drop = torch.nn.Dropout(0.5)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x)))).flatten(1))


class CudaNet(TinyNet):
    """TinyNet whose output gains a tensor made on cuda:0, as `torch.zeros(..., device=x.device)`
    traced on a GPU records it."""

    def forward(self, x):
        bias = torch.zeros(2, device=torch.device("cuda:0"))
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc(x))))) + bias


class FlatNet(TinyNet):
    """TinyNet on 2x2 inputs; `int()` makes the trace fix `view`'s batch size at the one it saw."""

    def forward(self, x):
        return super().forward(x.view(int(x.shape[0]), 4))


def write_batch_mismatch(out):
    """A trace made at batch 1 whose `view` then fails on the batch 2 the ONNX model takes:
    a runtime error from inside libtorch's interpreter."""
    model = FlatNet().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.trace(model, (torch.randn(1, 2, 2),)).save(os.path.join(out, "batch1.pt"))
    ex.export_onnx(model, (torch.randn(2, 2, 2),), os.path.join(out, "batch2.onnx"), "legacy",
                   ["x"], ["y"])


def restamp_zip(src, dst, version):
    """Copies a TorchScript archive with its file-format `version` records set to `version`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("/version") or item.filename.endswith("/.data/version"):
                data = f"{version}\n".encode()
            zout.writestr(item, data)


def write_training_mode_pair(out):
    torch.manual_seed(2)
    model = BnNet()
    example = (torch.randn(2, 3, 6, 6),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.trace(model.train(), example, check_trace=False).save(
            os.path.join(out, "train_mode.pt"))
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            torch.onnx.export(model.train(), example, os.path.join(out, "train_mode.onnx"),
                              dynamo=False, opset_version=17, input_names=["x"],
                              output_names=["y"], training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
    model.eval()
    torch.jit.trace(model, example).save(os.path.join(out, "bn.pt"))
    ex.export_onnx(model, example, os.path.join(out, "bn.onnx"), "legacy", ["x"], ["y"])
    # In eval mode, but normalising with the batch's statistics by design: not a mistake.
    model.bn = torch.nn.BatchNorm2d(4, track_running_stats=False)
    model.eval()
    torch.jit.trace(model, example).save(os.path.join(out, "batch_stats.pt"))
    ex.export_onnx(model, example, os.path.join(out, "batch_stats.onnx"), "legacy", ["x"], ["y"])


def write_version_stamped(out):
    restamp_zip(os.path.join(out, "model.pt"), os.path.join(out, "newer_format.pt"), 99)
    newer_ir = onnx.load(os.path.join(out, "model.onnx"))
    newer_ir.ir_version = 99
    onnx.save_model(newer_ir, os.path.join(out, "newer_ir.onnx"))
    newer_opset = onnx.load(os.path.join(out, "model.onnx"))
    for entry in newer_opset.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = 99
    onnx.save_model(newer_opset, os.path.join(out, "newer_opset.onnx"))


def main():
    driver.pin_hash_seed()  # scripted models: constants in hash order
    torch.manual_seed(0)
    out = fresh_folder(os.path.join(REPO, "tests", "fixtures"), "first_contact")
    model = TinyNet().eval()
    example = (torch.randn(1, 4),)
    torch.save(model.state_dict(), os.path.join(out, "state_dict.pth"))
    torch.save(model.state_dict(), os.path.join(out, "legacy_state_dict.pth"),
               _use_new_zipfile_serialization=False)
    torch.save(model, os.path.join(out, "module.pth"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(torch.export.export(model, example), os.path.join(out, "exported.pt2"))
    ex.export_onnx(model, example, os.path.join(out, "model.onnx"), "legacy", ["x"], ["y"])
    torch.jit.trace(model, example).save(os.path.join(out, "model.pt"))
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(onnx.load(os.path.join(out, "model.onnx")),
                        os.path.join(tmp, "moved_external.onnx"), save_as_external_data=True,
                        location="moved_external.onnx.data", size_threshold=0)
        # Copied without its .data file, as a user moving only the .onnx would.
        shutil.copyfile(os.path.join(tmp, "moved_external.onnx"),
                        os.path.join(out, "moved_external.onnx"))
    torch.manual_seed(1)
    ex.export_onnx(TinyNet().eval(), example, os.path.join(out, "other_weights.onnx"), "legacy",
                   ["x"], ["y"])
    torch.manual_seed(0)
    cuda = CudaNet().eval()
    cuda.load_state_dict(model.state_dict())
    torch.jit.script(cuda).save(os.path.join(out, "cuda.pt"))
    write_training_mode_pair(out)
    write_version_stamped(out)
    write_batch_mismatch(out)
    print(f"wrote {sorted(os.listdir(out))} to {out}")


if __name__ == "__main__":
    main()
