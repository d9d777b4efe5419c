//! The `fusion` pass: a paired module whose ONNX node also computes the unpaired modules
//! after it (a Conv with its BatchNorm folded in, a `FusedConv` with its activation); the
//! chain is weighed as a whole and the pair moves to the value the node computes
//! (`chains`).

use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// A paired module whose ONNX node also computes the unpaired modules after it. The
    /// chain of unpaired consumers is weighed as a whole, since a step of it (the
    /// BatchNorm before a ReLU) can be further from the fused output than the one before.
    /// Graphs without scopes need it as much: a simplifier folds each BatchNorm into its
    /// Conv, and the global order, seeing conv and bn both fit a Conv, gives a branch's conv
    /// one branch's Conv and its bn the next branch's (SK or Inception blocks run parallel
    /// convs of one shape).
    fn fuse_consumers_into_node(&mut self) {
        let outputs = self.module_outputs();
        let starts: Vec<usize> = outputs.iter().map(|&(u, _)| u).collect();
        self.prefetch_chains(&starts, &outputs);
        for u in starts {
            self.fuse_chain_after(u, &outputs);
        }
    }
}

pub(super) struct Fusion;

impl Pass for Fusion {
    fn name(&self) -> &'static str {
        "fusion"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.fuse_consumers_into_node();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::graphs::legacy_conv_batchnorm_fused;
    use super::super::super::tests::run_alone;
    use super::*;

    #[test]
    fn a_conv_node_that_computes_the_batchnorm_after_it_moves_its_pair_there() {
        let (t, o, [tc, tb, tr, oc, or]) = legacy_conv_batchnorm_fused();
        // What `module_output` left: the conv met the Conv of its scope.
        let state = run_alone(&Fusion, &t, &o, &[(tc, oc), (tr, or)]);
        let made = state.get(tb).expect("the batchnorm holds the node");
        assert_eq!((made.onnx, made.by), (oc, "fusion"));
        assert_eq!(state.fused(tb), [tc]);
        assert!(!state.is_paired(tc) && state.accounted(tc));
    }
}
