//! The stricter half of the dataflow check: a pair whose ONNX value is computed from the right
//! producers, but not *directly* from them, while another value of its call is.
//!
//! Ancestry alone cannot tell the calls of a chain apart when each call reads a later link of
//! one chain: an optical-flow network samples every level of a pooled pyramid (level 1 is
//! pooled from level 0, level 2 from level 1, ...) with one `grid_sample` each, and ONNX
//! Runtime's saved graph runs the calls in the reverse order. The order-keeping alignment
//! then pairs the level-0 sample with the ONNX GridSample that reads level 3, and that value
//! is still computed from level 0 (through the pooling), so it passes the ancestry check.
//! What does differ is the nearest paired producers: walking back from an ONNX value through
//! unpaired ones, the paired values met first must include the twins of the TorchScript
//! value's nearest paired producers. When the pair's value breaks that and another value of
//! the same call, kind and shape keeps it and is closer in value, the pair moves there (the
//! values only choose; a real fault changes numbers, not wiring, so it keeps its pair).

use super::wiring::nearest_producer_twins;
use super::{compatible, is_layer_candidate, same_shape, Pairer};
use std::collections::BTreeSet;

impl Pairer<'_> {
    /// The paired ONNX values met first walking back from ONNX value `o` through unpaired
    /// ones (graph inputs count as paired).
    fn nearest_paired_onnx(&self, o: usize) -> BTreeSet<usize> {
        nearest_producer_twins(self.cx.onnx, |u| self.state.is_taken(u).then_some(u), o)
            .into_iter()
            .collect()
    }

    /// Whether ONNX value `o` is computed directly (through unpaired values only) from every
    /// ONNX value in `needed`. More is allowed: ONNX may also read a graph input where
    /// TorchScript traced a size as a constant.
    fn reads_directly(&self, o: usize, needed: &BTreeSet<usize>) -> bool {
        needed.is_subset(&self.nearest_paired_onnx(o))
    }

    /// For TorchScript value `t`, paired with `o` which is computed from `needed` but not
    /// directly: moves the pair to the closer value of `o`'s call, kind and shape that reads
    /// `needed` directly, free or held by a later pair (which is checked in its turn).
    pub(super) fn prefer_direct_producers(&mut self, t: usize, o: usize, needed: &[usize]) {
        let needed: BTreeSet<usize> = needed.iter().copied().collect();
        // Nothing to say without producers, or when the pair already reads them directly.
        if needed.is_empty() || self.reads_directly(o, &needed) {
            return;
        }
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let now = self.cx.distance(t, o);
        let closer = ov
            .iter()
            .filter(|c| c.id != o && is_layer_candidate(c))
            .filter(|c| self.cx.onnx_keys[c.id] == self.cx.onnx_keys[o])
            .filter(|c| same_shape(&tv[t], c) && compatible(&tv[t].op, &c.op))
            .filter(|c| self.state.holder(c.id).is_none_or(|other| other > t))
            .filter(|c| self.reads_directly(c.id, &needed))
            .map(|c| (c.id, self.cx.distance(t, c.id)))
            .filter(|&(_, d)| d < now)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((c, _)) = closer {
            match self.state.holder(c) {
                Some(other) => self.state.swap(t, other),
                None => self.state.rebind(t, c, false),
            }
        }
    }
}
