//! Which of the model's inputs each value is computed from, on both sides alike.
//!
//! A graph that lost its scopes (a simplifier's output) is aligned with TorchScript by op
//! order over the whole graph. A network with several inputs runs independent towers (a
//! CLIP-like model's vision and text encoders), and an exporter or a simplifier may order
//! the two towers' nodes differently: one global order then pairs the vision tower's layers
//! with the text tower's. Which inputs a value is computed from does not depend on any order:
//! it is read from the wiring, and a value computed from the image alone is no twin of one
//! computed from the token ids. Inputs count through the pairs `signature::boundary` made, so
//! an input one side lacks marks nothing. TorchScript ops that read only their arguments'
//! shape (`aten::size`) do not carry their input's mark: the exporters fold them to constants.

use super::ops::reads_only_shape;
use super::Pair;
use crate::capture::{CapturedValue, ValueRole};

/// For every value, one bit per paired graph input it is computed from (the first 64 pairs;
/// later ones mark nothing).
pub(super) fn input_marks(
    values: &[CapturedValue],
    inputs: &[Pair],
    side_id: impl Fn(&Pair) -> usize,
) -> Vec<u64> {
    let mut marks = vec![0u64; values.len()];
    for v in values {
        let own = match v.role {
            ValueRole::Input(_) => inputs
                .iter()
                .position(|p| side_id(p) == v.id)
                .filter(|&k| k < 64)
                .map_or(0, |k| 1u64 << k),
            _ if reads_only_shape(&v.op) => 0,
            _ => v
                .inputs
                .iter()
                .filter(|&&u| u < v.id)
                .fold(0, |m, &u| m | marks[u]),
        };
        marks[v.id] = own;
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;

    fn value(id: usize, op: &str, role: ValueRole, inputs: &[usize]) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: op.into(),
            node: String::new(),
            scope: vec![],
            scope_recorded: true,
            source: None,
            source_stack: vec![],
            role,
            dtype: DType::F32,
            shape: vec![1],
            inputs: inputs.to_vec(),
            tensor: None,
        }
    }

    #[test]
    fn marks_follow_the_wiring_and_skip_shape_reads_and_unpaired_inputs() {
        let values = vec![
            value(0, "input", ValueRole::Input(0), &[]),
            value(1, "input", ValueRole::Input(1), &[]),
            value(2, "input", ValueRole::Input(2), &[]),
            value(3, "aten::linear", ValueRole::Intermediate, &[0]),
            value(4, "aten::size", ValueRole::Intermediate, &[1]),
            value(5, "aten::add", ValueRole::Intermediate, &[3, 4]),
            value(6, "aten::mul", ValueRole::Intermediate, &[5, 1]),
            value(7, "aten::mul", ValueRole::Intermediate, &[2, 3]),
        ];
        let pair = |torch, onnx| Pair {
            torch,
            onnx,
            paired_by: super::super::POSITION,
            fused: vec![],
            follows_dataflow: true,
            certain: true,
        };
        // Input 2 has no ONNX counterpart: it marks nothing.
        let inputs = [pair(0, 10), pair(1, 11)];
        let marks = input_marks(&values, &inputs, |p| p.torch);
        assert_eq!(marks[3], 0b01);
        assert_eq!(marks[4], 0, "a size is folded to a constant");
        assert_eq!(marks[5], 0b01);
        assert_eq!(marks[6], 0b11);
        assert_eq!(marks[7], 0b01);
    }
}
