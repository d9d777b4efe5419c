//! What an op is, for pairing purposes: its family, whether it is bookkeeping, whether it
//! vanishes from ONNX.
//!
//! TorchScript and ONNX name ops differently and one aten op may become several ONNX nodes.
//! Pairing inside a scope only allows an aten op to meet ONNX nodes of a compatible family,
//! so a Resize is never compared with a Concat just because their shapes agree.

use crate::capture::tensor::DType;
use crate::capture::CapturedValue;

/// An aten op's name without its namespace and in-place mark (`aten::relu_` -> `relu`).
pub fn aten_name(op: &str) -> &str {
    let name = op.strip_prefix("aten::").unwrap_or(op);
    name.strip_suffix('_').unwrap_or(name)
}

/// Families an op can belong to. An aten op and an ONNX op are compatible when their
/// family sets intersect.
pub fn torch_families(op: &str) -> Vec<&'static str> {
    let name = aten_name(op);
    let fams: &[&'static str] = match name {
        "_convolution" | "conv1d" | "conv2d" | "conv3d" | "convolution" | "conv_transpose1d"
        | "conv_transpose2d" | "conv_transpose3d" => &["conv"],
        "batch_norm" | "instance_norm" => &["norm", "conv"],
        "layer_norm" | "group_norm" | "rms_norm" => &["norm", "arith"],
        "linear" | "addmm" | "matmul" | "mm" | "bmm" | "baddbmm" | "einsum" => &["matmul", "arith"],
        // Exported as MatMul/Mul/Softmax/MatMul (plus a mask Add); the last MatMul completes it.
        "scaled_dot_product_attention" => &["matmul"],
        // Exported as Slice/Concat pairs, one per rolled dim; the last Concat completes it.
        "roll" => &["layout", "concat"],
        "relu" | "relu6" | "hardtanh" | "clamp" | "clamp_min" | "clamp_max" | "threshold" => {
            &["relu"]
        }
        "gelu" | "silu" | "hardswish" | "hardsigmoid" | "sigmoid" | "tanh" | "elu" | "selu"
        | "leaky_relu" | "prelu" | "softplus" | "mish" | "erf" | "exp" | "log" | "sqrt"
        | "rsqrt" | "neg" | "abs" | "reciprocal" | "pow" | "sin" | "cos" => {
            &["activation", "arith"]
        }
        "softmax" | "log_softmax" | "_softmax" => &["softmax"],
        // An elementwise op meets the ONNX ops it becomes (an Add, or a Sub of a negated
        // constant; a Div, or a Mul by the reciprocal), not every arithmetic node: in a
        // graph without scopes a SiLU's `x * sigmoid(x)` Mul next to a residual Add would
        // let the order pair the add with the Mul and shift every pair after it.
        "add" | "sub" | "rsub" => &["add"],
        "mul" | "div" | "floor_divide" | "true_divide" => &["mul"],
        "where" | "masked_fill" => &["where"],
        "maximum" | "minimum" => &["relu", "arith"],
        "max_pool1d"
        | "max_pool2d"
        | "max_pool3d"
        | "avg_pool1d"
        | "avg_pool2d"
        | "avg_pool3d"
        | "adaptive_avg_pool1d"
        | "adaptive_avg_pool2d"
        | "adaptive_max_pool2d" => &["pool"],
        "mean" | "sum" | "amax" | "amin" | "max" | "min" | "prod" | "norm" | "var" | "std"
        | "linalg_vector_norm" | "linalg_norm" | "frobenius_norm" | "logsumexp" => {
            &["reduce", "pool"]
        }
        "upsample_nearest1d"
        | "upsample_nearest2d"
        | "upsample_nearest3d"
        | "upsample_bilinear2d"
        | "upsample_bicubic2d"
        | "upsample_linear1d"
        | "upsample_trilinear3d"
        | "interpolate"
        | "pixel_shuffle" => &["resize"],
        "cat" | "concat" | "stack" => &["concat"],
        // Sampling at given coordinates (RT-DETR's deformable attention, RAFT's lookup).
        "grid_sampler" | "grid_sampler_2d" => &["grid_sample"],
        "eq" | "ne" | "gt" | "lt" | "ge" | "le" | "logical_not" | "logical_and" | "logical_or" => {
            &["compare"]
        }
        "argmax" | "argmin" => &["argreduce"],
        "view" | "reshape" | "flatten" | "squeeze" | "unsqueeze" | "permute" | "transpose"
        | "t" | "expand" | "expand_as" | "repeat" | "select" | "slice" | "index"
        | "index_select" | "narrow" | "chunk" | "split" | "unbind" | "gather" | "flip" | "pad"
        | "constant_pad_nd" | "reflection_pad2d" | "replicate_pad2d" | "unflatten"
        | "reshape_as" | "view_as" | "movedim" | "moveaxis" | "swapaxes" | "swapdims" | "tile" => {
            &["layout"]
        }
        _ => &[],
    };
    fams.to_vec()
}

