#!/usr/bin/env python3
"""Writes the files a new user passes by mistake as the TorchScript model, for
tests/first_contact.rs: a `torch.save` of a state_dict (zip and legacy pickle format), a
`torch.save` of a whole pickled module, and a `torch.export.save` archive (.pt2), all of one
tiny network, plus the matching TorchScript and ONNX exports so the mistaken file is the only
thing wrong; and that ONNX model saved with external data, then moved without its `.data`
file (moved_external.onnx); and other_weights.onnx, the same network exported from another
random initialisation (two files from different checkpoints).

Run with the pinned interpreter: .venv/bin/python scripts/make_first_contact_fixtures.py
It overwrites tests/fixtures/first_contact/ and nothing else.
"""

import os
import shutil
import sys
import tempfile
import warnings

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures_lib import export as ex  # noqa: E402
from fixtures_lib.manifest import fresh_folder  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 8)
        self.fc3 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc(x)))))


def main():
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
    print(f"wrote {sorted(os.listdir(out))} to {out}")


if __name__ == "__main__":
    main()
