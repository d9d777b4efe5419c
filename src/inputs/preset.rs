//! Inputs the reference model carries itself: a torch.export archive (`.pt2`) stores the
//! arguments `torch.export.export` was given (`data/sample_inputs/`). They are real data the
//! model was exported with, so when the user gives no inputs at all they are a better first
//! check than seeded noise; asking for anything (`--input`, `--inputs`, `--shape`, `--seed`,
//! `--samples`, `--torch-inputs`) keeps the user's choice.
//!
//! They meet the ONNX signature by position (ONNX exporters keep the argument order) and go
//! through the same checks as the user's arrays; sample inputs that do not fit are not an
//! error of the user's: the check falls back to seeded random inputs and says why.

use super::InputRequest;
use crate::capture::tensor::HostTensor;
use crate::onnx::signature::InputSpec;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// A reference's own sample inputs, in argument order, and where they were read from.
#[derive(Debug, Clone)]
pub struct Preset {
    pub origin: String,
    pub tensors: Vec<HostTensor>,
}

/// Whether the request leaves the choice of inputs to the tool (nothing given or asked for).
pub fn user_gave_none(request: &InputRequest) -> bool {
    request.files.is_empty()
        && request.archive.is_none()
        && request.torch_archive.is_none()
        && request.shapes.is_empty()
        && !request.random_asked
}

/// The preset's tensors by the ONNX input each one feeds (the k-th tensor, the k-th input);
/// an error when the counts differ.
pub fn by_onnx_name(preset: &Preset, specs: &[InputSpec]) -> Result<BTreeMap<String, HostTensor>> {
    if preset.tensors.len() != specs.len() {
        bail!(
            "{} holds {} tensor(s), the ONNX model takes {} input(s)",
            preset.origin,
            preset.tensors.len(),
            specs.len()
        );
    }
    Ok(specs
        .iter()
        .zip(&preset.tensors)
        .map(|(spec, t)| (spec.name.clone(), t.clone()))
        .collect())
}

/// The note a report carries when the sample inputs could not be used.
pub fn fallback_note(why: &anyhow::Error) -> String {
    format!(
        "the .pt2 archive's own sample inputs were not used ({why}); seeded random inputs instead"
    )
}

/// The note a report carries when they were.
pub fn used_note(preset: &Preset) -> String {
    format!(
        "inputs: the .pt2 archive's own sample inputs ({}), as no inputs were given",
        preset.origin
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::{DType, TensorData};
    use crate::onnx::signature::Dim;

    fn spec(name: &str) -> InputSpec {
        InputSpec {
            name: name.into(),
            dtype: DType::F32,
            dims: vec![Dim::Fixed(2)],
        }
    }

    #[test]
    fn sample_inputs_meet_the_onnx_inputs_by_position_or_not_at_all() {
        let t = |v: f32| HostTensor::new(vec![2], TensorData::F32(vec![v, v]));
        let preset = Preset {
            origin: "m.pt2:data/sample_inputs/model.pt".into(),
            tensors: vec![t(1.0), t(2.0)],
        };
        let named = by_onnx_name(&preset, &[spec("a"), spec("b")]).unwrap();
        assert_eq!(named["a"], t(1.0));
        assert_eq!(named["b"], t(2.0));
        let why = by_onnx_name(&preset, &[spec("a")]).unwrap_err().to_string();
        assert!(
            why.contains("holds 2 tensor(s), the ONNX model takes 1"),
            "{why}"
        );
    }

    #[test]
    fn any_input_option_is_the_users_choice() {
        let none = InputRequest::default();
        assert!(user_gave_none(&none));
        let seeded = InputRequest {
            random_asked: true,
            ..InputRequest::default()
        };
        assert!(!user_gave_none(&seeded));
        let shaped = InputRequest {
            shapes: vec![("x".into(), vec![3, 4])],
            ..InputRequest::default()
        };
        assert!(!user_gave_none(&shaped));
    }
}
