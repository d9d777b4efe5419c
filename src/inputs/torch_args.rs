//! TorchScript's `forward` arguments, built from the inputs made for the ONNX model.
//!
//! The two signatures need not agree (files exported by different tools): `signature::mapping`
//! says which ONNX input each argument (or element of a container argument) receives. From
//! that, per sample:
//!
//! - a linked tensor argument gets the ONNX input's tensor, a linked `int`/`float`/`bool` its
//!   one element (`--arg NAME=VALUE` sets both sides), a dict/tuple/list argument the tensors
//!   of the inputs its elements link to;
//! - an argument no ONNX input feeds (one the legacy exporter dropped as unused) gets
//!   `--input NAME=file.npy`, an array of that name in the `--inputs` archive, `--shape
//!   NAME=...` (seeded float32), or else a placeholder that is only valid because the
//!   argument is unused, which the captured graph must then confirm; a number gets `--arg`,
//!   a 0-d array, or the schema's default; an `Optional` gets `None`;
//! - `--torch-inputs FILE.npz` replaces what TorchScript gets, by argument name, where the
//!   two models take their inputs in different conventions; such an input is not paired.
//!
//! Inputs given to one side only are listed in the report with a note.

use super::samples::{resolve_samples_with, Sample};
use super::{npy, random, InputRequest, ResolvedInput};
use crate::capture::tensor::{format_shape, DType, HostTensor, TensorData};
use crate::onnx::signature::{Dim, InputSpec};
use crate::signature::mapping::{self, Mapping, OnnxInput, TorchArg};
use crate::signature::types::{argument_name, describe, ArgType, ArgValue};
use crate::torch::InputInfo;
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The note a TorchScript-only input carries in reports, and how its data was chosen.
const UNUSED_NOTE: &str = "unused by ONNX: not an input of the ONNX model";

