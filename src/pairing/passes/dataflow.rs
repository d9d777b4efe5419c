//! The `dataflow` pass.
//!
//! The dataflow check on finished pairs: a pair's ONNX value must be computed from the ONNX
//! twins of the values its TorchScript value was computed from.
//!
//! Order and scope place most pairs, but an optimiser that sorts the graph again (ONNX
//! Runtime's transformer optimiser, a simplifier) can put a module's query and key
//! projections in the other order, and the alignment then pairs the query's reshape with the
//! key's. Such a pair fails at every element, and the layer after it, paired the same way,
//! seems to confirm it. Structure settles it without looking at numbers: walk back from the
//! TorchScript value to its nearest paired producers; their ONNX twins must all be ancestors
//! of the ONNX value. A pair that breaks this is moved to the ONNX value of the same scope,
//! kind and shape that keeps it and is closer in value (the values choose among several);
//! when none does, it stays but is marked, and a failure there is not trusted on its own
//! (`evaluate` treats it as unconfirmed). A real fault changes numbers, not wiring, so it
//! keeps its pair.

use super::super::wiring::computed_from_all;
use super::super::wiring::nearest_producer_twins;
use super::super::{compatible, is_layer_candidate, same_shape, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// Checks every layer pair in TorchScript execution order (producers are settled before
    /// their consumers are checked), moves a pair that breaks the dataflow to an ONNX value
    /// that keeps it, and records the ones nothing repairs in `off_dataflow`.
    fn repair_dataflow(&mut self) {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        for t in self.state.paired() {
            let o = self.state.twin(t).expect("paired");
            let needed = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            if computed_from_all(ov, o, &needed) {
                // Computed from them, but maybe through a later link of their chain.
                self.prefer_direct_producers(t, o, &needed);
                continue;
            }
            // Another value of the same call, kind and shape that is computed from the right
            // producers, free or held by a later pair (which is checked in its turn).
            let candidates: Vec<usize> = ov
                .iter()
                .filter(|c| c.id != o && is_layer_candidate(c))
                .filter(|c| self.cx.onnx_keys[c.id] == self.cx.onnx_keys[o])
                .filter(|c| same_shape(&tv[t], c) && compatible(&tv[t].op, &c.op))
                .filter(|c| self.state.holder(c.id).is_none_or(|other| other > t))
                .filter(|c| computed_from_all(ov, c.id, &needed))
                .map(|c| c.id)
                .collect();
            // Only a closer value replaces the pair: layout ops commute (a Reshape and a
            // Transpose may be exported in either order), which breaks the ancestry while the
            // values still agree.
            let closer = self
                .closest_onnx(t, &candidates)
                .filter(|&(_, d)| d < self.cx.distance(t, o));
            match closer {
                Some((c, _)) => match (self.consumer_holding(t, c), self.state.holder(c)) {
                    // Its consumer's agreeing twin: that node computes both (a folded
                    // BatchNorm).
                    (Some(holder), _) => self.fuse_into_holder(t, holder),
                    (None, Some(other)) => self.state.swap(t, other),
                    (None, None) => self.state.rebind(t, c, false),
                },
                // The one value that keeps it may be held by an earlier pair of a crossed
                // chain (`crossed_chains.rs`): exchange the two.
                None => match self.crossed_earlier_holder(t, o, &needed) {
                    Some(other) => {
                        self.state.swap(t, other);
                        self.state.back_on_dataflow(other);
                    }
                    None => match self.merged_copy_of(t, &needed) {
                        Some(original) => self.mark_merged_copy(t, original),
                        // Its value is computed in a node no scope places (a residual Add
                        // inside ONNX Runtime's SkipLayerNormalization): undone, for the
                        // `scopeless` pass to place.
                        None if self.free_scopeless_keeps(t, &needed) => {
                            self.state.unassign(t);
                        }
                        None => {
                            self.state.mark_off_dataflow(t);
                        }
                    },
                },
            }
        }
    }
}

pub(super) struct Dataflow;

impl Pass for Dataflow {
    fn name(&self) -> &'static str {
        "dataflow"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.repair_dataflow();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::graphs::relu_of_the_other_branch;
    use super::super::super::tests::run_alone;
    use super::*;

    #[test]
    fn a_pair_whose_node_reads_another_branch_and_has_no_better_twin_is_marked() {
        // The only ONNX Relu of the scope is computed from the wrong branch: kept, but marked.
        let (t, o, [a, b, r, s, oa, ob, or, os]) = relu_of_the_other_branch();
        let pairs = [(a, oa), (b, ob), (r, or), (s, os)];
        let state = run_alone(&Dataflow, &t, &o, &pairs);
        assert_eq!(state.twin(r), Some(or), "no value repairs it");
        assert!(state.is_off_dataflow(r));
        assert!(!state.is_off_dataflow(s) && !state.is_off_dataflow(a));
    }
}
