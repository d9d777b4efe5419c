//! TorchScript values whose ONNX twins stay inside a control-flow subgraph: covered by the
//! control-flow node's result, with that reason, instead of counted as missing.
//!
//! The ONNX rewrite (`onnx::control_flow`) unrolls static loops and inlines an If on a
//! constant; what is left as a `Loop` or `If` node has a trip count or condition computed
//! from the data, and the values inside it cannot be graph outputs. The TorchScript side
//! still observes them (each loop iteration, the branch that ran). A value left without a
//! twin whose nearest paired consumers are all that one node is part of what the node
//! computes: its result is compared, so the value is accounted for, not missing. Module
//! calls inside are accounted by scope already (`scoped::leave_group`); this covers the
//! functional ops of a loop body or branch (`x + 0.5 * y`), which have no scope to look up.

use super::fused_nodes::nearest_consumer_twins;
use super::{consumers_of, Pairer};

/// ONNX ops whose values inside stay in a subgraph once the rewrite has run.
const CONTROL_FLOW_OPS: &[&str] = &["Loop", "If", "Scan"];

impl Pairer<'_> {
    pub(super) fn account_kept_control_flow(&mut self) {
        let open = self.open_representatives();
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let consumers = consumers_of(tv);
        for t in open.iter().map(|o| o.id) {
            if self.state.is_paired(t) || self.state.accounted(t) {
                continue;
            }
            let twins = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            let Some(&node) = twins.first() else {
                continue;
            };
            if twins.iter().all(|&o| o == node) && CONTROL_FLOW_OPS.contains(&ov[node].op.as_str())
            {
                let reason = format!(
                    "computed inside ONNX {} node {}, which keeps its subgraph (coverage.uncapturable says why); compared through that node's result",
                    ov[node].op, ov[node].node
                );
                self.state.reason.insert(t, (reason, true));
            }
        }
    }
}
