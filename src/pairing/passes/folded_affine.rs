//! A weighted node that also applies the constant scale or shift that follows it.
//!
//! Simplifiers and ONNX Runtime fold an elementwise multiply, divide, add or subtract by a
//! constant into the weights and bias of the Conv, Gemm or MatMul before it: a layer scale
//! (`x * gamma`, timm's MetaNeXt and SwiftFormer blocks, BEiT's `lambda_1`), a residual
//! branch's fixed factor; the node may be followed by the Reshape that restores a 2-D Gemm's
//! leading dims, which then holds the scaled value.
//! The TorchScript op has no ONNX node of its own, so the node paired with the module before
//! it computes the op's output, not the module's. Structure says which ops can have been
//! folded (the module's only consumer, an elementwise op whose other operands are computed
//! from weights and constants alone, of the node's shape); the values choose which of the
//! chain the node computes, so no pair made here is certain. A planted fault in the weights
//! still fails: the node then matches no value of the chain.

use super::super::ops::{onnx_families, torch_families, vanishes_in_onnx, Families, Family};
use super::super::reason::UnpairedReason;
use super::super::{constant_values, consumers_of, is_layer_candidate, same_shape, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;
use crate::capture::CapturedValue;

/// The most constant ops one weighted node is taken to absorb (a scale, then a shift).
const MAX_FOLDED: usize = 2;

/// Below this relative distance the pair already agrees: nothing to move.
const AGREES: f64 = 1e-3;

/// ONNX ops whose weights and bias can absorb a constant scale or shift.
fn has_weights(onnx_op: &str) -> bool {
    onnx_families(onnx_op).meets(Families::of(&[Family::Conv, Family::MatMul, Family::Norm]))
}

/// The most layout nodes looked through between a value and the weighted node it holds.
const MAX_RELAYOUT: usize = 3;

/// Whether ONNX value `o` is a weighted node's output, or that output only rearranged: a
/// simplifier that runs a Linear as a 2-D Gemm restores its leading dims with a Reshape
/// after it, and that Reshape is the value the module's output pairs with.
fn holds_weighted_output(ov: &[CapturedValue], o: usize) -> bool {
    let mut v = o;
    for _ in 0..MAX_RELAYOUT {
        if has_weights(&ov[v].op) {
            return true;
        }
        if !onnx_families(&ov[v].op).contains(Family::Layout) {
            return false;
        }
        let data: Vec<usize> = ov[v]
            .inputs
            .iter()
            .copied()
            .filter(|&u| u < ov.len() && is_layer_candidate(&ov[u]))
            .collect();
        match data[..] {
            [u] => v = u,
            _ => return false,
        }
    }
    has_weights(&ov[v].op)
}

/// Whether `v` applies a constant to `from` elementwise: an add, sub, mul or div that reads
/// `from` once and otherwise only values no model input reaches (a parameter, a scalar).
fn applies_constant_to(v: &CapturedValue, from: usize, constant: &[bool]) -> bool {
    let fams = torch_families(&v.op);
    (fams.is_only(Family::Mul) || fams.is_only(Family::Add))
        && v.inputs.iter().filter(|&&u| u == from).count() == 1
        && v.inputs.iter().all(|&u| u == from || constant[u])
}

impl Pairer<'_> {
    fn fold_constant_consumers(&mut self) {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let constant = constant_values(self.cx.torch);
        let consumers = consumers_of(tv);
        for u in self.state.paired() {
            let Some(o) = self.state.twin(u) else {
                continue;
            };
            if !holds_weighted_output(ov, o) {
                continue;
            }
            let mut chain = vec![u];
            while chain.len() <= MAX_FOLDED {
                let last = *chain.last().expect("non-empty");
                // Only the last value's sole reader can be folded: any other reader needs
                // the unscaled value, so the exporter could not have dropped it.
                let sole_reader = |t: usize| -> Option<usize> {
                    let readers: Vec<usize> = consumers[t]
                        .iter()
                        .copied()
                        .filter(|&c| is_layer_candidate(&tv[c]) && !constant[c])
                        .collect();
                    match readers[..] {
                        [v] => Some(v),
                        _ => None,
                    }
                };
                // An identity in eval mode between them (a Mlp's trailing dropout) has no
                // ONNX node either: look through it.
                let (mut from, mut next) = (last, sole_reader(last));
                while let Some(v) = next.filter(|&v| vanishes_in_onnx(&tv[v].op)) {
                    (from, next) = (v, sole_reader(v));
                }
                let Some(v) = next else { break };
                if !applies_constant_to(&tv[v], from, &constant)
                    || self.state.is_paired(v)
                    || self.state.accounted(v)
                    || !same_shape(&tv[v], &ov[o])
                {
                    break;
                }
                chain.push(v);
            }
            if chain.len() == 1 {
                continue;
            }
            let distances: Vec<f64> = chain.iter().map(|&t| self.cx.distance(t, o)).collect();
            if distances[0] < AGREES {
                continue;
            }
            let best = (1..chain.len())
                .min_by(|&a, &b| distances[a].total_cmp(&distances[b]))
                .expect("a chain of two or more");
            if distances[best] >= distances[0] {
                continue;
            }
            let v = chain[best];
            let reason = UnpairedReason::FusedWithConstant {
                node: ov[o].node.clone(),
                constant_op: tv[v].op.clone(),
            };
            self.move_down_chain(&chain[..=best], o, &reason, false);
        }
    }
}

pub(super) struct FoldedAffine;

impl Pass for FoldedAffine {
    fn name(&self) -> &'static str {
        "folded_affine"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.fold_constant_consumers();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_conv_node_holding_the_layer_scale_after_it_moves_its_pair_there() {
        let (t, o, [tc, tm, ta, oc, oa]) = graphs::layer_scale_folded_into_conv();
        let state = run_alone(&FoldedAffine, &t, &o, &[(tc, oc), (ta, oa)]);
        let made = state.get(tm).expect("the scaled value is compared");
        assert_eq!((made.onnx, made.by), (oc, "folded_affine"));
        assert!(!made.certain, "the values chose it");
        assert_eq!(state.fused(tm), [tc]);
        assert!(!state.is_paired(tc) && state.accounted(tc));
    }

    #[test]
    fn a_gate_computed_from_the_input_is_no_constant_to_fold() {
        // A squeeze-excitation gate, `conv * sigmoid(x)`: no weights can hold it, so a Conv
        // that differs from the conv is a fault, not the gated value.
        let x = [1.0, -2.0, 3.0, -4.0];
        let gate = [0.7, 0.1, 0.9, 0.0];
        let gated = [1.4, -0.1, 0.45, 0.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let tc = t.op("aten::_convolution", "b.fc2", &[ti], &[2.0, -1.0, 0.5, 3.0]);
        let tg = t.op("aten::sigmoid", "b", &[ti], &gate);
        let tm = t.op("aten::mul", "b", &[tc, tg], &gated);
        t.output(0, tm);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let oc = o.op("Conv", "b.fc2", &[oi], &gated);
        let og = o.op("Sigmoid", "b", &[oi], &gate);
        let om = o.op("Mul", "b", &[oc, og], &gated);
        o.output(0, om);
        let state = run_alone(&FoldedAffine, &t.build(), &o.build(), &[(tc, oc), (tg, og)]);
        assert_eq!(state.twin(tc), Some(oc), "the conv keeps its pair");
        assert!(!state.is_paired(tm));
    }
}
