//! Making the one set of input tensors both runtimes receive.
//!
//! The ONNX signature is the authority on names, element types and ranks. Each input comes
//! from, in order of precedence: `--input NAME=file.npy`, an array of the `--inputs` archive,
//! or seeded random data whose shape is the signature's with symbolic dimensions resolved by
//! `--shape`. User data in another element type is converted where nothing the comparison
//! needs is lost (`conform`); every other mismatch (missing input, wrong dtype, wrong rank
//! or fixed dimension, unresolved dimension) is an error that says what was expected.

pub mod npy;
pub mod npz_writer;
pub mod preset;
pub mod random;
pub mod samples;
pub mod torch_args;

use crate::capture::tensor::{format_shape, DType, HostTensor};
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
    /// `--map TORCH_ARG=ONNX_INPUT`: which ONNX input a TorchScript argument receives.
    pub maps: Vec<(String, String)>,
    /// `--arg NAME=VALUE`: a non-tensor TorchScript argument (`int`, `float`, `bool`, `str`).
    pub args: Vec<(String, String)>,
    /// `--torch-inputs FILE.npz`: TorchScript's own arrays, by argument name, where the two
    /// models take their inputs in different conventions.
    pub torch_archive: Option<PathBuf>,
    /// ONNX inputs no TorchScript argument takes (set from the signature mapping, not by the
    /// user): zeros unless the user gives data for them.
    pub zero_filled: Vec<String>,
    /// (ONNX input, TorchScript slot) for each input the signature mapping links to an
    /// argument of another name: an archive array may use either name.
    pub aliases: Vec<(String, String)>,
    /// `--seed` or `--samples` given: seeded random inputs asked for, not left to the tool.
    pub random_asked: bool,
    /// The reference's own sample inputs (a `.pt2` archive's), used when the request gives
    /// no data (set by the check, not by the user; see `preset`).
    pub preset: Option<preset::Preset>,
}

/// One resolved input and where it came from, as reports show it.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedInput {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: String,
    pub source: String,
    /// The element type the user's data had, when it was converted to the ONNX model's
    /// (`conform`): both runtimes were given the converted values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converted_from: Option<String>,
    /// Set for a TorchScript forward argument the ONNX model does not take (see
    /// `torch_args`): why, and what TorchScript was given instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_only: Option<String>,
    /// Set for an ONNX input that no TorchScript argument takes (state the TorchScript module
    /// keeps inside itself): what it was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub onnx_only: Option<String>,
    /// Set when TorchScript was given other data than this ONNX input (`--torch-inputs`):
    /// what it got instead. The two inputs are then not compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_differs: Option<String>,
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

