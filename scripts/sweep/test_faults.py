"""Unit tests of the sweep's expected-culprit derivation (faults.py) and its judgement
(causes.py) on small hand-made graphs, each shaped like a case measured in the sweep. Run with
`.venv/bin/python -m unittest discover -s scripts/sweep -p 'test_*.py'` (scripts/test.sh does).
"""

import os
import sys
import unittest

from onnx import TensorProto, helper, numpy_helper
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sweep import causes, faults, module_tree  # noqa: E402


def _graph(nodes, inits=()):
    return helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((2, 2), np.float32), n) for n in inits])


class RepeatedCalls(unittest.TestCase):
    def test_call_suffix_names_the_module_called_again(self):
        # The legacy exporter writes a module's second call as `query_1`; TorchScript (and
        # align-check) name it `query`.
        g = _graph([
            helper.make_node("MatMul", ["x", "w"], ["a"], name="/enc/attention/query/MatMul"),
            helper.make_node("MatMul", ["a", "w"], ["y"], name="/enc/attention/query_1/MatMul"),
        ], ["w"])
        self.assertEqual(faults.expected_module(g.node[1], g), ("enc.attention.query",
                                                                "node_name"))

    def test_suffix_kept_without_a_first_call(self):
        g = _graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="/enc/fc_1/MatMul")],
                   ["w"])
        self.assertEqual(faults.expected_module(g.node[0], g)[0], "enc.fc_1")


class HeldOutputs(unittest.TestCase):
    def test_unscoped_reshape_after_gemm_holds_the_output(self):
        # ONNX Runtime's MatMul+Add -> Gemm rewrite: the module's output in its own shape is
        # only in the optimiser's Reshape.
        g = _graph([
            helper.make_node("Reshape", ["x", "s"], ["x2"], name="gemm_input_reshape_token_1"),
            helper.make_node("Gemm", ["x2", "w", "b"], ["g"],
                             name="/layer/lin2/MatMul/MatMulAddFusion"),
            helper.make_node("Reshape", ["g", "s"], ["/layer/lin2/Add_output_0"],
                             name="gemm_output_reshape_token_2"),
            helper.make_node("Relu", ["/layer/lin2/Add_output_0"], ["y"], name="/next/Relu"),
        ], ["w", "b", "s"])
        self.assertEqual(faults.accepted_nodes(g, 1), ["/layer/lin2/MatMul/MatMulAddFusion",
                                                       "gemm_output_reshape_token_2"])


class MergedProjections(unittest.TestCase):
    def _merged(self):
        # A simplifier merged q/k/v into one MatMul (renamed, no scope) and splits its output.
        return _graph([
            helper.make_node("MatMul", ["x", "w"], ["m"], name="MatMul_4"),
            helper.make_node("Split", ["m"], ["q", "k", "v"], name="Split_5", axis=-1),
            helper.make_node("Reshape", ["q", "s"], ["q2"], name="/l0/attn/Reshape"),
            helper.make_node("Reshape", ["k", "s"], ["k2"], name="/l0/attn/Reshape_1"),
            helper.make_node("Reshape", ["v", "s"], ["y"], name="/l0/attn/Reshape_2"),
        ], ["w", "s"])

    def test_split_readers_in_one_scope_enclose_the_culprit(self):
        g = self._merged()
        self.assertEqual(faults.expected_module(g.node[0], g), ("l0.attn", "enclosing_scope"))

    def test_a_module_inside_the_enclosing_scope_is_right(self):
        recipe = {"kind": "scale", "op_type": "MatMul", "node": "MatMul_4",
                  "expected_module": "l0.attn", "expected_module_from": "enclosing_scope",
                  "accepted_nodes": ["MatMul_4", "Split_5"]}
        result = {"exit": 1, "first_divergence": {"module": "l0.attn.q_proj",
                                                  "onnx_node": "Split_5"}}
        out = causes.fault_outcome(result, recipe)
        self.assertTrue(out["module_right"])
        self.assertFalse(out["module_exact"])
        exact = dict(recipe, expected_module_from="node_name")
        self.assertFalse(causes.fault_outcome(result, exact)["module_right"])

    def test_a_container_the_graph_names_without_its_children_encloses_the_culprit(self):
        # A scripted nn.Sequential exported by the legacy exporter: its Linears' nodes carry
        # `encoder` alone, though the model has `encoder.0` .. `encoder.2`.
        g = _graph([
            helper.make_node("MatMul", ["x", "w"], ["m"], name="/encoder/MatMul"),
            helper.make_node("Tanh", ["m"], ["t"], name="/encoder/Tanh"),
            helper.make_node("MatMul", ["t", "v"], ["y"], name="/encoder/MatMul_1"),
            helper.make_node("Relu", ["y"], ["z"], name="/head/fc/Relu"),
        ], ["w", "v"])
        modules = {"", "encoder", "encoder.0", "encoder.1", "encoder.2", "head", "head.fc"}
        recipe = {"expected_module": "encoder", "expected_module_from": "node_name"}
        faults._known_only_as_container(recipe, g, modules)
        self.assertEqual(recipe["expected_module_from"], "enclosing_scope")
        recipe.update(kind="scale", op_type="MatMul", node="/encoder/MatMul_1",
                      accepted_nodes=["/encoder/MatMul_1"])
        result = {"exit": 1, "first_divergence": {"module": "encoder.2",
                                                  "onnx_node": "/encoder/MatMul_1"}}
        self.assertTrue(causes.fault_outcome(result, recipe)["module_right"])
        # A container whose children the graph does name stays exact: `head` is not enclosing
        # when `head.fc` has nodes.
        recipe = {"expected_module": "head", "expected_module_from": "node_name"}
        faults._known_only_as_container(recipe, g, modules)
        self.assertEqual(recipe["expected_module_from"], "node_name")

    def test_bias_add_names_the_renamed_matmul(self):
        g = _graph([
            helper.make_node("MatMul", ["x", "w"], ["m"], name="MatMul_13"),
            helper.make_node("Add", ["m", "b"], ["y"], name="/l1/attn/q_proj/Add"),
        ], ["w", "b"])
        self.assertEqual(faults.expected_module(g.node[0], g), ("l1.attn.q_proj", "bias_add"))


