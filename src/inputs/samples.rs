//! Several input samples for one check: a folder of `.npz` archives (`--inputs DIR`) or N
//! seeds (`--samples N`). A fault that only some inputs trigger is exactly what a check on a
//! single input misses, so every sample runs through both models and the gate takes the
//! worst case per layer.

use super::{resolve_except, InputRequest, ResolvedInput};
use crate::onnx::signature::InputSpec;
use anyhow::{anyhow, bail, Result};

/// One set of inputs and how to name it in reports.
pub struct Sample {
    pub label: String,
    pub inputs: Vec<ResolvedInput>,
}

pub fn resolve_samples(specs: &[InputSpec], request: &InputRequest) -> Result<Vec<Sample>> {
    resolve_samples_with(specs, request, &[], |_| Ok(Vec::new()))
}

/// `resolve_samples`, plus the inputs `extra` makes from each sample's own request (its seed
/// and archive) for the names in `others`, which the ONNX model does not take.
pub fn resolve_samples_with(
    specs: &[InputSpec],
    request: &InputRequest,
    others: &[&str],
    extra: impl Fn(&InputRequest) -> Result<Vec<ResolvedInput>>,
) -> Result<Vec<Sample>> {
    let resolve_one = |one: &InputRequest| -> Result<Vec<ResolvedInput>> {
        let mut inputs = resolve_except(specs, one, others)?;
        inputs.extend(extra(one)?);
        Ok(inputs)
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
                Ok(Sample {
                    label: file.display().to_string(),
                    inputs: resolve_one(&one)?,
                })
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
            Ok(Sample {
                label: format!("seed {}", one.seed),
                inputs: resolve_one(&one)?,
            })
        })
        .collect()
}
