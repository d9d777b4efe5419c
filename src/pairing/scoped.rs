//! What the passes that pair by scope and order share (`module_output`, `op_order`,
//! `global_order`, `module_internals`): the order-keeping alignment of a group's values,
//! the groups of functional ops, and the reasons given to the values of a call that found
//! no twin.

use super::ops::{compatible, same_op_name, torch_families, torch_kind, vanishes_in_onnx};
use super::ops::{Family, OpKind};
use super::reason::UnpairedReason;
use super::scopes::key_path;
use super::sibling_outputs::floats_first;
use super::{align, relative_distance, same_shape, Pairer};
use crate::capture::CapturedValue;

impl Pairer<'_> {
    /// The TorchScript groups of scopes with child modules (or the top level): where
    /// functional ops are paired by kind, shape and order rather than as module outputs.
    pub(super) fn op_groups(&self) -> Vec<(String, Vec<usize>)> {
        self.cx
            .torch_groups
            .iter()
            .filter(|(k, _)| !self.cx.is_leaf_group(k))
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect()
    }

    /// Pairs TorchScript values with ONNX values of compatible kind and shape, keeping the
    /// order of both. The alignment fixes each pair's place, not always its ONNX value: when
    /// several unpaired candidates fit between the neighbouring pairs (a decomposition whose
    /// partial results have the op's shape), the values choose the one that completes the
    /// op, and the pair is not certain. Returns (torch id, onnx id, certain).
    ///
    /// With `own_type_first`, an op meets a node of another type of its family (`aten::sub`
    /// an `Add`) only where no node of `o_ids` has its own type and shape, and no op of
    /// `reps` has the node's.
    pub(super) fn align_by_order(
        &self,
        reps: &[usize],
        o_ids: &[usize],
        own_type_first: bool,
    ) -> Vec<(usize, usize, bool)> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        // A multi-output node's outputs in one order on both sides (`sibling_outputs`).
        let reps = &floats_first(reps, tv)[..];
        let o_ids = &floats_first(o_ids, ov)[..];
        let own_type =
            |t: &CapturedValue, o: &CapturedValue| same_shape(t, o) && same_op_name(&t.op, &o.op);
        let has_own_type: Vec<bool> = reps
            .iter()
            .map(|&r| own_type_first && o_ids.iter().any(|&o| own_type(&tv[r], &ov[o])))
            .collect();
        let onnx_has_own_type: Vec<bool> = o_ids
            .iter()
            .map(|&o| own_type_first && reps.iter().any(|&r| own_type(&tv[r], &ov[o])))
            .collect();
        let fits = |i: usize, j: usize| {
            let (t, o) = (&tv[reps[i]], &ov[o_ids[j]]);
            same_shape(t, o)
                && compatible(&t.op, &o.op)
                && ((!has_own_type[i] && !onnx_has_own_type[j]) || same_op_name(&t.op, &o.op))
        };
        let found = align::align(reps.len(), o_ids.len(), fits);
        let mut out = Vec::with_capacity(found.len());
        let (mut lower, mut lower_t) = (0, 0);
        for (k, &(i, j)) in found.iter().enumerate() {
            let upper = found.get(k + 1).map_or(o_ids.len(), |&(_, next)| next);
            // The other way round too: several TorchScript values between their neighbours
            // may fit this ONNX value (ONNX lost one of two alike adds to a fusion; both
            // read only the same paired producers): the values choose which it computes.
            let upper_t = found.get(k + 1).map_or(reps.len(), |&(next, _)| next);
            let rivals: Vec<usize> = (lower_t..upper_t).filter(|&r| fits(r, j)).collect();
            let i = if rivals.len() > 1 {
                self.closest_torch(o_ids[j], &rivals, reps).unwrap_or(i)
            } else {
                i
            };
            lower_t = i + 1;
            let candidates: Vec<usize> = (lower..upper)
                .filter(|&c| c == j || (fits(i, c) && !self.state.is_taken(o_ids[c])))
                .collect();
            let chosen = if candidates.len() > 1 {
                self.closest(reps[i], &candidates, o_ids).unwrap_or(j)
            } else {
                j
            };
            // Certain only when the scope leaves no choice at all: this is the one ONNX
            // value of its kind and shape in the scope, and the TorchScript value the one
            // of its kind and shape (the window between neighbours can be wrong itself).
            let certain = candidates.len() == 1
                && (0..o_ids.len()).filter(|&c| fits(i, c)).count() == 1
                && (0..reps.len()).filter(|&r| fits(r, chosen)).count() == 1
                && self.placed_by_scope(reps[i], o_ids[chosen]);
            out.push((reps[i], o_ids[chosen], certain));
            lower = chosen + 1;
        }
        out
    }

    /// Whether a pair's scope can vouch for it: the ONNX node records its own scope (a node
    /// an optimiser added joins the call it feeds only by position) and the value computes
    /// something (layout ops commute and repeat, one Transpose looks like another).
    pub(super) fn placed_by_scope(&self, t: usize, o: usize) -> bool {
        self.cx.onnx.values[o].scope_recorded
            && !torch_families(&self.cx.torch.values[t].op).contains(Family::Layout)
    }

    /// The candidate (index into `o_ids`) whose value is closest to TorchScript value `t`,
    /// the later one on a tie; `None` when some data is not at hand.
    fn closest(&self, t: usize, candidates: &[usize], o_ids: &[usize]) -> Option<usize> {
        let reference = self.cx.torch.values[t].data().ok()?;
        let mut best: Option<(f64, usize)> = None;
        for &c in candidates.iter().rev() {
            let test = self.cx.onnx.values[o_ids[c]].data().ok()?;
            let d = relative_distance(&test, &reference);
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// The candidate (index into `reps`) whose TorchScript value is closest to ONNX value
    /// `o`, the later one on a tie; `None` when some data is not at hand.
    fn closest_torch(&self, o: usize, candidates: &[usize], reps: &[usize]) -> Option<usize> {
        let test = self.cx.onnx.values[o].data().ok()?;
        let mut best: Option<(f64, usize)> = None;
        for &c in candidates.iter().rev() {
            let reference = self.cx.torch.values[reps[c]].data().ok()?;
            let d = relative_distance(&test, &reference);
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// Reasons for the values of a scoped group that found no twin in their scope.
    pub(super) fn explain_in_scope(&mut self, key: &str, t_ids: &[usize]) {
        let otherwise = UnpairedReason::NoCompatibleOnnxOp {
            scope: key_path(key).to_string(),
        };
        self.explain_unpaired(key, t_ids, Some(otherwise));
    }

    /// Gives every value of group `key` that found no ONNX twin its reason; `otherwise` is
    /// the reason when nothing explains it (`None`: such a value keeps what it had).
    pub(super) fn explain_unpaired(
        &mut self,
        key: &str,
        t_ids: &[usize],
        otherwise: Option<UnpairedReason>,
    ) {
        let call_compared = t_ids.iter().any(|&id| self.state.is_paired(id));
        for &id in t_ids {
            if self.state.is_paired(id) || self.state.is_identity(id) {
                continue;
            }
            let op = &self.cx.torch.values[id].op;
            let reason = if vanishes_in_onnx(op) {
                UnpairedReason::VanishesInEval
            } else if torch_kind(op) == Some(OpKind::Loop) {
                // The body's values are observed per iteration and paired with the unrolled
                // ONNX nodes; the loop's result is the last iteration's value.
                UnpairedReason::LoopResult
            } else if torch_kind(op) == Some(OpKind::If) {
                // Its producers are the taken branch's results, observed and paired in the
                // branch; an exporter that folded the if has no node for it.
                UnpairedReason::IfResult
            } else if self.cx.is_leaf_group(key) && call_compared {
                UnpairedReason::InternalToModule {
                    module: key_path(key).to_string(),
                }
            } else if torch_families(op).contains(Family::Layout) {
                UnpairedReason::LayoutWithoutTwin
            } else if let Some(otherwise) = &otherwise {
                otherwise.clone()
            } else {
                continue;
            };
            self.state.leave(id, reason);
        }
    }

    /// Reasons for a call whose scope has no ONNX node at all.
    pub(super) fn leave_group(&mut self, key: &str, t_ids: &[usize]) {
        let path = key_path(key);
        let nested = format!("{path}.");
        // The ONNX twin exists but sits inside an If branch or Loop body, where no value can
        // be a graph output: only the control-flow node's result is compared, so the call
        // counts as not compared.
        let in_subgraph = self
            .cx
            .onnx
            .uncapturable
            .iter()
            .filter(|u| !path.is_empty() && u.subgraph.is_some())
            .find(|u| u.module == path || u.module.starts_with(&nested));
        let open: Vec<usize> = (t_ids.iter().copied())
            .filter(|&id| !self.state.is_identity(id))
            .collect();
        for id in open {
            let op = &self.cx.torch.values[id].op;
            let reason = if vanishes_in_onnx(op) {
                UnpairedReason::VanishesInEval
            } else if let Some(u) = in_subgraph {
                UnpairedReason::InControlFlowSubgraph {
                    subgraph: u.subgraph.clone().unwrap_or_default(),
                }
            } else {
                UnpairedReason::NoOnnxScope {
                    scope: path.to_string(),
                }
            };
            self.state.leave(id, reason);
        }
    }
}

/// The ids of `ids` that `keep` keeps, in their order.
pub(super) fn kept(ids: &[usize], keep: impl Fn(usize) -> bool) -> Vec<usize> {
    ids.iter().copied().filter(|&id| keep(id)).collect()
}