pub fn onnx_families(op: &str) -> Vec<&'static str> {
    // ONNX Runtime's own fused ops (its transformer optimiser's) compute what the ops they
    // replace computed.
    let op = op.strip_prefix("com.microsoft::").unwrap_or(op);
    let fams: &[&'static str] = match op {
        "Conv" | "ConvTranspose" | "QLinearConv" | "FusedConv" => &["conv"],
        "BatchNormalization"
        | "InstanceNormalization"
        | "LayerNormalization"
        | "GroupNormalization"
        | "RMSNormalization"
        | "SimplifiedLayerNormalization"
        | "SkipLayerNormalization"
        | "SkipSimplifiedLayerNormalization"
        | "EmbedLayerNormalization" => &["norm"],
        "Gemm"
        | "MatMul"
        | "Einsum"
        | "FusedMatMul"
        | "FusedGemm"
        | "Attention"
        | "MultiHeadAttention"
        | "GroupQueryAttention" => &["matmul"],
        "BiasGelu" | "QuickGelu" | "GemmFastGelu" => &["activation"],
        "BiasSoftmax" => &["softmax"],
        "Relu" | "Clip" | "Max" | "Min" => &["relu"],
        "Gelu" | "FastGelu" | "Sigmoid" | "Tanh" | "HardSwish" | "HardSigmoid" | "Elu" | "Selu"
        | "LeakyRelu" | "PRelu" | "Softplus" | "Mish" | "Erf" | "Exp" | "Log" | "Sqrt" | "Neg"
        | "Abs" | "Reciprocal" | "Pow" | "Sin" | "Cos" => &["activation"],
        "Softmax" | "LogSoftmax" => &["softmax"],
        // `arith` for the ops whose decomposition may end in any of them (a GELU's Mul, a
        // Linear's bias Add, a LayerNorm's last Add).
        // The residual sum a fused residual-and-norm outputs (`onnx::fused_sums`).
        "Add" | "Sub" | "SkipLayerNormalization.sum" | "SkipSimplifiedLayerNormalization.sum" => {
            &["add", "arith"]
        }
        "Mul" | "Div" => &["mul", "arith"],
        "Where" => &["where", "arith"],
        "MaxPool" | "AveragePool" | "GlobalAveragePool" | "GlobalMaxPool" => &["pool"],
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceSumSquare" | "ReduceLogSum" | "ReduceLogSumExp" => {
            &["reduce", "pool"]
        }
        "Resize" | "Upsample" | "DepthToSpace" => &["resize"],
        "Concat" => &["concat"],
        "GridSample" => &["grid_sample"],
        "Equal" | "Greater" | "Less" | "GreaterOrEqual" | "LessOrEqual" | "Not" | "And" | "Or" => {
            &["compare"]
        }
        "ArgMax" | "ArgMin" => &["argreduce"],
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "Expand" | "Tile"
        | "Gather" | "GatherElements" | "Slice" | "Split" | "Pad" => &["layout"],
        _ => &[],
    };
    fams.to_vec()
}

/// Whether an aten op and an ONNX op can be the same computation.
pub fn compatible(torch_op: &str, onnx_op: &str) -> bool {
    let t = torch_families(torch_op);
    let o = onnx_families(onnx_op);
    if t.iter().any(|f| o.contains(f)) {
        return true;
    }
    // Ops outside the table still pair when their names agree (aten::sigmoid / Sigmoid), and
    // so do custom ops whatever their namespace and domain (my_ops::my_add / my_ops::my_add).
    same_op_name(torch_op, onnx_op)
}

/// Whether the two sides name the same op, namespace, domain, case, underscores and an
/// in-place suffix aside: `aten::sub_` and `Sub`, but not `aten::sub` and `Add`.
pub fn same_op_name(torch_op: &str, onnx_op: &str) -> bool {
    let bare = torch_op.rsplit("::").next().unwrap_or(torch_op);
    let bare = bare.strip_suffix('_').unwrap_or(bare).replace('_', "");
    let onnx_bare = onnx_op
        .rsplit("::")
        .next()
        .unwrap_or(onnx_op)
        .replace('_', "");
    bare.eq_ignore_ascii_case(&onnx_bare)
}

/// Ops whose result depends on their tensor arguments' shape and dtype only, never on their
/// values: with static input shapes the exporter folds them to constants.
pub fn reads_only_shape(torch_op: &str) -> bool {
    matches!(
        torch_op,
        "prim::NumToTensor"
            | "aten::size"
            | "aten::new_ones"
            | "aten::new_zeros"
            | "aten::new_full"
            | "aten::new_empty"
            | "aten::zeros_like"
            | "aten::ones_like"
            | "aten::full_like"
            | "aten::empty_like"
    )
}