/// The forward arguments as the mapping sees them; `elements` lists (graph argument name,
/// key) for every tensor the graph reads out of a container argument.
pub fn torch_signature(infos: &[InputInfo], elements: &[(String, String)]) -> Vec<TorchArg> {
    infos
        .iter()
        .map(|info| {
            let mut keys: Vec<String> = Vec::new();
            for (arg, key) in elements {
                if arg == &info.name && !key.is_empty() && !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
            let ty = ArgType::parse(&info.type_name);
            TorchArg {
                name: argument_name(&info.name).to_string(),
                optional: info.default.is_some() || ty.is_optional(),
                ty,
                keys,
            }
        })
        .collect()
}

fn onnx_signature(specs: &[InputSpec]) -> Vec<OnnxInput> {
    specs
        .iter()
        .map(|s| OnnxInput {
            name: s.name.clone(),
            one_element: s.dims.iter().all(|d| *d == Dim::Fixed(1)),
        })
        .collect()
}

/// The mapping of the two signatures and every sample's inputs for both models.
pub fn resolve_samples(
    infos: &[InputInfo],
    elements: &[(String, String)],
    specs: &[InputSpec],
    request: &InputRequest,
) -> Result<(Mapping, Vec<Sample>)> {
    let args = torch_signature(infos, elements);
    let mut state: Vec<String> = Vec::new();
    for (arg, key) in elements {
        if arg == "self" && !state.contains(key) {
            state.push(key.clone());
        }
    }
    let mapping = mapping::plan(&args, &state, &onnx_signature(specs), &request.maps)?;
    for (name, _) in &request.args {
        match args.iter().find(|a| &a.name == name) {
            Some(a) if takes_text(&a.ty) => {}
            Some(a) => bail!(
                "--arg {name}=...: '{name}' is {}, not a number or string; give tensors with --input or --inputs",
                describe(&a.ty)
            ),
            None => bail!(
                "--arg {name}=...: the PyTorch model's forward has no argument '{name}' (its arguments: {})",
                args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    let mut request = request.clone();
    // ONNX inputs that TorchScript keeps inside the module: nothing feeds them but the
    // user's data or zeros; one linked to a state attribute is then compared with it.
    request.zero_filled = mapping.onnx_only.clone();
    request
        .zero_filled
        .extend(state_links(&mapping).map(|(_, onnx)| onnx.clone()));
    request.aliases = mapping
        .links
        .iter()
        .filter(|l| l.slot != l.onnx)
        .map(|l| (l.onnx.clone(), l.slot.clone()))
        .collect();
    // The input data may name TorchScript-only arguments, and scalars by their own names.
    let mut others: Vec<&str> = mapping.torch_only.iter().map(String::as_str).collect();
    others.extend(args.iter().map(|a| a.name.as_str()));
    let torch_archive = match &request.torch_archive {
        Some(path) => read_torch_archive(path, &args)?,
        None => BTreeMap::new(),
    };
    let builder = Builder {
        infos,
        args: &args,
        mapping: &mapping,
        specs,
        torch_archive: &torch_archive,
        torch_archive_path: request.torch_archive.as_deref(),
    };
    let samples = resolve_samples_with(specs, &request, &others, |one, sample| {
        builder.finish(one, sample)
    })?;
    Ok((mapping, samples))
}

/// (state slot, ONNX input) for each module attribute linked to an ONNX input.
fn state_links(mapping: &Mapping) -> impl Iterator<Item = (&String, &String)> {
    mapping
        .links
        .iter()
        .filter(|l| l.slot.starts_with(mapping::STATE_PREFIX))
        .map(|l| (&l.slot, &l.onnx))
}

/// `--torch-inputs`: every array must name an argument or an element slot.
fn read_torch_archive(path: &Path, args: &[TorchArg]) -> Result<BTreeMap<String, HostTensor>> {
    let arrays: BTreeMap<String, HostTensor> = npy::read_npz(path)?.into_iter().collect();
    let mut names: Vec<String> = args.iter().map(|a| a.name.clone()).collect();
    for a in args {
        names.extend(a.keys.iter().map(|k| format!("{}.{k}", a.name)));
    }
    if let Some(extra) = arrays.keys().find(|k| !names.contains(k)) {
        bail!(
            "{} holds array '{extra}', which is not a forward argument of the PyTorch model (arguments: {})",
            path.display(),
            names.join(", ")
        );
    }
    Ok(arrays)
}

/// Everything that makes one sample's TorchScript arguments.
struct Builder<'a> {
    infos: &'a [InputInfo],
    args: &'a [TorchArg],
    mapping: &'a Mapping,
    specs: &'a [InputSpec],
    torch_archive: &'a BTreeMap<String, HostTensor>,
    torch_archive_path: Option<&'a Path>,
}

impl Builder<'_> {
    fn finish(&self, one: &InputRequest, mut sample: Sample) -> Result<Sample> {
        self.apply_scalar_args(one, &mut sample)?;
        sample
            .pairs
            .extend(state_links(self.mapping).map(|(s, o)| (s.clone(), o.clone())));
        let mut torch = Vec::with_capacity(self.args.len());
        for (position, (arg, info)) in self.args.iter().zip(self.infos).enumerate() {
            let value = if arg.ty.is_container() {
                self.container(arg, &mut sample)?
            } else {
                self.plain(arg, info, one, position, &mut sample)?
            };
            torch.push(value);
        }
        sample.torch = torch;
        Ok(sample)
    }

    /// `--arg NAME=VALUE` for an argument linked to an ONNX input: that input gets the value
    /// too, in its own element type and declared shape (one element).
    fn apply_scalar_args(&self, one: &InputRequest, sample: &mut Sample) -> Result<()> {
        for (name, text) in &one.args {
            let Some(link) = self.mapping.onnx_for(name) else {
                continue;
            };
            let arg = self.args.iter().find(|a| &a.name == name).expect("checked");
            let number = match ArgValue::parse(&arg.ty, text, name)? {
                ArgValue::Int(v) => v as f64,
                ArgValue::Float(v) => v,
                ArgValue::Bool(v) => f64::from(u8::from(v)),
                _ => continue,
            };
            let spec = self
                .specs
                .iter()
                .find(|s| s.name == link.onnx)
                .expect("linked");
            let input = sample
                .inputs
                .iter_mut()
                .find(|i| i.name == link.onnx)
                .expect("every ONNX input is resolved");
            let shape = vec![1; spec.dims.len()];
            input.tensor = random::filled(spec.dtype, &shape, number);
            input.shape = shape;
            input.source = format!("arg:{name}={text}");
            input.converted_from = None;
        }
        Ok(())
    }

    /// The tensor for a slot linked to an ONNX input (or given by `--torch-inputs`), and
    /// whether it is the ONNX input's own data (then the two graph inputs pair).
    fn linked_tensor(&self, slot: &str, sample: &mut Sample) -> Option<HostTensor> {
        let link = self.mapping.onnx_for(slot);
        if let Some(t) = self.torch_archive.get(slot) {
            if let Some(link) = link {
                let path = self.torch_archive_path.expect("archive read").display();
                let input = sample.inputs.iter_mut().find(|i| i.name == link.onnx)?;
                input.torch_differs = Some(format!(
                    "PyTorch's '{slot}' was given {path}[{slot}] ({} {}) instead of this input ({} {}); the two inputs differ and are not compared",
                    t.dtype(),
                    format_shape(&t.shape),
                    input.dtype,
                    format_shape(&input.shape)
                ));
            }
            return Some(t.clone());
        }
        let link = link?;
        let input = sample.inputs.iter().find(|i| i.name == link.onnx)?;
        sample.pairs.push((slot.to_string(), link.onnx.clone()));
        Some(input.tensor.clone())
    }

    fn container(&self, arg: &TorchArg, sample: &mut Sample) -> Result<ArgValue> {
        let mut elements = Vec::new();
        let mut missing = Vec::new();
        for key in &arg.keys {
            let slot = format!("{}.{key}", arg.name);
            match self.linked_tensor(&slot, sample) {
                Some(t) => elements.push((key.clone(), ArgValue::Tensor(t))),
                None => missing.push(slot),
            }
        }
        if elements.is_empty() && arg.ty.is_optional() {
            return Ok(ArgValue::None);
        }
        if let Some(slot) = missing.first() {
            bail!(
                "PyTorch reads '{slot}' but no ONNX input is named '{}'; say which input it is with --map {slot}=INPUT, or give PyTorch's data with --torch-inputs FILE.npz (an array named '{slot}')",
                slot.rsplit('.').next().unwrap_or(slot)
            );
        }
        let inner = match &arg.ty {
            ArgType::Optional(inner) => inner.as_ref(),
            other => other,
        };
        Ok(match inner {
            ArgType::Dict(_) => ArgValue::Dict(elements),
            ArgType::Tuple(_) | ArgType::List(_) => {
                // Elements were read at indices; the container holds them in index order.
                let mut by_index: Vec<(usize, ArgValue)> = elements
                    .into_iter()
                    .map(|(k, v)| (k.parse().unwrap_or(usize::MAX), v))
                    .collect();
                by_index.sort_by_key(|(k, _)| *k);
                if by_index.iter().enumerate().any(|(i, (k, _))| i != *k) {
                    bail!(
                        "forward argument '{}' is {}, but its graph reads only some of its elements, so align-check cannot build all of them",
                        arg.name,
                        describe(&arg.ty)
                    );
                }
                let values = by_index.into_iter().map(|(_, v)| v).collect();
                if matches!(inner, ArgType::Tuple(_)) {
                    ArgValue::Tuple(values)
                } else {
                    ArgValue::List(values)
                }
            }
            _ => unreachable!("is_container"),
        })
    }

    fn plain(
        &self,
        arg: &TorchArg,
        info: &InputInfo,
        one: &InputRequest,
        position: usize,
        sample: &mut Sample,
    ) -> Result<ArgValue> {
        let name = arg.name.as_str();
        if takes_text(&arg.ty) {
            return self.scalar(arg, info, one, sample);
        }
        if let Some(t) = self.linked_tensor(name, sample) {
            return Ok(ArgValue::Tensor(t));
        }
        let has_data = one.files.iter().any(|(n, _)| n == name)
            || one.shapes.iter().any(|(n, _)| n == name)
            || archive_array(one, name)?.is_some();
        if arg.ty.is_optional() && !has_data {
            return Ok(ArgValue::None);
        }
        if !matches!(arg.ty, ArgType::Tensor | ArgType::Optional(_)) {
            if info.default.is_some() {
                return Ok(ArgValue::Default);
            }
            bail!(
                "forward argument '{name}' is {}, which align-check cannot build and which has no default",
                describe(&arg.ty)
            );
        }
        let input = torch_only_input(name, one, self.specs.len() + position)?;
        if input.source == "placeholder" {
            sample.placeholders.push(name.to_string());
        }
        let t = input.tensor.clone();
        sample.inputs.push(input);
        Ok(ArgValue::Tensor(t))
    }

    /// An `int`/`float`/`bool`/`str` argument, from (in order) `--torch-inputs`, `--arg`,
    /// the ONNX input it links to, a 0-d array in the inputs archive, the schema's default.
    fn scalar(
        &self,
        arg: &TorchArg,
        info: &InputInfo,
        one: &InputRequest,
        sample: &Sample,
    ) -> Result<ArgValue> {
        let name = arg.name.as_str();
        if let Some(t) = self.torch_archive.get(name) {
            return ArgValue::from_array(&arg.ty, t, name);
        }
        if let Some((_, text)) = one.args.iter().find(|(n, _)| n == name) {
            return ArgValue::parse(&arg.ty, text, name);
        }
        if let Some(link) = self.mapping.onnx_for(name) {
            let input = sample
                .inputs
                .iter()
                .find(|i| i.name == link.onnx)
                .expect("every ONNX input is resolved");
            return ArgValue::from_array(&arg.ty, &input.tensor, name);
        }
        if let Some(t) = archive_array(one, name)? {
            return ArgValue::from_array(&arg.ty, &t, name);
        }
        if info.default.is_some() {
            return Ok(ArgValue::Default);
        }
        if arg.ty.is_optional() {
            return Ok(ArgValue::None);
        }
        bail!(
            "forward argument '{name}' is {} that no ONNX input gives and that has no default; pass --arg {name}=VALUE (or a 0-d array '{name}' in --inputs)",
            describe(&arg.ty)
        )
    }
}

/// Whether `--arg NAME=VALUE` can spell the type: a number, a bool or a string (or an
/// Optional of one).
fn takes_text(ty: &ArgType) -> bool {
    match ty {
        ArgType::Str => true,
        ArgType::Optional(inner) => takes_text(inner),
        other => other.scalar().is_some(),
    }
}

/// The array `name` of the sample's archive, if it has one.
fn archive_array(one: &InputRequest, name: &str) -> Result<Option<HostTensor>> {
    match one.archive.as_ref().filter(|p| p.is_file()) {
        Some(path) => Ok(npy::read_npz(path)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)),
        None => Ok(None),
    }
}

/// One TorchScript-only tensor argument's data for one sample, from (in order) `--input`,
/// the sample's archive, `--shape`, or a placeholder.
fn torch_only_input(name: &str, one: &InputRequest, position: usize) -> Result<ResolvedInput> {
    let archive = archive_array(one, name)?.map(|t| {
        let path = one.archive.as_ref().expect("read above").display();
        (t, format!("npz:{path}[{name}]"))
    });
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
            // type it only as `Tensor`); an unused argument takes anything, and the boundary
            // check makes sure it is unused.
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
            format!("{UNUSED_NOTE}; PyTorch was given a placeholder (0-d float32), as its graph does not read it either")
        } else {
            format!("{UNUSED_NOTE}; PyTorch was given the data named for it")
        }),
        onnx_only: None,
        torch_differs: None,
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

