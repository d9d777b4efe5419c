//! A value that ONNX holds multiplied by a constant factor (one, or one per channel), the
//! factor folded into the weights of the nodes that read it.
//!
//! A simplifier may move a constant factor across a linear op: onnxsim drops the `* 0.5`
//! that ends a GELU's decomposition and halves the next Conv's weights instead, so the
//! GELU's last ONNX value is twice PyTorch's at every element while both graphs are right;
//! a simplifier folds an RMSNorm's weight into the MatMul after it, so the norm's last ONNX
//! value is PyTorch's divided by that weight, channel by channel (along the axis the
//! reader's weights index).
//! Exact proportionality is no coincidence of rounding, and only a reader
//! with weights can have absorbed it, so such a pair is unpaired and counted as covered (its
//! data is compared where it is used: a wrong factor shows at the reader). Nodes with
//! weights of their own are never unpaired here: a planted scale on their weights yields
//! the same proportionality, and it is a fault.

use super::ops::onnx_families;
use super::{consumers_of, Pairer};
use crate::capture::tensor::HostTensor;
use crate::capture::ValueRole;

/// How far from 1 a factor must be to be a factor, not rounding.
const NOT_ONE: f64 = 1e-3;

/// The largest deviation from exact proportionality, relative to the value's range, still
/// taken as exact (float32 rounding through a decomposition).
const EXACT: f64 = 1e-4;

fn families_include(onnx_op: &str, wanted: &[&str]) -> bool {
    onnx_families(onnx_op).iter().any(|f| wanted.contains(f))
}

/// Fewer elements per channel than this say nothing about a factor per channel.
const MIN_PER_CHANNEL: usize = 4;

/// The factors `k[c]` with `test == k[c] * reference` elementwise, `c` the index along
/// `axis` (one factor for all when `axis` is `None`), when there are such factors.
fn factors(test: &HostTensor, reference: &HostTensor, axis: Option<usize>) -> Option<Vec<f64>> {
    let n = test.numel();
    if n == 0 || n != reference.numel() {
        return None;
    }
    let shape = &reference.shape;
    let (channels, stride) = match axis {
        None => (1, 1),
        Some(a) if a < shape.len() && test.shape == *shape => {
            (shape[a], shape[a + 1..].iter().product::<usize>())
        }
        Some(_) => return None,
    };
    if channels == 0 || (axis.is_some() && n / channels < MIN_PER_CHANNEL) {
        return None;
    }
    let channel = |i: usize| (i / stride) % channels;
    let (a, b) = (test.data.to_f64_vec(), reference.data.to_f64_vec());
    let (mut ab, mut bb) = (vec![0.0; channels], vec![0.0; channels]);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        ab[channel(i)] += x * y;
        bb[channel(i)] += y * y;
    }
    // A channel that is zero throughout on the reference side takes factor 1: any works.
    let k: Vec<f64> = ab
        .iter()
        .zip(&bb)
        .map(|(&ab, &bb)| if bb == 0.0 { 1.0 } else { ab / bb })
        .collect();
    if k.iter().any(|k| !k.is_finite()) {
        return None;
    }
    let range = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let worst = a.iter().zip(&b).enumerate().fold(0.0f64, |m, (i, (x, y))| {
        m.max((x - k[channel(i)] * y).abs())
    });
    (range > 0.0 && worst <= EXACT * range).then_some(k)
}

/// The one factor `k` with `test == k * reference` at every element, when there is one.
pub(super) fn single_factor(test: &HostTensor, reference: &HostTensor) -> Option<f64> {
    factors(test, reference, None).map(|k| k[0])
}

/// The axis of a value that the weights of all its readers index: the channels of a Conv's
/// input, the last dim of a MatMul's or Gemm's, and of a Mul's (a 1-D constant broadcasts
/// along the last dim).
fn weighted_axis(readers: &[&str], rank: usize) -> Option<usize> {
    if readers.iter().all(|r| families_include(r, &["conv"])) {
        (rank >= 2).then_some(1)
    } else if readers
        .iter()
        .all(|r| families_include(r, &["matmul", "mul"]))
    {
        rank.checked_sub(1)
    } else {
        None
    }
}

impl Pairer<'_> {
    pub(super) fn unpair_folded_scale(&mut self) {
        let ov = &self.onnx.values;
        let readers_of = consumers_of(ov);
        for t in self.state.paired() {
            let Some(made) = self.state.get(t) else {
                continue;
            };
            let o = made.onnx;
            let readers = &readers_of[o];
            if families_include(&ov[o].op, &["conv", "matmul", "norm"])
                || readers.is_empty()
                || !readers.iter().all(|&r| {
                    // Weights: a Conv, MatMul or Mul whose other operands are constants
                    // (an attention's MatMul of two activations absorbs nothing).
                    families_include(&ov[r].op, &["conv", "matmul", "mul"])
                        && ov[r].inputs.iter().all(|&i| {
                            i == o
                                || (ov[i].role == ValueRole::Intermediate
                                    && ov[i].inputs.is_empty())
                        })
                })
            {
                continue;
            }
            let (Ok(test), Ok(reference)) = (ov[o].data(), self.torch.values[t].data()) else {
                continue;
            };
            let reader_ops: Vec<&str> = readers.iter().map(|&r| ov[r].op.as_str()).collect();
            let axis = weighted_axis(&reader_ops, reference.shape.len());
            let Some(k) = factors(&test, &reference, None)
                .or_else(|| axis.and_then(|a| factors(&test, &reference, Some(a))))
            else {
                continue;
            };
            if k.iter().all(|k| (k - 1.0).abs() < NOT_ONE) {
                continue;
            }
            self.state.unassign(t);
            let factor = match k[..] {
                [k] => format!("times {k:.4}"),
                _ => "times a factor per channel".to_string(),
            };
            let reason = format!(
                "ONNX holds it {factor}, folded into the weights of {} (its data is compared \
                 where that node's output is)",
                ov[readers[0]].node
            );
            self.state.reason.insert(t, (reason, true));
        }
    }
}
