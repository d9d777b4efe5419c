//! A value that ONNX holds multiplied by a constant factor, the factor folded into the
//! weights of the node that reads it.
//!
//! A simplifier may move a constant factor across a linear op: onnxsim drops the `* 0.5`
//! that ends a GELU's decomposition and halves the next Conv's weights instead, so the
//! GELU's last ONNX value is twice PyTorch's at every element while both graphs are right.
//! Exact proportionality by one factor is no coincidence of rounding, and only a reader
//! with weights can have absorbed it, so such a pair is unpaired and counted as covered (its
//! data is compared where it is used: a wrong factor shows at the reader). Nodes with
//! weights of their own are never unpaired here: a planted scale on their weights yields
//! the same proportionality, and it is a fault.

use super::ops::onnx_families;
use super::{consumers_of, Pairer};
use crate::capture::tensor::HostTensor;

/// How far from 1 a factor must be to be a factor, not rounding.
const NOT_ONE: f64 = 1e-3;

/// The largest deviation from exact proportionality, relative to the value's range, still
/// taken as exact (float32 rounding through a decomposition).
const EXACT: f64 = 1e-4;

fn families_include(onnx_op: &str, wanted: &[&str]) -> bool {
    onnx_families(onnx_op).iter().any(|f| wanted.contains(f))
}

/// The factor `k` with `test == k * reference` elementwise, when there is one.
fn uniform_factor(test: &HostTensor, reference: &HostTensor) -> Option<f64> {
    let n = test.numel();
    if n == 0 || n != reference.numel() {
        return None;
    }
    let (a, b) = (test.data.to_f64_vec(), reference.data.to_f64_vec());
    let (ab, bb) = a
        .iter()
        .zip(&b)
        .fold((0.0, 0.0), |(ab, bb), (x, y)| (ab + x * y, bb + y * y));
    if bb == 0.0 || !ab.is_finite() || !bb.is_finite() {
        return None;
    }
    let k = ab / bb;
    let range = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let worst = a
        .iter()
        .zip(&b)
        .fold(0.0f64, |m, (x, y)| m.max((x - k * y).abs()));
    (range > 0.0 && worst <= EXACT * range).then_some(k)
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
                || !readers
                    .iter()
                    .all(|&r| families_include(&ov[r].op, &["conv", "matmul"]))
            {
                continue;
            }
            let (Ok(test), Ok(reference)) = (ov[o].data(), self.torch.values[t].data()) else {
                continue;
            };
            let Some(k) = uniform_factor(&test, &reference) else {
                continue;
            };
            if (k - 1.0).abs() < NOT_ONE {
                continue;
            }
            self.state.unassign(t);
            let reason = format!(
                "ONNX holds it times {k:.4}, the factor folded into the weights of {} (its data \
                 is compared where that node's output is)",
                ov[readers[0]].node
            );
            self.state.reason.insert(t, (reason, true));
        }
    }
}
