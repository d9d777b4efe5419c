//! The op table: every kind of op pairing tells apart, how TorchScript and ONNX spell it, its
//! families on each side, and what else pairing asks of it. This is the one file of
//! `src/pairing/` that spells an op (`architecture` checks it); the rest asks the table.
//!
//! TorchScript and ONNX name ops differently and one aten op may become several ONNX nodes.
//! Pairing inside a scope only allows an aten op to meet ONNX nodes of a compatible family,
//! so a Resize is never compared with a Concat just because their shapes agree. A kind is a
//! row: the ops pairing treats alike, on both sides. Pairing asks the table for many
//! candidate pairs, so each side's spellings go into a map built once, every accepted form of
//! a spelling a key of its own: a lookup is one hash of the op's name, without allocating.

use super::family::{Families, Family as F};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The namespace of aten ops.
const ATEN: &str = "aten::";
/// The domain of ONNX Runtime's own fused ops.
const ORT_DOMAIN: &str = "com.microsoft::";

/// The kinds of op pairing tells apart; `ROWS` spells each and gives its families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Conv,
    /// A normalisation an exporter folds into the preceding convolution in eval mode.
    BatchNorm,
    Norm,
    /// A product of two tensors without a bias.
    MatMul,
    /// A product with a bias, or one ONNX Runtime fused with its transposes.
    Gemm,
    Einsum,
    /// Exported as MatMul/Mul/Softmax/MatMul (plus a mask Add); the last MatMul completes it.
    Attention,
    /// Exported as Slice/Concat pairs, one per rolled dim; the last Concat completes it.
    Roll,
    /// Relu and the clamps ONNX Runtime's FusedConv applies as its Relu or Clip.
    Relu,
    /// The other clamps and thresholds.
    Threshold,
    /// Elementwise maximum and minimum of two tensors.
    MaxMin,
    /// The other activations FusedConv applies (Sigmoid, Tanh, LeakyRelu, HardSigmoid).
    FusableActivation,
    Activation,
    Softmax,
    /// Adds and subtracts (`x - c` may be exported as an Add of `-c`).
    Add,
    /// `c - x`: no constant leaves `x` as it is.
    ReverseSub,
    /// Multiplies and divides (`x / c` may be exported as a Mul by `1/c`).
    Mul,
    /// Rounds: no constant leaves `x` as it is.
    FloorDivide,
    Where,
    Pool,
    Reduce,
    Resize,
    Concat,
    /// Sampling at given coordinates (RT-DETR's deformable attention, RAFT's lookup).
    GridSample,
    Compare,
    ArgReduce,
    /// Keeps every element and only reshapes or permutes dims.
    Rearrange,
    /// Takes part of its input or broadcasts it, and keeps all of it when its range is full
    /// (`x[:, :]`, `narrow` over a whole dim, `expand` to the same shape).
    Select,
    /// Cuts a tensor into pieces.
    Split,
    /// Any other op that moves, selects or repeats elements.
    Layout,
    /// Reads only its argument's shape, and is small integer bookkeeping.
    ShapeQuery,
    /// Makes a tensor in another's shape: reads only that shape, but is data.
    ShapedLike,
    /// Shape arithmetic and constants: small integer bookkeeping, not layers.
    ShapeArithmetic,
    /// Equals its input in eval mode; ONNX drops it.
    Vanishing,
    Identity,
    /// Unpacks a list (a `chunk`'s pieces); ONNX has no node for it.
    ListUnpack,
    Loop,
    If,
    Scan,
}

impl OpKind {
    /// Ops whose result depends on their tensor arguments' shape and dtype only, never on
    /// their values: with static input shapes the exporter folds them to constants.
    pub fn reads_only_shape(self) -> bool {
        matches!(self, OpKind::ShapeQuery | OpKind::ShapedLike)
    }

    /// Normalisations an exporter folds into the preceding convolution in eval mode.
    pub fn folds_into_conv(self) -> bool {
        self == OpKind::BatchNorm
    }

