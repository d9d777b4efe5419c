#!/usr/bin/env python3
"""Regenerates align-check's second fixture family, tests/fixtures/lib/, and its manifest.json:
models from the libraries people deploy (transformers, timm, Ultralytics), exported the ways
their users export them.

Responsible for: writing each fixture folder (model.pt, model.onnx, inputs.npz keyed by ONNX
input names) and tests/fixtures/lib/manifest.json in the entry format of
tests/fixtures/manifest.json, then checking every fixture. Clean fixtures: the tiny models of
fixtures_lib/library_models.py with the legacy exporter (opset 17) and, where it works, the
dynamo exporter (a failure is recorded in export_error, not fatal); YOLO as Ultralytics' own
exporter writes it (Conv+BN fused before tracing, onnxslim); onnxslim'd BERT and ViT; a GPT-2
whose dynamo export fell back to the JIT-trace strategy and so has no module scopes; a scripted
loop+if model. Planted faults copy a clean fixture's model.pt and inputs.npz and change one
thing in its ONNX. Checks: clean fixtures agree with TorchScript within 1e-4 (relative to the
output's magnitude where that exceeds 1), each fault's planted node is the first ONNX node
that departs from the clean export, by more than 1e-3 of its range, and the fault is visible at
the outputs (or, for the one designed to be, invisible there). Any failed check: exit 1.
What every spec family does alike (seeds, exports, manifest entries, planting, checks) is
fixtures_lib/driver.py; this file is this family's specs, the fixtures no spec describes
(Ultralytics' own export, onnxslim, the fallback export) and its faults.

Run with the pinned interpreter: .venv/bin/python scripts/make_library_fixtures.py
It overwrites tests/fixtures/lib/ and nothing else; seeds are fixed per model and
PYTHONHASHSEED is pinned, so reruns on the same checkout path give the same files.
Nothing is downloaded: every model is built from a config with random weights.
"""

import argparse
import functools
import os
import warnings

# Before the libraries are imported: offline, and no settings files in the user's home.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_VERBOSE", "False")
os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(
    os.environ.get("ALIGN_CHECK_CACHE", os.path.expanduser("~/.cache/align-check")),
    "ultralytics"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxslim  # noqa: E402

from fixtures_lib import driver  # noqa: E402
from fixtures_lib import export as ex  # noqa: E402
from fixtures_lib import faults  # noqa: E402
from fixtures_lib.manifest import entry, fresh_folder  # noqa: E402
from fixtures_lib import library_models as lm  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "lib")
MAX_TOTAL_BYTES = 15 * 2**20

TEXT_IN = ["input_ids", "attention_mask"]

