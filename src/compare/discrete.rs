//! Discrete decisions that flip under rounding: a `TopK`, `ArgMax`, `NonMaxSuppression` or a
//! comparison whose inputs agree to rounding but whose selection differs (near-ties: a
//! detector with many almost equal scores). Fed PyTorch's values, such a node selects what
//! PyTorch selects, so it is no export bug; its integer or boolean result still differs, and
//! so does everything gathered by it. This module names those flips so that every report can
//! explain the downstream differences by them; whether the run fails is the outputs' call.

use serde::Serialize;

use crate::capture::tensor::DType;
use crate::capture::Capture;
use crate::compare::judged::{LayerResult, Origin};

/// One discrete value that differs only because of what it was computed from.
#[derive(Debug, Clone, Serialize)]
pub struct DiscreteFlip {
    pub layer_index: usize,
    pub module: String,
    pub onnx_node: String,
    pub onnx_op: String,
    /// Elements (indices, mask entries) that differ from PyTorch's.
    pub differing: usize,
    pub total: usize,
    /// The largest accumulated error of the paired values it was computed from, absolute
    /// and relative to their range (`None` when none of its inputs is paired).
    #[serde(serialize_with = "crate::compare::stats::finite_or_null")]
    pub input_max_abs: f64,
    #[serde(serialize_with = "crate::compare::stats::finite_or_null")]
    pub input_rel_to_range: f64,
    /// Fed PyTorch's values it selects the same values and orders equal ones its own way
    /// (`tied_selection`), rather than deciding near-ties the other way.
    pub tied: bool,
}

/// The layers whose discrete result differs while their own computation, fed PyTorch's
/// values, agrees (`Origin::Accumulated` on an integer or bool value).
pub fn flips(layers: &[LayerResult], torch: &Capture) -> Vec<DiscreteFlip> {
    let layer_of_value = |id: usize| layers.iter().find(|l| l.torch_id == id);
    layers
        .iter()
        .filter(|l| l.origin == Some(Origin::Accumulated) && !l.unconfirmed)
        .filter(|l| DType::from_name(&l.cmp.dtype).is_some_and(|d| !d.is_float()))
        .map(|l| {
            let worst_input = torch.values[l.torch_id]
                .inputs
                .iter()
                .filter_map(|&input| layer_of_value(input))
                .max_by(|a, b| a.cmp.max_abs.total_cmp(&b.cmp.max_abs));
            let (max_abs, rel) = worst_input.map_or((f64::NAN, f64::NAN), |u| {
                (u.cmp.max_abs, u.cmp.rel_to_range)
            });
            DiscreteFlip {
                layer_index: l.index,
                module: l.module.clone(),
                onnx_node: l.onnx_node.clone(),
                onnx_op: l.onnx_op.clone(),
                differing: l.cmp.mismatches,
                total: l.cmp.numel,
                input_max_abs: max_abs,
                input_rel_to_range: rel,
                tied: l.isolated.as_ref().is_some_and(|x| x.tied),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::judged::Origin;

    #[test]
    fn an_accumulated_integer_layer_is_a_flip_and_a_float_one_is_not() {
        let mut layers: Vec<LayerResult> = (0..2)
            .map(crate::compare::evaluate::tests::layer_result)
            .collect();
        for l in &mut layers {
            l.cmp.pass = false;
            l.origin = Some(Origin::Accumulated);
            l.cmp.mismatches = 3;
            l.cmp.numel = 300;
        }
        layers[1].cmp.dtype = "int64".to_string();
        layers[1].torch_id = 2;
        let torch = crate::compare::evaluate::tests::chain_torch_capture();
        let f = flips(&layers, &torch);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].layer_index, f[0].differing, f[0].total), (1, 3, 300));
        // Computed from value 1, which layer 0 pairs.
        assert_eq!(f[0].input_max_abs, layers[0].cmp.max_abs);
        // An introduced integer difference is a fault, not a flip.
        layers[1].origin = Some(Origin::Introduced);
        assert!(flips(&layers, &torch).is_empty());
    }
}