/// The forward arguments with floating-point tensors in `parameter_dtype`, the type the
/// module computes in, when one of the two is a reduced precision (float16, bfloat16): a
/// float16 ONNX model's inputs reach a float32 TorchScript as float32 (exactly the same
/// values), and a half-precision TorchScript gets float32 inputs rounded to float16.
pub fn in_module_dtype(values: &[ArgValue], parameter_dtype: Option<DType>) -> Vec<ArgValue> {
    // Only between a reduced precision and a full one: a float64 input to a float32 module
    // is the model's own business (it may cast it itself).
    let reduced = |d: DType| matches!(d, DType::F16 | DType::Bf16);
    fn map(v: &ArgValue, f: &dyn Fn(&HostTensor) -> HostTensor) -> ArgValue {
        match v {
            ArgValue::Tensor(t) => ArgValue::Tensor(f(t)),
            ArgValue::Tuple(e) => ArgValue::Tuple(e.iter().map(|x| map(x, f)).collect()),
            ArgValue::List(e) => ArgValue::List(e.iter().map(|x| map(x, f)).collect()),
            ArgValue::Dict(e) => {
                ArgValue::Dict(e.iter().map(|(k, x)| (k.clone(), map(x, f))).collect())
            }
            other => other.clone(),
        }
    }
    let convert = |t: &HostTensor| match parameter_dtype {
        Some(to) if t.dtype() != to && (reduced(to) || reduced(t.dtype())) => {
            t.cast_float(to).unwrap_or_else(|| t.clone())
        }
        _ => t.clone(),
    };
    values.iter().map(|v| map(v, &convert)).collect()
}