# Clean model specs (the schema is in fixtures_lib/driver.py's Family). `make` builds the eager
# model and example inputs from the seeded RNG; the seed depends only on the spec name (or
# `seed_of`), so every variant of a model and the faults derived from it share weights and
# inputs exactly.
SPECS = {
    "bert": dict(
        make=lm.bert, inputs=TEXT_IN, outputs=["last_hidden_state", "pooler_output"],
        exporters=["legacy", "dynamo"],
        exercises=["iterated_container", "attention", "sdpa", "decomposed_op", "padding_mask",
                   "int_inputs", "layernorm", "gelu", "residual"],
        notes="transformers BertModel (2 layers, hidden 32, 2 heads, vocab 100, seq 8), sdpa "
              "attention, batch 2 with row 1 padded from position 5 (attention_mask zeros). "
              "BertEncoder runs `for layer in self.layer`, so libtorch's call stack says "
              "encoder.0... for encoder.layer.0... (see torchscript_call_paths). The legacy "
              "exporter decomposes scaled_dot_product_attention into Mul/Mul/MatMul/Add/"
              "Softmax/IsNaN/Where/MatMul and GELU into Div/Erf/Add/Mul/Mul; Linear on 3-D "
              "input is MatMul+Add."),
    "gpt2": dict(
        make=lm.gpt2, inputs=TEXT_IN, outputs=["last_hidden_state"],
        exporters=["legacy", "dynamo"],
        exercises=["iterated_container", "attention", "padding_mask", "int_inputs",
                   "layernorm", "gelu", "residual", "split"],
        notes="transformers GPT2Model (2 layers, hidden 32, 2 heads), eager attention: "
              "matmul, scaling, causal where, softmax are separate TorchScript ops. Conv1D is "
              "addmm (ONNX Gemm); c_attn gives q, k, v in one tensor that is split. Batch 2, "
              "row 1 padded from position 5. `for block in self.h` is iterated: call stack "
              "says 0.attn for h.0.attn."),
    "vit": dict(
        make=lm.vit, inputs=["pixel_values"], outputs=["last_hidden_state", "pooler_output"],
        exporters=["legacy", "dynamo"],
        exercises=["iterated_container", "attention", "sdpa", "decomposed_op", "layernorm",
                   "gelu", "residual"],
        notes="transformers ViTModel (image 32, patch 8, 2 layers, hidden 32, 2 heads), sdpa "
              "attention. In transformers 5.x the blocks are `layers.N` at the model's root with "
              "attention.{q,k,v,o}_proj and mlp.{fc1,activation_fn,fc2}; `for layer in "
              "self.layers` is iterated, so libtorch's call stack says 0.attention.q_proj "
              "for layers.0.attention.q_proj."),
    "swin": dict(
        make=lm.swin, inputs=["input"], outputs=["logits"], exporters=["legacy", "dynamo"],
        exercises=["window_attention", "roll", "decomposed_op", "layernorm", "gelu",
                   "residual"],
        notes="timm SwinTransformer (image 32, patch 2, window 4, depths (2, 2), embed 16). "
              "Blocks layers.N.blocks.1 are shifted: torch.roll(shift -2) before and "
              "roll(+2) after window attention, each exported as Slice, Slice, Concat per "
              "rolled dim (dims 1 and 2); the first Concat's value is partial (same shape "
              "as the roll's output), only the second completes aten::roll."),
    "mobilevit": dict(
        make=lm.mobilevit, inputs=["input"], outputs=["logits"],
        exporters=["legacy", "dynamo"],
        exercises=["bn_fusion", "bn_act_fusion", "attention", "sdpa", "decomposed_op",
                   "layernorm", "silu", "residual"],
        notes="timm ByobNet with MobileViT v1 blocks (reduced widths, image 64). Convs are "
              "ConvNormAct: conv + BatchNormAct2d (a BatchNorm2d subclass applying SiLU "
              "itself), so a fused Conv's value equals the BN *before* the activation, "
              "inside the bn module. The transformers use timm's fused attention "
              "(F.scaled_dot_product_attention)."),
    "xcit": dict(
        make=lm.xcit, inputs=["input"], outputs=["logits"], exporters=["legacy"],
        exercises=["constant_from_sizes", "tuple_return", "layernorm", "gelu", "residual"],
        notes="timm Xcit (image 32, patch 8, 1 block + 1 class-attention block, embed 32). "
              "patch_embed returns (x, (Hp, Wp)) and pos_embed computes a Fourier encoding "
              "from Hp, Wp only (arange, sin/cos, a 1x1 Conv), which the legacy exporter "
              "computes in the graph. F.normalize of q and k: linalg_vector_norm -> ReduceL2, "
              "clamp_min -> Clip. Legacy only: where dynamo or onnxslim fold the encoding, the "
              "TorchScript side still counts it (issue #20, item 4)."),
    "yolo": dict(
        make=lm.yolo_detection_model, inputs=["images"], outputs=["output0"],
        exporters=["legacy", "dynamo"], trace_kwargs=dict(check_trace=False),
        exercises=["iterated_container", "shared_module", "bn_fusion", "silu", "split",
                   "upsample", "top_level_functional"],
        notes="Ultralytics DetectionModel from yolov8n.yaml (width 0.0625, nc 8, reg_max 4, "
              "imgsz 64), random weights, NOT fused: plain torch.jit.trace (check_trace="
              "False: Detect caches anchors, so a second trace differs) and the exporter on "
              "the eager model. Detect.export = True, as Ultralytics' exporter sets it, so "
              "the output is one tensor (1, 4 + nc, 84). `for m in self.model` is iterated "
              "(call stack: 4.cv1.conv for model.4.cv1.conv; C2f's ModuleList `m` too); every "
              "Conv's act is the one shared SiLU (Conv.default_act), which torch.jit.trace "
              "passes to each Conv.forward as an argument, so libtorch names it "
              "INSTANCE_NAME_UNKNOWN; the legacy exporter names it by the call path "
              "(/model.4/cv1/act/Sigmoid). Detect's cv2.i and cv3.i are both `22.i...` on "
              "the call stack."),
    "loop_if": dict(
        make=lm.loop_if, inputs=["input"], outputs=["output"], exporters=["legacy", "dynamo"],
        scripted=True,
        exercises=["control_flow", "bn_fusion", "iterated_container", "module_called_twice"],
        notes="torch.jit.script of LoopIfNet: `for _ in range(self.steps)` (prim::Loop, 3 "
              "trips, calling `gate` each time), `for blk in self.blocks` over a ModuleList "
              "(unrolled by the script compiler: call stack 0/1 for blocks.0/blocks.1), and "
              "`if x.mean() > 0` (prim::If; ONNX If with pos/neg branches)."),
}

