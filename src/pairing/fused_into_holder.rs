//! A pair off the dataflow whose one closer value is its own consumer's agreeing twin: the
//! node that holds that value computes both, so the value is fused into it, not taken.
//!
//! A simplifier folds each BatchNorm into the Conv before it, so in a graph without scopes
//! one Conv node holds the BatchNorm's output and no node holds the conv's. The global order
//! can still give the conv a Conv of its shape from a parallel branch (a residual block's
//! downsample, which the simplifier sorted before the main branch). The dataflow check then
//! finds the conv off its wiring and moves it to the closest value computed from its
//! producers' twins: the folded node, which its BatchNorm holds and agrees with. Taking it
//! crosses every pair after it (the BatchNorm, pushed off its twin, takes the next block's
//! Conv in its turn). When the value's closer candidate is held by a pair that agrees with
//! it, and that pair's TorchScript value is computed from `t` through unpaired values only,
//! the node computes `t` on the way to its consumer: `t` is fused into it, covered, and the
//! value it held is left to the passes after. A fault in the folded conv makes the consumer
//! disagree, so the rule does not fire and the pair is judged as before.

use super::wiring::nearest_producer_twins;
use super::{Pairer, AGREES};

impl Pairer<'_> {
    /// The consumer of `t` that holds ONNX value `c` and agrees with it, while `t` does not:
    /// `c`'s node computes `t` on the way to that consumer (a Conv with its BatchNorm folded).
    pub(super) fn consumer_holding(&self, t: usize, c: usize) -> Option<usize> {
        let holder = self.state.holder(c)?;
        // `t` is paired, so it is among the holder's nearest paired producers exactly when
        // its twin is among theirs (one value per twin), read through unpaired values only.
        let own = self.twin(t)?;
        let fused = holder > t
            && self.cx.distance(holder, c) < AGREES
            && self.cx.distance(t, c) > AGREES
            && nearest_producer_twins(self.cx.torch, |u| self.twin(u), holder).contains(&own);
        fused.then_some(holder)
    }

    /// Unpairs `t`, fused into the ONNX node its consumer `holder` is paired with.
    pub(super) fn fuse_into_holder(&mut self, t: usize, holder: usize) {
        self.state.unassign(t);
        let module = self.cx.torch.values[holder].module_path().to_string();
        self.fuse_into_consumer_node(t, holder, &module);
    }
}
