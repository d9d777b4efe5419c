//! The `module_internals` pass: the other values of a compared module call are internal to
//! it, covered.

use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// A module call whose output some pass paired covers the values inside it.
    fn account_module_internals(&mut self) {
        let groups: Vec<(String, Vec<usize>)> = self
            .cx
            .torch_groups
            .iter()
            .filter(|(k, ids)| {
                self.cx.is_leaf_group(k) && ids.iter().any(|id| self.state.is_paired(*id))
            })
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect();
        for (key, ids) in groups {
            self.explain_unpaired(&key, &ids, None);
        }
    }
}

pub(super) struct ModuleInternals;

impl Pass for ModuleInternals {
    fn name(&self) -> &'static str {
        "module_internals"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.account_module_internals();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn the_other_values_of_a_compared_call_are_covered() {
        let x = [1.0, -2.0, 3.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let mm = t.op("aten::matmul", "fc", &[ti], &[2.0, -4.0, 6.0]);
        let add = t.op("aten::add", "fc", &[mm], &[3.0, -3.0, 7.0]);
        t.output(0, add);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let og = o.op("Gemm", "fc", &[oi], &[3.0, -3.0, 7.0]);
        let on = o.op("Neg", "fc", &[og], &[-3.0, 3.0, -7.0]);
        o.output(0, on);
        let state = run_alone(&ModuleInternals, &t.build(), &o.build(), &[(add, og)]);
        assert!(state.accounted(mm), "{:?}", state.reasons().get(&mm));
        assert!(state.paired() == [add], "it makes no pairs");
    }
}
