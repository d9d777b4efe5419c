//! The `duplicates` pass.
//!
//! TorchScript values that compute again what an earlier value computed: one ONNX node for
//! both once a simplifier merged the common subexpression.
//!
//! A detector's box decoder takes `boxes[:, 2] - boxes[:, 0]` of the proposals that its
//! RoI pooler has just taken the same difference of (for the box areas). TorchScript keeps
//! both computations; onnxslim, onnxsim and ONNX Runtime merge nodes that apply the same
//! op to the same inputs, and the one node left sits in the scope of the first. The second
//! computation then has no node in its own scope, and the order-keeping alignment pairs it,
//! and every op after it, with the next node of its shape there: a `select` met an
//! `Unsqueeze`, and a clean pair failed. A value of the same op, shape and dtype as an
//! earlier one, computed from inputs that hold the same tensors (the same values, or values
//! equal element for element: a one-element `cat` of the proposals is the proposals), and
//! equal to it element for element, in another module's scope, is the same computation: it
//! is neither aligned nor compared, and counts as covered (the earlier value is compared).
//! Where the ONNX graph kept both nodes, the second is left without a twin; it feeds what
//! the later pairs compare. Two such values of one scope (a query and a key transposed from
//! one input) are left to the alignment: a merged node still sits in their scope, where the
//! values choose between them; so are ops with weights (a Conv, a Linear, a norm), which a
//! fault can change in one of two copies. Marking reads TorchScript's values only; a copy of
//! one scope is settled after the alignment, by the dataflow check (`merged_copy_of`): when
//! its twin is not computed from its producers' twins and the earlier copy's is, the graph
//! kept one node for both. Whether two values hold the same tensor is asked of the
//! fingerprints of `value_memo`, which read each value once.

use super::super::merged_copies::weighted;
use super::super::reason::UnpairedReason;
use super::super::{is_layer_candidate, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;
use std::collections::HashMap;

impl Pairer<'_> {
    fn mark_duplicates(&mut self) {
        let tv = &self.cx.torch.values;
        // Candidates by what must agree before any data is read.
        let mut seen: HashMap<(&str, &[usize], String), Vec<usize>> = HashMap::new();
        let mut duplicates: Vec<(usize, usize)> = Vec::new();
        for v in tv.iter().filter(|v| {
            is_layer_candidate(v)
                && !v.inputs.is_empty()
                && !weighted(&v.op)
                && !self.state.is_identity(v.id)
        }) {
            let group = seen
                .entry((v.op.as_str(), v.shape.as_slice(), format!("{:?}", v.dtype)))
                .or_default();
            let original = group.iter().copied().find(|&u| {
                tv[u].module_path() != v.module_path()
                    && self.cx.memo.same_torch_data(&tv[u], v)
                    && self.same_inputs(&tv[u], v)
            });
            match original {
                Some(u) => duplicates.push((v.id, u)),
                None => group.push(v.id),
            }
        }
        for (t, original) in duplicates {
            let reason = UnpairedReason::Duplicate {
                original: tv[original].name.clone(),
            };
            self.state.mark_identity(t);
            self.state.leave(t, reason);
        }
    }
}

pub(super) struct Duplicates;

impl Pass for Duplicates {
    fn name(&self) -> &'static str {
        "duplicates"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.mark_duplicates();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_difference_computed_again_in_another_module_is_an_alias_of_the_first() {
        let (t, o, ids) = graphs::difference_merged_across_modules();
        let [g0, g2, w, area, r0, r2, rw, un, ..] = ids;
        let state = run_alone(&Duplicates, &t, &o, &[]);
        for copy in [r0, r2, rw] {
            assert!(
                state.is_identity(copy),
                "value {copy} computes the pooler's again"
            );
            assert!(state.accounted(copy), "value {copy} counts as covered");
        }
        for own in [g0, g2, w, area, un] {
            assert!(
                !state.is_identity(own),
                "value {own} is the first of its kind"
            );
        }
        assert!(state.paired().is_empty(), "duplicates makes no pairs");
    }

    #[test]
    fn other_values_or_a_copy_in_its_own_scope_are_layers() {
        // The same select of the same boxes: another column in module `b`, the same column
        // again in module `a` (a merged node would still sit in `a`'s scope).
        let boxes = [1.0, 2.0, 3.0, 5.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &boxes);
        let a = t.op("aten::select", "a", &[ti], &[1.0, 2.0]);
        let b = t.op("aten::select", "b", &[ti], &[3.0, 5.0]);
        let again = t.op("aten::select", "a", &[ti], &[1.0, 2.0]);
        let s = t.op("aten::add", "", &[a, b, again], &[5.0, 9.0]);
        t.output(0, s);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &boxes);
        let oa = o.op("Gather", "a", &[oi], &[1.0, 2.0]);
        let ob = o.op("Gather", "b", &[oi], &[3.0, 5.0]);
        let os = o.op("Add", "", &[oa, ob], &[5.0, 9.0]);
        o.output(0, os);
        let state = run_alone(&Duplicates, &t.build(), &o.build(), &[]);
        for v in [a, b, again] {
            assert!(!state.is_identity(v) && !state.accounted(v), "value {v}");
        }
    }
}
