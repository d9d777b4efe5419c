//! Nodes a graph optimiser fused across module boundaries, paired by where they sit in the
//! dataflow rather than by scope: what the `partial_linear`, `scopeless` and
//! `fused_into_consumers` passes share.
//!
//! ONNX Runtime's transformer optimiser (and similar tools) replace a Linear's bias Add, the
//! residual Add and the LayerNorm after it with one `SkipLayerNormalization`, or an Add and
//! the GELU after it with one `BiasGelu`, under a node name that records no scope. Three
//! things follow, each handled here:
//!
//! - the Linear's scope now ends in a bare MatMul: its value is the Linear's output minus the
//!   bias, a partial value that must not be compared (the `partial_linear` pass);
//! - the LayerNorm or GELU has no ONNX node in its scope, but the fused node computes its
//!   value: it is the unpaired scope-less ONNX value of a compatible kind and shape that is
//!   computed from the twins of the TorchScript value's producers and feeds the twins of its
//!   consumers (the `scopeless` pass);
//! - the residual Add and the biased Linear are inside that node: covered, not missing
//!   (the `fused_into_consumers` pass).
//!
//! Only scope-less ONNX values are candidates, so values still never pair across scopes.

use super::ops::{compatible, in_runtime_domain, onnx_families, onnx_kind, torch_families};
use super::ops::{Family, OpKind};
use super::wiring::computed_from_all;
use super::{is_layer_candidate, relative_distance, Pairer};
use crate::capture::tensor::{DType, HostTensor};
use crate::capture::CapturedValue;
use std::collections::HashSet;

/// A TorchScript value still without a twin, as `pair_scopeless` sees it.
pub(super) struct Open {
    pub id: usize,
    /// A leaf module's output (it stands for the whole call), not a functional op.
    pub module_output: bool,
    /// The value whose op says what kind of computation this is: the module's last op that
    /// is not a layout op, or the value itself.
    pub kind_of: usize,
}

/// Whether ONNX op `op` is a normalisation and TorchScript module output `t` is one written
/// out: its module's own values before it take a mean or variance. ONNX Runtime writes some
/// of its fused nodes in the default domain (`SimplifiedLayerNormalization`, the RMSNorm
/// that TorchScript computes as pow, mean, add, rsqrt, mul, mul), so their op names say
/// nothing of the fusion; what the module computes does.
fn normalises_what_it_reduces(tv: &[CapturedValue], t: usize, op: &str) -> bool {
    if !onnx_families(op).contains(Family::Norm) {
        return false;
    }
    let module = tv[t].module_path();
    let mut seen = HashSet::new();
    let mut stack = vec![t];
    while let Some(u) = stack.pop() {
        if !seen.insert(u) {
            continue;
        }
        if torch_families(&tv[u].op).contains(Family::Reduce) {
            return true;
        }
        stack.extend(
            tv[u]
                .inputs
                .iter()
                .copied()
                .filter(|&p| p < u && tv[p].module_path() == module),
        );
    }
    false
}

/// Below this, a Linear and a MatMul agree: nothing is missing from the MatMul.
const AGREE: f64 = 1e-4;

/// Whether `diff = reference - test` over `[rows, channels]` is one vector repeated on every
/// row (up to rounding), and not zero: the bias of a Linear that a later node adds.
fn is_per_channel_offset(reference: &HostTensor, test: &HostTensor, rounding: f64) -> bool {
    let channels = *reference.shape.last().unwrap_or(&0);
    let n = reference.numel();
    if channels == 0 || n != test.numel() || n / channels < 2 {
        return false;
    }
    let diff = |i: usize| reference.data.get_f64(i) - test.data.get_f64(i);
    let offset: Vec<f64> = (0..channels).map(diff).collect();
    let largest = offset.iter().fold(0.0f64, |m, d| m.max(d.abs()));
    if !largest.is_finite() || largest == 0.0 {
        return false;
    }
    // What the test side's own rounding can add to the offset (float16 MatMuls round at
    // about 1e-3 of their values, which can exceed 1e-3 of the bias).
    let range = (0..n).fold(0.0f64, |m, i| m.max(reference.data.get_f64(i).abs()));
    let slack = largest * 1e-3 + range * rounding;
    // An offset rounding alone could make is no bias (a float16 `q @ k^T` against its MatMul).
    if largest <= 2.0 * range * rounding {
        return false;
    }
    (channels..n).all(|i| (diff(i) - offset[i % channels]).abs() <= slack)
}

/// A few units of `dtype`'s rounding, relative to a value: what one op's output may carry.
fn rounding_of(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 4.0 * 2f64.powi(-11),
        DType::Bf16 => 4.0 * 2f64.powi(-8),
        _ => 4.0 * 2f64.powi(-24),
    }
}

