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
mod outputs;
mod scope;
mod translate;

use super::ffi::ModulePlan;
use super::meta::GraphMeta;
use anyhow::{anyhow, Result};
use std::path::Path;

pub use archive::{format_line, is_archive};

/// Reads the archive at `path` and prepares its program to run, with its metadata.
pub fn load(path: &Path) -> Result<(ModulePlan, GraphMeta)> {
    let archive::Archive {
        model,
        mut tensors,
        parameter_dtype,
    } = archive::read(path)?;
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
    let meta = describe::describe(&model, &translation, parameter_dtype);
    Ok((plan, meta))
}
