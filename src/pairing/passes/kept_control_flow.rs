//! TorchScript values whose ONNX twins stay inside a control-flow subgraph: named, with the
//! node they stay in and why, and counted as not compared.
//!
//! The ONNX rewrite (`onnx::control_flow`) unrolls loops and inlines ifs whose trip counts
//! and conditions constants or the check's own inputs fix (`onnx::probe`); what is left as a
//! `Loop` or `If` node could not be rewritten (its steering differs between the samples, a
//! scan output of a loop that ran no iteration, ...), and the values inside it cannot be
//! graph outputs. The TorchScript side still observes them (each loop iteration, the branch
//! that ran). A value left without a twin whose nearest paired consumers are all that one
//! node is part of what the node computes: only the node's result is compared, which says
//! nothing of where inside the error was made, so the value counts against coverage. A loop
//! body's value also reaches, through its last iteration, what follows the loop; there the
//! kept loop among its nearest paired consumers is the node that computes it. Module
//! calls inside are accounted by scope already (`scoped::leave_group`); this covers the
//! functional ops of a loop body or branch (`x + 0.5 * y`), which have no scope to look up.

use super::super::fused_nodes::nearest_consumer_twins;
use super::super::ops::{onnx_kind, OpKind};
use super::super::reason::UnpairedReason;
use super::super::{consumers_of, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    fn account_kept_control_flow(&mut self) {
        let open = self.open_representatives();
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let consumers = consumers_of(tv);
        for t in open.iter().map(|o| o.id) {
            if self.state.is_paired(t) || self.state.accounted(t) {
                continue;
            }
            let twins = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            // ONNX ops whose values inside stay in a subgraph once the rewrite has run.
            let is_control_flow =
                |o: &usize| onnx_kind(&ov[*o].op).is_some_and(OpKind::is_control_flow);
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
            let reason = UnpairedReason::InsideKeptControlFlow {
                op: ov[node].op.clone(),
                node: ov[node].node.clone(),
            };
            self.state.leave(t, reason);
        }
    }
}

pub(super) struct KeptControlFlow;

impl Pass for KeptControlFlow {
    fn name(&self) -> &'static str {
        "kept_control_flow"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.account_kept_control_flow();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    /// `x * 2 + 1` computed in a loop body that ONNX keeps as a Loop node (the name of the
    /// body's value records its iteration), its result paired with the loop's `after`:
    /// returns the state and the body's mul.
    fn loop_body_before(onnx_op: &str) -> (PairState, usize) {
        let x = [1.0, 2.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let tm = t.op("aten::mul", "", &[ti], &[2.0, 4.0]);
        let ta = t.op("aten::add", "", &[tm], &[3.0, 5.0]);
        t.output(0, ta);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let ol = o.op(onnx_op, "", &[oi], &[3.0, 5.0]);
        o.output(0, ol);
        let mut tc = t.build();
        tc.values[tm].name = "mul@iter0".into();
        let state = run_alone(&KeptControlFlow, &tc, &o.build(), &[(ta, ol)]);
        (state, tm)
    }

    #[test]
    fn a_value_that_flows_only_into_a_kept_loop_is_named_and_not_covered() {
        let (state, tm) = loop_body_before("Loop");
        assert!(
            state.reasons().contains_key(&tm),
            "the body's value has a reason"
        );
        assert!(!state.accounted(tm), "only the loop's result is compared");
    }

    #[test]
    fn a_value_whose_consumer_meets_an_ordinary_node_is_left_open() {
        let (state, tm) = loop_body_before("Add");
        assert!(!state.reasons().contains_key(&tm));
    }
}
