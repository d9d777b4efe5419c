"""The steps users apply to an ONNX file after export, each turning the clean export into a new
pair with the same TorchScript: onnxslim, onnxsim, ONNX Runtime's transformer optimiser, models
saved by ONNX Runtime at the basic and extended optimisation levels, and float16 conversion.

`apply(name, source, target, spec)` writes the variant and returns the precision its pair is
judged in. onnxsim is not part of the pinned environment: it is imported from the sweep's pip
overlay (build.use_overlay), and a missing onnxsim makes that variant an error, listed as such.
"""

import onnx

from . import build


def _onnxslim(source, target, spec):
    import onnxslim
    onnx.save(onnxslim.slim(onnx.load(source)), target)


def _onnxsim(source, target, spec):
    build.use_overlay()
    import onnxsim
    model, ok = onnxsim.simplify(onnx.load(source))
    if not ok:
        raise RuntimeError("onnxsim could not validate the simplified model")
    onnx.save(model, target)


def _ort_saved(level):
    def save(source, target, spec):
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.graph_optimization_level = level
        opts.optimized_model_filepath = target
        opts.intra_op_num_threads = 1
        ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    return save


def _ort_transformer(source, target, spec):
    """ONNX Runtime's transformer optimiser with the model type matching the architecture
    (bert for encoders, gpt2 for decoders, vit for vision transformers); num_heads/hidden_size
    0: read from the graph, as the optimiser's own command line does."""
    from onnxruntime.transformers import optimizer
    kind = spec["inputs"]["kind"]
    model_type = {"text": "bert", "causal": "gpt2", "image_hf": "vit"}.get(kind, "bert")
    model = optimizer.optimize_model(source, model_type=model_type, num_heads=0, hidden_size=0)
    model.save_model_to_file(target)


def _fp16(source, target, spec):
    """ONNX Runtime's own float16 converter, inputs and outputs kept float32. (onnxconverter-
    common's left 32 of the sweep's exports unloadable: a Gather or Cast it kept in float32
    feeding nodes it had converted.)"""
    from onnxruntime.transformers import float16
    model = float16.convert_float_to_float16(onnx.load(source), keep_io_types=True)
    onnx.save(model, target)


def _variants():
    import onnxruntime as ort
    level = ort.GraphOptimizationLevel
    return {"onnxslim": _onnxslim, "onnxsim": _onnxsim,
            "ort_basic": _ort_saved(level.ORT_ENABLE_BASIC),
            "ort_extended": _ort_saved(level.ORT_ENABLE_EXTENDED),
            "ort_transformer": _ort_transformer, "fp16": _fp16}


def apply(name, source, target, spec):
    _variants()[name](source, target, spec)
    return "float16" if name == "fp16" else "float32"
