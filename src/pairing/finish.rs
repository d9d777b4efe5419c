//! Turning the pass state into the pairing the rest of the tool reads: layer pairs in
//! execution order, coverage on both sides, and every value left over with its reason.

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
                let reason =
                    "computes only from weights and constants; the exporter folded it".to_string();
                self.state.leave(t, reason, true);
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
            .map(|(id, (reason, accounted))| {
                unpaired(
                    Side::Torch,
                    &self.cx.torch.values[id],
                    reason.to_string(),
                    accounted,
                )
            })
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
                Some(k) if !self.cx.torch_groups.contains_key(k) && !k.is_empty() => format!(
                    "scope '{}' has no TorchScript module call to match",
                    key_path(k)
                ),
                Some(k) => format!(
                    "no TorchScript op of a compatible kind and shape in scope '{}'",
                    key_path(k)
                ),
                None => "not a layer".to_string(),
            };
            missing.push(unpaired(Side::Onnx, v, reason, false));
        }
        missing
    }
}

fn unpaired(side: Side, v: &CapturedValue, reason: String, accounted: bool) -> Unpaired {
    Unpaired {
        side,
        id: v.id,
        name: v.name.clone(),
        op: v.op.clone(),
        module: v.module_path().to_string(),
        reason,
        accounted,
    }
}
