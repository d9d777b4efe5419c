//! The read-only context every pairing pass works in: the two captures, each value's
//! module-call key once the scope steps (`scope_steps`) have made the two sides' keys meet,
//! the module-call groups, and the memo of value distances. Built once before the passes;
//! no pass changes it (the memo only remembers what it computed).

use super::scope_steps::ScopeWork;
use super::scopes::{key_path, GroupKey};
use super::{value_memo, Pair};
use crate::capture::Capture;
use std::collections::{BTreeMap, HashSet};

pub(super) struct PairCx<'a> {
    pub(super) torch: &'a Capture,
    pub(super) onnx: &'a Capture,
    pub(super) onnx_keys: Vec<Option<GroupKey>>,
    pub(super) torch_groups: BTreeMap<GroupKey, Vec<usize>>,
    /// Values of each call that no compared output is computed from (`unused_values`): in
    /// no group the passes read, listed and counted when pairing finishes.
    pub(super) unused_groups: BTreeMap<GroupKey, Vec<usize>>,
    pub(super) onnx_groups: BTreeMap<GroupKey, Vec<usize>>,
    /// Modules with child modules: their groups hold functional ops, not a module output.
    pub(super) torch_parents: HashSet<String>,
    pub(super) onnx_has_scopes: bool,
    /// Each ONNX value's place in the order the exporter wrote the nodes, where a graph
    /// tool sorted them again (`export_order`); `None`: the saved order is that order.
    pub(super) onnx_export_ranks: Option<Vec<usize>>,
    /// TorchScript values no model input reaches that are compared all the same, because
    /// their module's ONNX scope computes constants too (`computed_constants`).
    pub(super) kept_constants: Vec<usize>,
    /// The graph inputs and outputs, paired by position before the passes run.
    pub(super) boundary: Vec<Pair>,
    /// Distances and fingerprints of the captured data, each computed once.
    pub(super) memo: value_memo::ValueMemo,
}

impl<'a> PairCx<'a> {
    /// Runs the scope steps (`scope_steps::SCOPE_STEPS`) and keeps what they built.
    pub(super) fn new(
        torch: &'a Capture,
        onnx: &'a Capture,
        boundary: Vec<Pair>,
        read_back: value_memo::ReadBack,
    ) -> Self {
        let w = ScopeWork::run(torch, onnx);
        PairCx {
            torch,
            onnx,
            torch_groups: w.torch_groups,
            unused_groups: w.unused_groups,
            onnx_groups: w.onnx_groups,
            onnx_keys: w.onnx_keys,
            torch_parents: w.torch_parents,
            onnx_has_scopes: w.onnx_has_scopes,
            onnx_export_ranks: w.onnx_export_ranks,
            kept_constants: w.kept_constants,
            boundary,
            memo: value_memo::ValueMemo::reading(read_back),
        }
    }

    pub(super) fn is_leaf_group(&self, key: &str) -> bool {
        !key.is_empty() && !self.torch_parents.contains(key_path(key))
    }

    /// How far ONNX value `c` is from TorchScript value `t` (`relative_distance`); infinite
    /// when either is not at hand. Spilled data is read back for the two values, then
    /// dropped; the distance is remembered.
    pub(super) fn distance(&self, t: usize, c: usize) -> f64 {
        self.memo
            .distance(&self.torch.values[t], &self.onnx.values[c])
    }

    /// Computes the distances of pairs `(t, c)` that a pass is about to weigh, several at
    /// once (`ValueMemo::prefetch`).
    pub(super) fn prefetch_distances(&self, pairs: impl IntoIterator<Item = (usize, usize)>) {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let pairs: Vec<_> = pairs.into_iter().map(|(t, c)| (&tv[t], &ov[c])).collect();
        self.memo.prefetch(&pairs);
    }
}