/// Normalisations an exporter folds into the preceding convolution in eval mode.
pub fn folds_into_conv(torch_op: &str) -> bool {
    matches!(torch_op, "aten::batch_norm" | "aten::instance_norm")
}

/// Ops whose output equals their input in eval mode; ONNX drops them.
pub fn vanishes_in_onnx(torch_op: &str) -> bool {
    matches!(
        torch_op,
        "aten::dropout"
            | "aten::dropout_"
            | "aten::feature_dropout"
            | "aten::alpha_dropout"
            | "aten::contiguous"
            | "aten::clone"
            | "aten::detach"
            | "aten::identity"
            | "aten::to"
            | "aten::type_as"
            | "aten::copy_"
            | "prim::TupleUnpack"
            | "prim::ListUnpack"
    )
}

/// Shape arithmetic and other small integer bookkeeping: not layers. ONNX constant-folds
/// most of it, so it is neither compared nor counted.
pub fn is_bookkeeping(v: &CapturedValue) -> bool {
    const TORCH_SHAPE_OPS: &[&str] = &[
        "aten::size",
        "prim::NumToTensor",
        "aten::Int",
        "aten::ScalarImplicit",
        "aten::arange",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::empty",
        "aten::tensor",
        "aten::scalar_tensor",
        "aten::zeros_like",
        "aten::ones_like",
        "prim::Constant",
    ];
    const ONNX_SHAPE_OPS: &[&str] = &[
        "Constant",
        "Shape",
        "Size",
        "ConstantOfShape",
        "Range",
        "NonZero",
        "Cast",
    ];
    if TORCH_SHAPE_OPS.contains(&v.op.as_str()) || ONNX_SHAPE_OPS.contains(&v.op.as_str()) {
        return true;
    }
    // An argmax is data however small: a runtime that picks another index is wrong.
    if matches!(
        v.op.as_str(),
        "aten::argmax" | "aten::argmin" | "ArgMax" | "ArgMin"
    ) {
        return false;
    }
    let is_int = matches!(v.dtype, DType::I64 | DType::I32) && v.shape.len() <= 1;
    let small = v.shape.iter().product::<usize>() <= 8;
    if is_int && small {
        return true;
    }
    // Integer and boolean tensors that only move data around (a `view` of `input_ids`, an
    // expanded mask): their content is checked where it is computed, while pairing them by
    // order and shape alone can meet another id tensor of the same shape (an error of 986
    // between two unrelated index tensors is a pairing artefact, not a finding).
    let integral = matches!(
        v.dtype,
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::Bool
    );
    integral
        && (torch_families(&v.op).contains(&"layout") || onnx_families(&v.op).contains(&"layout"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatible_across_naming_schemes() {
        assert!(compatible("aten::_convolution", "Conv"));
        assert!(compatible("aten::relu_", "Relu"));
        assert!(compatible("aten::linear", "Gemm"));
        assert!(compatible("aten::linear", "Add"));
        assert!(compatible("aten::upsample_bicubic2d", "Resize"));
        assert!(compatible("aten::sigmoid", "Sigmoid"));
        assert!(compatible("aten::hardswish", "HardSwish"));
        assert!(compatible("my_ops::my_add", "my_ops::my_add"));
        assert!(compatible("aten::gt", "Greater"));
        assert!(compatible("aten::argmax", "ArgMax"));
        assert!(compatible("aten::sub", "Add"));
        assert!(compatible("aten::div", "Mul"));
        assert!(compatible("aten::silu", "Mul"));
        assert!(compatible(
            "aten::layer_norm",
            "com.microsoft::SkipLayerNormalization"
        ));
        assert!(compatible("aten::gelu", "com.microsoft::FastGelu"));
        // `F.normalize`'s norm (XCiT's query and key): a reduction, not an unlisted op that
        // only its value could place, next to a Clip that holds the same value.
        assert!(compatible("aten::linalg_vector_norm", "ReduceL2"));
        assert!(compatible("aten::logsumexp", "ReduceLogSumExp"));
    }

    #[test]
    fn incompatible_ops_do_not_meet() {
        assert!(!compatible("aten::cat", "Resize"));
        assert!(!compatible("aten::_convolution", "Relu"));
        assert!(!compatible("aten::upsample_bilinear2d", "Concat"));
        assert!(!compatible("aten::add", "Mul"));
        assert!(!compatible("aten::mul", "Add"));
        assert!(!compatible("aten::linalg_vector_norm", "Clip"));
    }
}
