#!/usr/bin/env python3
"""The export helper from a checkout: runs python/align_check/export.py, the module the wheel
ships as `python -m align_check.export` (one copy of the code, here and installed).

Exports a user's nn.Module to model.pt, model.onnx and inputs.npz and checks that both files
load and run; see that module for what it does. Run with the pinned interpreter:
.venv/bin/python scripts/export_pair.py --help
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from align_check.export import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="export_pair.py", cmd=".venv/bin/python scripts/export_pair.py"))