    /// Ops whose output equals their input in eval mode; ONNX drops them.
    pub fn vanishes_in_onnx(self) -> bool {
        matches!(
            self,
            OpKind::Vanishing | OpKind::Identity | OpKind::ListUnpack
        )
    }

    /// Shape arithmetic and other small integer bookkeeping, whatever the value's size.
    pub fn is_bookkeeping(self) -> bool {
        matches!(self, OpKind::ShapeQuery | OpKind::ShapeArithmetic)
    }

    /// Elementwise activations a node may compute after its own op (ONNX Runtime's FusedConv
    /// takes Relu, Sigmoid, Tanh, LeakyRelu, Clip and HardSigmoid).
    pub fn is_fusable_activation(self) -> bool {
        matches!(self, OpKind::Relu | OpKind::FusableActivation)
    }

    /// Elementwise arithmetic that some constant operand makes an identity (`x + 0`, `x * 1`).
    pub fn has_identity_constant(self) -> bool {
        matches!(self, OpKind::Add | OpKind::Mul)
    }

    /// Ops that pass on every element of their input unchanged, at most arranged anew.
    pub fn keeps_every_element(self) -> bool {
        matches!(self, OpKind::Rearrange | OpKind::Identity)
    }

    /// ONNX ops whose values inside stay in a subgraph.
    pub fn is_control_flow(self) -> bool {
        matches!(self, OpKind::Loop | OpKind::If | OpKind::Scan)
    }
}

/// How one side spells the ops of a row.
enum Spelled {
    /// The side has no op of this kind.
    Nowhere,
    /// aten ops by bare name, with or without the `aten::` namespace and the in-place mark
    /// (`aten::relu_` is `relu`).
    Aten(&'static [&'static str]),
    /// ONNX op types, in the default domain or ONNX Runtime's: its fused ops compute what
    /// the ops they replace computed.
    AnyDomain(&'static [&'static str]),
    /// Whole spellings, matched as written: `aten::copy_` but not `aten::copy`, `Range` but
    /// not `com.microsoft::Range`.
    Exactly(&'static [&'static str]),
}

/// One kind: each side's spellings and families.
struct Row {
    kind: OpKind,
    torch: Spelled,
    torch_families: Families,
    onnx: Spelled,
    onnx_families: Families,
}

const fn row(
    kind: OpKind,
    torch: Spelled,
    torch_families: &[F],
    onnx: Spelled,
    onnx_families: &[F],
) -> Row {
    Row {
        kind,
        torch,
        torch_families: Families::of(torch_families),
        onnx,
        onnx_families: Families::of(onnx_families),
    }
}

use Spelled::{AnyDomain, Aten, Exactly, Nowhere};

