"""Where the sweep keeps what it built and what it measured, outside the clone.

Layout under `${ALIGN_CHECK_CACHE:-$HOME/.cache/align-check}/sweep/`:

- `exports/<model>/` one folder per model: `model.pt`, `inputs.npz`, `meta.json` (calibration
  evidence, input names, the export log) and one sub-folder per (exporter, variant) pair holding
  `model.onnx` and `pair.json` (or the export error in `pair.json`). Ultralytics pairs carry
  their own `model.pt` (the library's exporter fuses Conv+BN before tracing).
- `exports/<model>/<pair>/faults/<fault>/model.onnx` + `fault.json`: derived ONNX files; the
  TorchScript of a fault is the clean one.
- `exports/<model>/model.pt2` + `pt2.json`: the torch.export reference (pt2.py), or why
  torch.export refused the model.
- `results/<binary id>/<pair or fault key>.json`: one check's summary, keyed by the identity of
  the align-check binary (sha256 of the file), so a new binary re-runs only the checks; the
  checks against the `.pt2` reference under `results/<binary id>/pt2/`.
- `bin/<binary id>/align-check`: the copy of the binary a sweep runs (cache.pin_binary).
- `registry-*.json`: slow registry listings (timm's smallest variant per family), computed once.

Writes go through a temporary file and a rename so that a sweep killed mid-write never leaves a
half-written JSON file behind to be read as a result on resume.
"""

import hashlib
import json
import os
import re
import shutil

SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def root():
    base = os.environ.get("ALIGN_CHECK_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "align-check")
    return os.path.join(base, "sweep")


def safe_name(text):
    """A model id such as `timm/resnet18` as one folder name."""
    return SAFE.sub("_", text.replace("/", "__"))


def model_dir(model_id):
    return os.path.join(root(), "exports", safe_name(model_id))


def pair_dir(model_id, pair):
    return os.path.join(model_dir(model_id), pair)


def fault_dir(model_id, pair, fault):
    return os.path.join(pair_dir(model_id, pair), "faults", fault)


def results_dir(binary_id):
    return os.path.join(root(), "results", binary_id)


REFERENCES = ("torchscript", "pt2")


def result_path(binary_id, key, reference="torchscript"):
    """A check's summary; TorchScript's where it always was, so cached results stay valid."""
    folder = results_dir(binary_id)
    if reference != "torchscript":
        folder = os.path.join(folder, reference)
    return os.path.join(folder, safe_name(key) + ".json")


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True, default=str)
    os.replace(tmp, path)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def pin_binary(binary):
    """(identity, path of a private copy) of the align-check binary.

    Why a copy: the binary is rebuilt while a sweep runs (cargo replaces the file); every check
    of one sweep must run the binary its results are filed under. The identity is the first 16
    hex digits of the copy's sha256, remembered by (path, size, mtime) so that an unchanged
    binary is neither hashed nor copied again.
    """
    pinned_dir = os.path.dirname(os.path.realpath(binary))
    if os.path.dirname(pinned_dir) == os.path.realpath(os.path.join(root(), "bin")):
        return os.path.basename(pinned_dir), binary  # already a pinned copy
    st = os.stat(binary)
    memo_path = os.path.join(root(), "binary-ids.json")
    memo = read_json(memo_path, {})
    stamp = f"{os.path.realpath(binary)}:{st.st_size}:{st.st_mtime_ns}"
    ident = memo.get(stamp)
    if ident and os.path.exists(os.path.join(root(), "bin", ident, "align-check")):
        return ident, os.path.join(root(), "bin", ident, "align-check")
    os.makedirs(os.path.join(root(), "bin"), exist_ok=True)
    tmp = os.path.join(root(), "bin", f"incoming-{os.getpid()}")
    shutil.copy2(binary, tmp)
    ident = _sha256(tmp)
    target = os.path.join(root(), "bin", ident, "align-check")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.replace(tmp, target)
    memo[stamp] = ident
    write_json(memo_path, memo)
    return ident, target
