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
            let reason = "its output is held by ONNX only in another arrangement (a layout \
                          node an optimiser merged; the data it passes on is compared where \
                          it is used)";
            self.state.leave(t, reason.to_string(), true);
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
