"""The `hazards` registry family (issue 49): model classes on which align-check was found
silently wrong and which no registry of the sweep contains. Each entry is a small nn.Module of
`hazard_models.py` (this file imports no torch: the sweep's main process lists specs without
it), built from code with random weights and exported like the other families: TorchScript by
torch.jit.trace, or torch.jit.script where the class is about scripted control flow (the
legacy exporter then exports the scripted module, with its Loop/If; the dynamo exporter the
eager one, and refuses what it cannot export), both ONNX exporters.

Spec fields the export honours (`build` of each spec):

- `script`: TorchScript by torch.jit.script; the legacy ONNX export takes the scripted module;
- `trace_mode`: the grad mode torch.jit.trace runs under, `no_grad` or `inference_mode` (the
  ONNX exports run as usual): PyTorch's fused attention fast path is taken only then.

Classes (`arch` is `hazards:<class>:<name>`): `inplace`, `control`, `subtol`, `fastpath`,
`fp16` (hazard_models.py says what each covers). The fp16 class's pairs get the sweep's
`fp16` variant on both exporters.
"""

# Input tensors: [name, kind, shape without batch, options] (hazard_models.make_inputs).
IMG = [["input", "image", [3, 32], {}]]
IMAGES = [["images", "image", [3, 32], {}]]  # the detectors' argument
IMG_X = [["x", "image", [3, 32], {}]]  # torchvision VisionTransformer.forward(x)
SEQ = [["x", "normal", [16, 16], {}]]
VEC = [["x", "normal", [8, 16], {}]]


def _pillars(points=48, grid=16, two_d=False, valid=False):
    coords = (["coords", "coords2d", [points], {"height": grid, "width": grid}] if two_d
              else ["coords", "perm", [points], {"cells": grid * grid}])
    out = [["pillars", "normal", [points, 9], {}], coords]
    if valid:
        out.append(["valid", "mask", [points], {}])
    return out


def _kv(length=16, heads=4, dh=8, past=True, fresh=False, tokens=False, layers=None):
    t = length - 1 if fresh else length
    lead = [layers] if layers else []
    out = [["tokens", "tokens", [1], {"vocab": 64}] if tokens
           else ["x", "normal", [1, heads * dh], {}]]
    if past:
        out += [["past_k", "normal", lead + [heads, t, dh], {}],
                ["past_v", "normal", lead + [heads, t, dh], {}]]
    if not fresh:
        out.append(["pos", "pos", [], {"low": 4, "high": length - 2}])
    return out


