//! Making the one set of input tensors both runtimes receive.
//!
//! The ONNX signature is the authority on names, element types and ranks. Each input comes
//! from, in order of precedence: `--input NAME=file.npy`, an array of the `--inputs` archive,
//! or seeded random data whose shape is the signature's with symbolic dimensions resolved by
//! `--shape`. Every mismatch (missing input, wrong dtype, wrong rank or fixed dimension,
//! unresolved dimension) is an error that says what was expected.

pub mod npy;
pub mod npz_writer;
pub mod random;
pub mod samples;
pub mod torch_args;

use crate::capture::tensor::{format_shape, HostTensor};
use crate::onnx::signature::{Dim, InputSpec};
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What the user asked for, before the model's signature is known.
#[derive(Debug, Clone, Default)]
pub struct InputRequest {
    pub seed: u64,
    /// `--input NAME=file.npy`
    pub files: Vec<(String, PathBuf)>,
    /// `--inputs file.npz`, or a folder of them (one sample each)
    pub archive: Option<PathBuf>,
    /// `--samples N`: N random samples with seeds seed, seed+1, ...
    pub samples: usize,
    /// `--shape NAME=1x3x224x224`
    pub shapes: Vec<(String, Vec<usize>)>,
}

/// One resolved input and where it came from, as reports show it.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedInput {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: String,
    pub source: String,
    /// Set for a TorchScript forward argument the ONNX model does not take (see
    /// `torch_args`): why, and what TorchScript was given instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_only: Option<String>,
    /// NaN and infinite elements in the input itself: non-finite values in the layers after
    /// it then come from the data, not from either runtime.
    #[serde(skip_serializing_if = "is_zero")]
    pub nonfinite: usize,
    #[serde(skip)]
    pub tensor: HostTensor,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Number of NaN and infinite elements (0 for integer and bool tensors).
pub fn count_nonfinite(t: &HostTensor) -> usize {
    if !t.dtype().is_float() {
        return 0;
    }
    (0..t.numel())
        .filter(|&i| !t.data.get_f64(i).is_finite())
        .count()
}

/// Parses `NAME=VALUE` command-line pairs.
pub fn split_assignment(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got '{s}'")),
    }
}

/// Parses `1x3x224x224` (also `1,3,224,224`).
pub fn parse_shape(s: &str) -> Result<Vec<usize>, String> {
    if s == "scalar" {
        return Ok(Vec::new());
    }
    s.split(['x', ','])
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| format!("'{s}' is not a shape like 1x3x224x224"))
        })
        .collect()
}

fn describe_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Symbolic(s) if s.is_empty() => "?".to_string(),
            Dim::Symbolic(s) => s.clone(),
        })
        .collect();
    if parts.is_empty() {
        "scalar".to_string()
    } else {
        parts.join("x")
    }
}

/// Whether a concrete shape has the signature's rank and its fixed dimensions.
fn fits(shape: &[usize], dims: &[Dim]) -> bool {
    shape.len() == dims.len()
        && shape.iter().zip(dims).all(|(have, want)| match want {
            Dim::Fixed(n) => have == n,
            Dim::Symbolic(_) => true,
        })
}

/// Checks a user-provided tensor against the signature.
fn check_against(spec: &InputSpec, t: &HostTensor, origin: &str) -> Result<()> {
    if t.dtype() != spec.dtype {
        bail!(
            "input '{}' from {origin} has element type {}, but the ONNX model expects {}",
            spec.name,
            t.dtype(),
            spec.dtype
        );
    }
    if !fits(&t.shape, &spec.dims) {
        bail!(
            "input '{}' from {origin} has shape {}, but the ONNX model expects {}",
            spec.name,
            format_shape(&t.shape),
            describe_dims(&spec.dims)
        );
    }
    Ok(())
}

/// Resolves every input of the signature according to the request.
pub fn resolve(specs: &[InputSpec], request: &InputRequest) -> Result<Vec<ResolvedInput>> {
    resolve_except(specs, request, &[])
}

