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
            self.explain_unpaired(&key, &ids, "");
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