/// What the signature report says about inputs fed to one side only or differently: one
/// note per such input, in input order.
pub fn signature_notes(inputs: &[ResolvedInput]) -> Vec<String> {
    let mut notes = Vec::new();
    for i in inputs {
        if let Some(n) = &i.onnx_only {
            notes.push(format!("ONNX input '{}': {n}", i.name));
        }
        if let Some(n) = &i.torch_differs {
            notes.push(format!(
                "inputs differ: ONNX input '{}' ({}): {n}",
                i.name, i.source
            ));
        }
    }
    notes
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

/// A user-provided tensor checked against the signature and put in its element type when
/// that loses nothing the comparison needs (`converted`): integers whose values fit, a
/// float widened, or a float narrowed to the float16/bfloat16 of a converted model (which
/// takes the full-precision data the original took, rounded). Both runtimes then get the
/// converted values. float64 data for a float32 input stays an error: rounding it is a
/// choice the user should make when saving it.
fn conform(spec: &InputSpec, t: HostTensor, origin: &str) -> Result<(HostTensor, Option<DType>)> {
    let given = t.dtype();
    let t = if given == spec.dtype {
        t
    } else {
        in_signature_type(spec, &t, origin)?
    };
    if !fits(&t.shape, &spec.dims) {
        bail!(
            "input '{}' from {origin} has shape {}, but the ONNX model expects {}",
            spec.name,
            format_shape(&t.shape),
            describe_dims(&spec.dims)
        );
    }
    Ok((t, (given != spec.dtype).then_some(given)))
}

/// `t` converted to the signature's element type, when `conform` allows it.
fn in_signature_type(spec: &InputSpec, t: &HostTensor, origin: &str) -> Result<HostTensor> {
    let (given, want) = (t.dtype(), spec.dtype);
    if given.is_integer() && want.is_integer() {
        return t.cast_integer(want).ok_or_else(|| {
            anyhow!(
                "input '{}' from {origin} holds {given} values that do not fit the ONNX model's {want}",
                spec.name
            )
        });
    }
    let widens = given.size_bytes() < want.size_bytes();
    let reduced = matches!(want, DType::F16 | DType::Bf16);
    if given.is_float() && want.is_float() && (widens || reduced) {
        if let Some(converted) = t.cast_float(want) {
            return Ok(converted);
        }
    }
    bail!(
        "input '{}' from {origin} has element type {given}, but the ONNX model expects {want}: save the array as {want}",
        spec.name
    )
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
    known.extend_from_slice(others);
    let onnx_names = known[..specs.len()].join(", ");
    let mut archive = match &request.preset {
        Some(preset) if request.archive.is_none() => preset::by_onnx_name(preset, specs)?,
        _ => given_arrays(request, &known, &onnx_names)?,
    };

    // Zero-filled inputs come last: their dynamic dimensions are taken from the inputs that
    // share their names (`batch_size`, `sequence_length`).
    let zero = |i: &usize| request.zero_filled.contains(&specs[*i].name);
    let order: Vec<usize> = (0..specs.len())
        .filter(|i| !zero(i))
        .chain((0..specs.len()).filter(zero))
        .collect();
    let mut resolved: Vec<Option<ResolvedInput>> = vec![None; specs.len()];
    for position in order {
        let spec = &specs[position];
        let (tensor, source, converted) = tensor_for(
            position,
            specs,
            request,
            &mut archive,
            &resolved,
            &onnx_names,
        )?;
        let onnx_only = request
            .zero_filled
            .contains(&spec.name)
            .then(|| onnx_only_note(&source));
        resolved[position] = Some(ResolvedInput {
            name: spec.name.clone(),
            shape: tensor.shape.clone(),
            dtype: tensor.dtype().name().to_string(),
            source,
            converted_from: converted.map(|d| d.name().to_string()),
            torch_only: None,
            onnx_only,
            torch_differs: None,
            nonfinite: count_nonfinite(&tensor),
            tensor,
        });
    }
    Ok(resolved.into_iter().flatten().collect())
}

/// The arrays of `--inputs FILE.npz` by name, once every name the request gives (`--input`,
/// `--shape`, the archive's arrays) is checked against the `known` inputs.
fn given_arrays(
    request: &InputRequest,
    known: &[&str],
    onnx_names: &str,
) -> Result<BTreeMap<String, HostTensor>> {
    let unknown = |name: &str, flag: &str| {
        anyhow!("{flag} names input '{name}', but the ONNX model's inputs are: {onnx_names}")
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
    let Some(path) = &request.archive else {
        return Ok(BTreeMap::new());
    };
    let archive: BTreeMap<String, HostTensor> = npy::read_npz(path)?.into_iter().collect();
    if let Some(extra) = archive.keys().find(|k| !known.contains(&k.as_str())) {
        bail!(
            "{} holds array '{extra}', which is not an input of the ONNX model (inputs: {onnx_names})",
            path.display(),
        );
    }
    Ok(archive)
}

/// The tensor of input `position`, where it came from (`file:`, `npz:`, `zeros`, `random:`)
/// and the dtype it was converted from, if it was.
fn tensor_for(
    position: usize,
    specs: &[InputSpec],
    request: &InputRequest,
    archive: &mut BTreeMap<String, HostTensor>,
    resolved: &[Option<ResolvedInput>],
    onnx_names: &str,
) -> Result<(HostTensor, String, Option<DType>)> {
    let spec = &specs[position];
    if let Some((_, path)) = request.files.iter().find(|(n, _)| n == &spec.name) {
        let origin = path.display().to_string();
        let (t, converted) = conform(spec, npy::read_npy(path)?, &origin)?;
        Ok((t, format!("file:{origin}"), converted))
    } else if let Some((t, key)) = take_array(archive, request, &spec.name) {
        let (kind, file) = match (&request.archive, &request.preset) {
            (Some(path), _) => ("npz", path.display().to_string()),
            (None, Some(preset)) => ("pt2-sample", preset.origin.clone()),
            (None, None) => ("npz", String::new()),
        };
        let origin = format!("{file}[{key}]");
        let (t, converted) = conform(spec, t, &origin)?;
        Ok((t, format!("{kind}:{origin}"), converted))
    } else if request.zero_filled.contains(&spec.name) {
        // State the TorchScript module keeps itself: random data would differ from the
        // module's loaded state for certain, zeros (the usual initial state) only
        // perhaps; the note says what was assumed, and data given for it wins.
        let shape = zero_shape(spec, request, specs, resolved)?;
        let t = random::filled(spec.dtype, &shape, 0.0);
        Ok((t, "zeros".to_string(), None))
    } else if let Some(path) = &request.archive {
        // An archive that lacks an input is a mistake, not a request for random data.
        bail!(
            "{} has no array '{}' (the ONNX model's inputs are: {onnx_names})",
            path.display(),
            spec.name,
        );
    } else {
        let shape = random_shape(spec, request)?;
        let t = random::random_tensor(spec.dtype, &shape, request.seed, position);
        Ok((t, format!("random:seed={}", request.seed), None))
    }
}

/// The shape of a zero-filled input: as `random_shape`, with each named dynamic dimension
/// taken from an input already resolved that has a dimension of the same name.
fn zero_shape(
    spec: &InputSpec,
    request: &InputRequest,
    specs: &[InputSpec],
    resolved: &[Option<ResolvedInput>],
) -> Result<Vec<usize>> {
    let given = request.shapes.iter().any(|(n, _)| n == &spec.name);
    let from_others = |name: &str| {
        specs.iter().zip(resolved).find_map(|(other, r)| {
            let r = r.as_ref()?;
            let k = other
                .dims
                .iter()
                .position(|d| *d == Dim::Symbolic(name.to_string()))?;
            r.shape.get(k).copied()
        })
    };
    let shared: Option<Vec<usize>> = spec
        .dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => Some(*n),
            Dim::Symbolic(s) if !s.is_empty() => from_others(s),
            Dim::Symbolic(_) => None,
        })
        .collect();
    match shared {
        Some(shape) if !given => Ok(shape),
        _ => random_shape(spec, request),
    }
}

