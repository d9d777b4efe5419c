//! Merged copies, the helpers of the `duplicates` and `dataflow` passes: whether a value
//! computes again what an earlier one computes (the same op on inputs holding the same
//! tensors, no weights), and marking a copy a simplifier merged into one node
//! (`merged_copy_of`, `mark_merged_copy`), which the dataflow check settles after the
//! alignment.

use super::ops::{Families, Family};
use super::reason::UnpairedReason;
use super::wiring::{computed_from_all, nearest_producer_twins};
use super::{is_layer_candidate, ops, same_shape, Pairer};
use crate::capture::CapturedValue;

impl Pairer<'_> {}

impl Pairer<'_> {
    /// An earlier TorchScript value that computes what `t` computes (the same op on the same
    /// tensors, equal element for element, no weights) and whose twin is computed from the
    /// producers' twins `needed`: where `t`'s own twin is not, a simplifier merged the two
    /// copies of one scope into that one node (timm's CoaT slices each stream's class token
    /// twice, onnxslim keeps one Slice), and the alignment gave `t` the next node of its
    /// shape, another stream's.
    pub(super) fn merged_copy_of(&self, t: usize, needed: &[usize]) -> Option<usize> {
        let tv = &self.cx.torch.values;
        let v = &tv[t];
        if !is_layer_candidate(v) || v.inputs.is_empty() || weighted(&v.op) {
            return None;
        }
        tv[..t].iter().map(|u| u.id).find(|&u| {
            tv[u].op == v.op
                && tv[u].shape == v.shape
                && tv[u].dtype == v.dtype
                && self.same_inputs(&tv[u], v)
                && self
                    .state
                    .twin(u)
                    .is_some_and(|o| computed_from_all(&self.cx.onnx.values, o, needed))
                && self.cx.memo.same_torch_data(&tv[u], v)
        })
    }

    /// `t` computes what `original` computes, in one node: not compared, covered. The node
    /// it held goes to the value of its call still without a twin that it is computed for
    /// (the slice of the other stream, which the order left over).
    pub(super) fn mark_merged_copy(&mut self, t: usize, original: usize) {
        let freed = self.state.unassign(t);
        let reason = UnpairedReason::MergedCopy {
            original: self.cx.torch.values[original].name.clone(),
        };
        self.state.mark_identity(t);
        self.state.leave(t, reason);
        if let Some(o) = freed {
            if let Some(owner) = self.open_value_computed_as(t, o) {
                self.state.assign(owner, o, false);
            }
        }
    }

    /// The one later value of `t`'s call, without a twin, of ONNX value `o`'s kind and shape,
    /// that `o` is computed from the producers' twins of.
    fn open_value_computed_as(&self, t: usize, o: usize) -> Option<usize> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let call = self.cx.torch_groups.values().find(|ids| ids.contains(&t))?;
        let mut owners = call.iter().copied().filter(|&u| {
            u > t
                && !self.state.is_paired(u)
                && !self.state.is_identity(u)
                && same_shape(&tv[u], &ov[o])
                && ops::compatible(&tv[u].op, &ov[o].op)
                && computed_from_all(
                    ov,
                    o,
                    &nearest_producer_twins(self.cx.torch, |v| self.twin(v), u),
                )
        });
        match (owners.next(), owners.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }
}

/// Ops that apply weights (a Conv, a Linear, a norm): two of them on one input are two
/// layers, each with weights of its own that a fault can change, whatever they hold here.
pub(super) fn weighted(op: &str) -> bool {
    ops::torch_families(op).meets(Families::of(&[Family::Conv, Family::MatMul, Family::Norm]))
}

impl Pairer<'_> {
    /// Whether `u` and `v` read the same tensors, in the same order: the same captured
    /// values, or values that hold the same shape, dtype and elements.
    pub(super) fn same_inputs(&self, u: &CapturedValue, v: &CapturedValue) -> bool {
        let tv = &self.cx.torch.values;
        u.inputs.len() == v.inputs.len()
            && u.inputs
                .iter()
                .zip(&v.inputs)
                .all(|(&a, &b)| a == b || self.cx.memo.same_torch_data(&tv[a], &tv[b]))
    }
}
