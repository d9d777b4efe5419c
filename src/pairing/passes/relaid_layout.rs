//! A computing op paired with a layout node that holds its output in another arrangement is
//! unpaired: ONNX keeps no value with the op's output as TorchScript lays it out.
//!
//! An optimiser that moves a Transpose through the Reshape after it (ONNX Runtime's
//! transpose optimiser, after a batch-first LSTM whose ONNX form is `LSTM -> Transpose ->
//! Reshape -> Transpose`) merges the closing layout ops with the ones the model applies
//! next, so the op's own arrangement is never materialised: the module's last value of its
//! shape is a Reshape that already holds the next layout. Where two dimensions are equal
//! (13 rows of 13 tokens) it has the op's shape, module scope and shape pair the two, and
//! they differ at every element while both graphs are right. The data settles it: when the
//! twin is a layout node computed, through layout nodes only, from a node of the op's kind,
//! the op's producers agree, and the twin is the op's tensor with its axes permuted (and
//! adjacent axes merged or split), element by element within what the producers carry in
//! plus rounding (`permuted_axes`), only the arrangement differs. The op is left unpaired and
//! counted as covered; its data is compared where it is used. Holding the same values in some
//! other order would not do: two swapped output channels of a Linear before a Reshape hold
//! exactly that. A fault in the op changes its values or moves elements within an axis, which
//! no permutation of axes does, so the proof fails and the pair is compared (and fails there,
//! at the right module).

use super::super::ops::{compatible, onnx_families, Family};
use super::super::permuted_axes::holds_permuted_axes;
use super::super::reason::UnpairedReason;
use super::super::relaid::{computes_nothing, nearest_paired};
use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::super::{AGREES, ROUNDING};
use super::Pass;
use std::collections::HashSet;

fn is_layout_node(op: &str) -> bool {
    onnx_families(op).contains(Family::Layout)
}

impl Pairer<'_> {
    fn unpair_relaid_outputs(&mut self) {
        let relaid: Vec<usize> = self
            .state
            .paired()
            .into_iter()
            .filter(|&t| self.is_relaid_output(t))
            .collect();
        for t in relaid {
            self.state.unassign(t);
            self.state.leave(t, UnpairedReason::RelaidOutput);
        }
    }

    /// Whether paired TorchScript value `t` computes, is apart from its twin, and the twin
    /// is a rearrangement of the output of a node of `t`'s kind: `t`'s tensor with its axes
    /// permuted.
    fn is_relaid_output(&self, t: usize) -> bool {
        let tv = &self.cx.torch.values;
        let Some(o) = self.twin(t) else {
            return false;
        };
        if computes_nothing(&tv[t])
            || !is_layout_node(&self.cx.onnx.values[o].op)
            || !self.rearranges_a_node_of_kind(o, &tv[t].op)
            || self.cx.distance(t, o) < AGREES
        {
            return false;
        }
        let (before, computed_between) = nearest_paired(
            &tv[t].inputs,
            |u| tv[u].inputs.clone(),
            |u| self.twin(u).is_some(),
            |u| !computes_nothing(&tv[u]),
        );
        let distances: Vec<f64> = before
            .iter()
            .filter_map(|&u| self.twin(u).map(|ou| self.cx.distance(u, ou)))
            .collect();
        if before.is_empty() || computed_between || distances.iter().any(|&d| d >= AGREES) {
            return false;
        }
        let carried = distances.iter().copied().fold(0.0, f64::max);
        let limit = (2.0 * carried + ROUNDING).min(AGREES);
        match (tv[t].data(), self.cx.onnx.values[o].data()) {
            (Ok(reference), Ok(test)) => holds_permuted_axes(&reference, &test, limit),
            _ => false,
        }
    }

    /// Whether ONNX value `o` is computed, through layout nodes only, from nodes that all
    /// compute what `torch_op` does (and at least one such node).
    fn rearranges_a_node_of_kind(&self, o: usize, torch_op: &str) -> bool {
        let values = &self.cx.onnx.values;
        let (mut sources, mut seen, mut stack) = (0, HashSet::new(), vec![o]);
        while let Some(v) = stack.pop() {
            // Integer inputs are a Reshape's target shape or a Gather's indices, not data.
            if !seen.insert(v) || !values[v].dtype.is_float() {
                continue;
            }
            if is_layout_node(&values[v].op) {
                stack.extend(values[v].inputs.iter().copied());
            } else if compatible(torch_op, &values[v].op) {
                sources += 1;
            } else {
                return false;
            }
        }
        sources > 0
    }
}

pub(super) struct RelaidLayout;

impl Pass for RelaidLayout {
    fn name(&self) -> &'static str {
        "relaid_layout"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        let mut p = Pairer { cx, state };
        p.unpair_relaid_outputs();
        p.unpair_relaid_layout();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::graphs::{lstm_output_rearranged, seq_first, LSTM_OUT};
    use super::super::super::tests::run_alone;
    use super::*;

    /// Runs the pass after `module_output` met the LSTM with the Reshape holding `held`;
    /// returns the state, the lstm and that Reshape.
    fn run_with_reshape_holding(held: &[f32]) -> (PairState, usize, usize) {
        let (t, o, [tl, _, tf, _, or, of]) = lstm_output_rearranged(held);
        let state = run_alone(&RelaidLayout, &t, &o, &[(tl, or), (tf, of)]);
        (state, tl, or)
    }

    #[test]
    fn an_lstm_output_onnx_holds_only_with_its_axes_permuted_is_unpaired_and_covered() {
        let (state, tl, _) = run_with_reshape_holding(&seq_first(&LSTM_OUT));
        assert!(
            !state.is_paired(tl),
            "the Reshape holds the next layout, not the lstm's"
        );
        assert!(state.accounted(tl));
    }

    #[test]
    fn other_values_or_channels_moved_within_an_axis_keep_the_pair() {
        let scaled: Vec<f32> = seq_first(&LSTM_OUT).iter().map(|v| v * 1.05).collect();
        let mut swapped = LSTM_OUT;
        for row in swapped.chunks_mut(3) {
            row.swap(0, 1);
        }
        for held in [scaled, seq_first(&swapped)] {
            let (state, tl, or) = run_with_reshape_holding(&held);
            assert_eq!(state.twin(tl), Some(or));
        }
    }
}
