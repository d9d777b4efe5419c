//! The ONNX side's instrumented run: expose every node output, run once through ONNX Runtime
//! and describe each value for pairing.
//!
//! The capture lists, in order: the graph inputs, every node output in execution order, then
//! the graph outputs (as their own values pointing at the node output they repeat, so that
//! inputs and outputs pair by position). Anything the run cannot hand back as a tensor of a
//! supported type is listed as uncapturable with the reason, never dropped silently.
//! `run_plain` runs the unmodified model with the same session options; tests use it to prove
//! that instrumenting the model does not change its answer.

use super::convert::{from_ort, to_ort};
use super::expose::expose_all;
use super::model::OnnxModel;
use super::runtime;
use super::signature::{self, Dim, InputSpec};
use crate::capture::{Capture, CapturedValue, Side, Uncapturable, ValueRole};
use crate::tensor::{format_shape, HostTensor};
use anyhow::{anyhow, bail, Result};
use ort::session::{Session, SessionInputValue};
use ort::value::DynValue;
use prost::Message;
use std::collections::HashMap;
use std::path::Path;

/// Runs the instrumented `model` once on `inputs` (exactly the signature's inputs, by name)
/// and returns every value it computed.
pub fn capture(
    model: &OnnxModel,
    inputs: &[(String, HostTensor)],
    threads: usize,
    custom_ops: Option<&Path>,
) -> Result<Capture> {
    let specs = signature::inputs(model)?;
    let feed = match_inputs(model, &specs, inputs)?;
    let exposed = expose_all(&model.proto)
        .map_err(|e| anyhow!("ONNX model {}: {e}", model.path.display()))?;
    let bytes = exposed.model.encode_to_vec();
    let mut session = runtime::session(model, &bytes, threads, custom_ops)?;
    let mut results = run(&mut session, model, &specs, &feed)?;

    let mut values: Vec<CapturedValue> = Vec::new();
    let mut uncapturable = exposed.uncapturable;
    // Tensor name -> id of the captured value holding it.
    let mut ids: HashMap<String, usize> = HashMap::new();

    for (i, (spec, tensor)) in specs.iter().zip(&feed).enumerate() {
        ids.insert(spec.name.clone(), values.len());
        values.push(CapturedValue {
            id: values.len(),
            name: spec.name.clone(),
            op: "input".to_string(),
            node: String::new(),
            scope: Vec::new(),
            source: None,
            role: ValueRole::Input(i),
            dtype: tensor.dtype(),
            shape: tensor.shape.clone(),
            inputs: Vec::new(),
            tensor: Some((*tensor).clone()),
        });
    }

    for ev in &exposed.values {
        let module = ev.scope.last().map(|l| l.path.clone()).unwrap_or_default();
        // Taking the ort value out of the map frees it as soon as it is converted.
        let converted = match results.remove(&ev.name) {
            None => Err(anyhow!(
                "ONNX Runtime did not return it (an optional output the node did not produce)"
            )),
            Some(v) => from_ort(&v),
        };
        let tensor = match converted {
            Ok(t) => t,
            Err(e) => {
                uncapturable.push(Uncapturable {
                    name: ev.name.clone(),
                    op: ev.op_type.clone(),
                    module,
                    reason: e.to_string(),
                });
                continue;
            }
        };
        let id = values.len();
        values.push(CapturedValue {
            id,
            name: ev.name.clone(),
            op: ev.op_type.clone(),
            node: ev.node_name.clone(),
            scope: ev.scope.clone(),
            source: ev.source.clone(),
            role: ValueRole::Intermediate,
            dtype: tensor.dtype(),
            shape: tensor.shape.clone(),
            // Weights and constants folded into initializers are not values: skipped.
            inputs: ev
                .input_names
                .iter()
                .filter_map(|n| ids.get(n).copied())
                .collect(),
            tensor: Some(tensor),
        });
        ids.insert(ev.name.clone(), id);
    }

    for (k, name) in signature::output_names(model).into_iter().enumerate() {
        let (tensor, inputs) = if let Some(&src) = ids.get(&name) {
            let t = values[src]
                .tensor
                .clone()
                .expect("captured values hold data");
            (t, vec![src])
        } else if uncapturable.iter().any(|u| u.name == name) {
            // Its node output is already listed with the reason (a sequence, say).
            continue;
        } else {
            // An output that no node computes (a graph input passed through, an
            // initializer): the run returned it directly.
            match results.remove(&name).map(|v| from_ort(&v)) {
                Some(Ok(t)) => (t, Vec::new()),
                other => {
                    let reason = match other {
                        Some(Err(e)) => e.to_string(),
                        _ => "ONNX Runtime did not return it".to_string(),
                    };
                    uncapturable.push(Uncapturable {
                        name: name.clone(),
                        op: "output".to_string(),
                        module: String::new(),
                        reason: format!("graph output {k}: {reason}"),
                    });
                    continue;
                }
            }
        };
        values.push(CapturedValue {
            id: values.len(),
            name,
            op: "output".to_string(),
            node: String::new(),
            scope: Vec::new(),
            source: None,
            role: ValueRole::Output(k),
            dtype: tensor.dtype(),
            shape: tensor.shape.clone(),
            inputs,
            tensor: Some(tensor),
        });
    }

    Ok(Capture {
        side: Side::Onnx,
        values,
        uncapturable,
    })
}

