//! A computing op that ONNX runs in another layout is accounted, not compared: an optimiser
//! moved a Transpose past it.
//!
//! ONNX Runtime's transpose optimiser pushes a Transpose below elementwise ops: a key's
//! rotary arithmetic (`k * cos + rotate_half(k) * sin`), written after `transpose(1, 2)` in
//! PyTorch, runs on the untransposed key in ONNX, and one Transpose after the chain restores
//! the layout. Those ONNX values hold the TorchScript values' data with dims exchanged, so no
//! ONNX value of the TorchScript layout exists to compare with, and the order meets another
//! value of that shape instead (the attention's scaled query), which fails at every element.
//! A functional op whose pair is not certain and does not agree, or that is still open, is
//! left unpaired and counted as covered when exactly one free ONNX value of its call, of its
//! kind, whose shape has its dims in some order, is computed from its producers' twins (or
//! from the relaid values before it in the chain) and holds the same values in another
//! arrangement (`rearranged`), within rounding of what its producers carry in. Its data is
//! compared where the layout is restored (the attention the chain feeds). A fault in the
//! relaid op changes its values, so the op is not accounted and the fault shows at the next
//! compared layer.

use super::super::ops::{compatible, torch_families, Family};
use super::super::rearranged::holds_same_values;
use super::super::reason::UnpairedReason;
use super::super::wiring::{computed_from_all, nearest_producer_twins};
use super::super::{is_layer_candidate, Pairer};
use super::super::{PairCx, PairState};
use super::super::{AGREES, ROUNDING};
use super::Pass;
use std::collections::{HashMap, HashSet};

/// Whether shape `b` is shape `a` with its dims in some order.
fn same_dims(a: &[usize], b: &[usize]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

impl Pairer<'_> {
    fn account_relaid_computations(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        // Relaid values stand for their twins in the chain after them: the next link is
        // computed from the relaid ONNX value, not from the last compared one.
        let mut relaid: HashMap<usize, usize> = HashMap::new();
        for (key, ids) in self.op_groups() {
            let Some(o_ids) = self.cx.onnx_groups.get(&key).cloned() else {
                continue;
            };
            for t in self.representatives(&key, &ids) {
                if let Some(c) = self.relaid_twin(t, &o_ids, &relaid) {
                    self.state.unassign(t);
                    self.state.back_on_dataflow(t);
                    let reason = UnpairedReason::RelaidComputation {
                        node: self.cx.onnx.values[c].node.clone(),
                    };
                    self.state.leave(t, reason);
                    relaid.insert(t, c);
                }
            }
        }
        // With the chain accounted, a layout op before it that met a wrong value by shape
        // (the key's transpose) has agreeing values on both sides now: settle it again.
        if !relaid.is_empty() {
            self.unpair_relaid_layout();
        }
    }

    /// The one ONNX value of `o_ids` that holds TorchScript value `t`'s data in another
    /// layout, when `t` has no agreeing or certain pair.
    fn relaid_twin(
        &self,
        t: usize,
        o_ids: &[usize],
        relaid: &HashMap<usize, usize>,
    ) -> Option<usize> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        if torch_families(&tv[t].op).contains(Family::Layout)
            || torch_families(&tv[t].op).is_empty()
        {
            return None;
        }
        match self.state.get(t) {
            Some(made) if made.certain || self.cx.distance(t, made.onnx) < AGREES => return None,
            None if self.state.accounted(t) => return None,
            _ => {}
        }
        let twin = |u: usize| self.trusted_twin(u, relaid);
        let needed = nearest_producer_twins(self.cx.torch, twin, t);
        if needed.is_empty() {
            return None;
        }
        let limit = (2.0 * self.carried_in(t, relaid)).clamp(ROUNDING, AGREES);
        let candidates: Vec<usize> = o_ids
            .iter()
            .copied()
            .filter(|&c| {
                is_layer_candidate(&ov[c])
                    && !self.state.is_taken(c)
                    && !relaid.values().any(|&r| r == c)
                    && tv[t].dtype == ov[c].dtype
                    && tv[t].shape != ov[c].shape
                    && same_dims(&tv[t].shape, &ov[c].shape)
                    && compatible(&tv[t].op, &ov[c].op)
                    && computed_from_all(ov, c, &needed)
            })
            .filter(|&c| match (tv[t].data(), ov[c].data()) {
                (Ok(reference), Ok(test)) => holds_same_values(&reference, &test, limit),
                _ => false,
            })
            .collect();
        match candidates[..] {
            [only] => Some(only),
            _ => None,
        }
    }
}

