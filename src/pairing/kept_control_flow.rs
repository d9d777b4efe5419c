//! TorchScript values whose ONNX twins stay inside a control-flow subgraph: covered by the
//! control-flow node's result, with that reason, instead of counted as missing.
//!
//! The ONNX rewrite (`onnx::control_flow`) unrolls static loops and inlines an If on a
//! constant; what is left as a `Loop` or `If` node has a trip count or condition computed
//! from the data, and the values inside it cannot be graph outputs. The TorchScript side
//! still observes them (each loop iteration, the branch that ran). A value left without a
//! twin whose nearest paired consumers are all that one node is part of what the node
//! computes: its result is compared, so the value is accounted for, not missing. A loop
//! body's value also reaches, through its last iteration, what follows the loop; there the
//! kept loop among its nearest paired consumers is the node that computes it. Module
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
            let is_control_flow = |o: &usize| CONTROL_FLOW_OPS.contains(&ov[*o].op.as_str());
            let mut kept: Vec<usize> = twins.iter().copied().filter(is_control_flow).collect();
            kept.dedup();
            // A loop body's value (`name@iter3`) also reaches what follows the loop through
            // its last iteration, which the capture feeds to the loop's consumers: among its
            // nearest paired consumers, the kept loop node is the one that computes it.
            let in_body = tv[t].name.contains("@iter");
            let node = match kept[..] {
                [node] if in_body || twins.iter().all(|&o| o == node) => node,
                _ => continue,
            };
            let reason = format!(
                "computed inside ONNX {} node {}, which keeps its subgraph (coverage.uncapturable says why); compared through that node's result",
                ov[node].op, ov[node].node
            );
            self.state.reason.insert(t, (reason, true));
        }
    }
}
