//! Ops the kind table does not list (a new aten spelling, a library's own op) still pair:
//! by dataflow, shape and place, like any other value.
//!
//! An op of no known kind cannot meet anything in the order-keeping alignment, which
//! matches kinds. Left open, it would count against coverage although its ONNX twin is
//! there. Here a TorchScript value of an unlisted op, still open after the passes before,
//! pairs with the ONNX value of its own call that is free, has its shape, is computed from
//! its producers' twins and computes its consumers' twins, when exactly one value does:
//! several would be a guess.

use super::dataflow::{computed_from_all, nearest_producer_twins};
use super::fused_nodes::{nearest_consumer_twins, placement};
use super::ops::{torch_families, vanishes_in_onnx};
use super::{consumers_of, same_shape, subtree, PairedBy, Pairer};

impl Pairer<'_> {
    pub(super) fn pair_unlisted_ops(&mut self) {
        let tv = &self.torch.values;
        let ov = &self.onnx.values;
        let consumers = consumers_of(tv);
        let open: Vec<(usize, String)> = self
            .torch_groups
            .iter()
            .flat_map(|(k, ids)| {
                self.representatives(k, ids)
                    .into_iter()
                    .map(move |id| (id, k.clone()))
            })
            .filter(|(id, _)| {
                let op = &tv[*id].op;
                torch_families(op).is_empty()
                    && !vanishes_in_onnx(op)
                    && !self.state.is_paired(*id)
                    && !self.state.accounted(*id)
            })
            .collect();
        for (t, key) in open {
            let scope: Vec<usize> = if self.onnx_has_scopes {
                subtree(&self.onnx_groups, &key)
            } else {
                (0..ov.len()).collect()
            };
            let producers = nearest_producer_twins(tv, |u| self.twin(u), t);
            let after = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            let fitting: Vec<usize> = scope
                .into_iter()
                .filter(|&c| {
                    super::is_layer_candidate(&ov[c])
                        && !self.state.is_taken(c)
                        && same_shape(&tv[t], &ov[c])
                        && computed_from_all(ov, c, &producers)
                        && placement(ov, c, &after, false) == Some(1)
                })
                .collect();
            if let [c] = fitting[..] {
                self.state.assign(t, c, PairedBy::UnlistedOp, false);
            }
        }
    }
}
