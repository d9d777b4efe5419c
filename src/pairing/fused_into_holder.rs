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

use super::{Pairer, AGREES};
use crate::capture::CapturedValue;
use std::collections::HashSet;

/// Whether TorchScript value `t` is among the nearest values `v` was computed from,
/// looking through values `paired` says have no twin.
fn reads_through_unpaired(
    tv: &[CapturedValue],
    paired: impl Fn(usize) -> bool,
    v: usize,
    t: usize,
) -> bool {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = tv[v].inputs.clone();
    while let Some(u) = stack.pop() {
        if u == t {
            return true;
        }
        if u >= tv.len() || !seen.insert(u) || paired(u) {
            continue;
        }
        stack.extend(&tv[u].inputs);
    }
    false
}

impl Pairer<'_> {
    /// The consumer of `t` that holds ONNX value `c` and agrees with it, while `t` does not:
    /// `c`'s node computes `t` on the way to that consumer (a Conv with its BatchNorm folded).
    pub(super) fn consumer_holding(&self, t: usize, c: usize) -> Option<usize> {
        let holder = self.state.holder(c)?;
        let fused = holder > t
            && self.distance(holder, c) < AGREES
            && self.distance(t, c) > AGREES
            && reads_through_unpaired(&self.torch.values, |u| self.twin(u).is_some(), holder, t);
        fused.then_some(holder)
    }

    /// Unpairs `t`, fused into the ONNX node its consumer `holder` is paired with.
    pub(super) fn fuse_into_holder(&mut self, t: usize, holder: usize) {
        let Some(c) = self.state.twin(holder) else {
            return;
        };
        self.state.unassign(t);
        let module = self.torch.values[holder].module_path();
        let reason = format!(
            "fused into ONNX node {} (compared after {module})",
            self.onnx.values[c].node
        );
        self.state.reason.insert(t, (reason, true));
        self.state.fused_into.entry(holder).or_default().push(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::ValueRole;

    fn graph(edges: &[&[usize]]) -> Vec<CapturedValue> {
        edges
            .iter()
            .enumerate()
            .map(|(id, inputs)| CapturedValue {
                id,
                name: format!("v{id}"),
                op: "aten::relu".into(),
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
    fn a_consumer_reads_a_value_through_unpaired_ones_only() {
        // 0 -> 1 -> 2 -> 3
        let tv = graph(&[&[], &[0], &[1], &[2]]);
        assert!(reads_through_unpaired(&tv, |_| false, 3, 0));
        assert!(!reads_through_unpaired(&tv, |u| u == 2, 3, 0));
        assert!(reads_through_unpaired(&tv, |u| u == 2, 2, 0));
    }
}
