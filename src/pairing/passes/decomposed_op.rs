//! Decompositions paired at their last value. An exporter writes `silu(x)` as
//! `Mul(x, Sigmoid(x))`; when the order meets the Sigmoid first (a graph without scopes, where
//! nothing says the two nodes are one call), the pair holds a partial value and fails at every
//! element. The node that completes the op reads the partial value and the partial value's own
//! input; when such a node of the same kind and shape is closer to the TorchScript value, the
//! pair moves to it (taking it from a value it matches worse, which the order had shifted
//! onto it).
//!
//! Structure settles it too, where values cannot: a fault after the partial value leaves
//! every candidate far from the TorchScript value. A TorchScript op read only by a layout op
//! (a reshape) has as its output the computing node that the reader's twin reads through
//! layout nodes only; when that node is computed from the pair's partial value and fits the
//! op's kind and shape, the pair moves to it. GPT-J's and Qwen3's attention
//! (`scaled_dot_product_attention`, 16 tokens and a head of 16) met the scores' MatMul first,
//! of the output's shape; with a Softmax fault the values no longer pointed at the MatMul
//! after the Softmax, and the fault was reported at the scores.

use super::super::ops::{onnx_families, Family};
use super::super::relaid::computes_nothing;
use super::super::wiring::computed_from_all;
use super::super::{compatible, consumers_of, is_layer_candidate, same_shape, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    fn complete_decompositions(&mut self) {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let consumers = consumers_of(ov);
        for t in self.state.paired() {
            let Some(o) = self.state.twin(t) else {
                continue; // it lost its value to an earlier one in this loop
            };
            let completing = consumers[o].iter().copied().find(|&c| {
                is_layer_candidate(&ov[c])
                    && same_shape(&tv[t], &ov[c])
                    && compatible(&tv[t].op, &ov[c].op)
                    && ov[o].inputs.iter().any(|u| ov[c].inputs.contains(u))
            });
            let Some(c) = completing else {
                continue;
            };
            let here = self.cx.distance(t, c);
            if here >= self.cx.distance(t, o) {
                continue;
            }
            // The completing node may hold a later value that the order shifted onto it;
            // the closer value takes it, and the other is left for the steps after this.
            if let Some(h) = self.state.holder(c) {
                if self.cx.distance(h, c) <= here {
                    continue;
                }
                self.state.unassign(h);
            }
            self.state.rebind(t, c, false);
        }
        self.complete_for_layout_readers();
    }

    /// The structural rule of the module doc: a pair not certain, whose TorchScript value has
    /// one reader, a layout op, moves to the computing node that reader's twin reads.
    fn complete_for_layout_readers(&mut self) {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let readers = consumers_of(tv);
        for t in self.state.paired() {
            let Some(made) = self.state.get(t).filter(|m| !m.certain) else {
                continue;
            };
            let o = made.onnx;
            let [u] = readers[t][..] else { continue };
            let Some(read) = self.state.twin(u).filter(|_| computes_nothing(&tv[u])) else {
                continue;
            };
            let c = computing_source(ov, read);
            if c == o
                || c == read
                || self.state.is_taken(c)
                || !same_shape(&tv[t], &ov[c])
                || !compatible(&tv[t].op, &ov[c].op)
                || !computed_from_all(ov, c, &[o])
            {
                continue;
            }
            self.state.rebind(t, c, false);
        }
    }
}

/// The first node up from ONNX value `o` that is not a layout node, following the one float
/// value each layout node rearranges (a Reshape's shape operand is not followed).
fn computing_source(ov: &[crate::capture::CapturedValue], mut o: usize) -> usize {
    while onnx_families(&ov[o].op).contains(Family::Layout) {
        let data: Vec<usize> = ov[o]
            .inputs
            .iter()
            .copied()
            .filter(|&i| ov[i].dtype.is_float())
            .collect();
        match data[..] {
            [only] => o = only,
            _ => break,
        }
    }
    o
}

pub(super) struct DecomposedOp;

impl Pass for DecomposedOp {
    fn name(&self) -> &'static str {
        "decomposed_op"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.complete_decompositions();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone, run_alone_after, Builder};
    use super::*;
    use crate::capture::{Capture, Side};

    #[test]
    fn a_pair_on_a_sigmoid_moves_to_the_mul_that_completes_the_silu() {
        // The order met the SiLU at its Sigmoid and shifted the residual add onto the Mul.
        let (t, o, [conv, act, add, oconv, osig, omul, _]) = graphs::silu_as_mul_and_sigmoid();
        let earlier = [(conv, oconv), (act, osig), (add, omul)];
        let state = run_alone(&DecomposedOp, &t, &o, &earlier);
        let made = state.get(act).expect("the silu stays paired");
        assert_eq!((made.onnx, made.by), (omul, "decomposed_op"));
        assert!(
            !state.is_paired(add),
            "the add, further from the Mul, lets it go"
        );
        assert_eq!(state.twin(conv), Some(oconv));
    }

    /// An attention of 16 tokens and a head of 16, whose scores' MatMul has its output's
    /// shape, read by a reshape; ONNX's values after the Softmax are off (a fault), so no
    /// value points at the attention's own MatMul. Ids: torch attention, reshape; onnx
    /// scores, output MatMul, Reshape.
    fn attention_read_by_a_reshape() -> (Capture, Capture, [usize; 5]) {
        let x = [1.0, 2.0, 3.0, 4.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let ta = t.op("aten::scaled_dot_product_attention", "attn", &[ti], &x);
        let tr = t.op("aten::reshape", "", &[ta], &x);
        t.output(0, tr);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let scores = o.op("MatMul", "attn", &[oi], &[9.0, 8.0, 7.0, 6.0]);
        let soft = o.op("Softmax", "attn", &[scores], &[0.1, 0.2, 0.3, 0.4]);
        let out = o.op("MatMul", "attn", &[soft, oi], &[-4.0, -3.0, -2.0, -1.0]);
        let or = o.op("Reshape", "", &[out], &[-4.0, -3.0, -2.0, -1.0]);
        o.output(0, or);
        (t.build(), o.build(), [ta, tr, scores, out, or])
    }

    #[test]
    fn an_attention_met_at_its_scores_moves_to_what_its_reshape_reads() {
        let (t, o, [ta, tr, scores, out, or]) = attention_read_by_a_reshape();
        let state = run_alone(&DecomposedOp, &t, &o, &[(ta, scores), (tr, or)]);
        let made = state.get(ta).expect("the attention stays paired");
        assert_eq!((made.onnx, made.by), (out, "decomposed_op"));
    }

    #[test]
    fn a_certain_pair_is_not_moved_by_structure() {
        let (t, o, [ta, tr, scores, _, or]) = attention_read_by_a_reshape();
        let state = run_alone_after(&DecomposedOp, &t, &o, &[(tr, or)], |s| {
            s.assign(ta, scores, true)
        });
        assert_eq!(state.twin(ta), Some(scores));
    }
}
