//! `align-check inspect MODEL`: what the file is (`model_identity`), then every value the tool
//! can capture from it, so a user whose pairing surprises them can see what each side offers.
//!
//! An ONNX model is run on inputs from its own signature. A TorchScript model has no
//! signature with shapes, so it runs on inputs shaped by `--onnx MODEL.onnx` (which also
//! shows both signatures side by side with the mapping a check would use), `--shape` or
//! input files; without any of them a `.pt2` runs on its own sample inputs, and otherwise the
//! static structure is listed with unknown shapes.

use crate::app::{model_identity, signatures};
use crate::capture::sniff::{sniff, FileKind};
use crate::capture::tensor::{format_shape, DType};
use crate::capture::{Capture, CapturedValue, Side, ValueRole};
use crate::cli::config::{input_request, runtime_config};
use crate::cli::InspectArgs;
use crate::inputs::{npy, resolve, torch_args, InputRequest};
use crate::onnx;
use crate::onnx::signature::{Dim, InputSpec};
use crate::outcome::reference::{Reference, ReferenceFormat};
use crate::text::module_label;
use crate::torch::TorchModel;
use anyhow::{anyhow, Result};
use std::fmt::Write;
use std::io::Read;
use std::process::ExitCode;

fn file_kind(path: &std::path::Path) -> Result<FileKind> {
    let mut head = [0u8; 8];
    let mut f = std::fs::File::open(path)
        .map_err(|e| anyhow!("{}: cannot open it: {e}", path.display()))?;
    let n = f
        .read(&mut head)
        .map_err(|e| anyhow!("{}: cannot read it: {e}", path.display()))?;
    Ok(sniff(&head[..n]))
}