DYNAMO_FAILURE_NOTES = {
    "loop_if": "torch.export cannot branch on data (`if x.mean() > 0`) without torch.cond; "
               "the eager module was given (dynamo cannot take a ScriptModule).",
}

DYNAMO_NOTES = {
    "bert": " dynamo (default opset 18): GELU is one Gelu node (onnxscript rewriter), sdpa "
            "decomposed, Linear is Gemm or MatMul+Add.",
    "vit": " dynamo (default opset 18): GELU is one Gelu node.",
    "mobilevit": " dynamo: BatchNormAct2d's BN is folded into the Conv (scopes of the bn "
                 "module), the SiLU stays a separate Sigmoid/Mul.",
    "yolo": " dynamo on the unfused eager DetectionModel (model.pt is the plain trace).",
}


def modules(model_pt, eager_model):
    """expected_modules are the paths `named_modules()` gives (what align-check should name),
    resolved through iterated containers and shared modules; torchscript_call_paths maps each
    of them to what libtorch's inlined call stack says where the two differ."""
    paths, call_paths = ex.expected_modules_resolved(model_pt, eager_model)
    return {"expected_modules": paths, "torchscript_call_paths": call_paths}


FAMILY = driver.Family(
    root=FIXTURES, specs=SPECS, dynamo_notes=DYNAMO_NOTES,
    dynamo_failure_notes=DYNAMO_FAILURE_NOTES, legacy_opset=17, modules=modules,
    dynamo_scopes=lambda name, model: ex.module_scope_summary(model), full_fault_fields=True,
    clean_atol=1e-4, clean_relative=True,
    fault_min_out=1e-3,   # at the outputs, for a visible fault
    fault_min_rel=1e-3,   # at the planted node, relative to the clean value's max |x|
    owns_root=True, max_total_bytes=MAX_TOTAL_BYTES, name_width=34)
describe = functools.partial(driver.describe, FAMILY)
build_model = functools.partial(driver.build_model, FAMILY)


def make_yolo_ultralytics():
    """TorchScript and ONNX exactly as Ultralytics' own exporter writes them."""
    spec = dict(SPECS["yolo"], notes=(
        "Ultralytics' own export flow, run for real (YOLO('yolov8n.yaml') with the scaled-down "
        "DetectionModel of yolo_legacy swapped in, same weights): .export(format="
        "'torchscript') and .export(format='onnx'), offline. The exporter deep-copies the "
        "model, fuses Conv+BN in PyTorch (model.fuse(): Conv.forward_fuse, no BatchNorm left "
        "in model.pt, so its conv value is the fused conv+bn), sets C2f.forward = "
        "forward_split (aten::split_with_sizes instead of chunk), traces with strict=False, "
        "check_trace=False and stores a config.txt extra file. The ONNX is the legacy "
        "exporter at the opset Ultralytics picks for the installed onnx, then onnxslim.slim "
        "(node names kept, e.g. /model.4/cv1/act/Sigmoid). The export date in both files' "
        "metadata is pinned to 2024-01-01 for reproducibility."))
    spec["exercises"] = ["library_export", "fused_before_tracing", "onnxslim",
                         "iterated_container", "shared_module", "silu", "split", "upsample"]
    name = "yolo_ultralytics"
    FAMILY.origin[name] = ("yolo", None)
    model, inputs = build_model("yolo")
    path = fresh_folder(FIXTURES, name)
    lm.ultralytics_export(model, os.path.join(path, "model.pt"),
                          os.path.join(path, "model.onnx"))
    ex.save_inputs(os.path.join(path, "inputs.npz"), spec["inputs"], inputs)
    e = describe(entry(name, "legacy", spec), path, model)
    e["pipeline"] = "ultralytics: model.fuse() + torch.jit.trace / legacy export + onnxslim"
    ts_bn = [r for r in ex.torch_module_listing(os.path.join(path, "model.pt"))
             if r[0] == "aten::batch_norm"]
    assert not ts_bn, "Ultralytics' TorchScript still has batch_norm: not fused before tracing"
    return e