/// `resolve`, where `--input`, `--shape` and archive arrays may also name the inputs in
/// `others` (TorchScript-only arguments, which `torch_args` resolves itself).
pub fn resolve_except(
    specs: &[InputSpec],
    request: &InputRequest,
    others: &[&str],
) -> Result<Vec<ResolvedInput>> {
    let mut known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let n_onnx = known.len();
    known.extend_from_slice(others);
    let unknown = |name: &str, flag: &str| {
        anyhow!(
            "{flag} names input '{name}', but the ONNX model's inputs are: {}",
            known[..n_onnx].join(", ")
        )
    };
    for (name, _) in &request.files {
        if !known.contains(&name.as_str()) {
            return Err(unknown(name, "--input"));
        }
    }
    for (name, _) in &request.shapes {
        if !known.contains(&name.as_str()) {
            return Err(unknown(name, "--shape"));
        }
    }
    let mut archive: BTreeMap<String, HostTensor> = match &request.archive {
        Some(path) => npy::read_npz(path)?.into_iter().collect(),
        None => BTreeMap::new(),
    };
    if let Some(path) = &request.archive {
        if let Some(extra) = archive.keys().find(|k| !known.contains(&k.as_str())) {
            bail!(
                "{} holds array '{extra}', which is not an input of the ONNX model (inputs: {})",
                path.display(),
                known[..n_onnx].join(", ")
            );
        }
    }

    let mut resolved = Vec::with_capacity(specs.len());
    for (position, spec) in specs.iter().enumerate() {
        let (tensor, source) =
            if let Some((_, path)) = request.files.iter().find(|(n, _)| n == &spec.name) {
                let t = npy::read_npy(path)?;
                let origin = path.display().to_string();
                check_against(spec, &t, &origin)?;
                (t, format!("file:{origin}"))
            } else if let Some(t) = archive.remove(&spec.name) {
                let origin = format!(
                    "{}[{}]",
                    request.archive.as_ref().expect("archive present").display(),
                    spec.name
                );
                check_against(spec, &t, &origin)?;
                (t, format!("npz:{origin}"))
            } else if let Some(path) = &request.archive {
                // An archive that lacks an input is a mistake, not a request for random data.
                bail!(
                    "{} has no array '{}' (the ONNX model's inputs are: {})",
                    path.display(),
                    spec.name,
                    known[..n_onnx].join(", ")
                );
            } else {
                let shape = random_shape(spec, request)?;
                let t = random::random_tensor(spec.dtype, &shape, request.seed, position);
                (t, format!("random:seed={}", request.seed))
            };
        resolved.push(ResolvedInput {
            name: spec.name.clone(),
            shape: tensor.shape.clone(),
            dtype: tensor.dtype().name().to_string(),
            source,
            torch_only: None,
            nonfinite: count_nonfinite(&tensor),
            tensor,
        });
    }
    Ok(resolved)
}

/// The shape of a generated input: `--shape` when given (checked against fixed dims),
/// otherwise the signature's, which must then have no symbolic dimension.
fn random_shape(spec: &InputSpec, request: &InputRequest) -> Result<Vec<usize>> {
    if let Some((_, shape)) = request.shapes.iter().find(|(n, _)| n == &spec.name) {
        if !fits(shape, &spec.dims) {
            bail!(
                "--shape {}={} does not fit the ONNX model's input shape {}",
                spec.name,
                format_shape(shape),
                describe_dims(&spec.dims)
            );
        }
        return Ok(shape.clone());
    }
    let symbolic: Vec<String> = spec
        .dims
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match d {
            Dim::Symbolic(s) if s.is_empty() => Some(format!("dim {i} (unnamed)")),
            Dim::Symbolic(s) => Some(format!("dim {i} '{s}'")),
            Dim::Fixed(_) => None,
        })
        .collect();
    if !symbolic.is_empty() {
        bail!(
            "input '{}' has dynamic dimensions ({}) in shape {}; give a concrete shape with --shape {}=...",
            spec.name,
            symbolic.join(", "),
            describe_dims(&spec.dims),
            spec.name
        );
    }
    Ok(spec
        .dims
        .iter()
        .filter_map(|d| match d {
            Dim::Fixed(n) => Some(*n),
            Dim::Symbolic(_) => None,
        })
        .collect())
}
