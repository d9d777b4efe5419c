//! The `uncross_siblings` pass: sibling projections an optimiser reordered, uncrossed by
//! their values.

use super::super::wiring::nearest_producer_twins;
use super::super::wiring::permutations;
use super::super::wiring::SiblingKey;
use super::super::wiring::CLOSE;
use super::super::wiring::MAX_SIBLINGS;
use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;
use std::collections::HashMap;

impl Pairer<'_> {
    /// Sibling pairs (the same TorchScript op and shape, the same ONNX op, computed from the
    /// same producers' twins: a query, key and value projection) are alike to the dataflow,
    /// so an optimiser that reordered them leaves them paired crosswise, and each failure
    /// confirms the next. The values settle it: when another assignment within the siblings
    /// matches every one of them closely and the order's does not, it is taken. A real
    /// fault matches no sibling closely, so it keeps its pair.
    fn uncross_siblings(&mut self) {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let mut siblings: HashMap<SiblingKey, Vec<usize>> = HashMap::new();
        for t in self.state.paired() {
            let o = self.state.twin(t).expect("paired");
            let mut producers = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            producers.sort_unstable();
            let key = (
                tv[t].op.clone(),
                tv[t].shape.clone(),
                ov[o].op.clone(),
                producers,
            );
            siblings.entry(key).or_default().push(t);
        }
        for group in siblings.into_values() {
            if !(2..=MAX_SIBLINGS).contains(&group.len()) {
                continue;
            }
            let held: Vec<usize> = group.iter().filter_map(|&t| self.state.twin(t)).collect();
            // Selects of one input are told apart by the part each takes, whatever the values.
            if let Some(perm) = self.assignment_by_part(&group, &held) {
                self.reassign_siblings(&group, &held, &perm);
                continue;
            }
            let distance: Vec<Vec<f64>> = group
                .iter()
                .map(|&t| held.iter().map(|&o| self.cx.distance(t, o)).collect())
                .collect();
            let worst = |perm: &[usize]| {
                perm.iter()
                    .enumerate()
                    .map(|(i, &j)| distance[i][j])
                    .fold(0.0f64, f64::max)
            };
            let identity: Vec<usize> = (0..group.len()).collect();
            let best = permutations(group.len())
                .into_iter()
                .min_by(|a, b| worst(a).total_cmp(&worst(b)))
                .unwrap_or_else(|| identity.clone());
            if best != identity && worst(&best) < CLOSE && worst(&best) * 10.0 < worst(&identity) {
                self.reassign_siblings(&group, &held, &best);
            }
        }
    }

    /// Gives sibling `group[i]` the ONNX value `held[perm[i]]`; the ones that move are
    /// stamped `uncross_siblings`.
    fn reassign_siblings(&mut self, group: &[usize], held: &[usize], perm: &[usize]) {
        if perm.iter().enumerate().all(|(i, &j)| i == j) {
            return;
        }
        // Pairs that stay keep the pass that placed them, though now the values placed them;
        // the moved ones take this pass's stamp.
        for (_, &t) in group.iter().enumerate().filter(|&(i, _)| perm[i] == i) {
            self.state.doubt(t);
        }
        let moved: Vec<usize> = (0..perm.len()).filter(|&i| perm[i] != i).collect();
        for &i in &moved {
            self.state.unassign(group[i]);
        }
        for &i in &moved {
            self.state.assign(group[i], held[perm[i]], false);
        }
    }
}

pub(super) struct UncrossSiblings;

impl Pass for UncrossSiblings {
    fn name(&self) -> &'static str {
        "uncross_siblings"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.uncross_siblings();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    #[test]
    fn projections_the_order_crossed_take_the_twins_their_values_match() {
        // An optimiser put the key's Gemm first; the order gave it to the query.
        let (t, o, [q, k, oq, ok]) = graphs::sibling_projections(&[1.0, 2.0], true);
        let state = run_alone(&UncrossSiblings, &t, &o, &[(q, ok), (k, oq)]);
        for (tv, ov) in [(q, oq), (k, ok)] {
            let made = state.get(tv).expect("still paired");
            assert_eq!((made.onnx, made.by), (ov, "uncross_siblings"), "value {tv}");
        }
    }

    #[test]
    fn a_faulty_projection_that_matches_no_sibling_keeps_the_order_s_pairs() {
        let (t, o, [q, k, oq, ok]) = graphs::sibling_projections(&[1.5, 2.5], true);
        let state = run_alone(&UncrossSiblings, &t, &o, &[(q, ok), (k, oq)]);
        assert_eq!((state.twin(q), state.twin(k)), (Some(ok), Some(oq)));
    }
}