def make_slim(spec_name):
    """onnxslim.slim of the clean legacy export (what many deployment pipelines run)."""
    source = f"{spec_name}_legacy"
    name = f"{spec_name}_slim"
    FAMILY.origin[name] = (spec_name, None)
    base = FAMILY.entry_named(source)
    path = driver.copy_pair(FAMILY, name, source)
    exported = onnx.load(FAMILY.path(source, "model.onnx"))
    before = len(exported.graph.node)
    slim = onnxslim.slim(exported)
    onnx.save(slim, os.path.join(path, "model.onnx"))
    spec = dict(SPECS[spec_name], notes=(
        f"{spec_name}_legacy's ONNX after onnxslim.slim ({before} -> {len(slim.graph.node)} "
        "nodes): MatMul+Add of each Linear fused into Gemm between "
        "Reshapes named after the old outputs (/.../dense/MatMul_output_0_pre_reshape), shape "
        "arithmetic folded, Constant nodes turned into initializers. Same model.pt and "
        "inputs as the legacy fixture."))
    spec["exercises"] = list(base["exercises"]) + ["onnxslim"]
    model, _ = build_model(spec_name)
    e = describe(entry(name, "legacy", spec), path, model)
    e["pipeline"] = "legacy export (opset 17) + onnxslim.slim"
    return e


def make_fallback(strip):
    """GPT-2 whose dynamo export fell back to the JIT-trace strategy (no module scopes)."""
    name = "gpt2_dynamo_fallback" + ("" if strip else "_rootscopes")
    FAMILY.origin[name] = ("gpt2", lm.gpt2_padding_branch)
    base = SPECS["gpt2"]
    model, inputs = build_model("gpt2", make=lm.gpt2_padding_branch)
    path = fresh_folder(FIXTURES, name)
    ts = ex.trace_inlining_autograd_functions(model, inputs, check_trace=False)
    ts.save(os.path.join(path, "model.pt"))
    onnx_path = os.path.join(path, "model.onnx")
    strategy, errors = ex.export_dynamo_with_jit_fallback(model, inputs, onnx_path,
                                                          base["inputs"], base["outputs"])
    written = onnx.load(onnx_path)
    summary = ex.module_scope_summary(written)
    assert summary["nodes_with_module_scopes"] == 0, summary
    examples = ", ".join(next(n.name for n in written.graph.node if n.op_type == op)
                         for op in ("Gemm", "LayerNormalization", "Softmax"))
    if strip:
        removed = faults.strip_node_metadata(written)
        onnx.save(written, onnx_path)
        how = (f"then every node's metadata_props were removed ({removed} entries: the "
               "root-only pkg.torch.onnx.name_scopes ['', <fx node>] and class_hierarchy/"
               "namespace/stack_trace/fx_node that torch 2.13 writes for a converted program), "
               "which is what the fallback wrote in the torch versions that had it: no "
               "pkg.torch.onnx.* metadata at all. Node names are FX names "
               f"({examples}), not module paths.")
    else:
        how = ("metadata kept as torch 2.13 writes it for a converted program: "
               f"{summary['nodes_with_name_scopes']} of {summary['nodes']} nodes carry "
               "pkg.torch.onnx.name_scopes, but only ['', <fx node name>] or "
               "['_empty_nn_module_stack_from_metadata_hook', ...]: no module appears in any "
               "of them (a root-only scope must not be read as 'top-level functional').")
    ex.save_inputs(os.path.join(path, "inputs.npz"), base["inputs"], inputs)
    spec = dict(base, notes=(
        "GPT-2 of gpt2_legacy (same weights) behind `if (attention_mask == 0).any()`, a "
        "data-dependent branch: torch.export fails in both modes the dynamo exporter tries ("
        + "; ".join(errors) + "). The export then took the JIT-trace fallback strategy of "
        "torch <= 2.10 (export_dynamo_with_jit_fallback: torch.jit.trace -> "
        f"{strategy} -> dynamo ONNX export of that ExportedProgram); " + how +
        " model.pt is the same trace (branch for a padded batch)."))
    spec["exercises"] = list(base["exercises"]) + ["scopeless", "dynamo_fallback"]
    e = describe(entry(name, "dynamo", spec), path, model)
    e["pipeline"] = "dynamo export after torch.export failed: jit trace -> TS2EPConverter"
    if strip:
        assert e["dynamo_name_scopes"]["nodes_with_name_scopes"] == 0, e["dynamo_name_scopes"]
    return e


