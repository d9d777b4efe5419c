"""Hand-made hostile inputs for tests/fuzz_regressions.rs, next to what scripts/fuzz.sh finds.

Each file is one way a user's file can lie to the readers that the fuzz targets cover; the
test feeds every file under tests/fixtures/fuzz_regressions/ through the library entry points
and through the real binary and expects a one-line error, never a panic. Files are named
`hand_*` so they stay apart from the fuzzer's `crash-*`/`oom-*`/`timeout-*` finds.

Usage: .venv/bin/python scripts/make_fuzz_regressions.py
"""

import io
import struct
import zipfile
from pathlib import Path

from onnx import TensorProto, helper

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "fuzz_regressions"


def npy(header: str, data: bytes = b"", version: int = 1) -> bytes:
    """An .npy image with `header` as its dict literal, padded the way NumPy pads it."""
    text = header.encode("latin1")
    prefix = 10 if version == 1 else 12
    pad = (-(prefix + len(text) + 1)) % 64
    text += b" " * pad + b"\n"
    size = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text + data


def npz(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            # A fixed date keeps regenerated archives byte-identical.
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def f4(shape: str) -> str:
    return "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape


NPY = {
    # 2^60 elements claimed, 16 bytes present: must be refused before any reading.
    "hand_shape_2p60.npy": npy(f4("(1152921504606846976,)"), b"\0" * 16),
    # The element count overflows 64 bits: npyz multiplies it unchecked.
    "hand_shape_overflow.npy": npy(f4("(4294967296, 4294967296, 16)"), b"\0" * 16),
    # No elements, but the strides npyz computes still overflow.
    "hand_shape_zero_then_overflow.npy": npy(f4("(0, 1099511627776, 1099511627776)")),
    # The same lie written in hexadecimal and behind an escaped key.
    "hand_shape_hex_escaped_key.npy": npy(
        "{'descr': '<f4', 'fortran_order': False, '\\x73hape': (0xffffffff, 0xffffffff, 0xff), }"
    ),
    # A version-2 header that claims 4 GiB of header text.
    "hand_header_len_4gib.npy": b"\x93NUMPY\x02\x00\xff\xff\xff\xff{'descr'",
    # Brackets nested 20 000 deep: the header parser recurses once per level.
    "hand_header_deep_nesting.npy": npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': "
        + "(" * 20_000
        + ")" * 20_000
        + "}",
        version=2,
    ),
    # A valid header whose data stops early.
    "hand_truncated_data.npy": npy(f4("(3, 4)"), b"\0" * 8),
}

NPZ = {
    # An archive member named like an array that is not NumPy at all.
    "hand_member_not_npy.npz": npz({"input.npy": b"hello, I am not an array"}),
    # The lying headers again, inside an archive, where the length available is the
    # member's declared size.
    "hand_member_shape_2p60.npz": npz({"input.npy": NPY["hand_shape_2p60.npy"]}),
    "hand_member_shape_overflow.npz": npz({"input.npy": NPY["hand_shape_overflow.npy"]}),
    # Not a zip archive at all, though it starts like one.
    "hand_not_a_zip.npz": b"PK\x03\x04" + b"\xff" * 60,
}


def onnx_bytes(nodes, inputs=("x",), outputs=("y",), opset=17) -> bytes:
    raw = [n for n in nodes if isinstance(n, bytes)]
    graph = helper.make_graph(
        [n for n in nodes if not isinstance(n, bytes)],
        "g",
        [helper.make_tensor_value_info(i, TensorProto.FLOAT, [2]) for i in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2]) for o in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    # Nodes given as bytes are appended to the graph (field 7 of ModelProto) as encoded.
    return model.SerializeToString() + b"".join(field(7, field(1, n)) for n in raw)


def field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (lengths here stay below 2^28)."""
    size, varint = len(payload), b""
    while True:
        byte = size & 0x7F
        size >>= 7
        varint += bytes([byte | (0x80 if size else 0)])
        if not size:
            break
    return bytes([(number << 3) | 2]) + varint + payload


def nested_if(depth: int) -> bytes:
    """An If node whose then-branch holds an If node, `depth` levels down, each level three
    protobuf messages deep. Encoded by hand: the Python protobuf runtime refuses to build
    messages that deep, which is the point."""
    inner = helper.make_node("Relu", ["x"], ["r"], name="/deep/Relu").SerializeToString()
    for level in range(depth):
        graph = field(1, inner) + field(2, b"b%d" % level)  # node, name
        attribute = field(1, b"then_branch") + field(6, graph) + b"\xa0\x01\x05"  # type GRAPH
        inner = (
            field(1, b"c") + field(2, b"o%d" % level) + field(3, b"/If_%d" % level)
            + field(4, b"If") + field(5, attribute)
        )
    return inner


ONNX = {
    # A node that consumes its own output: the graph is not a DAG.
    "hand_self_loop.onnx": onnx_bytes([helper.make_node("Add", ["x", "y"], ["y"], name="/add/Add")]),
    # Two nodes feeding each other.
    "hand_cycle.onnx": onnx_bytes(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="/p/Add"),
            helper.make_node("Relu", ["a"], ["b"], name="/q/Relu"),
            helper.make_node("Identity", ["b"], ["y"], name="/Identity"),
        ]
    ),
    # A cycle through a node whose name holds a newline (the fuzzer's first find: the error
    # quoted the name and broke the one-line rule).
    "hand_cycle_newline_name.onnx": onnx_bytes(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="evil\nname"),
            helper.make_node("Relu", ["a"], ["b"], name="/q/Relu"),
            helper.make_node("Identity", ["b"], ["y"], name="/Identity"),
        ]
    ),
    # Two nodes producing the same value.
    "hand_two_producers.onnx": onnx_bytes(
        [
            helper.make_node("Relu", ["x"], ["y"], name="/a/Relu"),
            helper.make_node("Neg", ["x"], ["y"], name="/b/Neg"),
        ]
    ),
    # Subgraphs nested deeper than the protobuf decoder's recursion limit (100 messages).
    "hand_nested_subgraphs_40.onnx": onnx_bytes([nested_if(40)], outputs=("o39",)),
    # Hostile metadata: unterminated scope lists and a stack trace without frames.
    "hand_bad_metadata.onnx": None,
}


def bad_metadata() -> bytes:
    node = helper.make_node("Relu", ["x"], ["x"], name="/////")
    for key, value in [
        ("pkg.torch.onnx.name_scopes", "['', 'a\\"),
        ("pkg.torch.onnx.class_hierarchy", "[" * 1000),
        ("pkg.torch.onnx.stack_trace", 'File "x", line \nFile "'),
    ]:
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value
    return onnx_bytes([node], outputs=("x",))


def main():
    ONNX["hand_bad_metadata.onnx"] = bad_metadata()
    for folder, files in [("npy", NPY), ("npz", NPZ), ("onnx_model", ONNX)]:
        d = OUT / folder
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (d / name).write_bytes(data)
    print(f"wrote {sum(map(len, [NPY, NPZ, ONNX]))} files under {OUT}")


if __name__ == "__main__":
    main()
