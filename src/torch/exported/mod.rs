//! torch.export's ExportedProgram (`.pt2`, written by `torch.export.save`) as the reference:
//! the archive is read here, its graph translated for the interpreter in `program.cpp`, and
//! its metadata described in the TorchScript shim's shape, so that everything after loading
//! treats both references alike.
//!
//! Why an interpreter and not a TorchScript graph: each node names one operator overload
//! (`aten.add.Tensor`), which the dispatcher runs by that exact name; a TorchScript graph would
//! pick overloads again by argument types. Calling the same overloads through the dispatcher
//! is what `ep.module()(*args)` does in Python, so the kernels and the values are the same.

mod archive;
mod describe;
mod graph;
mod inline;
mod keywords;
mod outputs;
mod ranges;
mod scope;
mod translate;

use super::convert::to_host;
use super::ffi::ModulePlan;
use super::meta::GraphMeta;
use crate::capture::tensor::HostTensor;
use anyhow::{anyhow, Result};
use std::path::Path;

pub use archive::{format_line, is_archive};
pub use ranges::{refusal as shape_refusal, DimRule};

/// The archive's own sample inputs, as host tensors in the program's input order
/// (positional, then keyword arguments in the order the program takes them), with the entry
/// they were read from (`data/sample_inputs/model.pt`); `None` when it stores none.
/// libtorch's unpickler reads them (they are torch.save's format), so no Python is involved.
pub fn sample_inputs(path: &Path) -> Result<Option<(String, Vec<HostTensor>)>> {
    let Some(sample) = archive::sample_input_bytes(path)? else {
        return Ok(None);
    };
    let entry = sample.entry;
    let tensors = super::ffi::pickled_sample_inputs(&sample.bytes, &sample.keywords)
        .map_err(|e| anyhow!("its sample inputs ({entry}) cannot be fed: {e}"))?;
    let host = tensors
        .iter()
        .map(|t| to_host(&t.to_device(tch::Device::Cpu)))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| anyhow!("its sample inputs ({entry}): {e}"))?;
    Ok(Some((entry, host)))
}

/// Reads the archive at `path` and prepares its program to run, with its metadata.
pub fn load(path: &Path) -> Result<(ModulePlan, GraphMeta)> {
    let archive::Archive {
        mut model,
        mut tensors,
        parameter_dtype,
        storage,
    } = archive::read(path)?;
    inline::wrappers(&mut model.graph_module)?;
    let translation = translate::translate(&model)?;
    let constants = translation
        .constants
        .iter()
        .map(|name| {
            tensors
                .remove(name)
                .ok_or_else(|| anyhow!("the archive stores no tensor for `{name}`"))
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = ModulePlan::load_program(&translation.text, &constants)?;
    let mut meta = describe::describe(&model, &translation, parameter_dtype, &storage);
    meta.input_dims = ranges::input_rules(&model, &translation.inputs);
    Ok((plan, meta))
}
