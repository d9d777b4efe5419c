//! The `module_output` pass: each leaf module call's output with the last ONNX value of the
//! same call and shape.

use super::super::ops::{compatible, onnx_kind, torch_families, Family, OpKind};
use super::super::scopes::key_path;
use super::super::{is_layer_candidate, same_shape, subtree, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;
use crate::capture::CapturedValue;

/// Whether ONNX value `o` only rearranges a value computed outside the scope `o_ids` while the
/// module computes something (`torch_op` is no rearrangement): an exporter can scope the
/// reshape that builds a module's input into the module (a scattered canvas viewed as an
/// image, scoped into the convolution that reads it), and a value that holds none of the
/// module's own computation is not its output, whatever its shape.
fn rearranges_from_outside(
    ov: &[CapturedValue],
    o: usize,
    o_ids: &[usize],
    torch_op: &str,
) -> bool {
    let rearranges = onnx_kind(&ov[o].op).is_some_and(OpKind::keeps_every_element);
    if !rearranges || torch_families(torch_op).contains(Family::Layout) {
        return false;
    }
    ov[o]
        .inputs
        .iter()
        .filter(|&&u| u < ov.len() && u != o && is_layer_candidate(&ov[u]))
        .all(|u| !o_ids.contains(u))
}

impl Pairer<'_> {
    /// A leaf module call's output is the last ONNX value of the same call with its shape.
    /// Certain when that is the call's only value of the module's kind and shape that no
    /// other such value reads.
    fn pair_module_outputs(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        let groups: Vec<(String, Vec<usize>)> = self
            .cx
            .torch_groups
            .iter()
            .filter(|(k, _)| self.cx.is_leaf_group(k))
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect();
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        for (key, t_ids) in groups {
            let o_ids = subtree(&self.cx.onnx_groups, &key);
            if o_ids.is_empty() {
                self.leave_group(&key, &t_ids);
                continue;
            }
            if let Some(&output) = self.representatives(&key, &t_ids).first() {
                let t = self.computing_stand_in(output, &t_ids, &o_ids);
                let fitting = |o: &usize| {
                    same_shape(&tv[t], &ov[*o])
                        && (t == output || compatible(&tv[t].op, &ov[*o].op))
                        && !rearranges_from_outside(ov, *o, &o_ids, &tv[t].op)
                };
                if let Some(&o) = o_ids.iter().rev().find(|o| fitting(o)) {
                    let kind = |o: &usize| fitting(o) && compatible(&tv[t].op, &ov[*o].op);
                    let candidates: Vec<usize> = o_ids.iter().copied().filter(kind).collect();
                    // A candidate another candidate reads is a partial result of the same
                    // computation (a Linear's MatMul before its bias Add), not a second
                    // plausible output: the one that completes the chain is the output.
                    let completing = candidates
                        .iter()
                        .filter(|&&c| !candidates.iter().any(|&d| ov[d].inputs.contains(&c)))
                        .count();
                    let certain = completing == 1 && self.placed_by_scope(t, o);
                    self.state.assign(t, o, certain);
                    for &other in o_ids.iter().filter(|&&i| i != o) {
                        self.state.absorb(other, key_path(&key));
                    }
                }
            }
            self.explain_in_scope(&key, &t_ids);
        }
    }
}

pub(super) struct ModuleOutput;

impl Pass for ModuleOutput {
    fn name(&self) -> &'static str {
        "module_output"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_module_outputs();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_leaf_call_pairs_its_output_with_the_last_onnx_value_of_its_call() {
        let x = [1.0, -2.0, 3.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let mm = t.op("aten::matmul", "fc", &[ti], &[2.0, -4.0, 6.0]);
        let add = t.op("aten::add", "fc", &[mm], &[3.0, -3.0, 7.0]);
        let relu = t.op("aten::relu", "act", &[add], &[3.0, 0.0, 7.0]);
        t.output(0, relu);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let om = o.op("MatMul", "fc", &[oi], &[2.0, -4.0, 6.0]);
        let oa = o.op("Add", "fc", &[om], &[3.0, -3.0, 7.0]);
        let or = o.op("Relu", "act", &[oa], &[3.0, 0.0, 7.0]);
        o.output(0, or);
        let state = run_alone(&ModuleOutput, &t.build(), &o.build(), &[]);
        let made = state.get(add).expect("the call's output is paired");
        assert_eq!((made.onnx, made.by), (oa, "module_output"));
        assert_eq!(state.twin(relu), Some(or));
        assert_eq!(state.twin(mm), None, "only a call's output stands for it");
    }
}