/// The archive's array for ONNX input `name`, under its own name or the name of the
/// TorchScript argument it is linked to; with the name it was found under.
fn take_array(
    archive: &mut BTreeMap<String, HostTensor>,
    request: &InputRequest,
    name: &str,
) -> Option<(HostTensor, String)> {
    if let Some(t) = archive.remove(name) {
        return Some((t, name.to_string()));
    }
    let (_, slot) = request.aliases.iter().find(|(o, _)| o == name)?;
    archive.get(slot).cloned().map(|t| (t, slot.clone()))
}

/// What an ONNX-only input's report line says about it.
fn onnx_only_note(source: &str) -> String {
    if source == "zeros" {
        "no forward argument of the PyTorch model takes it (the model supplies it itself: state, a default); zero-filled: give it with --input or --inputs if what the module supplies is not zero".to_string()
    } else {
        "no forward argument of the PyTorch model takes it (the model supplies it itself: state, a default); ONNX Runtime was given the data named for it".to_string()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::TensorData;

    fn spec(dtype: DType) -> InputSpec {
        InputSpec {
            name: "x".into(),
            dtype,
            dims: vec![Dim::Fixed(3)],
        }
    }

    fn given(data: TensorData) -> HostTensor {
        HostTensor::new(vec![3], data)
    }

    #[test]
    fn float_data_for_a_float16_model_is_rounded_and_says_so() {
        let t = given(TensorData::F32(vec![1.0, 0.1, 7e4]));
        let (t, converted) = conform(&spec(DType::F16), t, "a.npz[x]").unwrap();
        assert_eq!(converted, Some(DType::F32));
        let TensorData::F16(v) = &t.data else {
            panic!("{:?}", t.dtype())
        };
        assert_eq!(v[1], half::f16::from_f32(0.1));
        // Beyond float16's range: the model would get inf too, and the comparison shows it.
        assert!(v[2].is_infinite());
    }

    #[test]
    fn integers_are_converted_only_when_every_value_fits() {
        let ids = given(TensorData::I32(vec![0, 5, 30521]));
        let (t, converted) = conform(&spec(DType::I64), ids, "ids").unwrap();
        assert_eq!(t.data, TensorData::I64(vec![0, 5, 30521]));
        assert_eq!(converted, Some(DType::I32));
        let big = given(TensorData::I64(vec![0, 1, 1 << 40]));
        let err = conform(&spec(DType::I32), big, "ids").unwrap_err();
        assert!(err.to_string().contains("do not fit"), "{err}");
    }

    #[test]
    fn lossy_or_kind_changing_conversions_stay_errors() {
        for (data, want) in [
            (TensorData::F64(vec![0.5; 3]), DType::F32),
            (TensorData::F32(vec![0.5; 3]), DType::I64),
            (TensorData::I64(vec![1; 3]), DType::F32),
            (TensorData::Bool(vec![true; 3]), DType::I64),
        ] {
            let from = data.dtype();
            let err = conform(&spec(want), given(data), "a.npy").unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "element type {from}, but the ONNX model expects {want}"
                )),
                "{text}"
            );
        }
    }

    #[test]
    fn the_same_type_is_taken_as_given() {
        let t = given(TensorData::F32(vec![1.0, 2.0, 3.0]));
        let (out, converted) = conform(&spec(DType::F32), t.clone(), "a").unwrap();
        assert_eq!(out.data, t.data);
        assert_eq!(converted, None);
    }
}
