//! The dataflow check on finished pairs: a pair's ONNX value must be computed from the ONNX
//! twins of the values its TorchScript value was computed from.
//!
//! Order and scope place most pairs, but an optimiser that sorts the graph again (ONNX
//! Runtime's transformer optimiser, a simplifier) can put a module's query and key
//! projections in the other order, and the alignment then pairs the query's reshape with the
//! key's. Such a pair fails at every element, and the layer after it, paired the same way,
//! seems to confirm it. Structure settles it without looking at numbers: walk back from the
//! TorchScript value to its nearest paired producers; their ONNX twins must all be ancestors
//! of the ONNX value. A pair that breaks this is moved to the ONNX value of the same scope,
//! kind and shape that keeps it and is closer in value (the values choose among several);
//! when none does, it stays but is marked, and a failure there is not trusted on its own
//! (`evaluate` treats it as unconfirmed). A real fault changes numbers, not wiring, so it
//! keeps its pair.

use super::{compatible, is_layer_candidate, same_shape, PairedBy, Pairer};
use crate::capture::tensor::DType;
use crate::capture::{Capture, CapturedValue};
use std::collections::{HashMap, HashSet};

/// What siblings share: TorchScript op and shape, ONNX op, their producers' twins.
type SiblingKey = (String, Vec<usize>, String, Vec<usize>);

/// Siblings are few (a query, key and value); beyond this many, permutations are not tried.
const MAX_SIBLINGS: usize = 4;

/// Below this distance a value matches another closely: rounding, even float16's, not a
/// different computation.
const CLOSE: f64 = 1e-2;

/// Every ordering of `0..n`.
pub(super) fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            out.push(p);
        }
    }
    out
}

/// The ONNX twins of the nearest paired values that TorchScript value `t` was computed
/// from, looking through unpaired ones. An element unpacked from a tuple built in the graph
/// was computed from that element's producers only (`Capture::element_inputs`), not from
/// every element of the tuple: a module that returns two tensors feeds each to its own
/// consumers. An `if`'s result is computed from its taken branch; its condition steers it
/// but is no operand, and an ONNX `If` inlined for the check's inputs (`onnx::steering`)
/// reads the branch's value alone.
pub(super) fn nearest_producer_twins(
    torch: &Capture,
    twin: impl Fn(usize) -> Option<usize>,
    t: usize,
) -> Vec<usize> {
    let tv = &torch.values;
    let is_condition = |p: &usize| {
        tv.get(*p)
            .is_some_and(|c| c.dtype == DType::Bool && c.shape.iter().product::<usize>() == 1)
    };
    let inputs_of = |u: usize| -> Vec<usize> {
        let inputs = torch.element_inputs.get(&u).unwrap_or(&tv[u].inputs);
        match tv[u].op.as_str() {
            "prim::If" => inputs
                .iter()
                .copied()
                .filter(|p| !is_condition(p))
                .collect(),
            _ => inputs.clone(),
        }
    };
    let mut twins = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = inputs_of(t);
    while let Some(u) = stack.pop() {
        if u >= tv.len() || u == t || !seen.insert(u) {
            continue;
        }
        match twin(u) {
            Some(o) => twins.push(o),
            None => stack.extend(inputs_of(u)),
        }
    }
    twins
}

/// Whether every value in `needed` is `o` or an ancestor of ONNX value `o`. Values are in
/// execution order, so the walk back never needs to go below the lowest one looked for.
pub(super) fn computed_from_all(ov: &[CapturedValue], o: usize, needed: &[usize]) -> bool {
    let mut missing: HashSet<usize> = needed.iter().copied().filter(|&n| n != o).collect();
    let Some(&lowest) = missing.iter().min() else {
        return true;
    };
    let mut seen = HashSet::new();
    let mut stack = vec![o];
    while let Some(v) = stack.pop() {
        for &u in &ov[v].inputs {
            if u < lowest || u >= ov.len() || !seen.insert(u) {
                continue;
            }
            missing.remove(&u);
            if missing.is_empty() {
                return true;
            }
            stack.push(u);
        }
    }
    false
}

