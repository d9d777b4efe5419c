//! TorchScript `forward` arguments that the ONNX model does not take.
//!
//! The legacy exporter drops a forward argument the traced graph never reads, so the ONNX
//! model has fewer inputs than TorchScript's forward. When the counts differ, the arguments
//! are matched to ONNX inputs by name (TorchScript's graph names them `x.1`, `mask`; the
//! exporter's `input_names` are usually the Python argument names); the ones left over are
//! fed to TorchScript only: from `--input NAME=file.npy`, an array of that name in the
//! `--inputs` archive, `--shape NAME=...` (seeded float32), or, when none is given, a placeholder that is only valid because the argument
//! is unused, which the captured graph must then confirm. Such inputs are listed in the
//! report with a note, and removed from the TorchScript capture so that graph inputs still
//! pair one to one.

use super::samples::{resolve_samples as resolve_onnx_samples, resolve_samples_with, Sample};
use super::{npy, random, InputRequest, ResolvedInput};
use crate::capture::tensor::{DType, HostTensor, TensorData};
use crate::capture::{Capture, ValueRole};
use crate::onnx::signature::InputSpec;
use crate::torch::InputInfo;
use anyhow::{bail, Result};

/// The note a TorchScript-only input carries in reports, and how its data was chosen.
const UNUSED_NOTE: &str = "unused by ONNX: not an input of the ONNX model";

/// A Python argument name as TorchScript's graph spells it, without the `.N` suffix it adds
/// to keep SSA names unique (`x.1` is argument `x`).
fn argument_name(debug_name: &str) -> &str {
    match debug_name.rsplit_once('.') {
        Some((base, n)) if !base.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => base,
        _ => debug_name,
    }
}

/// For each forward argument, the index of the ONNX input it receives, or `None` for an
/// argument ONNX does not take. Positional when the counts agree (the exporters may rename
/// inputs freely); by name when TorchScript has more.
fn match_arguments(torch_args: &[InputInfo], onnx_names: &[&str]) -> Result<Vec<Option<usize>>> {
    if torch_args.len() <= onnx_names.len() {
        // Equal counts pair by position; more ONNX inputs is refused later, where the
        // captures are paired, with both lists in the message.
        return Ok((0..torch_args.len()).map(Some).collect());
    }
    let matched: Vec<Option<usize>> = torch_args
        .iter()
        .map(|a| onnx_names.iter().position(|n| *n == argument_name(&a.name)))
        .collect();
    let missing: Vec<&str> = onnx_names
        .iter()
        .enumerate()
        .filter(|(i, _)| !matched.contains(&Some(*i)))
        .map(|(_, n)| *n)
        .collect();
    if !missing.is_empty() {
        bail!(
            "TorchScript forward takes {} argument(s) ({}) but the ONNX model only {} ({}), and ONNX input(s) {} match no argument name, so align-check cannot tell which argument the export dropped (export with input_names equal to the forward argument names)",
            torch_args.len(),
            names(torch_args).join(", "),
            onnx_names.len(),
            onnx_names.join(", "),
            missing.join(", ")
        );
    }
    Ok(matched)
}

fn names(torch_args: &[InputInfo]) -> Vec<&str> {
    torch_args.iter().map(|a| argument_name(&a.name)).collect()
}

/// Resolves every sample as `samples::resolve_samples` does for the ONNX inputs, then adds
/// the TorchScript-only arguments (with `torch_only` set) to each sample.
pub fn resolve_samples(
    torch_args: &[InputInfo],
    specs: &[InputSpec],
    request: &InputRequest,
) -> Result<Vec<Sample>> {
    let onnx_names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let matched = match_arguments(torch_args, &onnx_names)?;
    let extra: Vec<&str> = torch_args
        .iter()
        .zip(&matched)
        .filter(|(_, m)| m.is_none())
        .map(|(a, _)| argument_name(&a.name))
        .collect();
    if extra.is_empty() {
        return resolve_onnx_samples(specs, request);
    }
    resolve_samples_with(specs, request, &extra, |one| {
        extra
            .iter()
            .enumerate()
            .map(|(i, name)| torch_only_input(name, one, onnx_names.len() + i))
            .collect()
    })
}

