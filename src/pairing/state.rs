//! The pairing state the passes share: which TorchScript value is paired with which ONNX
//! value, by which pass and how certainly, and what every value left over is accounted as.
//!
//! Every field is private: passes change pairs only through `assign`, `unassign`, `rebind`
//! and `swap`, so the torch→onnx map and its reverse cannot disagree, and the side tables
//! (reasons, fused values, values off the dataflow) only through their own mutators. The
//! runner names the pass that is running (`begin_pass`); every pair is stamped with it, so
//! a pair's `paired_by` is the pass that last placed it by construction. Debug builds check
//! the invariants (`check`) after every pass.

use super::reason::UnpairedReason;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The `paired_by` of the graph inputs and outputs, paired by position before the passes.
pub const POSITION: &str = "position";

/// One layer pair as a pass made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Made {
    pub onnx: usize,
    /// The pass that placed it (`passes::Pass::name`).
    pub by: &'static str,
    /// Whether structure alone placed it: exactly one plausible ONNX value (an exact module
    /// call with one value of its kind and shape, or the only candidate between its
    /// neighbours in the order). A pair the values chose among several is not certain.
    pub certain: bool,
}

#[derive(Debug, Default)]
pub(super) struct PairState {
    pairs: HashMap<usize, Made>,
    holder: HashMap<usize, usize>,
    /// ONNX values of the graph inputs and outputs: taken, though not layer pairs.
    boundary: HashSet<usize>,
    /// TorchScript values left unpaired, with the reason (which says whether they still
    /// count as covered: fused into a compared value, identity in eval mode, internal to a
    /// call).
    reason: HashMap<usize, UnpairedReason>,
    /// TorchScript values compared as part of a pair (the conv of a fused conv+bn).
    fused_into: HashMap<usize, Vec<usize>>,
    /// ONNX values inside a compared module call (a decomposition's first nodes, a loop's
    /// unrolled iterations): covered, though not compared themselves.
    absorbed: HashMap<usize, String>,
    /// TorchScript values whose pair breaks the dataflow (see the `dataflow` pass).
    off_dataflow: HashSet<usize>,
    /// TorchScript layout values equal to their input (see `identities`): not aligned.
    identities: HashSet<usize>,
    /// Pairs a pass undid or moved away from (a Linear met with its bias-less MatMul):
    /// a later pass that fills what is left open does not make them again.
    undone: HashSet<(usize, usize)>,
    /// The pass running now: the stamp of the pairs it makes.
    pass: &'static str,
}

impl PairState {
    pub fn new(boundary_onnx: impl IntoIterator<Item = usize>) -> Self {
        PairState {
            boundary: boundary_onnx.into_iter().collect(),
            ..Default::default()
        }
    }

    /// Names the pass that runs from now on; the runner calls it, never a pass.
    pub fn begin_pass(&mut self, name: &'static str) {
        self.pass = name;
    }

    /// Pairs unpaired TorchScript value `t` with free ONNX value `o`, stamped with the pass
    /// that is running.
    pub fn assign(&mut self, t: usize, o: usize, certain: bool) {
        debug_assert!(!self.pairs.contains_key(&t), "value {t} is paired already");
        debug_assert!(!self.is_taken(o), "ONNX value {o} is taken already");
        let by = self.pass;
        self.pairs.insert(
            t,
            Made {
                onnx: o,
                by,
                certain,
            },
        );
        self.holder.insert(o, t);
        self.reason.remove(&t);
        self.check_maps();
    }

    /// Undoes `t`'s pair, returning the ONNX value it held.
    pub fn unassign(&mut self, t: usize) -> Option<usize> {
        let made = self.pairs.remove(&t)?;
        self.holder.remove(&made.onnx);
        self.undone.insert((t, made.onnx));
        self.check_maps();
        Some(made.onnx)
    }

    /// Moves `t`'s pair, or gives it one, to free ONNX value `o`.
    pub fn rebind(&mut self, t: usize, o: usize, certain: bool) {
        self.unassign(t);
        self.assign(t, o, certain);
    }

    /// Exchanges the ONNX values of two paired TorchScript values; `t` takes the running
    /// pass's stamp, the other keeps the pass that placed it.
    pub fn swap(&mut self, t: usize, other: usize) {
        let (Some(a), Some(b)) = (self.pairs.get(&t).copied(), self.pairs.get(&other).copied())
        else {
            return;
        };
        self.unassign(t);
        self.unassign(other);
        self.assign(t, b.onnx, false);
        self.assign(other, a.onnx, false);
        if let Some(m) = self.pairs.get_mut(&other) {
            m.by = b.by;
        }
    }

    /// `t`'s pair stays, and is certain: something besides the values says it is right.
    pub fn confirm(&mut self, t: usize) {
        if let Some(m) = self.pairs.get_mut(&t) {
            m.certain = true;
        }
    }

    /// `t`'s pair stays, but the values placed it, not structure alone.
    pub fn doubt(&mut self, t: usize) {
        if let Some(m) = self.pairs.get_mut(&t) {
            m.certain = false;
        }
    }

    pub fn get(&self, t: usize) -> Option<Made> {
        self.pairs.get(&t).copied()
    }

    pub fn twin(&self, t: usize) -> Option<usize> {
        self.pairs.get(&t).map(|m| m.onnx)
    }

    pub fn is_paired(&self, t: usize) -> bool {
        self.pairs.contains_key(&t)
    }

    /// The TorchScript value paired with ONNX value `o`, if any.
    pub fn holder(&self, o: usize) -> Option<usize> {
        self.holder.get(&o).copied()
    }

