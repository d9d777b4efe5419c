//! The `partial_linear` pass: a Linear compared with a bias-less MatMul (its bias moved
//! into a fused node) is unpaired; see `fused_nodes`.

use super::super::fused_nodes::lacks_bias;
use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// Unpairs a Linear compared with a bare MatMul whose difference from it is one vector
    /// on every row: the bias was moved into a later fused node, and the MatMul's value is
    /// not the Linear's output. A real fault in a bias is in the node that adds it, which
    /// is still compared; a bias the export dropped fails every layer after it.
    fn split_partial_linear(&mut self) {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let partial: Vec<usize> = self
            .state
            .paired()
            .into_iter()
            .filter(|&t| lacks_bias(&tv[t], &ov[self.state.twin(t).expect("paired")]))
            .collect();
        for t in partial {
            let o = self.state.unassign(t).expect("paired");
            let reason = format!(
                "its ONNX value {} lacks the bias, which a later node adds",
                ov[o].node
            );
            self.state.leave(t, reason, false);
        }
    }
}

pub(super) struct PartialLinear;

impl Pass for PartialLinear {
    fn name(&self) -> &'static str {
        "partial_linear"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.split_partial_linear();
    }
}