/// One TorchScript-only argument's data for one sample, from (in order) `--input`, the
/// sample's archive, `--shape`, or a placeholder.
fn torch_only_input(name: &str, one: &InputRequest, position: usize) -> Result<ResolvedInput> {
    let archive = match one.archive.as_ref().filter(|p| p.is_file()) {
        Some(path) => npy::read_npz(path)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| (t, format!("npz:{}[{name}]", path.display()))),
        None => None,
    };
    let (tensor, source, placeholder) =
        if let Some((_, path)) = one.files.iter().find(|(n, _)| n == name) {
            (
                npy::read_npy(path)?,
                format!("file:{}", path.display()),
                false,
            )
        } else if let Some((t, source)) = archive {
            (t, source, false)
        } else if let Some((_, shape)) = one.shapes.iter().find(|(n, _)| n == name) {
            let t = random::random_tensor(DType::F32, shape, one.seed, position);
            (t, format!("random:seed={}", one.seed), false)
        } else {
            // The graph does not say what the argument should be (loaded TorchScript graphs
            // type it only as `Tensor`); an unused argument takes anything, and
            // `drop_torch_only` makes sure it is unused.
            let t = HostTensor::new(Vec::new(), TensorData::F32(vec![0.0]));
            (t, "placeholder".to_string(), true)
        };
    Ok(ResolvedInput {
        name: name.to_string(),
        shape: tensor.shape.clone(),
        dtype: tensor.dtype().name().to_string(),
        source,
        converted_from: None,
        nonfinite: super::count_nonfinite(&tensor),
        torch_only: Some(if placeholder {
            format!("{UNUSED_NOTE}; TorchScript was given a placeholder (0-d float32), as its graph does not read it either")
        } else {
            format!("{UNUSED_NOTE}; TorchScript was given the data named for it")
        }),
        tensor,
    })
}

/// The inputs that go to ONNX Runtime: every one but the TorchScript-only arguments.
pub fn onnx_inputs(inputs: &[ResolvedInput]) -> Vec<(String, HostTensor)> {
    inputs
        .iter()
        .filter(|i| i.torch_only.is_none())
        .map(|i| (i.name.clone(), i.tensor.clone()))
        .collect()
}

/// The tensors for TorchScript's forward, in argument order. Floating-point inputs are given
/// in `parameter_dtype`, the type the module computes in, when one of the two is a reduced
/// precision (float16, bfloat16): a float16 ONNX
/// model's inputs reach a float32 TorchScript as float32 (exactly the same values), and a
/// half-precision TorchScript gets float32 inputs rounded to float16.
pub fn forward_inputs(
    torch_args: &[InputInfo],
    inputs: &[ResolvedInput],
    parameter_dtype: Option<DType>,
) -> Result<Vec<HostTensor>> {
    // Only between a reduced precision and a full one: a float64 input to a float32 module
    // is the model's own business (it may cast it itself).
    let reduced = |d: DType| matches!(d, DType::F16 | DType::Bf16);
    let in_module_dtype = |t: &HostTensor| match parameter_dtype {
        Some(to) if t.dtype() != to && (reduced(to) || reduced(t.dtype())) => {
            t.cast_float(to).unwrap_or_else(|| t.clone())
        }
        _ => t.clone(),
    };
    if inputs.iter().all(|i| i.torch_only.is_none()) || torch_args.len() != inputs.len() {
        // Nothing TorchScript-only: positional, as ever (a count mismatch is reported by the
        // TorchScript side with both lists).
        return Ok(inputs.iter().map(|i| in_module_dtype(&i.tensor)).collect());
    }
    torch_args
        .iter()
        .map(|a| {
            let name = argument_name(&a.name);
            match inputs.iter().find(|i| i.name == name) {
                Some(i) => Ok(in_module_dtype(&i.tensor)),
                None => bail!("no input was resolved for forward argument '{name}'"),
            }
        })
        .collect()
}