    /// Whether ONNX value `o` is paired with a layer or is a graph input or output.
    pub fn is_taken(&self, o: usize) -> bool {
        self.holder.contains_key(&o) || self.boundary.contains(&o)
    }

    /// Paired TorchScript values in execution order.
    pub fn paired(&self) -> Vec<usize> {
        let mut ids: Vec<usize> = self.pairs.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The TorchScript values whose pair pass `name` placed, in execution order: how a pass
    /// learns what an earlier one did, without reading labels of its own making.
    pub fn made_by(&self, name: &str) -> Vec<usize> {
        let mut ids: Vec<usize> = (self.pairs.iter())
            .filter(|(_, m)| m.by == name)
            .map(|(&t, _)| t)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Whether pass work once paired `t` with `o` and undid it.
    pub fn was_undone(&self, t: usize, o: usize) -> bool {
        self.undone.contains(&(t, o))
    }

    /// Leaves TorchScript value `t` unpaired with `reason`, which says whether it still
    /// counts as compared (fused into a compared value, identity in eval mode).
    pub fn leave(&mut self, t: usize, reason: UnpairedReason) {
        self.reason.insert(t, reason);
    }

    /// Every value left unpaired with its reason, in execution order.
    pub fn reasons(&self) -> BTreeMap<usize, &UnpairedReason> {
        self.reason.iter().map(|(&t, r)| (t, r)).collect()
    }

    /// Whether TorchScript value `t` is left unpaired for a reason that still counts it as
    /// covered.
    pub fn accounted(&self, t: usize) -> bool {
        self.reason.get(&t).is_some_and(UnpairedReason::covered)
    }

    /// Marks layout value `t` as equal to its input: an alias, never aligned.
    pub fn mark_identity(&mut self, t: usize) {
        self.identities.insert(t);
    }

    pub fn is_identity(&self, t: usize) -> bool {
        self.identities.contains(&t)
    }

    /// Marks paired value `t` as breaking the dataflow: its failure alone proves nothing.
    pub fn mark_off_dataflow(&mut self, t: usize) {
        self.off_dataflow.insert(t);
    }

    /// `t`'s pair follows the dataflow again (it moved, or the pass repaired it).
    pub fn back_on_dataflow(&mut self, t: usize) {
        self.off_dataflow.remove(&t);
    }

    pub fn is_off_dataflow(&self, t: usize) -> bool {
        self.off_dataflow.contains(&t)
    }

    /// The values marked off the dataflow, in execution order.
    pub fn off_dataflow(&self) -> Vec<usize> {
        let mut ids: Vec<usize> = self.off_dataflow.iter().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Records `u` as compared within `v`'s pair (the conv of a fused conv+bn).
    pub fn fuse(&mut self, u: usize, v: usize) {
        self.fused_into.entry(v).or_default().push(u);
    }

    /// The values compared within `t`'s pair, taken away from it (the pair moves on).
    pub fn take_fused(&mut self, t: usize) -> Vec<usize> {
        self.fused_into.remove(&t).unwrap_or_default()
    }

    pub fn fused(&self, t: usize) -> Vec<usize> {
        self.fused_into.get(&t).cloned().unwrap_or_default()
    }

    /// Records ONNX value `o` as computed inside the compared call of module `path`.
    pub fn absorb(&mut self, o: usize, path: &str) {
        self.absorbed.insert(o, path.to_string());
    }

    pub fn is_absorbed(&self, o: usize) -> bool {
        self.absorbed.contains_key(&o)
    }

    /// The invariants every pass leaves behind (debug builds; the runner calls it after each
    /// pass): the two pair maps mirror each other, a paired value has no reason to be
    /// unpaired, a value is compared within a pair only while that pair stands, and an
    /// identity is never paired. (A mark off the dataflow outlives an undone pair: it is read
    /// only for paired values.)
    pub fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        self.check_maps();
        for t in self.pairs.keys() {
            debug_assert!(
                !self.reason.contains_key(t),
                "paired value {t} has a reason"
            );
            debug_assert!(!self.identities.contains(t), "identity {t} is paired");
        }
        for (v, fused) in &self.fused_into {
            debug_assert!(
                fused.is_empty() || self.pairs.contains_key(v),
                "values {fused:?} fused into unpaired value {v}"
            );
        }
    }

    /// The two maps mirror each other.
    fn check_maps(&self) {
        debug_assert_eq!(self.pairs.len(), self.holder.len());
        debug_assert!(self
            .pairs
            .iter()
            .all(|(t, m)| self.holder.get(&m.onnx) == Some(t)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutators_keep_both_directions_in_step_and_stamp_the_running_pass() {
        let mut s = PairState::new([9]);
        s.begin_pass("op_order");
        s.assign(1, 10, true);
        s.assign(2, 20, true);
        assert!(s.is_taken(9) && s.is_taken(10) && !s.is_taken(30));
        s.begin_pass("dataflow");
        s.swap(1, 2);
        assert_eq!((s.twin(1), s.twin(2)), (Some(20), Some(10)));
        assert_eq!(s.get(1).unwrap().by, "dataflow");
        assert_eq!(s.get(2).unwrap().by, "op_order", "the other keeps its pass");
        assert_eq!(s.made_by("op_order"), [2]);
        s.begin_pass("fusion");
        s.rebind(1, 30, false);
        assert_eq!(s.holder(20), None);
        assert_eq!(s.holder(30), Some(1));
        assert!(s.was_undone(1, 20));
        assert_eq!(s.unassign(2), Some(10));
        assert_eq!(s.paired(), [1]);
        s.check();
    }
}
