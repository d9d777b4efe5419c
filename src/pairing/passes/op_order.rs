//! The `op_order` pass: the functional ops of a scope with child modules, aligned by
//! compatible kind, shape and order.

use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// The functional ops of a scope with child modules (or the top level) pair with the
    /// ONNX values of the same scope by compatible kind, shape and order.
    fn pair_ops_in_scope(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        let groups = self.op_groups();
        for (key, t_ids) in groups {
            let o_ids = self.cx.onnx_groups.get(&key).cloned().unwrap_or_default();
            if o_ids.is_empty() {
                self.leave_group(&key, &t_ids);
                continue;
            }
            // A value an earlier pass paired (a split's piece) is no place in the order.
            let mut o_ids: Vec<usize> = o_ids
                .into_iter()
                .filter(|&o| !self.state.is_taken(o))
                .collect();
            // The order the exporter wrote them in, where a graph tool sorted them again.
            // Rebuilt from names, that order can still interleave two chains of one family
            // (`x - w`, `x + w`) differently from TorchScript: there an op meets a node of
            // another type of its family only where the scope has none of its own type.
            let resorted = if let Some(ranks) = &self.cx.onnx_export_ranks {
                o_ids.sort_by_key(|&o| ranks[o]);
                true
            } else {
                false
            };
            let reps = self.representatives(&key, &t_ids);
            for (t, o, certain) in self.align_by_order(&reps, &o_ids, resorted) {
                self.state.assign(t, o, certain);
            }
            self.explain_in_scope(&key, &t_ids);
        }
    }
}

pub(super) struct OpOrder;

impl Pass for OpOrder {
    fn name(&self) -> &'static str {
        "op_order"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_ops_in_scope();
    }
}