impl Pairer<'_> {
    /// Checks every layer pair in TorchScript execution order (producers are settled before
    /// their consumers are checked), moves a pair that breaks the dataflow to an ONNX value
    /// that keeps it, and records the ones nothing repairs in `off_dataflow`.
    pub(super) fn repair_dataflow(&mut self) {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        for t in self.state.paired() {
            let o = self.state.twin(t).expect("paired");
            let needed = nearest_producer_twins(self.torch, |u| self.twin(u), t);
            if computed_from_all(ov, o, &needed) {
                // Computed from them, but maybe through a later link of their chain.
                self.prefer_direct_producers(t, o, &needed);
                continue;
            }
            // Another value of the same call, kind and shape that is computed from the right
            // producers, free or held by a later pair (which is checked in its turn).
            let candidates: Vec<usize> = ov
                .iter()
                .filter(|c| c.id != o && is_layer_candidate(c))
                .filter(|c| self.onnx_keys[c.id] == self.onnx_keys[o])
                .filter(|c| same_shape(&tv[t], c) && compatible(&tv[t].op, &c.op))
                .filter(|c| self.state.holder(c.id).is_none_or(|other| other > t))
                .filter(|c| computed_from_all(ov, c.id, &needed))
                .map(|c| c.id)
                .collect();
            // Only a closer value replaces the pair: layout ops commute (a Reshape and a
            // Transpose may be exported in either order), which breaks the ancestry while the
            // values still agree.
            let closer = self
                .closest_onnx(t, &candidates)
                .filter(|&(_, d)| d < self.distance(t, o));
            match closer {
                Some((c, _)) => match (self.consumer_holding(t, c), self.state.holder(c)) {
                    // Its consumer's agreeing twin: that node computes both (a folded
                    // BatchNorm).
                    (Some(holder), _) => self.fuse_into_holder(t, holder),
                    (None, Some(other)) => self.state.swap(t, other, PairedBy::Dataflow),
                    (None, None) => self.state.rebind(t, c, PairedBy::Dataflow, false),
                },
                // The one value that keeps it may be held by an earlier pair of a crossed
                // chain (`crossed_chains.rs`): exchange the two.
                None => match self.crossed_earlier_holder(t, o, &needed) {
                    Some(other) => {
                        self.state.swap(t, other, PairedBy::Dataflow);
                        self.state.off_dataflow.remove(&other);
                    }
                    None => match self.merged_copy_of(t, &needed) {
                        Some(original) => self.mark_merged_copy(t, original),
                        // Its value is computed in a node no scope places (a residual Add
                        // inside ONNX Runtime's SkipLayerNormalization): undone, for the
                        // `scopeless` pass to place.
                        None if self.free_scopeless_keeps(t, &needed) => {
                            self.state.unassign(t);
                        }
                        None => {
                            self.state.off_dataflow.insert(t);
                        }
                    },
                },
            }
        }
    }

    /// Whether a free ONNX value without a module call (a scope-less fused node's), of
    /// `t`'s kind and shape, is computed from the producers' twins `needed`. Only where the
    /// graph has scopes: in one without any, every value lacks a call, and undoing would hand
    /// a branch's conv to its sibling's (SKNet's two paths and its downsample read one input).
    fn free_scopeless_keeps(&self, t: usize, needed: &[usize]) -> bool {
        if !self.onnx_has_scopes {
            return false;
        }
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        ov.iter().any(|c| {
            self.onnx_keys[c.id].is_none()
                && is_layer_candidate(c)
                && !self.state.is_taken(c.id)
                && same_shape(&tv[t], c)
                && compatible(&tv[t].op, &c.op)
                && computed_from_all(ov, c.id, needed)
        })
    }

    /// Sibling pairs (the same TorchScript op and shape, the same ONNX op, computed from the
    /// same producers' twins: a query, key and value projection) are alike to the dataflow,
    /// so an optimiser that reordered them leaves them paired crosswise, and each failure
    /// confirms the next. The values settle it: when another assignment within the siblings
    /// matches every one of them closely and the order's does not, it is taken. A real
    /// fault matches no sibling closely, so it keeps its pair.
    pub(super) fn uncross_siblings(&mut self) {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let mut siblings: HashMap<SiblingKey, Vec<usize>> = HashMap::new();
        for t in self.state.paired() {
            let o = self.state.twin(t).expect("paired");
            let mut producers = nearest_producer_twins(self.torch, |u| self.twin(u), t);
            producers.sort_unstable();
            let key = (
                tv[t].op.clone(),
                tv[t].shape.clone(),
                ov[o].op.clone(),
                producers,
            );
            siblings.entry(key).or_default().push(t);
        }
        for group in siblings.into_values() {
            if !(2..=MAX_SIBLINGS).contains(&group.len()) {
                continue;
            }
            let held: Vec<usize> = group.iter().filter_map(|&t| self.state.twin(t)).collect();
            // Selects of one input are told apart by the part each takes, whatever the values.
            if let Some(perm) = self.assignment_by_part(&group, &held) {
                self.reassign_siblings(&group, &held, &perm);
                continue;
            }
            let distance: Vec<Vec<f64>> = group
                .iter()
                .map(|&t| held.iter().map(|&o| self.distance(t, o)).collect())
                .collect();
            let worst = |perm: &[usize]| {
                perm.iter()
                    .enumerate()
                    .map(|(i, &j)| distance[i][j])
                    .fold(0.0f64, f64::max)
            };
            let identity: Vec<usize> = (0..group.len()).collect();
            let best = permutations(group.len())
                .into_iter()
                .min_by(|a, b| worst(a).total_cmp(&worst(b)))
                .unwrap_or_else(|| identity.clone());
            if best != identity && worst(&best) < CLOSE && worst(&best) * 10.0 < worst(&identity) {
                self.reassign_siblings(&group, &held, &best);
            }
        }
    }

    /// Gives sibling `group[i]` the ONNX value `held[perm[i]]`; the ones that move are
    /// stamped `uncross_siblings`.
    fn reassign_siblings(&mut self, group: &[usize], held: &[usize], perm: &[usize]) {
        if perm.iter().enumerate().all(|(i, &j)| i == j) {
            return;
        }
        let before: Vec<_> = group.iter().map(|&t| self.state.get(t)).collect();
        for &t in group {
            self.state.unassign(t);
        }
        for (i, &j) in perm.iter().enumerate() {
            let by = match before[i] {
                Some(made) if i == j => made.by,
                _ => PairedBy::UncrossSiblings,
            };
            self.state.assign(group[i], held[j], by, false);
        }
    }

    /// Of the ONNX values `candidates`, the one closest to TorchScript value `t`, with its
    /// `distance`.
    fn closest_onnx(&self, t: usize, candidates: &[usize]) -> Option<(usize, f64)> {
        candidates
            .iter()
            .map(|&c| (c, self.distance(t, c)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::ValueRole;

    /// Values with only their producers set: `edges[id]` lists value `id`'s inputs.
    fn graph(edges: &[&[usize]]) -> Vec<CapturedValue> {
        edges
            .iter()
            .enumerate()
            .map(|(id, inputs)| CapturedValue {
                id,
                name: format!("v{id}"),
                op: "Relu".into(),
                node: String::new(),
                scope: vec![],
                scope_recorded: true,
                source: None,
                source_stack: Vec::new(),
                role: ValueRole::Intermediate,
                dtype: DType::F32,
                shape: vec![1],
                inputs: inputs.to_vec(),
                tensor: None,
            })
            .collect()
    }

    #[test]
    fn producers_are_found_through_unpaired_values() {
        // 0 -> 1 -> 3, 2 -> 3; only 0 and 2 are paired.
        let tv = graph(&[&[], &[0], &[], &[1, 2]]);
        let twin = |u| match u {
            0 => Some(10),
            2 => Some(12),
            _ => None,
        };
        let mut twins = nearest_producer_twins(&capture(tv), twin, 3);
        twins.sort();
        assert_eq!(twins, [10, 12]);
    }

    fn capture(values: Vec<CapturedValue>) -> Capture {
        Capture {
            side: crate::capture::Side::Torch,
            values,
            uncapturable: vec![],
            element_inputs: Default::default(),
        }
    }

    #[test]
    fn an_element_unpacked_from_a_tuple_needs_only_its_own_producers() {
        // A module returns (0, 1) as a tuple built in the graph: 2 packs them, 3 unpacks
        // element 1, and 4 is computed from 3. Value 4 needs only 1's twin, not 0's.
        let mut torch = capture(graph(&[&[], &[], &[0, 1], &[2], &[3]]));
        let twin = |u| match u {
            0 => Some(10),
            1 => Some(11),
            _ => None,
        };
        let mut whole = nearest_producer_twins(&torch, twin, 4);
        whole.sort();
        assert_eq!(whole, [10, 11], "without element inputs, the whole tuple");
        torch.element_inputs.insert(3, vec![1]);
        assert_eq!(nearest_producer_twins(&torch, twin, 4), [11]);
    }

    #[test]
    fn ancestry_is_checked_on_the_onnx_side() {
        // 0 -> 2 -> 3, 1 -> 3, 1 -> 4
        let ov = graph(&[&[], &[], &[0], &[2, 1], &[1]]);
        assert!(computed_from_all(&ov, 3, &[0, 1]));
        assert!(computed_from_all(&ov, 4, &[1]));
        assert!(!computed_from_all(&ov, 4, &[0]));
        assert!(computed_from_all(&ov, 4, &[]));
        assert!(computed_from_all(&ov, 4, &[4]));
    }

    #[test]
    fn permutations_are_all_orderings_once() {
        let mut all = permutations(3);
        all.sort();
        assert_eq!(all.len(), 6);
        all.dedup();
        assert_eq!(all.len(), 6);
        assert!(all.contains(&vec![2, 0, 1]));
    }
}
