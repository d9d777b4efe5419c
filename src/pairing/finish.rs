//! Turning the pass state into the pairing the rest of the tool reads: layer pairs in
//! execution order, coverage on both sides, and every value left over with its reason.

use super::reason::UnpairedReason;
use super::scopes::key_path;
use super::{is_layer_candidate, Coverage, Pair, Pairer, Pairing, Unpaired};
use crate::capture::{CapturedValue, Side};

impl Pairer<'_> {
    pub(super) fn finish(mut self, p: &mut Pairing) {
        p.layers = self
            .state
            .paired()
            .into_iter()
            .map(|t| {
                let made = self.state.get(t).expect("paired");
                Pair {
                    torch: t,
                    onnx: made.onnx,
                    paired_by: made.by,
                    fused: self.state.fused(t),
                    follows_dataflow: !self.state.is_off_dataflow(t),
                    certain: made.certain,
                }
            })
            .collect();
        self.account_folded_constants();
        let mut cov = Coverage::default();
        self.account_unused(&mut cov);
        self.torch_coverage(&mut cov);
        p.unpaired.extend(self.torch_unpaired());
        p.unpaired.extend(self.onnx_coverage(&mut cov));
        p.coverage = cov;
    }

    /// A constant module that ONNX computes may still have parts the exporter folded (a
    /// relative-position bucket's comparisons folded, its table kept): what of it met no
    /// twin was folded, which is bookkeeping, not a gap in what was compared.
    fn account_folded_constants(&mut self) {
        for &t in &self.cx.kept_constants {
            if !self.state.is_paired(t) {
                self.state.leave(t, UnpairedReason::FoldedConstant);
            }
        }
    }

    /// The values set apart as unused (`unused_values`): left with their reason, and counted
    /// as the groups are (a leaf module call once), covered.
    fn account_unused(&mut self, cov: &mut Coverage) {
        for (key, ids) in &self.cx.unused_groups {
            let counted = if self.cx.is_leaf_group(key) && !self.cx.torch_groups.contains_key(key) {
                1
            } else if self.cx.is_leaf_group(key) {
                0 // the call's live output counts it
            } else {
                ids.len()
            };
            cov.torch_layers_total += counted;
            cov.torch_layers_paired += counted;
            // A pass that reads every value rather than the groups may still have paired one.
            for &t in ids {
                if !self.state.is_paired(t) {
                    self.state.leave(t, UnpairedReason::ReachesNoOutput);
                }
            }
        }
    }

    /// Torch coverage: leaf module calls count once, functional ops each.
    fn torch_coverage(&self, cov: &mut Coverage) {
        for (key, ids) in &self.cx.torch_groups {
            let leaf = self.cx.is_leaf_group(key);
            let counted: Vec<usize> = if leaf {
                ids.last().copied().into_iter().collect()
            } else {
                ids.clone()
            };
            let call_paired = leaf && ids.iter().any(|&i| self.state.is_paired(i));
            for id in counted {
                cov.torch_layers_total += 1;
                if self.state.is_paired(id) || self.state.accounted(id) || call_paired {
                    cov.torch_layers_paired += 1;
                }
            }
        }
    }

    fn torch_unpaired(&self) -> Vec<Unpaired> {
        (self.state.reasons().into_iter())
            .map(|(id, reason)| unpaired(Side::Torch, &self.cx.torch.values[id], reason.clone()))
            .collect()
    }

    /// ONNX coverage: a node counts when its value is compared or is a graph boundary, or
    /// when it lies inside a module call whose output is compared (the first nodes of a
    /// decomposition). Returns the nodes that count as missing.
    fn onnx_coverage(&self, cov: &mut Coverage) -> Vec<Unpaired> {
        let mut missing = Vec::new();
        for v in self.cx.onnx.values.iter().filter(|v| is_layer_candidate(v)) {
            cov.onnx_nodes_total += 1;
            if self.state.is_taken(v.id) || self.state.is_absorbed(v.id) {
                cov.onnx_nodes_paired += 1;
                continue;
            }
            let reason = match self.cx.onnx_keys[v.id].as_ref() {
                Some(k) if !self.cx.torch_groups.contains_key(k) && !k.is_empty() => {
                    UnpairedReason::NoTorchCall {
                        scope: key_path(k).to_string(),
                    }
                }
                Some(k) => UnpairedReason::NoCompatibleTorchOp {
                    scope: key_path(k).to_string(),
                },
                None => UnpairedReason::NotALayer,
            };
            missing.push(unpaired(Side::Onnx, v, reason));
        }
        missing
    }
}

/// `v` left unpaired for `reason`, covered when the reason says so.
fn unpaired(side: Side, v: &CapturedValue, reason: UnpairedReason) -> Unpaired {
    Unpaired {
        accounted: reason.covered(),
        side,
        id: v.id,
        name: v.name.clone(),
        op: v.op.clone(),
        module: v.module_path().to_string(),
        reason,
    }
}