/// The table. An aten op and an ONNX op are compatible when their families meet. Where the
/// two sides' families differ, the aten op names what its decomposition may end in (`arith`
/// for a LayerNorm's last Add) and the ONNX op what it may complete.
const ROWS: &[Row] = &[
    row(
        OpKind::Conv,
        Aten(&[
            "_convolution",
            "conv1d",
            "conv2d",
            "conv3d",
            "convolution",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
        ]),
        &[F::Conv],
        AnyDomain(&["Conv", "ConvTranspose", "QLinearConv", "FusedConv"]),
        &[F::Conv],
    ),
    row(
        OpKind::BatchNorm,
        Aten(&["batch_norm", "instance_norm"]),
        &[F::Norm, F::Conv],
        AnyDomain(&["BatchNormalization", "InstanceNormalization"]),
        &[F::Norm],
    ),
    row(
        OpKind::Norm,
        Aten(&["layer_norm", "group_norm", "rms_norm"]),
        &[F::Norm, F::Arith],
        AnyDomain(&[
            "LayerNormalization",
            "GroupNormalization",
            "RMSNormalization",
            "SimplifiedLayerNormalization",
            "SkipLayerNormalization",
            "SkipSimplifiedLayerNormalization",
            "EmbedLayerNormalization",
        ]),
        &[F::Norm],
    ),
    row(
        OpKind::MatMul,
        Aten(&["matmul", "mm", "bmm"]),
        &[F::MatMul, F::Arith],
        AnyDomain(&["MatMul"]),
        &[F::MatMul],
    ),
    row(
        OpKind::Gemm,
        Aten(&["linear", "addmm", "baddbmm"]),
        &[F::MatMul, F::Arith],
        AnyDomain(&["Gemm", "FusedGemm", "FusedMatMul"]),
        &[F::MatMul],
    ),
    row(
        OpKind::Einsum,
        Aten(&["einsum"]),
        &[F::MatMul, F::Arith],
        AnyDomain(&["Einsum"]),
        &[F::MatMul],
    ),
    row(
        OpKind::Attention,
        Aten(&["scaled_dot_product_attention"]),
        &[F::MatMul],
        AnyDomain(&["Attention", "MultiHeadAttention", "GroupQueryAttention"]),
        &[F::MatMul],
    ),
    row(
        OpKind::Roll,
        Aten(&["roll"]),
        &[F::Layout, F::Concat],
        Nowhere,
        &[],
    ),
    row(
        OpKind::Relu,
        Aten(&["relu", "hardtanh", "clamp"]),
        &[F::Relu],
        AnyDomain(&["Relu", "Clip"]),
        &[F::Relu],
    ),
    row(
        OpKind::Threshold,
        Aten(&["relu6", "clamp_min", "clamp_max", "threshold"]),
        &[F::Relu],
        Nowhere,
        &[],
    ),
    row(
        OpKind::MaxMin,
        Aten(&["maximum", "minimum"]),
        &[F::Relu, F::Arith],
        AnyDomain(&["Max", "Min"]),
        &[F::Relu],
    ),
    row(
        OpKind::FusableActivation,
        Aten(&["sigmoid", "tanh", "leaky_relu", "hardsigmoid"]),
        &[F::Activation, F::Arith],
        AnyDomain(&["Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid"]),
        &[F::Activation],
    ),
    row(
        OpKind::Activation,
        Aten(&[
            "gelu",
            "silu",
            "hardswish",
            "elu",
            "selu",
            "prelu",
            "softplus",
            "mish",
            "erf",
            "exp",
            "log",
            "sqrt",
            "rsqrt",
            "neg",
            "abs",
            "reciprocal",
            "pow",
            "sin",
            "cos",
        ]),
        &[F::Activation, F::Arith],
        AnyDomain(&[
            "Gelu",
            "FastGelu",
            "BiasGelu",
            "QuickGelu",
            "GemmFastGelu",
            "HardSwish",
            "Elu",
            "Selu",
            "PRelu",
            "Softplus",
            "Mish",
            "Erf",
            "Exp",
            "Log",
            "Sqrt",
            "Neg",
            "Abs",
            "Reciprocal",
            "Pow",
            "Sin",
            "Cos",
        ]),
        &[F::Activation],
    ),
    row(
        OpKind::Softmax,
        Aten(&["softmax", "log_softmax", "_softmax"]),
        &[F::Softmax],
        AnyDomain(&["Softmax", "LogSoftmax", "BiasSoftmax"]),
        &[F::Softmax],
    ),
    // An elementwise op meets the ONNX ops it becomes (an Add, or a Sub of a negated
    // constant; a Div, or a Mul by the reciprocal), not every arithmetic node: in a graph
    // without scopes a SiLU's `x * sigmoid(x)` Mul next to a residual Add would let the order
    // pair the add with the Mul and shift every pair after it. The ONNX side's `arith` lets
    // them complete the ops that decompose into them.
    row(
        OpKind::Add,
        Aten(&["add", "sub"]),
        &[F::Add],
        // With the residual sums a fused residual-and-norm outputs (`onnx::fused_sums`).
        AnyDomain(&[
            "Add",
            "Sub",
            "SkipLayerNormalization.sum",
            "SkipSimplifiedLayerNormalization.sum",
        ]),
        &[F::Add, F::Arith],
    ),
    row(OpKind::ReverseSub, Aten(&["rsub"]), &[F::Add], Nowhere, &[]),
    row(
        OpKind::Mul,
        Aten(&["mul", "div", "true_divide"]),
        &[F::Mul],
        AnyDomain(&["Mul", "Div"]),
        &[F::Mul, F::Arith],
    ),
    row(
        OpKind::FloorDivide,
        Aten(&["floor_divide"]),
        &[F::Mul],
        Nowhere,
        &[],
    ),
    row(
        OpKind::Where,
        Aten(&["where", "masked_fill"]),
        &[F::Where],
        AnyDomain(&["Where"]),
        &[F::Where, F::Arith],
    ),
    row(
        OpKind::Pool,
        Aten(&[
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "avg_pool1d",
            "avg_pool2d",
            "avg_pool3d",
            "adaptive_avg_pool1d",
            "adaptive_avg_pool2d",
            "adaptive_max_pool2d",
        ]),
        &[F::Pool],
        AnyDomain(&[
            "MaxPool",
            "AveragePool",
            "GlobalAveragePool",
            "GlobalMaxPool",
        ]),
        &[F::Pool],
    ),
    row(
        OpKind::Reduce,
        Aten(&[
            "mean",
            "sum",
            "amax",
            "amin",
            "max",
            "min",
            "prod",
            "norm",
            "var",
            "std",
            "linalg_vector_norm",
            "linalg_norm",
            "frobenius_norm",
            "logsumexp",
        ]),
        &[F::Reduce, F::Pool],
        AnyDomain(&[
            "ReduceMean",
            "ReduceSum",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceSumSquare",
            "ReduceLogSum",
            "ReduceLogSumExp",
        ]),
        &[F::Reduce, F::Pool],
    ),
    row(
        OpKind::Resize,
        Aten(&[
            "upsample_nearest1d",
            "upsample_nearest2d",
            "upsample_nearest3d",
            "upsample_bilinear2d",
            "upsample_bicubic2d",
            "upsample_linear1d",
            "upsample_trilinear3d",
            "interpolate",
            "pixel_shuffle",
        ]),
        &[F::Resize],
        AnyDomain(&["Resize", "Upsample", "DepthToSpace"]),
        &[F::Resize],
    ),
    row(
        OpKind::Concat,
        Aten(&["cat", "concat", "stack"]),
        &[F::Concat],
        AnyDomain(&["Concat"]),
        &[F::Concat],
    ),
    row(
        OpKind::GridSample,
        Aten(&["grid_sampler", "grid_sampler_2d"]),
        &[F::GridSample],
        AnyDomain(&["GridSample"]),
        &[F::GridSample],
    ),
    row(
        OpKind::Compare,
        Aten(&[
            "eq",
            "ne",
            "gt",
            "lt",
            "ge",
            "le",
            "logical_not",
            "logical_and",
            "logical_or",
        ]),
        &[F::Compare],
        AnyDomain(&[
            "Equal",
            "Greater",
            "Less",
            "GreaterOrEqual",
            "LessOrEqual",
            "Not",
            "And",
            "Or",
        ]),
        &[F::Compare],
    ),
    row(
        OpKind::ArgReduce,
        Aten(&["argmax", "argmin"]),
        &[F::ArgReduce],
        AnyDomain(&["ArgMax", "ArgMin"]),
        &[F::ArgReduce],
    ),
    row(
        OpKind::Rearrange,
        Aten(&[
            "view",
            "reshape",
            "flatten",
            "unflatten",
            "squeeze",
            "unsqueeze",
            "permute",
            "transpose",
            "t",
            "reshape_as",
            "view_as",
            "movedim",
            "moveaxis",
            "swapaxes",
            "swapdims",
        ]),
        &[F::Layout],
        AnyDomain(&["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"]),
        &[F::Layout],
    ),
    row(
        OpKind::Select,
        Aten(&["slice", "narrow", "expand", "expand_as"]),
        &[F::Layout],
        AnyDomain(&["Slice", "Expand"]),
        &[F::Layout],
    ),
    row(
        OpKind::Split,
        // torch.export writes `split_with_sizes` where TorchScript records `split`.
        Aten(&["chunk", "split", "split_with_sizes", "unbind"]),
        &[F::Layout],
        AnyDomain(&["Split"]),
        &[F::Layout],
    ),
    row(
        OpKind::Layout,
        Aten(&[
            "repeat",
            "tile",
            "select",
            "index",
            "index_select",
            "gather",
            "flip",
            "pad",
            "constant_pad_nd",
            "reflection_pad2d",
            "replicate_pad2d",
        ]),
        &[F::Layout],
        AnyDomain(&["Tile", "Gather", "GatherElements", "Pad"]),
        &[F::Layout],
    ),
    row(
        OpKind::ShapeQuery,
        Exactly(&[
            "prim::NumToTensor",
            "aten::size",
            "aten::zeros_like",
            "aten::ones_like",
        ]),
        &[],
        Exactly(&["Shape", "Size"]),
        &[],
    ),
    row(
        OpKind::ShapedLike,
        Exactly(&[
            "aten::new_ones",
            "aten::new_zeros",
            "aten::new_full",
            "aten::new_empty",
            "aten::full_like",
            "aten::empty_like",
        ]),
        &[],
        Nowhere,
        &[],
    ),
    row(
        OpKind::ShapeArithmetic,
        Exactly(&[
            "prim::Constant",
            "aten::Int",
            "aten::ScalarImplicit",
            "aten::arange",
            "aten::zeros",
            "aten::ones",
            "aten::full",
            "aten::empty",
            "aten::tensor",
            "aten::scalar_tensor",
        ]),
        &[],
        Exactly(&["Constant", "ConstantOfShape", "Range", "NonZero", "Cast"]),
        &[],
    ),
    row(
        OpKind::Vanishing,
        Exactly(&[
            "aten::dropout",
            "aten::dropout_",
            "aten::feature_dropout",
            "aten::alpha_dropout",
            "aten::contiguous",
            "aten::clone",
            "aten::detach",
            // torch.export's no-op view where TorchScript had a detach or nothing.
            "aten::alias",
            "aten::to",
            "aten::type_as",
            "aten::copy_",
            "prim::TupleUnpack",
        ]),
        &[],
        Nowhere,
        &[],
    ),
    row(
        OpKind::Identity,
        Exactly(&["aten::identity"]),
        &[],
        Exactly(&["Identity"]),
        &[],
    ),
    row(
        OpKind::ListUnpack,
        Exactly(&["prim::ListUnpack"]),
        &[],
        Nowhere,
        &[],
    ),
    row(
        OpKind::Loop,
        Exactly(&["prim::Loop"]),
        &[],
        Exactly(&["Loop"]),
        &[],
    ),
    row(
        OpKind::If,
        Exactly(&["prim::If"]),
        &[],
        Exactly(&["If"]),
        &[],
    ),
    row(OpKind::Scan, Nowhere, &[], Exactly(&["Scan"]), &[]),
];

