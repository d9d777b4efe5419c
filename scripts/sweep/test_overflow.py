"""The sweep's float16 overflow reference (overflow.py) on a two-node graph built here, and how
a clean pair's failure is classified with it (causes.py). Run by scripts/test.sh
(`unittest discover -s scripts/sweep`)."""

import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from sweep import causes, overflow, variants  # noqa: E402


def scale_twice(folder, factor):
    """y = (x * factor) / factor as a float32 ONNX file and its float16 conversion."""
    import onnx
    from onnx import TensorProto, helper
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [], [factor])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "scale"], ["big"]),
         helper.make_node("Div", ["big", "scale"], ["y"])],
        "scale_twice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    source, converted = os.path.join(folder, "f32.onnx"), os.path.join(folder, "f16.onnx")
    onnx.save(model, source)
    variants.apply("fp16", source, converted, {})
    return source, converted


class Float16Overflow(unittest.TestCase):
    def test_a_value_beyond_65504_is_listed_with_its_peak(self):
        feeds = {"x": np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float32)}
        with tempfile.TemporaryDirectory() as folder:
            source, converted = scale_twice(folder, 1e5)
            found = overflow.float16_overflow(converted, source, feeds)
        self.assertEqual([f["name"] for f in found], ["big"])
        self.assertAlmostEqual(found[0]["max_abs"], 2e5, delta=1.0)

    def test_values_float16_holds_are_not_listed(self):
        feeds = {"x": np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float32)}
        with tempfile.TemporaryDirectory() as folder:
            source, converted = scale_twice(folder, 100.0)
            self.assertEqual(overflow.float16_overflow(converted, source, feeds), [])

    def test_a_failed_clean_pair_with_an_overflow_is_a_real_divergence(self):
        result = {"exit": 1, "first_divergence": None}
        pair = {"reference": {"outputs_within_tolerance": True,
                              "float16_overflow": [{"name": "big", "max_abs": 2e5}]}}
        category, cause = causes.clean_category(result, pair)
        self.assertEqual(category, "real divergence")
        self.assertIn("float16 overflow", cause)
        pair["reference"]["float16_overflow"] = []
        self.assertEqual(causes.clean_category(result, pair)[0], "false alarm")


if __name__ == "__main__":
    unittest.main()
