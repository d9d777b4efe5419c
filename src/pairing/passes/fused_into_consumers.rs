//! The `fused_into_consumers` pass: values whose consumers all meet one scope-less fused
//! node were fused into it, covered; see `fused_nodes`.

use super::super::fused_nodes::nearest_consumer_twins;
use super::super::fused_nodes::Open;
use super::super::reason::UnpairedReason;
use super::super::wiring::{computed_from_all, nearest_producer_twins};
use super::super::{consumers_of, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// A TorchScript value left without a twin whose nearest consumers are all paired with
    /// one scope-less ONNX node computed from its producers' twins was fused into that node
    /// (a residual Add or a Linear's bias inside `SkipLayerNormalization`): covered. When it
    /// is a leaf module's output, the module's other values were fused with it (GPT-2's
    /// `Conv1D` reshapes, multiplies and reshapes back; ONNX Runtime keeps a bare MatMul and
    /// adds the bias in the next fused node): covered too.
    fn account_fused_into_consumers(&mut self) {
        let open = self.open_representatives();
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let consumers = consumers_of(tv);
        let mut fused_calls: Vec<(usize, String)> = Vec::new();
        for &Open {
            id: t,
            module_output,
            ..
        } in &open
        {
            if self.state.is_paired(t) || self.state.accounted(t) {
                continue;
            }
            let twins = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            let Some(&node) = twins.first() else {
                continue;
            };
            let one_fused_node = twins.iter().all(|&o| o == node) && !ov[node].scope_recorded;
            let producers = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            if one_fused_node && computed_from_all(ov, node, &producers) {
                let reason = UnpairedReason::FusedIntoConsumer {
                    node: ov[node].node.clone(),
                    op: ov[node].op.clone(),
                };
                self.state.leave(t, reason);
                if module_output {
                    fused_calls.push((t, ov[node].node.clone()));
                }
            }
        }
        for (t, node) in fused_calls {
            let Some(ids) = self.cx.torch_groups.values().find(|ids| ids.contains(&t)) else {
                continue;
            };
            let module = tv[t].module_path();
            for &id in ids {
                if id != t && !self.state.is_paired(id) && !self.state.accounted(id) {
                    let reason = UnpairedReason::InternalToFusedModule {
                        module: module.to_string(),
                        node: node.clone(),
                    };
                    self.state.leave(id, reason);
                }
            }
        }
    }
}

pub(super) struct FusedIntoConsumers;

impl Pass for FusedIntoConsumers {
    fn name(&self) -> &'static str {
        "fused_into_consumers"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.account_fused_into_consumers();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    #[test]
    fn a_bias_and_residual_add_inside_a_skip_layer_norm_are_covered() {
        // What `scopeless` left: the LayerNorm met the fused node; the Linear (whose MatMul
        // lacks the bias) and the residual add are open.
        let (t, o, [lin, add, ln, ffn, _, fused, offn]) = graphs::skip_layer_norm();
        let state = run_alone(&FusedIntoConsumers, &t, &o, &[(ln, fused), (ffn, offn)]);
        for v in [lin, add] {
            assert!(state.accounted(v), "value {v} is inside the fused node");
        }
    }

    #[test]
    fn a_consumer_twin_with_a_scope_of_its_own_fuses_nothing_before_it() {
        let (t, mut o, [lin, add, ln, ffn, _, fused, offn]) = graphs::skip_layer_norm();
        o.values[fused].scope_recorded = true;
        let state = run_alone(&FusedIntoConsumers, &t, &o, &[(ln, fused), (ffn, offn)]);
        assert!(!state.accounted(lin) && !state.accounted(add));
    }
}
