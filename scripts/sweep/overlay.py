"""Installs the sweep's overlay (scripts/sweep/overlay-requirements.txt) once per machine.

The overlay holds packages the pinned environment cannot: facenet-pytorch (its own pins ask
for an old torch, so it goes in without dependencies) and onnxsim (only the sweep's onnxsim
variant uses it). build.use_overlay appends the directory to sys.path, never ahead of the
pinned packages. A marker named by the requirements' hash records a complete install, so a
new machine installs it on its first sweep and a changed pin installs it again; a failed
install is reported and the sweep goes on, listing the pairs that need it as export errors.
"""

import hashlib
import os
import shutil
import subprocess
import sys

from sweep import build

REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "overlay-requirements.txt")


def marker_path():
    with open(REQUIREMENTS, "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:12]
    return os.path.join(build.OVERLAY, f".complete-{key}")


def ensure(log):
    """Installs the overlay unless its marker is there; returns whether it is usable."""
    marker = marker_path()
    if os.path.exists(marker):
        return True
    log(f"installing the sweep overlay (onnxsim, facenet-pytorch) into {build.OVERLAY}")
    shutil.rmtree(build.OVERLAY, ignore_errors=True)
    cache = os.path.join(os.path.dirname(build.OVERLAY), "pip")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         build.OVERLAY, "-r", REQUIREMENTS], env={**os.environ, "PIP_CACHE_DIR": cache},
        capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
        log(f"overlay install failed ({tail[0]}); onnxsim variants and facenet models will be "
            "listed as export errors")
        return False
    open(marker, "w").close()
    return True