/// Whether ONNX value `o` is TorchScript value `t` without a bias: a bare MatMul (which
/// adds none) that differs from it by one vector on every row. `t` may be a Linear, or a
/// module whose output is a view of its `addmm` (GPT-2's Conv1D).
pub(super) fn lacks_bias(t: &CapturedValue, o: &CapturedValue) -> bool {
    if onnx_kind(&o.op) != Some(OpKind::MatMul) {
        return false;
    }
    let (Ok(reference), Ok(test)) = (t.data(), o.data()) else {
        return false;
    };
    relative_distance(&test, &reference) > AGREE
        && is_per_channel_offset(&reference, &test, rounding_of(o.dtype))
}

/// How well scope-less ONNX value `c` sits before the consumers' twins, as a rank (lower is
/// better): 0 when it computes all of them and is of the TorchScript value's kind, 1 when it
/// computes all of them, 2 when it computes one of them and is of its kind (one consumer's
/// pair may be a doubtful one, placed by order alone); `None` otherwise. "One of them" is
/// not enough for a value of another kind: through a run of unpaired values a consumer far
/// downstream would let it meet any later node.
pub(super) fn placement(
    ov: &[CapturedValue],
    c: usize,
    consumers: &[usize],
    kind: bool,
) -> Option<u8> {
    let computes = |d: &usize| computed_from_all(ov, *d, &[c]);
    if consumers.iter().all(computes) {
        Some(if kind { 0 } else { 1 })
    } else if kind && consumers.iter().any(computes) {
        Some(2)
    } else {
        None
    }
}

/// The ONNX twins of the nearest paired values computed from TorchScript value `t`,
/// looking through unpaired ones.
pub(super) fn nearest_consumer_twins(
    consumers: &[Vec<usize>],
    twin: impl Fn(usize) -> Option<usize>,
    t: usize,
) -> Vec<usize> {
    let mut twins = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = consumers[t].clone();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        match twin(v) {
            Some(o) => twins.push(o),
            None => stack.extend(&consumers[v]),
        }
    }
    twins
}

impl Pairer<'_> {}

/// Whether scope-less ONNX node `c` may compute the whole module whose output is `t` (its
/// op kind taken from `kind_of`) under another op than the module's own.
pub(super) fn computes_whole_module(
    tv: &[CapturedValue],
    ov: &[CapturedValue],
    t: usize,
    kind_of: usize,
    c: usize,
) -> bool {
    // A whole module under another op is what a fused node computes (a GELU module ends in a
    // Mul, ONNX Runtime's node is a Gelu; its RMSNorm fusion is written in the default domain).
    let fused_module = in_runtime_domain(&ov[c].op) || normalises_what_it_reduces(tv, t, &ov[c].op);
    // A simplifier merges the projections that read one input (a query's, key's and value's
    // Linear) into one MatMul and a Split: each piece of the Split is one module's output.
    let merged_piece = onnx_kind(&ov[c].op) == Some(OpKind::Split)
        && ov[c].inputs.iter().any(|&d| {
            d < ov.len() && is_layer_candidate(&ov[d]) && compatible(&tv[kind_of].op, &ov[d].op)
        });
    fused_module || merged_piece
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::HostTensor;

    #[test]
    fn a_missing_bias_is_one_vector_on_every_row() {
        let with_bias = HostTensor::f32(vec![3, 2], vec![1.5, 2.0, 3.5, 4.0, 5.5, 6.0]);
        let matmul = HostTensor::f32(vec![3, 2], vec![1.0, 3.0, 3.0, 5.0, 5.0, 7.0]);
        assert!(is_per_channel_offset(&with_bias, &matmul, 0.0));
        // A fault that changes one element is no per-channel offset.
        let faulty = HostTensor::f32(vec![3, 2], vec![1.5, 2.0, 3.5, 4.0, 9.0, 6.0]);
        assert!(!is_per_channel_offset(&faulty, &with_bias, 0.0));
        // Equal values are not an offset either.
        assert!(!is_per_channel_offset(&with_bias, &with_bias, 0.0));
        // One row cannot tell an offset from any difference.
        let row = HostTensor::f32(vec![1, 2], vec![1.0, 2.0]);
        let other = HostTensor::f32(vec![1, 2], vec![0.0, 0.0]);
        assert!(!is_per_channel_offset(&row, &other, 0.0));
    }

    #[test]
    fn consumers_are_found_through_unpaired_values() {
        // 0 -> 1 -> 2, 0 -> 3; 2 and 3 are paired.
        let consumers = vec![vec![1, 3], vec![2], vec![], vec![]];
        let twin = |v| match v {
            2 => Some(20),
            3 => Some(30),
            _ => None,
        };
        let mut twins = nearest_consumer_twins(&consumers, twin, 0);
        twins.sort();
        assert_eq!(twins, [20, 30]);
    }
}