# Planted faults -------------------------------------------------------------------------------

def onnx_nodes(source):
    return list(onnx.load(os.path.join(FIXTURES, source, "model.onnx")).graph.node)


def node_by_scope(source, op_type, scope, input_name=None):
    """The single node of `op_type` in a dynamo export whose name_scopes contain `scope`
    (or, for scope-less graphs, that reads initializer `input_name`)."""
    found = []
    for n in onnx_nodes(source):
        if n.op_type != op_type:
            continue
        props = {p.key: p.value for p in n.metadata_props}
        if scope is not None and f"'{scope}'" in props.get("pkg.torch.onnx.name_scopes", ""):
            found.append(n.name)
        elif input_name is not None and input_name in n.input:
            found.append(n.name)
    assert len(found) == 1, f"{source}: {op_type} for {scope or input_name}: {found}"
    return found[0]


make_fault = functools.partial(driver.make_fault, FAMILY)


def make_faults():
    out = []
    state = {}

    # 1. Inside an iterated block (encoder.layer is iterated, not called): a weight.
    node = "/encoder/layer.1/attention/output/dense/MatMul"
    out.append(make_fault(
        "fault_bert_dense_weight", "bert_legacy",
        "output feature 3 of encoder.layer.1.attention.output.dense scaled by 1.1 in the "
        "MatMul weight initializer (stored [in, out])",
        "encoder.layer.1.attention.output.dense",
        lambda m: faults.scale_initializer_slice(m, node, 1, 1.1, axis=1, index=3),
        kind="iterated_block_weight",
        extra={"completing_onnx_node": node.replace("MatMul", "Add"),
               "completing_onnx_op": "Add",
               "hint": "Linear on 3-D input is MatMul + Add(bias); the Add completes "
                       "aten::linear. Call stack path: encoder.1.attention.output.dense."}))

    # 2. Inside an iterated block, dynamo export: a LayerNorm attribute.
    ln = node_by_scope("bert_dynamo", "LayerNormalization",
                       "encoder.layer.1.attention.output.LayerNorm")

    def ln_eps(m):
        state["eps"] = faults.set_layernorm_epsilon(m, ln, 0.5)
        return ln

    e = make_fault(
        "fault_bert_dynamo_ln_eps", "bert_dynamo",
        "epsilon of encoder.layer.1.attention.output.LayerNorm's LayerNormalization set to 0.5",
        "encoder.layer.1.attention.output.LayerNorm", ln_eps, kind="iterated_block_attribute")
    e["fault"]["description"] += f" (exported: {state['eps']:.0e})"
    out.append(e)

    # 3. Inside the shared module (Conv.default_act), in Ultralytics' own export.
    # model.4.cv2's: of the SiLUs in model.4 the one whose change reaches the outputs most
    # (3e-3 px; inside the C2f's bottlenecks it stays under 1e-3 at the boxes).
    sig = "/model.4/cv2/act/Sigmoid"
    out.append(make_fault(
        "fault_yolo_shared_silu", "yolo_ultralytics",
        "the Sigmoid of model.4.cv2's SiLU (the one nn.SiLU instance every Conv shares as "
        "Conv.default_act) replaced by HardSigmoid(alpha=1/6, beta=0.5): that one call "
        "computes hard-swish, a close approximation, while every other SiLU call is exact",
        "model.4.cv2.act", lambda m: faults.sigmoid_to_hardsigmoid(m, sig),
        kind="shared_module_close_approximation",
        extra={"completing_onnx_node": "/model.4/cv2/act/Mul", "completing_onnx_op": "Mul",
               "hint": "SiLU is Sigmoid + Mul in ONNX; the Mul completes aten::silu. In "
                       "model.pt the SiLU is INSTANCE_NAME_UNKNOWN on the call stack "
                       "(4.cv2.INSTANCE_NAME_UNKNOWN); its path through the call is "
                       "model.4.cv2.act."}))

    # 4. In a decomposed op: the Concat completing torch.roll (dims 1, 2) in a shifted block.
    concat = "/layers/layers.0/blocks/blocks.1/Concat_1"
    assert concat in [n.name for n in onnx_nodes("swin_legacy")]
    out.append(make_fault(
        "fault_swin_roll", "swin_legacy",
        "inputs of the Concat that completes the first torch.roll of layers.0.blocks.1 "
        "(shift -2 over dims 1, 2; this Concat handles dim 2) swapped: the roll along the "
        "width is undone, so windows are shifted in height only",
        "layers.0.blocks.1", lambda m: faults.swap_concat_inputs(m, concat),
        kind="decomposed_op_roll",
        extra={"changed_onnx_nodes": [concat],
               "partial_onnx_nodes": ["/layers/layers.0/blocks/blocks.1/Slice",
                                      "/layers/layers.0/blocks/blocks.1/Slice_1",
                                      "/layers/layers.0/blocks/blocks.1/Concat",
                                      "/layers/layers.0/blocks/blocks.1/Slice_2",
                                      "/layers/layers.0/blocks/blocks.1/Slice_3"],
               "expected_torch_op": "aten::roll",
               "hint": "torch.roll(x, (-2, -2), (1, 2)) in SwinTransformerBlock._attn: "
                       "Slice, Slice, Concat (dim 1) then Slice, Slice, Concat_1 (dim 2). "
                       "Concat's value has the roll's shape but is partial; Concat_1 "
                       "completes aten::roll."}))

    # 5. In a decomposed op: the softmax scale inside scaled_dot_product_attention.
    mul = "/layers.0/attention/Mul"

    def sdpa_scale(m):
        # The legacy decomposition multiplies q and k^T by sqrt(scale) each (0.5 for
        # head_dim 16). Scale computed from the hidden size (32) instead of the head dim:
        # q-side factor (1/sqrt(32)) / 0.5.
        state["old"] = faults.replace_mul_constant(m, mul, (1 / np.sqrt(32)) / 0.5)
        return mul

    e = make_fault(
        "fault_vit_sdpa_scale", "vit_legacy",
        "in layers.0's scaled_dot_product_attention, the q-side scale Mul changed so the "
        "softmax scale is 1/sqrt(hidden=32) instead of 1/sqrt(head_dim=16)",
        "layers.0.attention", sdpa_scale, kind="decomposed_op_sdpa",
        extra={"completing_onnx_node": "/layers.0/attention/MatMul_1",
               "completing_onnx_op": "MatMul", "expected_torch_op":
               "aten::scaled_dot_product_attention",
               "hint": "sdpa -> Mul(q, s), Mul(k^T, s), MatMul, Softmax, MatMul: only the "
                       "last MatMul completes the op. Call stack path: 0.attention."})
    e["fault"]["description"] += f" (exported q-side factor: {float(state['old']):.3g})"
    out.append(e)

    # 6. An activation replaced by a close approximation (exact GELU -> tanh GELU).
    erf = "/layers.1/mlp/activation_fn/Erf"
    out.append(make_fault(
        "fault_vit_gelu_tanh", "vit_legacy",
        "the Erf of layers.1.mlp.activation_fn's exact GELU replaced by the tanh "
        "approximation's equivalent, so that GELU computes approximate='tanh' (a new "
        "Mul/Mul/Mul/Mul/Add before a Tanh that keeps the Erf's name and output)",
        "layers.1.mlp.activation_fn",
        lambda m: faults.erf_to_tanh_approximation(m, erf),
        kind="close_approximation", min_rel=1e-4, min_out=1e-4,
        extra={"completing_onnx_node": "/layers.1/mlp/activation_fn/Mul_1",
               "completing_onnx_op": "Mul",
               "hint": "GELU -> Div, Erf, Add, Mul, Mul; the last Mul completes aten::gelu. "
                       "The tanh GELU differs from the exact one by at most 4.7e-4, so the "
                       "error is small relative to the layer's range (~3.6e-4 at the Erf; "
                       "thresholds here 1e-4 at the node and at the outputs instead of "
                       "1e-3), like fault_gelu in the first family; ViT's final LayerNorm "
                       "keeps the outputs' change near 3e-4."}))

    # 7. Invisible in the final output: a key bias shifted; softmax is shift-invariant.
    gemm = "/h.0/attn/c_attn/Gemm"
    out.append(make_fault(
        "fault_gpt2_key_bias", "gpt2_legacy",
        "+1.0 added to the key part (elements 32:64) of h.0.attn.c_attn's bias (the Gemm "
        "computing q, k, v): every score of a query row moves by the same q.b, which softmax "
        "removes, so the outputs agree with PyTorch to float rounding while c_attn, the "
        "split-off keys and the raw scores (matmul, mul by the scale, add of the mask) are "
        "off",
        "h.0.attn.c_attn",
        lambda m: faults.offset_initializer_range(m, gemm, 2, 32, 64, 1.0),
        kind="invisible_at_outputs", invisible=True,
        extra={"completing_onnx_node": "/h.0/attn/c_attn/Reshape_1",
               "completing_onnx_op": "Reshape",
               "hint": "A real fault whose effect vanishes downstream: it propagates through "
                       "aten::split/view/transpose/matmul/mul/add and stops at softmax. "
                       "Call stack path: 0.attn.c_attn. Conv1D's output is the view after "
                       "its addmm (the Reshape after the Gemm)."}))

    # 8. In a scope-less graph (the fallback export, metadata stripped).
    fb = "gpt2_dynamo_fallback"
    w = "h.1.mlp.c_proj.weight"
    gemm_fb = node_by_scope(fb, "Gemm", None, input_name=w)
    out.append(make_fault(
        "fault_gpt2_fallback_proj", fb,
        "output feature 5 of h.1.mlp.c_proj scaled by 1.2 (column 5 of the Gemm's weight "
        f"initializer {w}, stored [in, out]) in the scope-less fallback export",
        "h.1.mlp.c_proj",
        lambda m: faults.scale_initializer_slice(m, gemm_fb, 1, 1.2, axis=1, index=5),
        kind="scopeless_graph_weight",
        extra={"completing_onnx_node": "node_view_23", "completing_onnx_op": "Reshape",
               "hint": "No node carries any metadata; node names are FX names. Conv1D is "
                       "view -> addmm (one Gemm) -> view; its output is the last view."}))

    # 9. A conv fused into timm's BatchNormAct2d, dynamo export.
    conv = node_by_scope("mobilevit_dynamo", "Conv", "stages.1.0.conv2_kxk.bn")
    out.append(make_fault(
        "fault_mobilevit_dynamo_bnact_conv", "mobilevit_dynamo",
        "output channel 2 of the Conv that carries stages.1.0.conv2_kxk (conv + "
        "BatchNormAct2d, fused by the dynamo exporter) scaled by 1.1 in its weight",
        "stages.1.0.conv2_kxk.bn",
        lambda m: faults.scale_conv_out_channel(m, conv, 2, 1.1),
        kind="fused_bn_subclass_weight",
        extra={"expected_modules_any": ["stages.1.0.conv2_kxk.bn",
                                        "stages.1.0.conv2_kxk.conv"],
               "hint": "The fused Conv's value equals BatchNormAct2d's batch_norm output "
                       "(before its SiLU), computed inside module stages.1.0.conv2_kxk.bn."}))
    return out


def main():
    driver.pin_hash_seed()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args()
    # transformers 5.x warns (FutureWarning) about its own deprecated attributes whenever
    # tracing walks a model; nothing here uses them.
    warnings.filterwarnings("ignore", category=FutureWarning)
    extras = [make_yolo_ultralytics, lambda: make_slim("bert"), lambda: make_slim("vit"),
              lambda: make_fallback(strip=True), lambda: make_fallback(strip=False)]
    return driver.run(FAMILY, extras=extras, faults=make_faults)


if __name__ == "__main__":
    raise SystemExit(main())
