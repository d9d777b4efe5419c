//! Questions about the wiring of both graphs that the passes share: a TorchScript value's
//! nearest paired producers and their twins (`nearest_producer_twins`), whether an ONNX
//! value is computed from all of them (`computed_from_all`), and the choice of the closest
//! ONNX value among those that keep the wiring.

use super::ops::{torch_kind, OpKind};
use super::{compatible, is_layer_candidate, same_shape, Pairer};
use crate::capture::tensor::DType;
use crate::capture::{Capture, CapturedValue};
use std::collections::HashSet;

/// What siblings share: TorchScript op and shape, ONNX op, their producers' twins.
pub(super) type SiblingKey = (String, Vec<usize>, String, Vec<usize>);

/// Siblings are few (a query, key and value); beyond this many, permutations are not tried.
pub(super) const MAX_SIBLINGS: usize = 4;

/// Below this distance a value matches another closely: rounding, even float16's, not a
/// different computation.
pub(super) const CLOSE: f64 = 1e-2;

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
        match torch_kind(&tv[u].op) {
            Some(OpKind::If) => inputs
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
    /// Whether a free ONNX value without a module call (a scope-less fused node's), of
    /// `t`'s kind and shape, is computed from the producers' twins `needed`. Only where the
    /// graph has scopes: in one without any, every value lacks a call, and undoing would hand
    /// a branch's conv to its sibling's (SKNet's two paths and its downsample read one input).
    pub(super) fn free_scopeless_keeps(&self, t: usize, needed: &[usize]) -> bool {
        if !self.cx.onnx_has_scopes {
            return false;
        }
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        ov.iter().any(|c| {
            self.cx.onnx_keys[c.id].is_none()
                && is_layer_candidate(c)
                && !self.state.is_taken(c.id)
                && same_shape(&tv[t], c)
                && compatible(&tv[t].op, &c.op)
                && computed_from_all(ov, c.id, needed)
        })
    }

    /// Of the ONNX values `candidates`, the one closest to TorchScript value `t`, with its
    /// `distance`.
    pub(super) fn closest_onnx(&self, t: usize, candidates: &[usize]) -> Option<(usize, f64)> {
        candidates
            .iter()
            .map(|&c| (c, self.cx.distance(t, c)))
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
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
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