/// What the table says of one spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    pub kind: OpKind,
    pub families: Families,
}

/// Every form in which an op of `spelled` may be named.
fn forms(spelled: &Spelled) -> Vec<String> {
    match spelled {
        Nowhere => Vec::new(),
        Aten(names) => names
            .iter()
            .flat_map(|n| {
                [
                    n.to_string(),
                    format!("{n}_"),
                    format!("{ATEN}{n}"),
                    format!("{ATEN}{n}_"),
                ]
            })
            .collect(),
        AnyDomain(names) => names
            .iter()
            .flat_map(|n| [n.to_string(), format!("{ORT_DOMAIN}{n}")])
            .collect(),
        Exactly(names) => names.iter().map(|n| n.to_string()).collect(),
    }
}

/// One side's map from every form of a spelling to its row.
fn build(side: impl Fn(&Row) -> (&Spelled, Families)) -> HashMap<String, OpInfo> {
    let mut map = HashMap::new();
    for row in ROWS {
        let (spelled, families) = side(row);
        let info = OpInfo {
            kind: row.kind,
            families,
        };
        for form in forms(spelled) {
            // A spelling in two rows would make the table's answer depend on the row order.
            let earlier = map.insert(form, info);
            assert!(
                earlier.is_none(),
                "an op spelled in two rows of the op table"
            );
        }
    }
    map
}