/// Explains a TorchScript run that failed with a placeholder argument: the argument is used
/// after all, and only the user can say what it holds.
pub fn explain_run_error(err: anyhow::Error, inputs: &[ResolvedInput]) -> anyhow::Error {
    match placeholders(inputs).first() {
        Some(name) => anyhow::anyhow!(
            "forward argument '{name}' is not an input of the ONNX model and TorchScript failed on a placeholder for it ({err}); pass --input {name}=file.npy or --shape {name}=..."
        ),
        None => err,
    }
}

fn placeholders(inputs: &[ResolvedInput]) -> Vec<&str> {
    inputs
        .iter()
        .filter(|i| i.torch_only.is_some() && i.source == "placeholder")
        .map(|i| i.name.as_str())
        .collect()
}

/// Removes the TorchScript-only arguments from the capture's graph inputs (so inputs pair
/// one to one with ONNX's), after checking that no captured value was computed from a
/// placeholder.
pub fn drop_torch_only(
    mut capture: Capture,
    torch_args: &[InputInfo],
    inputs: &[ResolvedInput],
) -> Result<Capture> {
    let torch_only: Vec<usize> = torch_args
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            inputs
                .iter()
                .any(|i| i.torch_only.is_some() && i.name == argument_name(&a.name))
        })
        .map(|(n, _)| n)
        .collect();
    if torch_only.is_empty() {
        return Ok(capture);
    }
    let removed: Vec<usize> = capture
        .values
        .iter()
        .filter(|v| matches!(v.role, ValueRole::Input(n) if torch_only.contains(&n)))
        .map(|v| v.id)
        .collect();
    let placeholder_names = placeholders(inputs);
    for v in &capture.values {
        if let Some(&r) = v.inputs.iter().find(|i| removed.contains(i)) {
            let arg = &capture.values[r].name;
            if placeholder_names.contains(&argument_name(arg)) {
                let name = argument_name(arg);
                bail!(
                    "forward argument '{name}' is not an input of the ONNX model, but TorchScript reads it ({} computes value '{}' from it), so align-check has no data for it; pass --input {name}=file.npy or --shape {name}=...",
                    v.op,
                    v.name
                );
            }
        }
    }
    // Ids are positions in `values`: shift the later ones down and renumber the inputs.
    let new_id = |old: usize| old - removed.iter().filter(|&&r| r < old).count();
    capture.values.retain(|v| !removed.contains(&v.id));
    let mut next_input = 0;
    for v in &mut capture.values {
        v.id = new_id(v.id);
        v.inputs.retain(|i| !removed.contains(i));
        for i in &mut v.inputs {
            *i = new_id(*i);
        }
        if let ValueRole::Input(_) = v.role {
            v.role = ValueRole::Input(next_input);
            next_input += 1;
        }
    }
    Ok(capture)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(names: &[&str]) -> Vec<InputInfo> {
        names
            .iter()
            .map(|n| InputInfo {
                name: n.to_string(),
                type_name: "Tensor".to_string(),
            })
            .collect()
    }

    #[test]
    fn argument_names_lose_the_ssa_suffix_only() {
        assert_eq!(argument_name("x.1"), "x");
        assert_eq!(argument_name("mask"), "mask");
        assert_eq!(argument_name("a.b"), "a.b");
        assert_eq!(argument_name(".1"), ".1");
    }

    #[test]
    fn dropped_argument_is_found_by_name_wherever_it_is() {
        let m = match_arguments(&args(&["mask", "x.1"]), &["x"]).unwrap();
        assert_eq!(m, vec![None, Some(0)]);
        let m = match_arguments(&args(&["x.1", "mask"]), &["x"]).unwrap();
        assert_eq!(m, vec![Some(0), None]);
        // Equal counts stay positional whatever the names.
        let m = match_arguments(&args(&["a", "b"]), &["input_0", "input_1"]).unwrap();
        assert_eq!(m, vec![Some(0), Some(1)]);
    }

    #[test]
    fn unmatched_onnx_name_is_a_clear_error() {
        let err = match_arguments(&args(&["x.1", "mask"]), &["input"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("input") && err.contains("x, mask"), "{err}");
    }
}