class DecomposedNorms(unittest.TestCase):
    def _group_norm(self):
        # The dynamo exporter's group_norm after onnxslim: InstanceNormalization, Reshape, the
        # affine Mul and Add, no scopes left; the Add is the module's output.
        return _graph([
            helper.make_node("Reshape", ["x", "s"], ["r"], name="node_Reshape_90"),
            helper.make_node("InstanceNormalization", ["r", "g", "b"], ["n"],
                             name="node_InstanceNormalization_92"),
            helper.make_node("Reshape", ["n", "s"], ["n2"], name="node_Reshape_94"),
            helper.make_node("Mul", ["n2", "w"], ["m"], name="node_Mul_102"),
            helper.make_node("Add", ["m", "c"], ["a"], name="node_group_norm"),
            helper.make_node("Conv", ["a", "k"], ["y"], name="node_Conv_628"),
        ], ["s", "g", "b", "w", "c", "k"])

    def test_the_affine_add_holds_a_scopeless_group_norm(self):
        g = self._group_norm()
        self.assertEqual(faults.accepted_nodes(g, 1), [
            "node_InstanceNormalization_92", "node_Reshape_94", "node_Mul_102",
            "node_group_norm"])

    def test_a_node_holding_the_output_is_right_when_no_module_is_known(self):
        recipe = {"kind": "attribute", "op_type": "InstanceNormalization",
                  "node": "node_InstanceNormalization_92", "expected_module": None,
                  "expected_module_from": None,
                  "accepted_nodes": faults.accepted_nodes(self._group_norm(), 1)}
        result = {"exit": 1, "first_divergence": {"module": "stages.2.main.0",
                                                  "onnx_node": "node_group_norm"}}
        out = causes.fault_outcome(result, recipe)
        self.assertTrue(out["module_right"] and out["op_right"])
        # The next layer is not.
        result["first_divergence"]["onnx_node"] = "node_Conv_628"
        self.assertFalse(causes.fault_outcome(result, recipe)["module_right"])


class ModuleTree(unittest.TestCase):
    MODULES = {"", "model", "model.decoder", "model.decoder.layers.0",
               "model.decoder.layers.0.v_proj", "blocks.0.attn", "blocks.0.attn.rel_pos",
               "blocks.0.attn.rel_pos.mlp", "blocks.0.attn.rel_pos.mlp.fc2", "enc",
               "enc.layers.0.norm", "enc.layers.1.norm", "enc.layers.0", "enc.layers.1"}

    def resolved(self, expected):
        recipe = {"expected_module": expected, "expected_module_from": "node_name"}
        module_tree.resolve(recipe, self.MODULES)
        return recipe

    def test_a_dropped_inner_level_or_wrapper_is_read_from_the_model(self):
        self.assertEqual(self.resolved("blocks.0.attn.mlp.fc2")["expected_module"],
                         "blocks.0.attn.rel_pos.mlp.fc2")
        recipe = self.resolved("decoder.layers.0.v_proj")
        self.assertEqual(recipe["expected_module"], "model.decoder.layers.0.v_proj")
        self.assertEqual(recipe["expected_module_from"], "node_name+module_tree")

    def test_a_module_of_the_model_is_kept_and_an_ambiguous_path_accepts_each_fit(self):
        self.assertEqual(self.resolved("enc.layers.0.norm"),
                         {"expected_module": "enc.layers.0.norm",
                          "expected_module_from": "node_name"})
        recipe = self.resolved("enc.norm")
        self.assertEqual(recipe["expected_candidates"], ["enc.layers.0.norm",
                                                          "enc.layers.1.norm"])
        recipe.update(kind="attribute", op_type="LayerNormalization", node="n",
                      accepted_nodes=["n"])
        result = {"exit": 1, "first_divergence": {"module": "enc.layers.1.norm",
                                                  "onnx_node": "other"}}
        self.assertTrue(causes.fault_outcome(result, recipe)["module_right"])
        result["first_divergence"]["module"] = "enc.layers.1"
        self.assertFalse(causes.fault_outcome(result, recipe)["module_right"])


if __name__ == "__main__":
    unittest.main()