/// What the table says of TorchScript op `op`; `None` for an op it does not list.
pub fn torch_op(op: &str) -> Option<OpInfo> {
    static MAP: OnceLock<HashMap<String, OpInfo>> = OnceLock::new();
    let map = MAP.get_or_init(|| build(|r| (&r.torch, r.torch_families)));
    map.get(op).copied()
}

/// What the table says of ONNX op `op`; `None` for an op it does not list.
pub fn onnx_op(op: &str) -> Option<OpInfo> {
    static MAP: OnceLock<HashMap<String, OpInfo>> = OnceLock::new();
    let map = MAP.get_or_init(|| build(|r| (&r.onnx, r.onnx_families)));
    map.get(op).copied()
}

/// An op's name without its namespace or domain (`aten::relu_` is `relu_`,
/// `com.microsoft::Gelu` is `Gelu`).
pub fn bare_name(op: &str) -> &str {
    op.rsplit("::").next().unwrap_or(op)
}

/// Whether ONNX op `op` is one of ONNX Runtime's own fused ops: they span modules by design.
pub fn in_runtime_domain(op: &str) -> bool {
    op.starts_with(ORT_DOMAIN)
}

/// Every spelling the table lists, as written in it (for the check that no other file of
/// `src/pairing/` spells one).
#[cfg(test)]
pub(crate) fn spellings() -> Vec<&'static str> {
    let listed = |s: &Spelled| match s {
        Nowhere => &[][..],
        Aten(names) | AnyDomain(names) | Exactly(names) => names,
    };
    ROWS.iter()
        .flat_map(|r| listed(&r.torch).iter().chain(listed(&r.onnx)))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_an_aten_spelling_is_found_and_no_other() {
        for op in ["aten::relu", "aten::relu_", "relu", "relu_"] {
            assert_eq!(torch_op(op).map(|i| i.kind), Some(OpKind::Relu), "{op}");
        }
        for op in ["aten::relu__", "prim::relu", "Relu", "aten::Relu"] {
            assert_eq!(torch_op(op), None, "{op}");
        }
    }

    #[test]
    fn exact_spellings_are_found_only_as_written() {
        assert_eq!(
            torch_op("aten::copy_").map(|i| i.kind),
            Some(OpKind::Vanishing)
        );
        assert_eq!(torch_op("aten::copy"), None);
        assert_eq!(torch_op("aten::feature_dropout_"), None);
        assert_eq!(
            onnx_op("Range").map(|i| i.kind),
            Some(OpKind::ShapeArithmetic)
        );
        assert_eq!(onnx_op("com.microsoft::Range"), None);
        assert_eq!(torch_op("Loop"), None);
        assert_eq!(onnx_op("prim::Loop"), None);
    }

    #[test]
    fn onnx_runtime_spellings_keep_their_kind() {
        let gelu = onnx_op("com.microsoft::Gelu").expect("listed");
        assert_eq!(gelu, onnx_op("Gelu").expect("listed"));
        assert!(gelu.families.contains(F::Activation));
        assert!(in_runtime_domain("com.microsoft::Gelu") && !in_runtime_domain("Gelu"));
    }

    #[test]
    fn no_spelling_is_in_two_rows() {
        // Building the maps asserts it; the counts say every form went in.
        let forms = |side: fn(&Row) -> &Spelled| -> usize {
            ROWS.iter().map(|r| forms(side(r)).len()).sum()
        };
        assert_eq!(
            torch_op("aten::view").map(|i| i.kind),
            Some(OpKind::Rearrange)
        );
        assert_eq!(onnx_op("Reshape").map(|i| i.kind), Some(OpKind::Rearrange));
        let torch = build(|r| (&r.torch, r.torch_families));
        let onnx = build(|r| (&r.onnx, r.onnx_families));
        assert_eq!(torch.len(), forms(|r| &r.torch));
        assert_eq!(onnx.len(), forms(|r| &r.onnx));
    }

    #[test]
    fn names_lose_their_namespace() {
        assert_eq!(bare_name("aten::relu_"), "relu_");
        assert_eq!(bare_name("com.microsoft::Gelu"), "Gelu");
        assert_eq!(bare_name("Conv"), "Conv");
    }
}
