//! The `folded_scale` pass.
//!
//! A value that ONNX holds multiplied by a constant factor (one, or one per channel), the
//! factor folded into the weights of the nodes that read it.
//!
//! A simplifier may move a constant factor across a linear op: onnxsim drops the `* 0.5`
//! that ends a GELU's decomposition and halves the next Conv's weights instead, so the
//! GELU's last ONNX value is twice PyTorch's at every element while both graphs are right;
//! a simplifier folds an RMSNorm's weight into the MatMul after it, so the norm's last ONNX
//! value is PyTorch's divided by that weight, channel by channel (along the axis the
//! reader's weights index).
//! Exact proportionality is no coincidence of rounding, and only a reader
//! with weights can have absorbed it, so such a pair is unpaired and counted as covered (its
//! data is compared where it is used: a wrong factor shows at the reader). Nodes with
//! weights of their own are never unpaired here: a planted scale on their weights yields
//! the same proportionality, and it is a fault.

use super::super::reason::{ScaleFactor, UnpairedReason};
use super::super::scale_factors::could_be_folded;
use super::super::scale_factors::fitted_factors;
use super::super::scale_factors::NOT_ONE;
use super::super::{consumers_of, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    fn unpair_folded_scale(&mut self) {
        let ov = &self.cx.onnx.values;
        let readers_of = consumers_of(ov);
        let candidates: Vec<(usize, usize)> = self
            .state
            .paired()
            .into_iter()
            .filter_map(|t| self.state.get(t).map(|made| (t, made.onnx)))
            .filter(|&(_, o)| could_be_folded(ov, o, &readers_of[o]))
            .collect();
        for (t, o) in candidates {
            let readers: Vec<&str> = readers_of[o].iter().map(|&r| ov[r].op.as_str()).collect();
            let Some(k) = fitted_factors(&ov[o], &self.cx.torch.values[t], &readers) else {
                continue;
            };
            if k.iter().all(|k| (k - 1.0).abs() < NOT_ONE) {
                continue;
            }
            self.state.unassign(t);
            let factor = match k[..] {
                [k] => ScaleFactor::Scalar(k),
                _ => ScaleFactor::PerChannel,
            };
            let reason = UnpairedReason::FoldedScale {
                factor,
                node: ov[readers_of[o][0]].node.clone(),
            };
            self.state.leave(t, reason);
        }
    }
}

pub(super) struct FoldedScale;

impl Pass for FoldedScale {
    fn name(&self) -> &'static str {
        "folded_scale"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.unpair_folded_scale();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    #[test]
    fn a_value_twice_its_twin_read_by_a_conv_is_unpaired_and_covered() {
        let (t, o, [t1, tg, t2, o1, og, o2]) = graphs::gelu_scale_folded("Conv");
        let state = run_alone(&FoldedScale, &t, &o, &[(t1, o1), (tg, og), (t2, o2)]);
        assert!(!state.is_paired(tg), "twice the GELU is no twin of it");
        assert!(
            state.accounted(tg),
            "the Conv reading it absorbed the factor"
        );
        assert_eq!((state.twin(t1), state.twin(t2)), (Some(o1), Some(o2)));
    }

    #[test]
    fn a_factor_no_reader_can_absorb_keeps_its_pair() {
        let (t, o, [t1, tg, t2, o1, og, o2]) = graphs::gelu_scale_folded("Relu");
        let state = run_alone(&FoldedScale, &t, &o, &[(t1, o1), (tg, og), (t2, o2)]);
        assert_eq!(
            state.twin(tg),
            Some(og),
            "a Relu has no weights to hold the factor"
        );
    }
}
