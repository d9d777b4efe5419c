//! The `fused_producer` pass: a Conv whose node carries the BatchNorm's scope (the dynamo
//! exporter's folding) has no node of its own; it is compared within the BatchNorm's pair.

use super::super::ops::{compatible, torch_families, Family};
use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// An unpaired conv whose consumer module is paired with a node of the conv's own kind
    /// (a Conv carrying the BatchNorm's scope): the conv is fused into that node.
    fn fuse_producer_into_node(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let outputs = self.module_outputs();
        for &(u, _) in &outputs {
            if self.state.is_paired(u) || self.state.accounted(u) {
                continue;
            }
            let consumer = outputs
                .iter()
                .find(|&&(v, _)| tv[v].inputs.contains(&u) && self.state.is_paired(v));
            let Some(&(v, ref v_path)) = consumer else {
                continue;
            };
            let o = self.state.twin(v).expect("paired");
            let conv = torch_families(&tv[u].op).contains(Family::Conv);
            if conv && compatible(&tv[u].op, &ov[o].op) {
                let v_path = v_path.clone();
                self.state.rebind(v, o, false);
                self.fuse_into_consumer_node(u, v, &v_path);
            }
        }
    }
}

pub(super) struct FusedProducer;

impl Pass for FusedProducer {
    fn name(&self) -> &'static str {
        "fused_producer"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.fuse_producer_into_node();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::graphs::dynamo_conv_in_batchnorm_scope;
    use super::super::super::tests::run_alone;
    use super::*;

    #[test]
    fn a_conv_folded_into_the_batchnorms_node_is_compared_within_its_pair() {
        // The dynamo exporter's folding: the Conv carries the BatchNorm's scope.
        let (t, o, [tc, tb, oc]) = dynamo_conv_in_batchnorm_scope();
        let state = run_alone(&FusedProducer, &t, &o, &[(tb, oc)]);
        assert_eq!(state.fused(tb), [tc]);
        assert!(!state.is_paired(tc) && state.accounted(tc));
        assert_eq!(state.twin(tb), Some(oc));
    }
}
