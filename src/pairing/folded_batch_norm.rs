//! Convolutions whose BatchNorm the export folded, in a graph without scopes.
//!
//! In eval mode every exporter or simplifier folds a BatchNorm into the convolution before it
//! (onnxslim and onnxsim on a dynamo export, the legacy exporter itself), so ONNX has one Conv
//! node for the two TorchScript values, and it computes the BatchNorm's output. With scopes the
//! module paths say which is which (`fusion`, `fused_producer`). Without them `global_order`
//! meets both values by kind and order, and the convolution (a `Conv` is of its kind too)
//! takes the fused node's place: the BatchNorm then meets the next Conv, and where a simplifier
//! sorted a parallel branch (a residual's downsample conv) in between, every pair after it is
//! shifted. A convolution read by nothing but a BatchNorm therefore takes no place in the
//! global order; the BatchNorm's pair covers it (`fused_producer`), and a graph that kept its
//! BatchNormalization node still pairs the convolution by dataflow (`left_open`).

use super::ops::torch_families;
use crate::capture::CapturedValue;

/// Whether TorchScript value `t` is a convolution every reader of which is a BatchNorm.
pub(super) fn feeds_only_batch_norm(
    values: &[CapturedValue],
    consumers: &[Vec<usize>],
    t: usize,
) -> bool {
    let readers = &consumers[t];
    torch_families(&values[t].op) == ["conv"]
        && !readers.is_empty()
        && readers.iter().all(|&r| values[r].op == "aten::batch_norm")
}