/// Runs the unmodified `model` (same session options as [`capture`]) and returns its graph
/// outputs in declaration order.
pub fn run_plain(
    model: &OnnxModel,
    inputs: &[(String, HostTensor)],
    threads: usize,
    custom_ops: Option<&Path>,
) -> Result<Vec<(String, HostTensor)>> {
    let specs = signature::inputs(model)?;
    let feed = match_inputs(model, &specs, inputs)?;
    let bytes = model.proto.encode_to_vec();
    let mut session = runtime::session(model, &bytes, threads, custom_ops)?;
    let mut results = run(&mut session, model, &specs, &feed)?;
    signature::output_names(model)
        .into_iter()
        .map(|name| {
            let v = results.remove(&name).ok_or_else(|| {
                anyhow!(
                    "ONNX Runtime returned no value for output `{name}` of {}",
                    model.path.display()
                )
            })?;
            let t = from_ort(&v)
                .map_err(|e| anyhow!("output `{name}` of {}: {e}", model.path.display()))?;
            Ok((name, t))
        })
        .collect()
}

/// The given inputs in signature order, after checking names, element types and fixed
/// dimensions so that mistakes are reported by input name rather than by ONNX Runtime.
fn match_inputs<'a>(
    model: &OnnxModel,
    specs: &[InputSpec],
    given: &'a [(String, HostTensor)],
) -> Result<Vec<&'a HostTensor>> {
    let shown = model.path.display();
    let expected = || {
        specs
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (i, (name, _)) in given.iter().enumerate() {
        if !specs.iter().any(|s| &s.name == name) {
            bail!(
                "`{name}` is not an input of the ONNX model {shown} (its inputs: {})",
                expected()
            );
        }
        if given[..i].iter().any(|(n, _)| n == name) {
            bail!("input `{name}` of the ONNX model {shown} is given twice");
        }
    }
    specs
        .iter()
        .map(|spec| {
            let Some((_, t)) = given.iter().find(|(n, _)| n == &spec.name) else {
                bail!(
                    "the ONNX model {shown} needs input `{}`, which was not given",
                    spec.name
                );
            };
            if t.dtype() != spec.dtype {
                bail!(
                    "input `{}` of the ONNX model {shown} is {}, but {} was given",
                    spec.name,
                    spec.dtype,
                    t.dtype()
                );
            }
            let fits = spec.dims.len() == t.shape.len()
                && spec.dims.iter().zip(&t.shape).all(|(d, &n)| match d {
                    Dim::Fixed(f) => *f == n,
                    Dim::Symbolic(_) => true,
                });
            // A model that declares no shape at all accepts any.
            if !fits && !spec.dims.is_empty() {
                let declared: Vec<String> = spec.dims.iter().map(Dim::to_string).collect();
                bail!(
                    "input `{}` of the ONNX model {shown} has shape {}, but {} was given",
                    spec.name,
                    declared.join("x"),
                    format_shape(&t.shape)
                );
            }
            Ok(t)
        })
        .collect()
}

/// What one run returned, by output name, together with the input values it was given.
///
/// ONNX Runtime does not copy what it can alias: an output that is a graph input passed
/// through, or the result of an aliasing kernel such as Reshape on a graph input, points
/// into the caller's input buffer. The inputs therefore live exactly as long as the outputs
/// (fields drop in declaration order: outputs first).
struct RunOutputs {
    values: HashMap<String, DynValue>,
    _inputs: Vec<DynValue>,
}

impl RunOutputs {
    /// Takes an output out, so that it is freed as soon as the caller has converted it.
    fn remove(&mut self, name: &str) -> Option<DynValue> {
        self.values.remove(name)
    }
}

/// One run of `session` on `feed` (in signature order).
fn run(
    session: &mut Session,
    model: &OnnxModel,
    specs: &[InputSpec],
    feed: &[&HostTensor],
) -> Result<RunOutputs> {
    let shown = model.path.display();
    let mut inputs: Vec<DynValue> = Vec::with_capacity(feed.len());
    for (spec, t) in specs.iter().zip(feed) {
        inputs.push(to_ort(t).map_err(|e| anyhow!("input `{}` of {shown}: {e}", spec.name))?);
    }
    let named: Vec<(&str, SessionInputValue<'_>)> = specs
        .iter()
        .zip(&inputs)
        .map(|(spec, v)| (spec.name.as_str(), SessionInputValue::from(v)))
        .collect();
    // ort panics (rather than erroring) if ONNX Runtime ever hands back a null output; a
    // panic is never an answer, so it becomes an error like any other run failure.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        session.run(named).map(|outputs| {
            outputs
                .into_iter()
                .map(|(name, v)| (name.to_string(), v))
                .collect::<HashMap<_, _>>()
        })
    }));
    match outcome {
        Ok(Ok(values)) => Ok(RunOutputs {
            values,
            _inputs: inputs,
        }),
        Ok(Err(e)) => bail!(
            "ONNX Runtime failed to run {shown}: {}",
            runtime::tidy_message(&e.to_string())
        ),
        Err(_) => bail!("ONNX Runtime failed to run {shown}: the run returned an invalid output"),
    }
}
