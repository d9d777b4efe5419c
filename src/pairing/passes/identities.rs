//! TorchScript layout values that equal their input: aliases the exporters drop, kept out of
//! the alignment.
//!
//! Indexing with full ranges (`x[:, :, None, :, :]` in Hugging Face's `repeat_kv`, which
//! every llama-family attention calls) is recorded by TorchScript as a chain of
//! `aten::slice` ops over the whole of each dim; the exporters emit no node for a slice that
//! keeps everything. Each such slice still takes a place in the order-keeping alignment,
//! where it meets whichever free layout node of its shape is left in the scope (a key's
//! Transpose that an optimiser sorted earlier), is compared with it and fails at every
//! element, while the layout values it displaced lose their twins. A slice, narrow or expand
//! whose value has its input's shape, dtype and every element is that input: it computes
//! nothing, so it is neither aligned nor compared, and counts as covered (its input is
//! compared). This reads TorchScript's values only; nothing on the ONNX side is judged by it.
//!
//! The same holds for elementwise arithmetic by a constant that is the op's identity element
//! (`rel_codes / wx` with unit box-coder weights in every torchvision detector): ONNX Runtime
//! and the simplifiers drop a Div or Mul by 1 and an Add or Sub of 0, so the op has no node,
//! and the order would pair it with the next Mul of its shape. Only an op whose one captured
//! operand is its input (the other a constant the graph does not compute) and whose value is
//! that input, element for element, is taken: an op of two computed values (a mask added to
//! attention scores) is real computation even where it happens to change nothing.

use super::super::ops::{torch_kind, OpKind};
use super::super::reason::UnpairedReason;
use super::super::{is_layer_candidate, relative_distance, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    fn mark_identities(&mut self) {
        let tv = &self.cx.torch.values;
        let identities: Vec<(usize, usize)> = tv
            .iter()
            .filter(|v| is_layer_candidate(v) && (selects(&v.op) || by_constant(v, tv)))
            .filter_map(|v| {
                v.inputs
                    .iter()
                    .copied()
                    .filter(|&u| u < v.id)
                    .find(|&u| equals(&tv[u], v))
                    .map(|u| (v.id, u))
            })
            .collect();
        for (t, input) in identities {
            let reason = UnpairedReason::Identity {
                input: tv[input].name.clone(),
            };
            self.state.mark_identity(t);
            self.state.leave(t, reason);
        }
    }
}

/// Ops that select or broadcast part of their input, and keep all of it when their range
/// is full (`x[:, :]`, `narrow` over a whole dim, `expand` to the same shape). A reshape
/// or permutation that keeps its input's shape is left to the alignment: it is rare, and
/// met by its own ONNX node when the exporter keeps one.
fn selects(op: &str) -> bool {
    torch_kind(op) == Some(OpKind::Select)
}

/// Elementwise arithmetic whose only computed operand is its input: the other is a constant
/// (a Python number or a tensor no model input reaches), so a value equal to that input
/// means the constant is the op's identity element. A divisor computed from sizes (`2 * x /
/// (w - 1)` over a traced image width: a scalar of shape arithmetic) is such a constant too;
/// a feature map one pixel wider than its last index makes it 1.
fn by_constant(
    v: &crate::capture::CapturedValue,
    values: &[crate::capture::CapturedValue],
) -> bool {
    let computed = v
        .inputs
        .iter()
        .filter(|&&u| u >= v.id || is_layer_candidate(&values[u]))
        .count();
    torch_kind(&v.op).is_some_and(OpKind::has_identity_constant) && computed == 1
}

/// Whether `v` holds exactly the tensor `input` holds: the same shape, dtype and elements.
fn equals(input: &crate::capture::CapturedValue, v: &crate::capture::CapturedValue) -> bool {
    if input.shape != v.shape || input.dtype != v.dtype {
        return false;
    }
    match (input.data(), v.data()) {
        (Ok(a), Ok(b)) => relative_distance(&b, &a) == 0.0,
        _ => false,
    }
}

pub(super) struct Identities;

impl Pass for Identities {
    fn name(&self) -> &'static str {
        "identities"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.mark_identities();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_slice_that_keeps_its_whole_input_is_marked_an_identity_and_covered() {
        let x = [1.0, 2.0, 3.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let whole = t.op("aten::slice", "m", &[ti], &x);
        let part = t.op("aten::slice", "m", &[ti], &[1.0, 2.0, 0.0]);
        let r = t.op("aten::relu", "m", &[whole, part], &x);
        t.output(0, r);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let or = o.op("Relu", "m", &[oi], &x);
        o.output(0, or);
        let state = run_alone(&Identities, &t.build(), &o.build(), &[]);
        assert!(state.is_identity(whole) && state.accounted(whole));
        assert!(
            !state.is_identity(part),
            "a slice that drops values is a layer"
        );
        assert!(state.paired().is_empty(), "identities makes no pairs");
    }
}
