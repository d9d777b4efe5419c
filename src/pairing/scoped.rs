//! The passes that pair by scope and order: module outputs, functional ops inside a scope,
//! and the whole-graph alignment for a graph without scopes; and the reasons given to the
//! values of a call that found no twin.

use super::input_reach::input_marks;
use super::ops::{compatible, same_op_name, torch_families, vanishes_in_onnx};
use super::scopes::key_path;
use super::sibling_outputs::floats_first;
use super::{
    align, is_layer_candidate, relative_distance, same_shape, subtree, Pair, PairedBy, Pairer,
};
use crate::capture::{CapturedValue, ValueRole};

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
    let rearranges = |op: &str| {
        matches!(
            op,
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "Identity"
        )
    };
    if !rearranges(&ov[o].op) || torch_families(torch_op).contains(&"layout") {
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
    pub(super) fn pair_module_outputs(&mut self) {
        if !self.onnx_has_scopes {
            return;
        }
        let groups: Vec<(String, Vec<usize>)> = self
            .torch_groups
            .iter()
            .filter(|(k, _)| self.is_leaf_group(k))
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect();
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        for (key, t_ids) in groups {
            let o_ids = subtree(&self.onnx_groups, &key);
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
                    self.state.assign(t, o, PairedBy::ModuleOutput, certain);
                    for &other in o_ids.iter().filter(|&&i| i != o) {
                        self.state
                            .absorbed
                            .insert(other, key_path(&key).to_string());
                    }
                }
            }
            self.explain_in_scope(&key, &t_ids);
        }
    }

    /// The TorchScript groups of scopes with child modules (or the top level): where
    /// functional ops are paired by kind, shape and order rather than as module outputs.
    pub(super) fn op_groups(&self) -> Vec<(String, Vec<usize>)> {
        self.torch_groups
            .iter()
            .filter(|(k, _)| !self.is_leaf_group(k))
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect()
    }

    /// The functional ops of a scope with child modules (or the top level) pair with the
    /// ONNX values of the same scope by compatible kind, shape and order.
    pub(super) fn pair_ops_in_scope(&mut self) {
        if !self.onnx_has_scopes {
            return;
        }
        let groups = self.op_groups();
        for (key, t_ids) in groups {
            let o_ids = self.onnx_groups.get(&key).cloned().unwrap_or_default();
            if o_ids.is_empty() {
                self.leave_group(&key, &t_ids);
                continue;
            }
            // A value an earlier pass paired (a split's piece) is no place in the order.
            let mut o_ids: Vec<usize> = o_ids
                .into_iter()
                .filter(|&o| !self.state.is_taken(o))
                .collect();
            // The order the exporter wrote them in, where a graph tool sorted them again.
            // Rebuilt from names, that order can still interleave two chains of one family
            // (`x - w`, `x + w`) differently from TorchScript: there an op meets a node of
            // another type of its family only where the scope has none of its own type.
            let resorted = if let Some(ranks) = &self.onnx_export_ranks {
                o_ids.sort_by_key(|&o| ranks[o]);
                true
            } else {
                false
            };
            let reps = self.representatives(&key, &t_ids);
            for (t, o, certain) in self.align_by_order(&reps, &o_ids, resorted) {
                self.state.assign(t, o, PairedBy::OpOrder, certain);
            }
            self.explain_in_scope(&key, &t_ids);
        }
    }

    /// Graphs without scopes (run through a simplifier) still keep op order: align every
    /// TorchScript layer output with the whole ONNX graph, first within each set of values
    /// computed from the same model inputs (`input_reach`: towers the two sides order
    /// differently), then what is left over across them. Never certain: nothing but the
    /// order says two values are one call.
    pub(super) fn pair_globally(&mut self) {
        if self.onnx_has_scopes {
            return;
        }
        let mut reps: Vec<usize> = self
            .torch_groups
            .iter()
            .flat_map(|(k, ids)| self.representatives(k, ids))
            .collect();
        reps.sort();
        let mut onnx_ids: Vec<usize> = self
            .onnx
            .values
            .iter()
            .filter(|v| is_layer_candidate(v))
            .map(|v| v.id)
            .collect();
        // A simplifier that sorts a graph by depth interleaves its branches; the names keep
        // the order they were exported in (`export_order`).
        if let Some(ranks) = &self.onnx_export_ranks {
            onnx_ids.sort_by_key(|&o| ranks[o]);
        }
        let inputs: Vec<Pair> = self
            .boundary
            .iter()
            .filter(|p| matches!(self.torch.values[p.torch].role, ValueRole::Input(_)))
            .cloned()
            .collect();
        let torch_marks = input_marks(&self.torch.values, &inputs, |p| p.torch);
        let onnx_marks = input_marks(&self.onnx.values, &inputs, |p| p.onnx);
        let mut classes: Vec<u64> = reps.iter().map(|&t| torch_marks[t]).collect();
        classes.sort_unstable();
        classes.dedup();
        // One class is the whole graph: the plain global alignment below.
        if classes.len() > 1 {
            for class in classes {
                let class_reps = kept(&reps, |t| torch_marks[t] == class);
                let class_onnx = kept(&onnx_ids, |o| onnx_marks[o] == class);
                for (t, o, _) in self.align_by_order(&class_reps, &class_onnx, false) {
                    self.state.assign(t, o, PairedBy::GlobalOrder, false);
                }
            }
        }
        let open_reps = kept(&reps, |t| !self.state.is_paired(t));
        let free_onnx = kept(&onnx_ids, |o| !self.state.is_taken(o));
        for (t, o, _) in self.align_by_order(&open_reps, &free_onnx, false) {
            self.state.assign(t, o, PairedBy::GlobalOrder, false);
        }
        let groups: Vec<(String, Vec<usize>)> = self
            .torch_groups
            .iter()
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect();
        for (key, ids) in groups {
            self.explain_unpaired(
                &key,
                &ids,
                "the ONNX graph has no scopes and no compatible op in order",
            );
        }
    }

    /// A module call whose output some pass paired covers the values inside it.
    pub(super) fn account_module_internals(&mut self) {
        let groups: Vec<(String, Vec<usize>)> = self
            .torch_groups
            .iter()
            .filter(|(k, ids)| {
                self.is_leaf_group(k) && ids.iter().any(|id| self.state.is_paired(*id))
            })
            .map(|(k, ids)| (k.clone(), ids.clone()))
            .collect();
        for (key, ids) in groups {
            self.explain_unpaired(&key, &ids, "");
        }
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
    fn align_by_order(
        &self,
        reps: &[usize],
        o_ids: &[usize],
        own_type_first: bool,
    ) -> Vec<(usize, usize, bool)> {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
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
    fn placed_by_scope(&self, t: usize, o: usize) -> bool {
        self.onnx.values[o].scope_recorded
            && !torch_families(&self.torch.values[t].op).contains(&"layout")
    }

    /// The candidate (index into `o_ids`) whose value is closest to TorchScript value `t`,
    /// the later one on a tie; `None` when some data is not at hand.
    fn closest(&self, t: usize, candidates: &[usize], o_ids: &[usize]) -> Option<usize> {
        let reference = self.torch.values[t].data().ok()?;
        let mut best: Option<(f64, usize)> = None;
        for &c in candidates.iter().rev() {
            let test = self.onnx.values[o_ids[c]].data().ok()?;
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
        let test = self.onnx.values[o].data().ok()?;
        let mut best: Option<(f64, usize)> = None;
        for &c in candidates.iter().rev() {
            let reference = self.torch.values[reps[c]].data().ok()?;
            let d = relative_distance(&test, &reference);
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// Reasons for the values of a scoped group that found no twin in their scope.
    fn explain_in_scope(&mut self, key: &str, t_ids: &[usize]) {
        let otherwise = format!(
            "no ONNX op of a compatible kind and shape in scope '{}'",
            key_path(key)
        );
        self.explain_unpaired(key, t_ids, &otherwise);
    }

    /// Gives every value of group `key` that found no ONNX twin its reason, and whether it
    /// still counts as covered; `otherwise` is the reason when nothing explains it.
    fn explain_unpaired(&mut self, key: &str, t_ids: &[usize], otherwise: &str) {
        let call_compared = t_ids.iter().any(|&id| self.state.is_paired(id));
        for &id in t_ids {
            if self.state.is_paired(id) || self.state.identities.contains(&id) {
                continue;
            }
            let op = &self.torch.values[id].op;
            let reason = if vanishes_in_onnx(op) {
                ("identity in eval mode; ONNX drops it".to_string(), true)
            } else if op == "prim::Loop" {
                // The body's values are observed per iteration and paired with the unrolled
                // ONNX nodes; the loop's result is the last iteration's value.
                (
                    "a loop's result is its last iteration's value, compared inside the loop"
                        .to_string(),
                    true,
                )
            } else if op == "prim::If" {
                // Its producers are the taken branch's results, observed and paired in the
                // branch; an exporter that folded the if has no node for it.
                (
                    "an if's result is its taken branch's value, compared inside the branch"
                        .to_string(),
                    true,
                )
            } else if self.is_leaf_group(key) && call_compared {
                (format!("internal to module {}", key_path(key)), true)
            } else if torch_families(op).contains(&"layout") {
                (
                    "layout op without an ONNX twin (the exporter merged or folded it); it computes nothing to compare".to_string(),
                    true,
                )
            } else {
                (otherwise.to_string(), false)
            };
            self.state.reason.insert(id, reason);
        }
    }

    /// Reasons for a call whose scope has no ONNX node at all.
    fn leave_group(&mut self, key: &str, t_ids: &[usize]) {
        let path = key_path(key);
        let nested = format!("{path}.");
        // The ONNX twin exists but sits inside an If branch or Loop body, where no value can
        // be a graph output: only the control-flow node's result is compared, so the call
        // counts as not compared.
        let in_subgraph = self
            .onnx
            .uncapturable
            .iter()
            .filter(|_| !path.is_empty())
            .find(|u| u.module == path || u.module.starts_with(&nested));
        for &id in t_ids
            .iter()
            .filter(|id| !self.state.identities.contains(id))
        {
            let op = &self.torch.values[id].op;
            let reason = if vanishes_in_onnx(op) {
                ("identity in eval mode; ONNX drops it".to_string(), true)
            } else if let Some(u) = in_subgraph {
                (
                    format!(
                        "not compared: its ONNX twin is inside a control-flow subgraph ({}); only that node's result is compared",
                        u.reason.split(';').next().unwrap_or_default()
                    ),
                    false,
                )
            } else {
                (format!("no ONNX node carries the scope '{path}'"), false)
            };
            self.state.reason.insert(id, reason);
        }
    }
}

/// The ids of `ids` that `keep` keeps, in their order.
fn kept(ids: &[usize], keep: impl Fn(usize) -> bool) -> Vec<usize> {
    ids.iter().copied().filter(|&id| keep(id)).collect()
}
