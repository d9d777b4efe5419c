#!/usr/bin/env python3
"""Writes tests/fixtures/pt2/<fixture>/values.npz on this machine: what PyTorch itself computes
from each committed .pt2 fixture (`torch.export.load(model.pt2).module()`, run node by node by
scripts/fx_recorder.py at two threads), the expectation that tests/it/exported_programs.rs
holds align-check's captured values to, bit for bit.

Why a script of its own, and why the values are not committed: a matmul's last bits depend on
the CPU's vector width (AVX2 and AVX-512 kernels sum in different orders), so values computed
on one machine are not what libtorch computes on another. They are made where the tests run,
from the committed archives and inputs, and never by align-check. scripts/make_pt2_fixtures.py
writes them too when it regenerates the archives. Archives that call an operator library
(`torch_ops` in the manifest) are left out: their test builds the library itself.

Run with the pinned interpreter: .venv/bin/python scripts/make_pt2_values.py
"""

import json
import os

import numpy as np
import torch

from make_pt2_fixtures import ZOO, inputs_of, record

PT2 = os.path.join(ZOO, "pt2")


def own_inputs(folder):
    """An archive without a zoo pair keeps its inputs beside it (in0, in1, ... or by name),
    in the order the tests read them: sorted by array name."""
    with np.load(os.path.join(folder, "inputs.npz")) as z:
        return [torch.from_numpy(z[k]) for k in sorted(z.files)]


def main():
    # The thread count the integration tests run libtorch with: a linear's sums split by
    # thread, so its last bits depend on the count (each side is exact at equal counts).
    torch.set_num_threads(2)
    written = []
    for entry in json.load(open(os.path.join(PT2, "manifest.json"))):
        if entry.get("torch_ops"):
            continue
        folder = os.path.join(PT2, entry["name"])
        inputs = own_inputs(folder) if os.path.exists(os.path.join(folder, "inputs.npz")) \
            else inputs_of(entry["name"])
        _, values = record(os.path.join(folder, "model.pt2"), inputs, folder)
        written.append({"name": entry["name"], "values": values})
        print(f"{entry['name']:24} {values:4} values")
    with open(os.path.join(PT2, "values.json"), "w") as f:
        json.dump({"torch": torch.__version__, "threads": 2,
                   "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                   "fixtures": written}, f, indent=1)


if __name__ == "__main__":
    main()