# (class, name, model class, kwargs, input tensors, options)
HAZARDS = [
    # 1. In-place writes that carry dataflow.
    ("inplace", "pillars_flat", "PointPillarsScatter", {}, _pillars(), {}),
    ("inplace", "pillars_2d", "PointPillarsScatter", {"two_d": True, "channels": 24},
     _pillars(two_d=True), {}),
    ("inplace", "pillars_neck", "PointPillarsScatter", {"neck": True}, _pillars(), {}),
    # The legacy exporter writes `feats[valid == 0] = 0` as a Where ONNX Runtime refuses.
    ("inplace", "pillars_masked_points", "PointPillarsScatter", {"masked_points": True},
     _pillars(valid=True), {}),
    ("inplace", "det_slice_zeros", "SliceAssignHead", {}, IMAGES, {}),
    ("inplace", "det_slice_empty", "SliceAssignHead", {"empty": True, "width": 8,
                                                       "classes": 3}, IMAGES, {}),
    ("inplace", "det_decode_1lvl", "InplaceDecodeDetect", {}, IMAGES, {}),
    ("inplace", "det_decode_2lvl", "InplaceDecodeDetect", {"levels": 2, "width": 8,
                                                           "anchors": 3}, IMAGES, {}),
    ("inplace", "kv_index_put", "KVCacheAttention", {"mode": "index_put"}, _kv(),
     {"batch": 1}),
    ("inplace", "kv_index_copy", "KVCacheAttention", {"mode": "index_copy"}, _kv(),
     {"batch": 1}),
    ("inplace", "kv_static_buffer", "StaticKVCache", {}, _kv(past=False), {"batch": 1}),
    ("inplace", "kv_fresh_copy", "KVCacheAttention", {"mode": "fresh"}, _kv(fresh=True),
     {"batch": 1}),
    ("inplace", "kv_decoder_2l", "KVDecoderStep", {}, _kv(tokens=True, layers=2),
     {"batch": 1}),
    ("inplace", "maskedfill_encoder", "MaskedFillEncoder", {},
     [["input_ids", "tokens", [16], {"vocab": 128}], ["attention_mask", "mask", [16], {}]],
     {}),
    ("inplace", "threshold_masked_fill", "ThresholdConvNet", {"mode": "masked_fill"}, IMG, {}),
    ("inplace", "threshold_bool_index", "ThresholdConvNet", {"mode": "bool_index"}, IMG, {}),
    ("inplace", "copy_into_buffer", "CopyIntoBuffer", {}, IMG, {}),
    ("inplace", "ring_buffer_stream", "RingBufferStream", {},
     [["chunk", "normal", [16, 8], {}], ["state1", "normal", [16, 4], {}],
      ["state2", "normal", [32, 4], {}]], {}),
    # 2. Control flow kept by torch.jit.script.
    ("control", "loop_if", "LoopIf", {}, VEC, {"script": True}),
    ("control", "const_loop", "ConstLoop", {}, IMG, {"script": True}),
    ("control", "greedy_grucell", "GreedyGRUDecoder", {}, [["features", "normal", [10, 16], {}]],
     {"script": True}),
    ("control", "greedy_manual_gru", "GreedyGRUDecoder", {"manual": True, "steps": 5},
     [["features", "normal", [10, 16], {}]], {"script": True}),
    ("control", "streaming_reset_gru", "StreamingReset", {},
     [["chunk", "normal", [6, 16], {}], ["state", "normal", [32], {}],
      ["flag", "flag", [], {"value": 0}]], {"script": True}),
    ("control", "streaming_reset_conv", "StreamingConvReset", {},
     [["chunk", "normal", [16, 8], {}], ["context", "normal", [16, 2], {}],
      ["flag", "flag", [], {"value": 1}]], {"script": True}),
    ("control", "streaming_zeros_like", "StreamingZerosLike", {},
     [["chunk", "normal", [16, 8], {}], ["context", "normal", [16, 2], {}],
      ["flag", "flag", [], {"value": 0}]], {"script": True}),
    ("control", "branch_modules", "BranchModules", {}, IMG, {"script": True}),
    ("control", "loop_stack", "LoopStack", {}, [["x", "normal", [6, 16], {}]],
     {"script": True}),
    ("control", "early_exit_loop", "EarlyExitLoop", {}, VEC, {"script": True}),
    # 3. Faults below the output tolerance but beyond a layer's own.
    ("subtol", "tfenc_post_relu", "TransformerEncoderModel", {}, SEQ, {}),
    ("subtol", "tfenc_pre_gelu", "TransformerEncoderModel",
     {"norm_first": True, "activation": "gelu", "layers": 3}, SEQ, {}),
    ("subtol", "attn_scale_s", "ScaledAttentionNet", {}, SEQ, {}),
    ("subtol", "attn_scale_deep", "ScaledAttentionNet", {"dim": 48, "heads": 6, "depth": 4},
     SEQ, {}),
    ("subtol", "early_conv_bn", "EarlyConvNorm", {"norm": "batch"}, IMG, {}),
    ("subtol", "early_conv_gn", "EarlyConvNorm", {"norm": "group"}, IMG, {}),
    ("subtol", "early_conv_in", "EarlyConvNorm", {"norm": "instance"}, IMG, {}),
    ("subtol", "early_conv_ln", "EarlyConvNorm", {"norm": "layer"}, IMG, {}),
    # 4. The fused attention fast path: traced under no_grad / inference_mode.
    ("fastpath", "mha_nograd", "MHAModel", {}, SEQ, {"trace_mode": "no_grad"}),
    ("fastpath", "mha_infer", "MHAModel", {}, SEQ, {"trace_mode": "inference_mode"}),
    ("fastpath", "mha_weights_nograd", "MHAModel", {"need_weights": True}, SEQ,
     {"trace_mode": "no_grad"}),
    ("fastpath", "tfenc_fast_nograd", "FastEncoder", {}, SEQ, {"trace_mode": "no_grad"}),
    ("fastpath", "tfenc_fast_prenorm_infer", "FastEncoder",
     {"norm_first": True, "activation": "gelu"}, SEQ, {"trace_mode": "inference_mode"}),
    ("fastpath", "tfenc_fast_3l_nograd", "FastEncoder", {"layers": 3, "heads": 2}, SEQ,
     {"trace_mode": "no_grad"}),
    ("fastpath", "vit_nograd", "tiny_vit", {}, IMG_X, {"trace_mode": "no_grad"}),
    ("fastpath", "vit_infer", "tiny_vit", {"layers": 3, "heads": 4}, IMG_X,
     {"trace_mode": "inference_mode"}),
    # 5. float16 overflow (the fp16 variant on both exports).
    ("fp16", "fp16_linear_layernorm", "LargeLinearLayerNorm", {}, VEC, {"fp16": True}),
    ("fp16", "fp16_conv_batchnorm", "LargeConvBatchNorm", {}, IMG, {"fp16": True}),
    ("fp16", "fp16_attention_scores", "LargeScoresAttention", {}, VEC, {"fp16": True}),
    ("fp16", "fp16_rmsnorm", "LargeRMSNorm", {}, VEC, {"fp16": True}),
    ("fp16", "fp16_exp_softmax", "ExpNormaliser", {}, VEC, {"fp16": True}),
]


def specs(spec):
    """The family's specs, made with registries.spec."""
    out = []
    for cls, name, model_cls, kwargs, tensors, opts in HAZARDS:
        build = {"lib": "hazards", "cls": model_cls, "kwargs": kwargs, "hazard": cls}
        for key in ("script", "trace_mode"):
            if opts.get(key):
                build[key] = opts[key]
        inputs = {"kind": "hazard", "tensors": tensors}
        if opts.get("batch"):
            inputs["batch"] = opts["batch"]
        variants = {"legacy": ["fp16"], "dynamo": ["fp16"]} if opts.get("fp16") else {}
        out.append(spec("hazards", name, f"{cls}:{name}", build, inputs, variants=variants))
    return out
