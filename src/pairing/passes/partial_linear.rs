//! The `partial_linear` pass: a Linear compared with a bias-less MatMul (its bias moved
//! into a fused node) is unpaired; see `fused_nodes`.

use super::super::fused_nodes::lacks_bias;
use super::super::reason::UnpairedReason;
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
            let reason = UnpairedReason::LacksBias {
                node: ov[o].node.clone(),
            };
            self.state.leave(t, reason);
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

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_linear_met_with_its_bias_less_matmul_is_unpaired_and_not_covered() {
        // Two rows of two channels: the bias is one vector on every row.
        let x = [1.0, 2.0, 3.0, 4.0];
        let biased = [1.5, 1.75, 3.5, 3.75];
        let bare = [1.0, 2.0, 3.0, 4.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let tl = t.op("aten::linear", "fc", &[ti], &biased);
        let tr = t.op("aten::relu", "act", &[tl], &biased);
        t.output(0, tr);
        for v in [ti, tl, tr, tr + 1] {
            t.reshape(v, &[2, 2]);
        }
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let om = o.op("MatMul", "fc", &[oi], &bare);
        let of = o.op("BiasRelu", "", &[om], &biased);
        o.output(0, of);
        for v in [oi, om, of, of + 1] {
            o.reshape(v, &[2, 2]);
        }
        let state = run_alone(&PartialLinear, &t.build(), &o.build(), &[(tl, om)]);
        assert!(!state.is_paired(tl), "a partial value is not compared");
        assert!(
            !state.accounted(tl),
            "and not covered: its bias went elsewhere"
        );
        assert!(
            state.was_undone(tl, om),
            "a later pass does not make it again"
        );
    }
}
