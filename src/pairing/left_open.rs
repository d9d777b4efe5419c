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

use super::dataflow::{computed_from_all, nearest_producer_twins};
use super::fused_nodes::{nearest_consumer_twins, placement};
use super::ops::{compatible, torch_families, vanishes_in_onnx};
use super::{consumers_of, same_shape, subtree, PairedBy, Pairer};

/// An op the table does not list has no kind to check, so shape and wiring alone could meet
/// an unrelated value of the same shape (a vector norm met a Transpose of the other
/// operand): its twin must also agree in value, closer than this relative distance. A fault
/// in such an op leaves it open and shows at the next compared layer.
const UNLISTED_AGREE: f64 = 1e-2;

/// How much nearer in value the chosen candidate must be than the next one.
const CLEAR_MARGIN: f64 = 0.5;

impl Pairer<'_> {
    pub(super) fn pair_left_open(&mut self) {
        let tv = &self.torch.values;
        let ov = &self.onnx.values;
        let consumers = consumers_of(tv);
        let mut open: Vec<(usize, String)> = self
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
            let scope: Vec<usize> = if self.onnx_has_scopes {
                subtree(&self.onnx_groups, &key)
            } else {
                (0..ov.len()).collect()
            };
            let listed = !torch_families(&tv[t].op).is_empty();
            let producers = nearest_producer_twins(self.torch, |u| self.twin(u), t);
            let after = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            let fitting: Vec<usize> = scope
                .into_iter()
                .filter(|&c| {
                    super::is_layer_candidate(&ov[c])
                        && !self.state.is_taken(c)
                        && !self.state.undone.contains(&(t, c))
                        && same_shape(&tv[t], &ov[c])
                        && (!listed || compatible(&tv[t].op, &ov[c].op))
                        && computed_from_all(ov, c, &producers)
                        && placement(ov, c, &after, false) == Some(1)
                        // Last: it reads both tensors, maybe back from the spill file.
                        && (listed || self.distance(t, c) < UNLISTED_AGREE)
                })
                .collect();
            if let Some(c) = self.clearly_closest(t, &fitting) {
                self.state.assign(t, c, PairedBy::LeftOpen, false);
            }
        }
    }

    /// The one candidate, or among several the one whose value is clearly the closest to
    /// TorchScript value `t`'s. A fault in `t`'s own op moves its twin away too, but
    /// usually less than another computation's value lies: past the margin, `t` stays open
    /// and its consumers' pairs still show the fault.
    pub(super) fn clearly_closest(&self, t: usize, candidates: &[usize]) -> Option<usize> {
        match candidates {
            [] => None,
            [only] => Some(*only),
            _ => {
                let mut by_distance: Vec<(usize, f64)> = candidates
                    .iter()
                    .map(|&c| (c, self.distance(t, c)))
                    .collect();
                by_distance.sort_by(|a, b| a.1.total_cmp(&b.1));
                let (best, nearest) = by_distance[0];
                let next = by_distance[1].1;
                (nearest.is_finite() && nearest < CLEAR_MARGIN * next).then_some(best)
            }
        }
    }
}
