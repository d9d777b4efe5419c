//! TorchScript values that compute again what an earlier value computed: one ONNX node for
//! both once a simplifier merged the common subexpression.
//!
//! A detector's box decoder takes `boxes[:, 2] - boxes[:, 0]` of the proposals that its
//! RoI pooler has just taken the same difference of (for the box areas). TorchScript keeps
//! both computations; onnxslim, onnxsim and ONNX Runtime merge nodes that apply the same
//! op to the same inputs, and the one node left sits in the scope of the first. The second
//! computation then has no node in its own scope, and the order-keeping alignment pairs it,
//! and every op after it, with the next node of its shape there: a `select` met an
//! `Unsqueeze`, and a clean pair failed. A value of the same op, shape and dtype as an
//! earlier one, computed from inputs that hold the same tensors (the same values, or values
//! equal element for element: a one-element `cat` of the proposals is the proposals), and
//! equal to it element for element, in another module's scope, is the same computation: it
//! is neither aligned nor compared, and counts as covered (the earlier value is compared).
//! Where the ONNX graph kept both nodes, the second is left without a twin; it feeds what
//! the later pairs compare. Two such values of one scope (a query and a key transposed from
//! one input) are left to the alignment: a merged node still sits in their scope, where the
//! values choose between them; so are ops with weights (a Conv, a Linear, a norm), which a
//! fault can change in one of two copies. Marking reads TorchScript's values only; a copy of
//! one scope is settled after the alignment, by the dataflow check (`merged_copy_of`): when
//! its twin is not computed from its producers' twins and the earlier copy's is, the graph
//! kept one node for both. Whether two values hold the same tensor is asked of the
//! fingerprints of `value_memo`, which read each value once.

use super::dataflow::{computed_from_all, nearest_producer_twins};
use super::{is_layer_candidate, ops, same_shape, PairedBy, Pairer};
use crate::capture::CapturedValue;
use std::collections::HashMap;

impl Pairer<'_> {
    pub(super) fn mark_duplicates(&mut self) {
        let tv = &self.torch.values;
        // Candidates by what must agree before any data is read.
        let mut seen: HashMap<(&str, &[usize], String), Vec<usize>> = HashMap::new();
        let mut duplicates: Vec<(usize, usize)> = Vec::new();
        for v in tv.iter().filter(|v| {
            is_layer_candidate(v)
                && !v.inputs.is_empty()
                && !weighted(&v.op)
                && !self.state.identities.contains(&v.id)
        }) {
            let group = seen
                .entry((v.op.as_str(), v.shape.as_slice(), format!("{:?}", v.dtype)))
                .or_default();
            let original = group.iter().copied().find(|&u| {
                tv[u].module_path() != v.module_path()
                    && self.memo.same_torch_data(&tv[u], v)
                    && self.same_inputs(&tv[u], v)
            });
            match original {
                Some(u) => duplicates.push((v.id, u)),
                None => group.push(v.id),
            }
        }
        for (t, original) in duplicates {
            let reason = format!(
                "computes what {} computes (the same op on the same inputs; a simplifier merges the two)",
                tv[original].name
            );
            self.state.identities.insert(t);
            self.state.reason.insert(t, (reason, true));
        }
    }
}

impl Pairer<'_> {
    /// An earlier TorchScript value that computes what `t` computes (the same op on the same
    /// tensors, equal element for element, no weights) and whose twin is computed from the
    /// producers' twins `needed`: where `t`'s own twin is not, a simplifier merged the two
    /// copies of one scope into that one node (timm's CoaT slices each stream's class token
    /// twice, onnxslim keeps one Slice), and the alignment gave `t` the next node of its
    /// shape, another stream's.
    pub(super) fn merged_copy_of(&self, t: usize, needed: &[usize]) -> Option<usize> {
        let tv = &self.torch.values;
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
                    .is_some_and(|o| computed_from_all(&self.onnx.values, o, needed))
                && self.memo.same_torch_data(&tv[u], v)
        })
    }

    /// `t` computes what `original` computes, in one node: not compared, covered. The node
    /// it held goes to the value of its call still without a twin that it is computed for
    /// (the slice of the other stream, which the order left over).
    pub(super) fn mark_merged_copy(&mut self, t: usize, original: usize) {
        let freed = self.state.unassign(t);
        let reason = format!(
            "computes what {} computes (the same op on the same inputs; a simplifier merged the two)",
            self.torch.values[original].name
        );
        self.state.identities.insert(t);
        self.state.reason.insert(t, (reason, true));
        if let Some(o) = freed {
            if let Some(owner) = self.open_value_computed_as(t, o) {
                self.state.assign(owner, o, PairedBy::Dataflow, false);
            }
        }
    }

    /// The one later value of `t`'s call, without a twin, of ONNX value `o`'s kind and shape,
    /// that `o` is computed from the producers' twins of.
    fn open_value_computed_as(&self, t: usize, o: usize) -> Option<usize> {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let call = self.torch_groups.values().find(|ids| ids.contains(&t))?;
        let mut owners = call.iter().copied().filter(|&u| {
            u > t
                && !self.state.is_paired(u)
                && !self.state.identities.contains(&u)
                && same_shape(&tv[u], &ov[o])
                && ops::compatible(&tv[u].op, &ov[o].op)
                && computed_from_all(
                    ov,
                    o,
                    &nearest_producer_twins(self.torch, |v| self.twin(v), u),
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
fn weighted(op: &str) -> bool {
    ops::torch_families(op)
        .iter()
        .any(|f| matches!(*f, "conv" | "matmul" | "norm"))
}

impl Pairer<'_> {
    /// Whether `u` and `v` read the same tensors, in the same order: the same captured
    /// values, or values that hold the same shape, dtype and elements.
    fn same_inputs(&self, u: &CapturedValue, v: &CapturedValue) -> bool {
        let tv = &self.torch.values;
        u.inputs.len() == v.inputs.len()
            && u.inputs
                .iter()
                .zip(&v.inputs)
                .all(|(&a, &b)| a == b || self.memo.same_torch_data(&tv[a], &tv[b]))
    }
}
