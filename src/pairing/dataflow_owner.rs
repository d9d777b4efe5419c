//! An ONNX value whose pair breaks the dataflow, handed to the TorchScript value of the same
//! call whose dataflow it follows.
//!
//! The order-keeping alignment chooses which TorchScript value takes an ONNX value, and when
//! the ONNX side lost one of two alike ops it can choose the wrong one: ONNX Runtime's
//! extended level fuses a block's second residual Add into the next `SkipLayerNormalization`,
//! so the block keeps one Add node, and the alignment, preferring the latest pair, gives it
//! to the second residual `add` (the `x + mlp(x)`) while it computes the first (`x +
//! attn(x)`). The dataflow pass can only move a pair to another ONNX value, and there is
//! none, so the pair stays, off the dataflow, and is reported as a doubtful failure at 0.3 of
//! range on a clean model. Here structure settles it from the other side: when exactly one
//! other TorchScript value of the same call, still open, of a compatible kind and shape, is
//! what the ONNX value is computed from (its producers' twins are the ONNX value's
//! ancestors) and what its consumers' twins are computed from, the ONNX value is its twin.
//! The value that lost it is left to the passes after (a fused node covers it). No number
//! is read, so a real fault, which changes numbers and not wiring, cannot move a pair.

use super::dataflow::{computed_from_all, nearest_producer_twins};
use super::fused_nodes::{nearest_consumer_twins, placement};
use super::ops::compatible;
use super::{consumers_of, same_shape, PairedBy, Pairer};

impl Pairer<'_> {
    pub(super) fn hand_over_by_dataflow(&mut self) {
        let mut off: Vec<usize> = self.state.off_dataflow.iter().copied().collect();
        off.sort_unstable();
        let mut moved = false;
        for t in off {
            let Some(o) = self.state.twin(t) else {
                continue;
            };
            let [owner] = self.dataflow_owners(t, o)[..] else {
                continue;
            };
            self.state.unassign(t);
            self.state.off_dataflow.remove(&t);
            let reason = format!(
                "its ONNX twin by order, {}, follows the dataflow of another value of its call",
                self.onnx.values[o].node
            );
            self.state.reason.insert(t, (reason, false));
            // The wiring leaves no other choice, but a node an optimiser added has no scope
            // of its own to vouch for it.
            let certain = self.onnx.values[o].scope_recorded;
            self.state
                .assign(owner, o, PairedBy::DataflowOwner, certain);
            moved = true;
        }
        if moved {
            self.recheck_off_dataflow();
        }
    }

    /// The open TorchScript values of `t`'s call that ONNX value `o` could be the twin of by
    /// kind, shape and wiring on both sides, looking through `t` as if it were unpaired.
    fn dataflow_owners(&self, t: usize, o: usize) -> Vec<usize> {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let Some((key, ids)) = self.torch_groups.iter().find(|(_, ids)| ids.contains(&t)) else {
            return Vec::new();
        };
        let twin = |v: usize| if v == t { None } else { self.twin(v) };
        let consumers = consumers_of(tv);
        self.representatives(key, ids)
            .into_iter()
            .filter(|&u| u != t && !self.state.is_paired(u) && !self.state.accounted(u))
            .filter(|&u| !self.state.undone.contains(&(u, o)))
            .filter(|&u| same_shape(&tv[u], &ov[o]) && compatible(&tv[u].op, &ov[o].op))
            .filter(|&u| {
                let needed = nearest_producer_twins(self.torch, twin, u);
                computed_from_all(ov, o, &needed) && !self.nearer_free_twin(u, o, &needed)
            })
            .filter(|&u| {
                let after = nearest_consumer_twins(&consumers, twin, u);
                placement(ov, o, &after, false) == Some(1)
            })
            .collect()
    }

    /// Whether a free ONNX value of `o`'s call, of TorchScript value `u`'s kind and shape,
    /// lies between `u`'s producers' twins `needed` and `o`: computed from all of them, and
    /// an ancestor of `o`. Ancestry lets every later link of a chain pass for `u`'s twin
    /// (`a + b + c` is computed from `a` and `b` too); the nearest such value is the one
    /// that computes what `u` computes, and `o` belongs to a value further down.
    fn nearer_free_twin(&self, u: usize, o: usize, needed: &[usize]) -> bool {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let Some(group) = self.onnx_keys[o]
            .as_ref()
            .and_then(|k| self.onnx_groups.get(k))
        else {
            return false;
        };
        group.iter().any(|&c| {
            c < o
                && !self.state.is_taken(c)
                && same_shape(&tv[u], &ov[c])
                && compatible(&tv[u].op, &ov[c].op)
                && computed_from_all(ov, c, needed)
                && computed_from_all(ov, o, &[c])
        })
    }

    /// Pairs marked off the dataflow because of a pair that has since moved: those whose
    /// ONNX value now follows their producers' twins are on it again.
    fn recheck_off_dataflow(&mut self) {
        let ov = &self.onnx.values;
        let still: Vec<usize> = self
            .state
            .off_dataflow
            .iter()
            .copied()
            .filter(|&t| {
                self.state.twin(t).is_some_and(|o| {
                    !computed_from_all(
                        ov,
                        o,
                        &nearest_producer_twins(self.torch, |u| self.twin(u), t),
                    )
                })
            })
            .collect();
        self.state.off_dataflow = still.into_iter().collect();
    }
}
