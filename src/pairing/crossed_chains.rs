//! Two chains of one call that an optimiser ran in the other order, uncrossed by their wiring
//! where the first link of one chain left nothing to check it against.
//!
//! ONNX Runtime saves its optimised graphs sorted again, and independent chains of one scope
//! can come out in the other order: a detector clips a box's x and y coordinates with a
//! `max` and a `min` each, and the saved graph runs the y chain first. The order-keeping
//! alignment then pairs the x chain's `max` with the y chain's Max. When the slice that
//! starts each chain has no twin (ONNX Runtime merged or reordered it), the x `max`'s nearest
//! paired producer is the boxes both chains read, so its crossed pair passes the dataflow
//! check; the y `max`, checked later, does not, and its one structural candidate is held by
//! that earlier pair, which the dataflow pass does not take from. Here it does: when the
//! earlier holder still follows the dataflow on the ONNX value the later one leaves, the two
//! exchange their ONNX values, both then follow it, and the chains' next links, checked in
//! their turn, follow. Only the later value's dataflow, which a fault does not change, starts
//! it; the values only choose when several such holders exist and must favour the exchange.

use super::ops::compatible;
use super::wiring::{computed_from_all, nearest_producer_twins};
use super::{is_layer_candidate, same_shape, Pairer};

impl Pairer<'_> {
    /// The earlier-paired TorchScript value whose ONNX value `t` (paired with `o`, off the
    /// dataflow, whose producers' twins are `needed`) should take in exchange for `o`: its
    /// ONNX value is of `o`'s call, kind and shape and computed from `needed`, it is not a
    /// certain pair, it still follows the dataflow on `o`, and the exchange brings `t`
    /// closer in value. The closest for `t` among several.
    pub(super) fn crossed_earlier_holder(
        &self,
        t: usize,
        o: usize,
        needed: &[usize],
    ) -> Option<usize> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let now = self.cx.distance(t, o);
        ov.iter()
            .filter(|c| c.id != o && is_layer_candidate(c))
            .filter(|c| self.cx.onnx_keys[c.id] == self.cx.onnx_keys[o])
            .filter(|c| same_shape(&tv[t], c) && compatible(&tv[t].op, &c.op))
            .filter_map(|c| Some((c.id, self.state.holder(c.id)?)))
            .filter(|&(_, other)| other < t)
            .filter(|&(_, other)| self.state.get(other).is_some_and(|m| !m.certain))
            .filter(|&(_, other)| {
                same_shape(&tv[other], &ov[o]) && compatible(&tv[other].op, &ov[o].op)
            })
            .filter(|&(c, _)| computed_from_all(ov, c, needed))
            .filter(|&(_, other)| {
                let theirs = nearest_producer_twins(self.cx.torch, |u| self.twin(u), other);
                computed_from_all(ov, o, &theirs)
            })
            .map(|(c, other)| (other, self.cx.distance(t, c)))
            .filter(|&(_, d)| d < now)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(other, _)| other)
    }
}
