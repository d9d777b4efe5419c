//! A query or key that ONNX holds multiplied by the attention's own scale: a simplifier
//! folded the scale into the projection before it.
//!
//! `scaled_dot_product_attention` computes `softmax(q k^T * s)` with `s = 1/sqrt(d)` (`d` the
//! head size). The exporters decompose it as `(q * sqrt(s)) (k^T * sqrt(s))`, and a simplifier
//! (onnxslim) folds the query's `Mul` into the weights and bias of the Linear that computes
//! the query, so that Linear's ONNX value is `sqrt(s)` times PyTorch's at every element while
//! both graphs compute the same attention. A pair whose ONNX value is exactly `sqrt(s)` or
//! `s` times its TorchScript value, whose TorchScript value reaches an attention as its query
//! or key through layout ops alone, and whose attention's pair agrees, is unpaired and counted
//! as covered: its data is compared at the attention's output, where a wrong factor shows. A
//! fault planted on the projection scales it by another factor (or not exactly), and the
//! attention it feeds disagrees, so it keeps its pair and fails.

use super::super::ops::{torch_families, torch_kind, vanishes_in_onnx, Family, OpKind};
use super::super::reason::UnpairedReason;
use super::super::scale_factors::single_factor;
use super::super::AGREES;
use super::super::{consumers_of, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

/// How close a factor must be to the attention's scale (float32 rounding of the fold).
const SAME_FACTOR: f64 = 1e-4;

impl Pairer<'_> {
    fn unpair_folded_attention_scale(&mut self) {
        let tv = &self.cx.torch.values;
        let consumers = consumers_of(tv);
        let mut folded = Vec::new();
        for t in self.state.paired() {
            let Some(scale) = self.attention_scale_reached(t, &consumers) else {
                continue;
            };
            let o = self.state.twin(t).expect("paired");
            let (Ok(test), Ok(reference)) = (self.cx.onnx.values[o].data(), tv[t].data()) else {
                continue;
            };
            let Some(k) = single_factor(&test, &reference) else {
                continue;
            };
            if [scale.sqrt(), scale]
                .iter()
                .any(|s| (k - s).abs() <= SAME_FACTOR * s)
            {
                folded.push((t, k));
            }
        }
        for (t, k) in folded {
            self.state.unassign(t);
            self.state
                .leave(t, UnpairedReason::AttentionScale { factor: k });
        }
    }

    /// The default scale `1/sqrt(d)` of the attention that TorchScript value `t` reaches as
    /// its query or key through layout ops alone, when that attention's pair agrees.
    fn attention_scale_reached(&self, t: usize, consumers: &[Vec<usize>]) -> Option<f64> {
        let tv = &self.cx.torch.values;
        let passes_on =
            |op: &str| torch_families(op).is_only(Family::Layout) || vanishes_in_onnx(op);
        let mut v = t;
        loop {
            let [next] = consumers[v][..] else {
                return None;
            };
            // The attention op whose scale a simplifier can fold into its query or key.
            if torch_kind(&tv[next].op) == Some(OpKind::Attention) {
                let position = tv[next].inputs.iter().position(|&u| u == v)?;
                let agrees = self
                    .state
                    .twin(next)
                    .is_some_and(|o| self.cx.distance(next, o) < AGREES);
                let d = *tv[v].shape.last()? as f64;
                return (position < 2 && agrees && d > 0.0).then(|| 1.0 / d.sqrt());
            }
            if !passes_on(&tv[next].op) {
                return None;
            }
            v = next;
        }
    }
}

pub(super) struct AttentionScale;

impl Pass for AttentionScale {
    fn name(&self) -> &'static str {
        "attention_scale"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.unpair_folded_attention_scale();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    /// Runs the pass on the attention whose ONNX query is `factor` times PyTorch's, every
    /// value paired with its own node; returns the state and the query and attention ids.
    fn run_with_query_times(factor: f32) -> (PairState, usize, usize) {
        let (t, o, [tq, tk, tv, att, oq, ok, ov, oatt]) = graphs::attention_scale_folded(factor);
        let earlier = [(tq, oq), (tk, ok), (tv, ov), (att, oatt)];
        let state = run_alone(&AttentionScale, &t, &o, &earlier);
        assert!(
            state.is_paired(tk),
            "the key ONNX holds unscaled stays compared"
        );
        (state, tq, att)
    }

    #[test]
    fn a_query_holding_half_the_attention_scale_is_unpaired_and_covered() {
        let (state, tq, att) = run_with_query_times(0.5f32.sqrt());
        assert!(!state.is_paired(tq) && state.accounted(tq));
        assert!(
            state.is_paired(att),
            "the attention's output is where it is compared"
        );
    }

    #[test]
    fn a_query_scaled_by_another_factor_keeps_its_pair() {
        let (state, tq, _) = run_with_query_times(1.0895);
        assert!(
            state.is_paired(tq),
            "a planted scale is compared, and fails"
        );
    }
}
