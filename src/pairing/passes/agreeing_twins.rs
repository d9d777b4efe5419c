//! Crossed chains of one call repaired by their values: a pair that fails moves to the
//! value of its call that structure allows and that agrees with it.
//!
//! Two chains of one scope with the same ops and shapes (a query's and a key's rotary
//! arithmetic) that an optimiser runs in the other order are paired crosswise by the
//! order-keeping alignment, and where the optimiser also moved a Transpose below an
//! elementwise op (ONNX Runtime's transpose optimiser computes `transpose(x * cos)` for
//! `transpose(x) * cos`) the wiring check cannot tell the chains apart either: both read the
//! same projections. Every crossed link then fails at about 1.0 of range, and each seems to
//! confirm the next. Here, in execution order (producers settle first), a pair that is not
//! certain and does not agree, or a value still open, moves to (takes) the ONNX value of its
//! own call that is free or held by another such pair, has its shape, is of its kind (or is a layout node right after a
//! node of its kind: the moved Transpose holds the value), is computed from its producers'
//! twins (or from their inputs, when a twin is a layout node the optimiser moved) and agrees
//! with it closely; the value that held it is left open for the passes after. A real fault
//! agrees with no value, so it keeps its pair and fails where it is.

use super::super::ops::{compatible, onnx_families, torch_families, Family};
use super::super::reason::UnpairedReason;
use super::super::wiring::{computed_from_all, nearest_producer_twins};
use super::super::AGREES;
use super::super::{is_layer_candidate, same_shape, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;
use crate::capture::CapturedValue;

/// The data inputs of ONNX value `o` (not its shape or index operands).
fn data_inputs(ov: &[CapturedValue], o: usize) -> Vec<usize> {
    ov[o]
        .inputs
        .iter()
        .copied()
        .filter(|&u| u < ov.len() && u != o && is_layer_candidate(&ov[u]))
        .collect()
}

fn is_layout(ov: &[CapturedValue], o: usize) -> bool {
    onnx_families(&ov[o].op).contains(Family::Layout)
}

impl Pairer<'_> {
    fn repair_by_agreement(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        let groups = self.op_groups();
        // Every uncertain pair of a representative is weighed first.
        let weighed: Vec<(usize, usize)> = groups
            .iter()
            .filter(|(key, _)| self.cx.onnx_groups.contains_key(key))
            .flat_map(|(key, ids)| self.representatives(key, ids))
            .filter_map(|t| self.state.get(t).map(|made| (t, made)))
            .filter(|(_, made)| !made.certain)
            .map(|(t, made)| (t, made.onnx))
            .collect();
        self.cx.prefetch_distances(weighed);
        for (key, ids) in groups {
            let Some(o_ids) = self.cx.onnx_groups.get(&key).cloned() else {
                continue;
            };
            // A second round gives a value whose twin a later value took back its own.
            for _ in 0..2 {
                for t in self.representatives(&key, &ids) {
                    if let Some(c) = self.agreeing_twin(t, &o_ids) {
                        self.move_to_agreeing(t, c);
                    }
                }
            }
        }
    }

    /// The ONNX value of `o_ids` that TorchScript value `t` should hold instead of its
    /// failing twin, if exactly one clearly fits.
    fn agreeing_twin(&self, t: usize, o_ids: &[usize]) -> Option<usize> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let held = match self.state.get(t) {
            Some(made) if made.certain || self.cx.distance(t, made.onnx) < AGREES => return None,
            Some(made) => Some(made.onnx),
            None if self.state.accounted(t) => return None,
            None => None,
        };
        let movable = |c: usize| match self.state.holder(c) {
            None => !self.state.is_taken(c),
            Some(other) => self
                .state
                .get(other)
                .is_some_and(|m| !m.certain && self.cx.distance(other, c) >= AGREES),
        };
        let kind = |c: usize| {
            compatible(&tv[t].op, &ov[c].op)
                || (is_layout(ov, c)
                    && matches!(data_inputs(ov, c)[..], [d] if compatible(&tv[t].op, &ov[d].op)))
        };
        // A producer's twin that is a layout node may have been moved below this value:
        // the value is then computed from that node's inputs instead.
        let needed: Vec<usize> = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t)
            .into_iter()
            .flat_map(|n| {
                if is_layout(ov, n) {
                    data_inputs(ov, n)
                } else {
                    vec![n]
                }
            })
            .collect();
        let candidates: Vec<usize> = o_ids
            .iter()
            .copied()
            .filter(|&c| {
                Some(c) != held
                    && is_layer_candidate(&ov[c])
                    && !self.state.was_undone(t, c)
                    && same_shape(&tv[t], &ov[c])
                    && kind(c)
                    && movable(c)
                    && computed_from_all(ov, c, &needed)
            })
            .collect();
        self.clearly_closest(t, &candidates)
            .filter(|&c| self.cx.distance(t, c) < AGREES)
    }

    /// Moves `t`'s pair to `c`; the value that held `c` is left open.
    fn move_to_agreeing(&mut self, t: usize, c: usize) {
        if let Some(other) = self.state.holder(c) {
            self.state.unassign(other);
            self.state.back_on_dataflow(other);
            // A layout op left without a twin computes nothing to compare (the optimiser
            // merged it into another); any other value counts as missing.
            let layout = torch_families(&self.cx.torch.values[other].op).contains(Family::Layout);
            let reason = UnpairedReason::TwinAgreesElsewhere {
                node: self.cx.onnx.values[c].node.clone(),
                layout,
            };
            self.state.leave(other, reason);
        }
        self.state.back_on_dataflow(t);
        self.state.rebind(t, c, false);
    }
}

pub(super) struct AgreeingTwins;

impl Pass for AgreeingTwins {
    fn name(&self) -> &'static str {
        "agreeing_twins"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.repair_by_agreement();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    /// Runs the pass on `transposes_moved_below_muls(key_factor)` after the pairs the order
    /// and the dataflow pass leave (the projections and the transposes; the muls have no
    /// Mul of their shape). Returns the state, the two muls and their Transposes.
    fn run_after_the_transposes(key_factor: f32) -> (PairState, [usize; 4]) {
        let (t, o, ids) = graphs::transposes_moved_below_muls(key_factor);
        let [tq, tk, tqt, tkt, tqm, tkm, oq, ok, _, okmt, okt, _, oqmt, oqt] = ids;
        let earlier = [(tq, oq), (tk, ok), (tqt, oqt), (tkt, okt)];
        let state = run_alone(&AgreeingTwins, &t, &o, &earlier);
        (state, [tqm, tkm, oqmt, okmt])
    }

    #[test]
    fn an_open_mul_takes_the_transpose_moved_below_it_that_agrees_with_it() {
        let (state, [tqm, tkm, oqmt, okmt]) = run_after_the_transposes(2.0);
        for (tv, ov) in [(tqm, oqmt), (tkm, okmt)] {
            let made = state
                .get(tv)
                .unwrap_or_else(|| panic!("value {tv} is compared"));
            assert_eq!((made.onnx, made.by), (ov, "agreeing_twins"), "value {tv}");
            assert!(!made.certain);
        }
    }

    #[test]
    fn a_mul_no_value_agrees_with_stays_open() {
        // The key's Mul is faulted: its Transpose no longer agrees with the key's mul.
        let (state, [tqm, tkm, oqmt, _]) = run_after_the_transposes(2.3);
        assert_eq!(state.twin(tqm), Some(oqmt), "the query's chain is clean");
        assert!(!state.is_paired(tkm), "a fault agrees with no value");
    }
}
