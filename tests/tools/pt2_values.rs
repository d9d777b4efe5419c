//! Writes every value align-check captures from a reference model (TorchScript `.pt` or
//! torch.export `.pt2`) to an `.npz`, at one thread: graph outputs as `output.K`, other values
//! under their side-local names (a `.pt2` node's FX name). scripts/bench.py compares them with
//! what `torch.export.load(model.pt2).module()` computes node by node in Python (issue 51:
//! the `.pt2` reference must run the same kernels as PyTorch's own module).
//!
//!     cargo run --release --example pt2_values -- MODEL.pt2 INPUTS.npz OUT.npz
//!
//! Inputs are the `.npz` arrays in name order (the bench models have one input).

use align_check::capture::store::Keep;
use align_check::capture::tensor::HostTensor;
use align_check::capture::ValueRole;
use align_check::cli::config::RuntimeConfig;
use align_check::inputs::npy::read_npz;
use align_check::inputs::npz_writer::write_npz;
use align_check::torch::TorchModel;
use anyhow::{Context, Result};
use std::path::Path;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, inputs, out] = args.as_slice() else {
        anyhow::bail!("usage: pt2_values MODEL INPUTS.npz OUT.npz");
    };
    let rt = RuntimeConfig {
        threads: 1,
        ort_lib: None,
        ort_custom_ops: None,
        torch_ops: vec![],
        max_memory: None,
    };
    align_check::app::runtimes::init(&rt, false)?;
    let mut arrays = read_npz(Path::new(inputs))?;
    arrays.sort_by(|a, b| a.0.cmp(&b.0));
    let feeds: Vec<HostTensor> = arrays.into_iter().map(|(_, t)| t).collect();
    let model = TorchModel::load(Path::new(model))?;
    let capture = model.capture(&feeds, &Keep::Memory)?;
    let mut named: Vec<(String, HostTensor)> = Vec::new();
    for value in &capture.values {
        let key = match value.role {
            ValueRole::Output(k) => format!("output.{k}"),
            ValueRole::Intermediate => value.name.clone(),
            _ => continue,
        };
        named.push((key, value.in_memory().context("a captured value")?.clone()));
    }
    let refs: Vec<(&str, &HostTensor)> = named.iter().map(|(k, t)| (k.as_str(), t)).collect();
    write_npz(Path::new(out), &refs)?;
    println!("{} values", named.len());
    Ok(())
}
