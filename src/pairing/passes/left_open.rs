//! The `left_open` pass.
//!
//! Values the passes before left open still pair: by dataflow, shape and place, like any
//! other value.
//!
//! Two kinds of value reach this pass without a twin. An op the kind table does not list (a
//! new aten spelling, a library's own op) cannot meet anything in the order-keeping
//! alignment, which matches kinds. And an op the table lists can lose its place in that
//! alignment when two independent chains of one scope run in another order on each side (a
//! simplifier that sorts the graph again interleaves a query's and a key's rotary
//! arithmetic): an alignment that keeps order pairs one chain and leaves the other open.
//! Left open, either would count against coverage although its ONNX twin is there. Here a
//! TorchScript value still open pairs with the ONNX value of its own call that is free, has
//! its shape, is of a compatible kind (for an op the table does not list, which has no kind:
//! agrees with it in value), is computed from its producers' twins and computes its
//! consumers' twins. When several do (a
//! query's rotary product and the attention's scaling of it both lie between the same
//! paired values), the values choose, and only a clear choice: the closest must be nearer
//! than half the distance of the next, or the value stays open rather than guessed. Values
//! are visited in execution order, so a chain pairs link by link, each link's producer
//! settled before it.

use super::super::clearly_closest::UNLISTED_AGREE;
use super::super::fused_nodes::{nearest_consumer_twins, placement};
use super::super::ops::{compatible, torch_families, vanishes_in_onnx};
use super::super::wiring::{computed_from_all, nearest_producer_twins};
use super::super::{consumers_of, same_shape, subtree, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    fn pair_left_open(&mut self) {
        let tv = &self.cx.torch.values;
        let ov = &self.cx.onnx.values;
        let consumers = consumers_of(tv);
        let mut open: Vec<(usize, String)> = self
            .cx
            .torch_groups
            .iter()
            .flat_map(|(k, ids)| {
                self.representatives(k, ids)
                    .into_iter()
                    .map(move |id| (id, k.clone()))
            })
            .filter(|(id, _)| {
                !vanishes_in_onnx(&tv[*id].op)
                    && !self.state.is_paired(*id)
                    && !self.state.accounted(*id)
            })
            .collect();
        open.sort_unstable();
        for (t, key) in open {
            let scope: Vec<usize> = if self.cx.onnx_has_scopes {
                subtree(&self.cx.onnx_groups, &key)
            } else {
                (0..ov.len()).collect()
            };
            let listed = !torch_families(&tv[t].op).is_empty();
            let producers = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            let after = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            let fitting: Vec<usize> = scope
                .into_iter()
                .filter(|&c| {
                    super::super::is_layer_candidate(&ov[c])
                        && !self.state.is_taken(c)
                        && !self.state.was_undone(t, c)
                        && same_shape(&tv[t], &ov[c])
                        && (!listed || compatible(&tv[t].op, &ov[c].op))
                        && computed_from_all(ov, c, &producers)
                        && placement(ov, c, &after, false) == Some(1)
                        // Last: it reads both tensors, maybe back from the spill file.
                        && (listed || self.cx.distance(t, c) < UNLISTED_AGREE)
                })
                .collect();
            if let Some(c) = self.clearly_closest(t, &fitting) {
                self.state.assign(t, c, false);
            }
        }
    }
}

pub(super) struct LeftOpen;

impl Pass for LeftOpen {
    fn name(&self) -> &'static str {
        "left_open"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_left_open();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::graphs::unlisted_op_between_listed_ones;
    use super::super::super::tests::run_alone;
    use super::*;

    #[test]
    fn an_op_no_kind_table_lists_pairs_by_dataflow_with_the_free_value_between_its_twins() {
        let (t, o, [c, odd, r, oc, oodd, or]) = unlisted_op_between_listed_ones();
        let state = run_alone(&LeftOpen, &t, &o, &[(c, oc), (r, or)]);
        let made = state.get(odd).expect("the unlisted op is compared");
        assert_eq!((made.onnx, made.by), (oodd, "left_open"));
        assert!(!made.certain, "the values chose it");
    }
}
