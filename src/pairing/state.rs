//! The pairing state the passes share: which TorchScript value is paired with which ONNX
//! value, by which pass and how certainly, and what every value left over is accounted as.
//!
//! Passes change pairs only through `assign`, `unassign`, `rebind` and `swap`, so the
//! torch→onnx map and its reverse cannot disagree (debug builds check it after every
//! change), and every pair keeps the name of the pass that last placed it.

use super::PairedBy;
use std::collections::{HashMap, HashSet};

/// One layer pair as a pass made it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Made {
    pub onnx: usize,
    pub by: PairedBy,
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
    /// TorchScript values left unpaired, with the reason and whether they still count as
    /// covered (fused into a compared value, identity in eval mode, internal to a call).
    pub reason: HashMap<usize, (String, bool)>,
    /// TorchScript values compared as part of a pair (the conv of a fused conv+bn).
    pub fused_into: HashMap<usize, Vec<usize>>,
    /// ONNX values inside a compared module call (a decomposition's first nodes, a loop's
    /// unrolled iterations): covered, though not compared themselves.
    pub absorbed: HashMap<usize, String>,
    /// TorchScript values whose pair breaks the dataflow (see `dataflow`).
    pub off_dataflow: HashSet<usize>,
    /// TorchScript layout values equal to their input (see `identities`): not aligned.
    pub identities: HashSet<usize>,
    /// Pairs a pass undid or moved away from (a Linear met with its bias-less MatMul):
    /// a later pass that fills what is left open does not make them again.
    pub undone: HashSet<(usize, usize)>,
}

impl PairState {
    pub fn new(boundary_onnx: impl IntoIterator<Item = usize>) -> Self {
        PairState {
            boundary: boundary_onnx.into_iter().collect(),
            ..Default::default()
        }
    }

    /// Pairs unpaired TorchScript value `t` with free ONNX value `o`.
    pub fn assign(&mut self, t: usize, o: usize, by: PairedBy, certain: bool) {
        debug_assert!(!self.pairs.contains_key(&t), "value {t} is paired already");
        debug_assert!(!self.is_taken(o), "ONNX value {o} is taken already");
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
        self.check();
    }

    /// Undoes `t`'s pair, returning the ONNX value it held.
    pub fn unassign(&mut self, t: usize) -> Option<usize> {
        let made = self.pairs.remove(&t)?;
        self.holder.remove(&made.onnx);
        self.undone.insert((t, made.onnx));
        self.check();
        Some(made.onnx)
    }

    /// Moves `t`'s pair, or gives it one, to free ONNX value `o`.
    pub fn rebind(&mut self, t: usize, o: usize, by: PairedBy, certain: bool) {
        self.unassign(t);
        self.assign(t, o, by, certain);
    }

    /// Exchanges the ONNX values of two paired TorchScript values; `t` takes `by`, the other
    /// keeps its pass.
    pub fn swap(&mut self, t: usize, other: usize, by: PairedBy) {
        let (Some(a), Some(b)) = (self.pairs.get(&t).copied(), self.pairs.get(&other).copied())
        else {
            return;
        };
        self.unassign(t);
        self.unassign(other);
        self.assign(t, b.onnx, by, false);
        self.assign(other, a.onnx, b.by, false);
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

    /// Whether TorchScript value `t` is left unpaired for a reason that still counts it as
    /// covered.
    pub fn accounted(&self, t: usize) -> bool {
        self.reason.get(&t).is_some_and(|(_, accounted)| *accounted)
    }

    /// The two maps mirror each other.
    fn check(&self) {
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
    fn mutators_keep_both_directions_in_step() {
        let mut s = PairState::new([9]);
        s.assign(1, 10, PairedBy::OpOrder, true);
        s.assign(2, 20, PairedBy::OpOrder, true);
        assert!(s.is_taken(9) && s.is_taken(10) && !s.is_taken(30));
        s.swap(1, 2, PairedBy::Dataflow);
        assert_eq!((s.twin(1), s.twin(2)), (Some(20), Some(10)));
        assert_eq!(s.get(1).unwrap().by, PairedBy::Dataflow);
        assert_eq!(s.get(2).unwrap().by, PairedBy::OpOrder);
        s.rebind(1, 30, PairedBy::Fusion, false);
        assert_eq!(s.holder(20), None);
        assert_eq!(s.holder(30), Some(1));
        assert_eq!(s.unassign(2), Some(10));
        assert_eq!(s.paired(), [1]);
    }
}
