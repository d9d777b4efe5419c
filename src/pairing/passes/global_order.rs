//! The `global_order` pass: a graph without scopes, aligned over the whole graph (within the
//! inputs each value is computed from).

use super::super::input_reach::input_marks;
use super::super::reason::UnpairedReason;
use super::super::scoped::kept;
use super::super::{is_layer_candidate, Pair, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;
use crate::capture::ValueRole;

impl Pairer<'_> {
    /// Graphs without scopes (run through a simplifier) still keep op order: align every
    /// TorchScript layer output with the whole ONNX graph, first within each set of values
    /// computed from the same model inputs (`input_reach`: towers the two sides order
    /// differently), then what is left over across them. Never certain: nothing but the
    /// order says two values are one call.
    fn pair_globally(&mut self) {
        if self.cx.onnx_has_scopes {
            return;
        }
        let mut reps: Vec<usize> = self
            .cx
            .torch_groups
            .iter()
            .flat_map(|(k, ids)| self.representatives(k, ids))
            .collect();
        reps.sort();
        let mut onnx_ids: Vec<usize> = self
            .cx
            .onnx
            .values
            .iter()
            .filter(|v| is_layer_candidate(v))
            .map(|v| v.id)
            .collect();
        // A simplifier that sorts a graph by depth interleaves its branches; the names keep
        // the order they were exported in (`export_order`).
        if let Some(ranks) = &self.cx.onnx_export_ranks {
            onnx_ids.sort_by_key(|&o| ranks[o]);
        }
        let inputs: Vec<Pair> = self
            .cx
            .boundary
            .iter()
            .filter(|p| matches!(self.cx.torch.values[p.torch].role, ValueRole::Input(_)))
            .cloned()
            .collect();
        let torch_marks = input_marks(&self.cx.torch.values, &inputs, |p| p.torch);
        let onnx_marks = input_marks(&self.cx.onnx.values, &inputs, |p| p.onnx);
        let mut classes: Vec<u64> = reps.iter().map(|&t| torch_marks[t]).collect();
        classes.sort_unstable();
        classes.dedup();
        // One class is the whole graph: the plain global alignment below.
        if classes.len() > 1 {
            for class in classes {
                let class_reps = kept(&reps, |t| torch_marks[t] == class);
                let class_onnx = kept(&onnx_ids, |o| onnx_marks[o] == class);
                for (t, o, _) in self.align_by_order(&class_reps, &class_onnx, false) {
                    self.state.assign(t, o, false);
                }
            }
        }
        let open_reps = kept(&reps, |t| !self.state.is_paired(t));
        let free_onnx = kept(&onnx_ids, |o| !self.state.is_taken(o));
        for (t, o, _) in self.align_by_order(&open_reps, &free_onnx, false) {
            self.state.assign(t, o, false);
        }
        let groups: Vec<(String, Vec<usize>)> = self
            .cx
            .torch_groups
            .iter()
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect();
        for (key, ids) in groups {
            self.explain_unpaired(&key, &ids, Some(UnpairedReason::NoScopesNoOrder));
        }
    }
}

pub(super) struct GlobalOrder;

impl Pass for GlobalOrder {
    fn name(&self) -> &'static str {
        "global_order"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_globally();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_graph_without_scopes_pairs_by_kind_shape_and_order() {
        let x = [1.0, -2.0, 3.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let c = t.op("aten::_convolution", "conv", &[ti], &[2.0, -4.0, 6.0]);
        let r = t.op("aten::relu", "act", &[c], &[2.0, 0.0, 6.0]);
        t.output(0, r);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let oc = o.op("Conv", "", &[oi], &[2.0, -4.0, 6.0]);
        let or = o.op("Relu", "", &[oc], &[2.0, 0.0, 6.0]);
        o.output(0, or);
        let state = run_alone(&GlobalOrder, &t.build(), &o.build(), &[]);
        assert_eq!((state.twin(c), state.twin(r)), (Some(oc), Some(or)));
        assert_eq!(state.made_by("global_order"), [c, r]);
    }
}
