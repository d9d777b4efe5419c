#!/usr/bin/env python3
"""Writes tests/fixtures/optimized/: library fixtures whose ONNX model went through ONNX
Runtime's transformer optimiser (onnxruntime.transformers.optimizer), the step many BERT, GPT-2
and ViT deployments take before shipping, with and without its float16 conversion; and
dynamo exports simplified by onnxslim (Ultralytics' default), one also in float16.

The optimiser fuses across module boundaries under node names that record no scope (a Linear's
bias, the residual Add and the LayerNorm become one SkipLayerNormalization; an Add and a GELU
one Gelu/FastGelu), turns MatMul+Add into Gemm, and sorts the graph again (a query's Reshape
may come after the key's). tests/optimized_models.rs checks that the clean ones pass and that
each planted fault is still named at the module that carries it.

Each folder holds the optimised model.onnx; model.pt and inputs.npz are links to the library
fixture it came from (tests/fixtures/lib/, made by make_library_fixtures.py, which must exist).
manifest.json lists each fixture with its source and, for faults, the library manifest's
fault entry. Run with the pinned interpreter: .venv/bin/python scripts/make_optimized_fixtures.py
It overwrites tests/fixtures/optimized/ and nothing else.
"""

import json
import logging
import os
import warnings

from fixtures_lib.manifest import fresh_folder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(REPO, "tests", "fixtures", "lib")
OUT = os.path.join(REPO, "tests", "fixtures", "optimized")

# (fixture name, library fixture, tool, float16 after it). The tool is the transformer
# optimiser's model_type, or "onnxslim" for a dynamo export simplified by onnxslim (no scopes
# survive; the SiLU's Mul(x, Sigmoid(x)) lies next to residual Adds in one global order).
FIXTURES = [
    ("bert_legacy", "bert_legacy", "bert", False),
    ("bert_dynamo", "bert_dynamo", "bert", False),
    ("gpt2_legacy", "gpt2_legacy", "gpt2", False),
    ("vit_legacy", "vit_legacy", "vit", False),
    ("bert_legacy_fp16", "bert_legacy", "bert", True),
    ("yolo_dynamo_slim", "yolo_dynamo", "onnxslim", False),
    ("yolo_dynamo_slim_fp16", "yolo_dynamo", "onnxslim", True),
    ("vit_dynamo_slim", "vit_dynamo", "onnxslim", False),
    ("fault_bert_dense_weight", "fault_bert_dense_weight", "bert", False),
    ("fault_bert_dynamo_ln_eps", "fault_bert_dynamo_ln_eps", "bert", False),
    ("fault_gpt2_key_bias", "fault_gpt2_key_bias", "gpt2", False),
    ("fault_vit_sdpa_scale", "fault_vit_sdpa_scale", "vit", False),
    ("fault_mobilevit_dynamo_bnact_conv_slim", "fault_mobilevit_dynamo_bnact_conv",
     "onnxslim", False),
]


def optimise(source, tool, fp16, target):
    """Writes the optimised model; returns the fused ops it holds, by count."""
    if tool == "onnxslim":
        return simplify(source, fp16, target)
    from onnxruntime.transformers import optimizer

    # num_heads/hidden_size 0: read from the graph, as the optimiser's own CLI does.
    model = optimizer.optimize_model(source, model_type=tool, num_heads=0, hidden_size=0)
    if fp16:
        model.convert_float_to_float16(keep_io_types=True)
    model.save_model_to_file(target)
    return {op: n for op, n in model.get_fused_operator_statistics().items() if n}


def simplify(source, fp16, target):
    import onnx
    import onnxslim
    from onnxconverter_common import float16

    model = onnxslim.slim(onnx.load(source))
    if fp16:
        # Type records onnxslim left would contradict the converted nodes.
        del model.graph.value_info[:]
        model = float16.convert_float_to_float16(model, keep_io_types=False)
    onnx.save(model, target)
    return {}


def main():
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    with open(os.path.join(LIB, "manifest.json")) as f:
        library = {e["name"]: e for e in json.load(f)}
    os.makedirs(OUT, exist_ok=True)
    entries = []
    for name, source, tool, fp16 in FIXTURES:
        folder = fresh_folder(OUT, name)
        fused = optimise(os.path.join(LIB, source, "model.onnx"), tool, fp16,
                         os.path.join(folder, "model.onnx"))
        for shared in ("model.pt", "inputs.npz"):
            os.symlink(os.path.join("..", "..", "lib", source, shared),
                       os.path.join(folder, shared))
        entries.append({"name": name, "source": source, "tool": tool,
                        "float16": fp16, "fused": fused,
                        "fault": library[source].get("fault")})
        print(f"{name}: {fused}")
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(entries, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
