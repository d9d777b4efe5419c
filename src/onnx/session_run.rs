//! One ONNX Runtime run and what it hands back: converting host tensors into ort values,
//! running a session on them, and keeping the inputs alive as long as the outputs that may
//! alias them. Shared by the whole-graph capture (`capture.rs`), the graph segments of
//! bounded mode (`segmented.rs`) and isolation, so that none of them imports another.

use super::convert::to_ort;
use super::runtime;
use super::signature::InputSpec;
use crate::capture::store::Stored;
use crate::capture::tensor::{DType, HostTensor};
use anyhow::{anyhow, bail, Result};
use ort::session::{Session, SessionInputValue};
use ort::value::DynValue;
use std::collections::HashMap;
use std::path::Path;

/// What a run handed back, by value name: the kept tensor with its type and shape, or why
/// it could not be kept.
pub(super) type Fetched = HashMap<String, Result<(DType, Vec<usize>, Stored)>>;

/// What one run returned, by output name, together with the input values it was given.
///
/// ONNX Runtime does not copy what it can alias: an output that is a graph input passed
/// through, or the result of an aliasing kernel such as Reshape on a graph input, points
/// into the caller's input buffer. The inputs therefore live exactly as long as the outputs
/// (fields drop in declaration order: outputs first).
pub struct RunOutputs {
    values: HashMap<String, DynValue>,
    _inputs: Vec<DynValue>,
}

impl RunOutputs {
    /// Takes an output out, so that it is freed as soon as the caller has converted it.
    pub fn remove(&mut self, name: &str) -> Option<DynValue> {
        self.values.remove(name)
    }
}

/// One run of `session` on `feed` (in signature order).
pub(super) fn run(
    session: &mut Session,
    path: &Path,
    specs: &[InputSpec],
    feed: &[&HostTensor],
) -> Result<RunOutputs> {
    let named: Vec<(&str, &HostTensor)> = specs
        .iter()
        .zip(feed)
        .map(|(spec, &t)| (spec.name.as_str(), t))
        .collect();
    run_named(session, path, &named)
}

/// One run of `session` on the named inputs in `feed`.
fn run_named(
    session: &mut Session,
    path: &Path,
    feed: &[(&str, &HostTensor)],
) -> Result<RunOutputs> {
    let mut names = Vec::with_capacity(feed.len());
    let mut inputs = Vec::with_capacity(feed.len());
    for (name, t) in feed {
        names.push(*name);
        inputs.push(ort_input(path, name, t)?);
    }
    run_values(session, path, &names, inputs)
}

/// `t` as an ort value for input `name` of the model at `path`.
pub fn ort_input(path: &Path, name: &str, t: &HostTensor) -> Result<DynValue> {
    to_ort(t).map_err(|e| anyhow!("input `{name}` of {}: {e}", path.display()))
}

/// One run of `session` on inputs already converted to ort values (`names[i]` is the input
/// `inputs[i]` is fed to), so that a caller can free each host copy as soon as it is
/// converted.
pub fn run_values(
    session: &mut Session,
    path: &Path,
    names: &[&str],
    inputs: Vec<DynValue>,
) -> Result<RunOutputs> {
    let shown = path.display();
    let named: Vec<(&str, SessionInputValue<'_>)> = names
        .iter()
        .zip(&inputs)
        .map(|(name, v)| (*name, SessionInputValue::from(v)))
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
