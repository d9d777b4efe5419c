//! A layout op paired with an ONNX value that holds the same data in another arrangement is
//! unpaired: ONNX merged its arrangement into another layout op.
//!
//! A transpose followed by another transpose (a key's `transpose(1, 2)` and the attention's
//! `transpose(-2, -1)`) is one Transpose in ONNX, and when two dimensions happen to be equal
//! (a sequence of 16 tokens, a head of 16 channels) it has the TorchScript value's shape, so
//! order and shape pair the two. Their values then differ at every element while both graphs
//! are right. A layout op computes nothing, so values settle it: when the pair's producers
//! agree and the values its consumers read agree, yet the pair itself does not, the data is
//! right and only its arrangement has no ONNX twin. Such a value is left unpaired, counted
//! as covered (its data is compared where it is used). Consumers that merely agree within
//! `AGREES` prove little: a small fault in the twin's own op (an attention's projection)
//! reaches its consumers under that bound, and a fault after the layout op makes them
//! disagree. So the pair is relaid when its twin holds the same values in another order
//! (`rearranged`), or when its consumers agree `MARGIN` times better than it does. A wrong
//! permutation in the export is not hidden: the values it feeds disagree, and the first of
//! them fails.

use super::ops::{is_bookkeeping, onnx_families, torch_families, vanishes_in_onnx, Family};
use super::rearranged::holds_same_values;
use super::reason::UnpairedReason;
use super::{consumers_of, Pairer};
use super::{AGREES, ROUNDING};
use crate::capture::CapturedValue;
use std::collections::HashSet;

/// How much closer than a relaid pair its consumers must agree for their agreement to show
/// the pair's difference is arrangement, not error (rounding is far below this; error
/// carried from the pair into its consumers is not).
const MARGIN: f64 = 100.0;

/// The nearest values in `next(t)` direction that `has_twin` accepts, looking through the
/// others; and whether one looked through computes data (`computes` says).
pub(super) fn nearest_paired(
    start: &[usize],
    next: impl Fn(usize) -> Vec<usize>,
    has_twin: impl Fn(usize) -> bool,
    computes: impl Fn(usize) -> bool,
) -> (Vec<usize>, bool) {
    let (mut found, mut seen, mut crossed) = (Vec::new(), HashSet::new(), false);
    let mut stack = start.to_vec();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if has_twin(v) {
            found.push(v);
        } else {
            crossed |= computes(v);
            stack.extend(next(v));
        }
    }
    (found, crossed)
}

/// Whether TorchScript value `t` computes no data: a layout op, one that vanishes from ONNX
/// (an identity in eval mode), or shape bookkeeping (the sizes a reshape reads).
pub(super) fn computes_nothing(t: &CapturedValue) -> bool {
    torch_families(&t.op).is_only(Family::Layout) || vanishes_in_onnx(&t.op) || is_bookkeeping(t)
}

fn is_layout(t: &CapturedValue, o: &CapturedValue) -> bool {
    torch_families(&t.op).is_only(Family::Layout) && onnx_families(&o.op).contains(Family::Layout)
}

impl Pairer<'_> {
    pub(super) fn unpair_relaid_layout(&mut self) {
        let consumers = consumers_of(&self.cx.torch.values);
        // Every uncertain layout pair is weighed by `is_apart_layout`.
        let layout_pairs: Vec<(usize, usize)> = self
            .state
            .paired()
            .into_iter()
            .filter_map(|t| self.state.get(t).map(|made| (t, made)))
            .filter(|(t, made)| {
                !made.certain
                    && is_layout(&self.cx.torch.values[*t], &self.cx.onnx.values[made.onnx])
            })
            .map(|(t, made)| (t, made.onnx))
            .collect();
        self.cx.prefetch_distances(layout_pairs);
        let relaid: Vec<usize> = self
            .state
            .paired()
            .into_iter()
            .filter(|&t| self.is_relaid_layout(t, &consumers))
            .collect();
        for t in relaid {
            self.state.unassign(t);
            self.state.leave(t, UnpairedReason::RelaidLayout);
        }
    }

    /// Whether paired TorchScript value `t` is a layout op that differs from its twin while
    /// the values around it agree.
    fn is_relaid_layout(&self, t: usize, consumers: &[Vec<usize>]) -> bool {
        let tv = &self.cx.torch.values;
        if !self.is_apart_layout(t) {
            return false;
        }
        // A chain of layout ops ONNX arranged in another order (a key's view, permute, view
        // and transpose, met by shape with Reshape/Transpose nodes of other arrangements)
        // leaves several such pairs in a row, each seeming to confirm the next: look through
        // them to the values the chain starts from and feeds.
        let has_twin = |u: usize| self.twin(u).is_some() && !self.is_apart_layout(u);
        let agrees = |u: usize| {
            self.twin(u)
                .is_some_and(|o| self.cx.distance(u, o) < AGREES)
        };
        let (before, computed_between) = nearest_paired(
            &tv[t].inputs,
            |u| tv[u].inputs.clone(),
            has_twin,
            |u| !computes_nothing(&tv[u]),
        );
        let (after, _) =
            nearest_paired(&consumers[t], |v| consumers[v].clone(), has_twin, |_| false);
        // The twin holding the value's own data in another order proves the arrangement is
        // all that differs, whatever happens downstream, but only when nothing between the
        // agreeing producers and the pair computes: an uncompared op there (a projection
        // internal to its module, where a fault may sit) can itself reorder the data, and a
        // channel swap in it leaves exactly "the same values in another order". Without
        // that proof, the values it feeds settle it only when they agree far better than
        // the pair itself does: a fault after the pair (or in its twin's op) leaves its
        // consumers about as far apart as the pair, while a mere rearrangement leaves them
        // at rounding.
        let carried = before
            .iter()
            .filter_map(|&u| self.twin(u).map(|o| self.cx.distance(u, o)))
            .fold(0.0, f64::max);
        !before.is_empty()
            && before.iter().all(|&u| agrees(u))
            && ((!computed_between && self.twin_holds_same_values(t, carried))
                || (!after.is_empty() && after.iter().all(|&v| self.agrees_far_better(v, t))))
    }

    /// Whether paired TorchScript value `t`'s twin holds the same values as `t`. A layout op
    /// adds no error of its own, so its values may differ only by what its producers
    /// carry in (`carried`, their worst distance), plus rounding.
    fn twin_holds_same_values(&self, t: usize, carried: f64) -> bool {
        let Some(o) = self.twin(t) else {
            return false;
        };
        let limit = (2.0 * carried).clamp(ROUNDING, AGREES);
        match (
            self.cx.torch.values[t].data(),
            self.cx.onnx.values[o].data(),
        ) {
            (Ok(reference), Ok(test)) => holds_same_values(&reference, &test, limit),
            _ => false,
        }
    }

    /// Whether paired value `v` agrees with its twin, and by at least `MARGIN` times less
    /// than paired value `t` differs from its own.
    fn agrees_far_better(&self, v: usize, t: usize) -> bool {
        let (Some(ov), Some(ot)) = (self.twin(v), self.twin(t)) else {
            return false;
        };
        let d = self.cx.distance(v, ov);
        d < AGREES && d * MARGIN <= self.cx.distance(t, ot)
    }

    /// Whether paired TorchScript value `t` is a layout op that no structure made certain
    /// and whose twin holds other data.
    fn is_apart_layout(&self, t: usize) -> bool {
        self.state.get(t).is_some_and(|made| {
            !made.certain
                && is_layout(&self.cx.torch.values[t], &self.cx.onnx.values[made.onnx])
                && self.cx.distance(t, made.onnx) >= AGREES
        })
    }
}