impl Pairer<'_> {
    /// The ONNX value that stands for TorchScript value `u` in the wiring: its twin, or the
    /// value a relaid op was found in. A layout op whose pair does not agree is looked
    /// through: that is the pair the moved Transpose left wrong (the key's transpose met by
    /// shape with another Reshape), not where the chain's data comes from.
    fn trusted_twin(&self, u: usize, relaid: &HashMap<usize, usize>) -> Option<usize> {
        if let Some(&c) = relaid.get(&u) {
            return Some(c);
        }
        let made = self.state.get(u);
        let apart_layout = made.is_some_and(|m| {
            !m.certain
                && torch_families(&self.cx.torch.values[u].op).is_only(Family::Layout)
                && self.cx.distance(u, m.onnx) >= AGREES
        });
        if apart_layout {
            return None;
        }
        self.twin(u)
    }

    /// The worst distance the nearest compared producers of `t` carry in (relaid values are
    /// compared with nothing, so the walk looks through them to the values the chain starts
    /// from).
    fn carried_in(&self, t: usize, relaid: &HashMap<usize, usize>) -> f64 {
        let tv = &self.cx.torch.values;
        let mut worst = 0.0f64;
        let mut seen = HashSet::new();
        let mut stack = tv[t].inputs.clone();
        while let Some(u) = stack.pop() {
            if u >= tv.len() || u == t || !seen.insert(u) {
                continue;
            }
            match self
                .trusted_twin(u, relaid)
                .filter(|_| !relaid.contains_key(&u))
            {
                Some(o) => worst = worst.max(self.cx.distance(u, o)),
                None => stack.extend(&tv[u].inputs),
            }
        }
        worst
    }
}

pub(super) struct RelaidComputation;

impl Pass for RelaidComputation {
    fn name(&self) -> &'static str {
        "relaid_computation"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.account_relaid_computations();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    /// Runs the pass on `op_in_another_layout(mul_factor)` after the order's pairs: the mul
    /// met the second Mul of its shape, the transpose the moved Transpose. Returns the state
    /// and the transpose, mul and matmul ids, and the matmul's twin.
    fn run_after_the_order(mul_factor: f32) -> (PairState, [usize; 4]) {
        let (t, o, ids) = graphs::op_in_another_layout(mul_factor);
        let [lin, tr, mul, _, mm, olin, _, _, otr, _, olure2, omm] = ids;
        let earlier = [(lin, olin), (tr, otr), (mul, olure2), (mm, omm)];
        let state = run_alone(&RelaidComputation, &t, &o, &earlier);
        (state, [tr, mul, mm, omm])
    }

    #[test]
    fn a_mul_onnx_computes_before_the_transpose_is_covered_not_paired_by_shape() {
        let (state, [tr, mul, mm, omm]) = run_after_the_order(2.0);
        assert!(
            !state.is_paired(mul),
            "no ONNX value holds the mul in its layout"
        );
        assert!(
            state.accounted(mul),
            "its data is compared where the layout is restored"
        );
        assert!(
            !state.is_paired(tr) && state.accounted(tr),
            "the moved transpose is relaid"
        );
        assert_eq!(state.twin(mm), Some(omm));
    }

    #[test]
    fn a_mul_whose_relaid_values_differ_keeps_its_pair() {
        let (state, [tr, mul, ..]) = run_after_the_order(2.2);
        assert!(state.is_paired(mul) && !state.accounted(mul));
        assert!(state.is_paired(tr));
    }
}