/// Explains a TorchScript run that failed with a placeholder argument: the argument is used
/// after all, and only the user can say what it holds.
pub fn explain_run_error(err: anyhow::Error, placeholders: &[String]) -> anyhow::Error {
    match placeholders.first() {
        Some(name) => anyhow!(
            "forward argument '{name}' is not an input of the ONNX model and PyTorch failed on a placeholder for it ({err}); pass --input {name}=file.npy or --shape {name}=..."
        ),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_keys_come_from_the_graph_reads_of_that_argument() {
        let infos = [
            InputInfo {
                name: "inputs.1".into(),
                type_name: "Dict[str, Tensor]".into(),
                default: None,
            },
            InputInfo {
                name: "rate".into(),
                type_name: "int".into(),
                default: Some("2".into()),
            },
        ];
        let elements = [
            ("inputs.1".to_string(), "input_ids".to_string()),
            ("inputs.1".to_string(), "input_ids".to_string()),
            ("inputs.1".to_string(), "mask".to_string()),
        ];
        let args = torch_signature(&infos, &elements);
        assert_eq!(args[0].name, "inputs");
        assert_eq!(args[0].keys, ["input_ids", "mask"]);
        assert_eq!(args[1].ty, ArgType::Int);
        assert!(args[1].keys.is_empty());
    }
}
