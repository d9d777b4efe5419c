"""Seed corpora for the cargo-fuzz targets in tests/fuzz/, written by scripts/fuzz.sh.

Mutations that start from real files reach deep code far sooner than ones that start from
nothing, so each target is seeded with what a user would really pass:

- onnx_model: every committed fixture model (both exporters, many opsets and ops);
- npz: the fixtures' inputs.npz archives and the multi-sample archives;
- npy: small arrays of every element type the tool reads and of several it refuses, in all
  three .npy format versions, plus the members of the fixture archives.

onnx_expose builds its graphs from raw bytes (see its target) and needs no seeds.

Usage: .venv/bin/python scripts/fuzz_seeds.py CORPUS_DIR
"""

import io
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def npy_bytes(array, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, version=version)
    return buf.getvalue()


def npy_seeds():
    """Named .npy images: one per supported dtype and version, and the refused kinds."""
    rng = np.random.default_rng(0)
    arrays = {
        "f32_2x3": rng.standard_normal((2, 3)).astype(np.float32),
        "f16_4": rng.standard_normal(4).astype(np.float16),
        "f64_scalar": np.array(3.5),
        "i8": np.arange(-3, 3, dtype=np.int8),
        "i16": np.arange(6, dtype=np.int16).reshape(2, 3),
        "i32_big_endian": np.arange(4, dtype=">i4"),
        "i64_empty": np.zeros((0, 3), dtype=np.int64),
        "u8": np.arange(5, dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "fortran": np.asfortranarray(np.ones((2, 3), dtype=np.float32)),
        "u16_refused": np.arange(3, dtype=np.uint16),
        "structured_refused": np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")]),
        "subarray_refused": np.zeros(2, dtype=("<f4", (2, 2))),
    }
    seeds = {}
    for name, a in arrays.items():
        seeds[f"{name}.npy"] = npy_bytes(a)
    for version in [(1, 0), (2, 0), (3, 0)]:
        seeds[f"f32_v{version[0]}.npy"] = npy_bytes(arrays["f32_2x3"], version)
    return seeds


def main():
    corpus = Path(sys.argv[1])
    dirs = {t: corpus / t for t in ["onnx_model", "npy", "npz", "onnx_expose"]}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)

    for model in sorted(FIXTURES.glob("*/model.onnx")):
        shutil.copy(model, dirs["onnx_model"] / f"{model.parent.name}.onnx")

    archives = sorted(FIXTURES.glob("*/inputs.npz")) + sorted(
        FIXTURES.glob("*/samples/*.npz")
    )
    for archive in archives:
        tag = f"{archive.parent.name}_{archive.stem}"
        shutil.copy(archive, dirs["npz"] / f"{tag}.npz")
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                if member.endswith(".npy"):
                    (dirs["npy"] / f"{tag}_{Path(member).stem}.npy").write_bytes(
                        z.read(member)
                    )

    for name, data in npy_seeds().items():
        (dirs["npy"] / name).write_bytes(data)
    # An archive of every hand-made array, stored and deflated.
    for method, tag in [(zipfile.ZIP_STORED, "stored"), (zipfile.ZIP_DEFLATED, "deflated")]:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            for name, data in npy_seeds().items():
                z.writestr(name, data)
        (dirs["npz"] / f"hand_made_{tag}.npz").write_bytes(buf.getvalue())

    counts = ", ".join(f"{t}: {len(list(d.iterdir()))}" for t, d in dirs.items())
    print(f"seed corpora in {corpus} ({counts})")


if __name__ == "__main__":
    main()
