//! What an op is, for pairing purposes: its kind and families, whether it is bookkeeping,
//! whether it vanishes from ONNX, and whether an aten op and an ONNX op can be the same
//! computation. Every answer comes from the op table (`table`), the one place that spells
//! ops; the families are an enum (`family`).

mod family;
mod table;

pub use family::{Families, Family};
#[cfg(test)]
pub(crate) use table::spellings as table_spellings;
pub use table::{bare_name, in_runtime_domain, OpKind};

use crate::capture::tensor::DType;
use crate::capture::CapturedValue;

/// The kind of TorchScript op `op`; `None` for an op the table does not list.
pub fn torch_kind(op: &str) -> Option<OpKind> {
    table::torch_op(op).map(|i| i.kind)
}

/// The kind of ONNX op `op`; `None` for an op the table does not list.
pub fn onnx_kind(op: &str) -> Option<OpKind> {
    table::onnx_op(op).map(|i| i.kind)
}

/// The families of TorchScript op `op`: none for an op the table does not list.
pub fn torch_families(op: &str) -> Families {
    table::torch_op(op).map_or(Families::NONE, |i| i.families)
}

/// The families of ONNX op `op`: none for an op the table does not list.
pub fn onnx_families(op: &str) -> Families {
    table::onnx_op(op).map_or(Families::NONE, |i| i.families)
}

/// Whether an aten op and an ONNX op can be the same computation.
pub fn compatible(torch_op: &str, onnx_op: &str) -> bool {
    if torch_families(torch_op).meets(onnx_families(onnx_op)) {
        return true;
    }
    // Ops outside the table still pair when their names agree (aten::sigmoid / Sigmoid), and
    // so do custom ops whatever their namespace and domain (my_ops::my_add / my_ops::my_add).
    same_op_name(torch_op, onnx_op)
}

/// Whether the two sides name the same op, namespace, domain, case, underscores and an
/// in-place suffix aside: `aten::sub_` and `Sub`, but not `aten::sub` and `Add`.
pub fn same_op_name(torch_op: &str, onnx_op: &str) -> bool {
    let bare = bare_name(torch_op);
    let bare = bare.strip_suffix('_').unwrap_or(bare).replace('_', "");
    let onnx_bare = bare_name(onnx_op).replace('_', "");
    bare.eq_ignore_ascii_case(&onnx_bare)
}

/// Ops whose result depends on their tensor arguments' shape and dtype only, never on their
/// values: with static input shapes the exporter folds them to constants.
pub fn reads_only_shape(torch_op: &str) -> bool {
    torch_kind(torch_op).is_some_and(OpKind::reads_only_shape)
}

/// Normalisations an exporter folds into the preceding convolution in eval mode.
pub fn folds_into_conv(torch_op: &str) -> bool {
    torch_kind(torch_op).is_some_and(OpKind::folds_into_conv)
}

/// Ops whose output equals their input in eval mode; ONNX drops them.
pub fn vanishes_in_onnx(torch_op: &str) -> bool {
    torch_kind(torch_op).is_some_and(OpKind::vanishes_in_onnx)
}

/// Shape arithmetic and other small integer bookkeeping: not layers. ONNX constant-folds
/// most of it, so it is neither compared nor counted.
pub fn is_bookkeeping(v: &CapturedValue) -> bool {
    let (torch, onnx) = (table::torch_op(&v.op), table::onnx_op(&v.op));
    let kinds = [torch, onnx].map(|i| i.map(|i| i.kind));
    if kinds.iter().flatten().any(|k| k.is_bookkeeping()) {
        return true;
    }
    // An argmax is data however small: a runtime that picks another index is wrong.
    if kinds.contains(&Some(OpKind::ArgReduce)) {
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
    let layout = |i: Option<table::OpInfo>| i.is_some_and(|i| i.families.contains(Family::Layout));
    integral && (layout(torch) || layout(onnx))
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
