//! Several input samples for one check: a folder of `.npz` archives (`--inputs DIR`) or N
//! seeds (`--samples N`). A fault that only some inputs trigger is exactly what a check on a
//! single input misses, so every sample runs through both models and the gate takes the
//! worst case per layer.

use super::{resolve_except, InputRequest, ResolvedInput};
use crate::onnx::signature::InputSpec;
use crate::signature::types::ArgValue;
use anyhow::{anyhow, bail, Result};

/// One set of inputs and how to name it in reports.
pub struct Sample {
    pub label: String,
    /// Every ONNX input, then the TorchScript-only tensor arguments: what reports list.
    pub inputs: Vec<ResolvedInput>,
    /// TorchScript's forward arguments, in order (filled by `torch_args`).
    pub torch: Vec<ArgValue>,
    /// (TorchScript slot, ONNX input) for each input both models were given identically:
    /// the graph inputs that pair.
    pub pairs: Vec<(String, String)>,
    /// TorchScript-only arguments given a placeholder, which TorchScript must not read.
    pub placeholders: Vec<String>,
    /// What the reports say about where this sample's inputs came from, when the tool chose
    /// (a reference's own sample inputs, used or not).
    pub notes: Vec<String>,
}

impl Sample {
    fn new(label: String, inputs: Vec<ResolvedInput>) -> Sample {
        Sample {
            label,
            inputs,
            torch: Vec::new(),
            pairs: Vec::new(),
            placeholders: Vec::new(),
            notes: Vec::new(),
        }
    }
}

pub fn resolve_samples(specs: &[InputSpec], request: &InputRequest) -> Result<Vec<Sample>> {
    resolve_samples_with(specs, request, &[], |_, sample| Ok(sample))
}

/// `resolve_samples`, where the input data may also name the arguments in `others` (which
/// the ONNX model does not take), and `finish` completes each sample from its own request
/// (its seed and archive): TorchScript's arguments.
pub fn resolve_samples_with(
    specs: &[InputSpec],
    request: &InputRequest,
    others: &[&str],
    finish: impl Fn(&InputRequest, Sample) -> Result<Sample>,
) -> Result<Vec<Sample>> {
    let resolve_one = |label: String, one: &InputRequest| -> Result<Sample> {
        finish(one, Sample::new(label, resolve_except(specs, one, others)?))
    };
    if let Some(dir) = request.archive.as_ref().filter(|p| p.is_dir()) {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| anyhow!("cannot read input folder {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "npz"))
            .collect();
        files.sort();
        if files.is_empty() {
            bail!("input folder {} holds no .npz files", dir.display());
        }
        return files
            .into_iter()
            .map(|file| {
                let one = InputRequest {
                    archive: Some(file.clone()),
                    ..request.clone()
                };
                resolve_one(file.display().to_string(), &one)
            })
            .collect();
    }
    let count = request.samples.max(1);
    (0..count as u64)
        .map(|k| {
            let one = InputRequest {
                seed: request.seed + k,
                ..request.clone()
            };
            let label = match &one.preset {
                Some(preset) => preset.origin.clone(),
                None => format!("seed {}", one.seed),
            };
            resolve_one(label, &one)
        })
        .collect()
}