pub fn run(args: &InspectArgs) -> Result<ExitCode> {
    let rt = runtime_config(&args.runtime, None)?;
    let request = input_request(&args.inputs, None)?;
    let text = match file_kind(&args.model)? {
        FileKind::Zip | FileKind::Pickle => {
            crate::app::runtimes::init(&rt, args.onnx.is_some())?;
            let model = TorchModel::load(&args.model)?;
            print!("{}", model_identity::torchscript(&model));
            let specs = match &args.onnx {
                Some(onnx_path) => {
                    let m = onnx::model::load(onnx_path)?;
                    let specs = onnx::signature::inputs(&m)?;
                    // A pair: both signatures, the mapping, and a run on mapped arguments.
                    let (mapping, samples) = torch_args::resolve_samples(
                        model.inputs(),
                        &model.element_reads(),
                        &specs,
                        &request,
                    )?;
                    print!(
                        "{}",
                        signatures::side_by_side(
                            model.inputs(),
                            &specs,
                            &onnx::signature::output_names(&m),
                            &mapping
                        )
                    );
                    let sample = samples.into_iter().next().expect("one sample at least");
                    let args = torch_args::in_module_dtype(&sample.torch, model.parameter_dtype());
                    let cap = model.capture_args(&args, &crate::capture::store::Keep::Memory)?;
                    print!("{}", render(&cap, reference_name(&model)));
                    return Ok(ExitCode::SUCCESS);
                }
                None => torch_specs(&model, &request)?,
            };
            match specs {
                Some(specs) => {
                    let inputs = resolve(&specs, &request)?;
                    let tensors: Vec<_> = inputs.into_iter().map(|i| i.tensor).collect();
                    render(
                        &model.capture(&tensors, &crate::capture::store::Keep::Memory)?,
                        reference_name(&model),
                    )
                }
                None => match model.sample_inputs() {
                    // A .pt2 stores what it was exported with: enough to run it.
                    Some(Ok((origin, tensors))) => {
                        println!("inputs: the archive's own sample inputs ({origin})");
                        render(
                            &model.capture(&tensors, &crate::capture::store::Keep::Memory)?,
                            reference_name(&model),
                        )
                    }
                    Some(Err(e)) => {
                        println!("its sample inputs cannot be used: {e:#}");
                        render_static(&model)
                    }
                    None => render_static(&model),
                },
            }
        }
        _ => {
            crate::app::runtimes::init(&rt, true)?;
            let model = onnx::model::load(&args.model)?;
            print!("{}", model_identity::onnx(&model));
            let specs = onnx::signature::inputs(&model)?;
            let inputs = resolve(&specs, &request)?;
            let named: Vec<_> = inputs.into_iter().map(|i| (i.name, i.tensor)).collect();
            let cap =
                onnx::capture::capture(&model, &named, rt.threads, rt.ort_custom_ops.as_deref())?;
            render(&cap, Side::Onnx.label())
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// Input specs for a TorchScript model without an ONNX twin: each forward input takes its
/// dtype and shape from its file when one is given, else float32 with its `--shape`.
/// `None` when some input has neither (the listing is then static).
fn torch_specs(model: &TorchModel, request: &InputRequest) -> Result<Option<Vec<InputSpec>>> {
    let archive = match &request.archive {
        Some(path) => npy::read_npz(path)?,
        None => Vec::new(),
    };
    let mut specs = Vec::new();
    for input in model.inputs() {
        let from_file = match request.files.iter().find(|(n, _)| n == &input.name) {
            Some((_, path)) => Some(npy::read_npy(path)?),
            None => archive
                .iter()
                .find(|(n, _)| n == &input.name)
                .map(|(_, t)| t.clone()),
        };
        let (dtype, shape) = match (
            from_file,
            request.shapes.iter().find(|(n, _)| n == &input.name),
        ) {
            (Some(t), _) => (t.dtype(), t.shape.clone()),
            (None, Some((_, s))) => (DType::F32, s.clone()),
            (None, None) => return Ok(None),
        };
        specs.push(InputSpec {
            name: input.name.clone(),
            dtype,
            dims: shape.into_iter().map(Dim::Fixed).collect(),
        });
    }
    Ok(Some(specs))
}

fn role_label(v: &CapturedValue) -> String {
    match v.role {
        ValueRole::Input(n) => format!("input {n}"),
        ValueRole::Output(n) => format!("output {n}"),
        ValueRole::Intermediate => String::new(),
    }
}

/// How the listing names a PyTorch model: `TorchScript` or `ExportedProgram`.
fn reference_name(model: &TorchModel) -> &'static str {
    let format = if model.is_exported() {
        ReferenceFormat::Pt2
    } else {
        ReferenceFormat::Torchscript
    };
    Reference::new(format).name()
}

/// The captured values of one side, named `side` (`ExportedProgram`, `ONNX`).
fn render(cap: &Capture, side: &str) -> String {
    let torch = cap.side == Side::Torch;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} values captured from the {} model{}",
        cap.values.len(),
        side,
        if cap.uncapturable.is_empty() {
            String::new()
        } else {
            format!(", {} not capturable", cap.uncapturable.len())
        }
    );
    let _ = writeln!(
        out,
        "{:>5}  {:<32} {:<16} {:<26} {:<9} {:<16} {}",
        "index",
        "module",
        "class",
        "op",
        "dtype",
        "shape",
        if torch { "source" } else { "node" }
    );
    for v in &cap.values {
        let where_ = if torch {
            v.source.clone().unwrap_or_default()
        } else {
            v.node.clone()
        };
        let _ = writeln!(
            out,
            "{:>5}  {:<32} {:<16} {:<26} {:<9} {:<16} {} {}",
            v.id,
            module_label(v.module_path()),
            v.module_class(),
            v.op,
            v.dtype.name(),
            format_shape(&v.shape),
            where_,
            role_label(v)
        );
    }
    for u in &cap.uncapturable {
        let _ = writeln!(
            out,
            "    -  {:<32} {:<16} {:<26} not capturable: {}",
            module_label(&u.module),
            "",
            u.op,
            u.reason
        );
    }
    out
}

fn render_static(model: &TorchModel) -> String {
    let mut out = String::new();
    let names: Vec<&str> = model.inputs().iter().map(|i| i.name.as_str()).collect();
    let _ = writeln!(
        out,
        "shapes unknown: give --shape NAME=1x3x224x224 for each input ({}) or --onnx MODEL.onnx to run the model",
        names.join(", ")
    );
    let _ = writeln!(
        out,
        "{:>5}  {:<32} {:<16} {:<26} source",
        "index", "module", "class", "op"
    );
    for (i, v) in model.static_values().iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>5}  {:<32} {:<16} {:<26} {}",
            i,
            module_label(v.scope.last().map(|l| l.path.as_str()).unwrap_or("")),
            v.scope.last().map(|l| l.class.as_str()).unwrap_or(""),
            v.op,
            v.source.clone().unwrap_or_default()
        );
    }
    out
}
