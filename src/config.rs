//! Resolved configuration: what a run uses, built once from the raw command line.
//!
//! Validation that needs more than one argument (an output path that would overwrite a
//! model, a coverage ratio outside 0..1, tolerance globs) happens here, so the pipeline can
//! trust every field.

use crate::cli::{CheckArgs, InputArgs, RuntimeArgs};
use crate::inputs::InputRequest;
use crate::tolerance::{parse_override, TolerancePolicy};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub threads: usize,
    pub ort_lib: Option<PathBuf>,
    pub ort_custom_ops: Option<PathBuf>,
    pub torch_ops: Vec<PathBuf>,
}

#[derive(Debug)]
pub struct CheckConfig {
    pub torch_path: PathBuf,
    pub onnx_path: PathBuf,
    pub inputs: InputRequest,
    pub runtime: RuntimeConfig,
    pub policy: TolerancePolicy,
    pub min_coverage: f64,
    pub baseline: Option<PathBuf>,
    pub max_growth: f64,
    pub update_baseline: bool,
    pub exit_zero: bool,
    pub json: Option<PathBuf>,
    pub all_rows: bool,
    pub worst: usize,
    pub verbose: bool,
    pub quiet: bool,
}

pub fn input_request(args: &InputArgs) -> InputRequest {
    InputRequest {
        seed: args.seed,
        files: args
            .input_files
            .iter()
            .map(|(n, p)| (n.clone(), PathBuf::from(p)))
            .collect(),
        archive: args.inputs_archive.clone(),
        samples: args.samples,
        shapes: args.shapes.clone(),
    }
}

pub fn runtime_config(args: &RuntimeArgs) -> RuntimeConfig {
    let threads = if args.threads == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    } else {
        args.threads
    };
    RuntimeConfig {
        threads,
        ort_lib: args.ort_lib.clone(),
        ort_custom_ops: args.ort_custom_ops.clone(),
        torch_ops: args.torch_ops.clone(),
    }
}

/// Refuses a report path that is one of the models: a typo must never destroy a model.
fn check_output_path(out: &Path, models: &[&Path]) -> Result<()> {
    if out == Path::new("-") {
        return Ok(());
    }
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    for model in models {
        if out == *model || (canon(out).is_some() && canon(out) == canon(model)) {
            bail!(
                "refusing to write a report to {}: that is one of the input models",
                out.display()
            );
        }
    }
    Ok(())
}

impl CheckConfig {
    pub fn from_args(args: &CheckArgs) -> Result<CheckConfig> {
        let (Some(torch_path), Some(onnx_path)) = (&args.model_pt, &args.model_onnx) else {
            bail!("give both models: align-check MODEL_PT MODEL_ONNX");
        };
        if !(0.0..=1.0).contains(&args.min_coverage) {
            bail!(
                "--min-coverage must be between 0 and 1, got {}",
                args.min_coverage
            );
        }
        let overrides = args
            .tolerances
            .iter()
            .map(|s| parse_override(s).map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()
            .context("--tolerance")?;
        let policy =
            TolerancePolicy::new(args.atol, args.rtol, overrides).map_err(anyhow::Error::msg)?;
        if let Some(json) = &args.json {
            check_output_path(json, &[torch_path, onnx_path])?;
        }
        if let Some(baseline) = &args.baseline {
            check_output_path(baseline, &[torch_path, onnx_path])?;
        }
        let max_growth = args.max_growth.unwrap_or(crate::baseline::DEFAULT_MAX_GROWTH);
        if !(max_growth.is_finite() && max_growth >= 1.0) {
            bail!("--max-growth must be a number of at least 1, got {max_growth}");
        }
        Ok(CheckConfig {
            torch_path: torch_path.clone(),
            onnx_path: onnx_path.clone(),
            inputs: input_request(&args.inputs),
            runtime: runtime_config(&args.runtime),
            policy,
            min_coverage: args.min_coverage,
            baseline: args.baseline.clone(),
            max_growth,
            update_baseline: args.update_baseline,
            exit_zero: args.exit_zero,
            json: args.json.clone(),
            all_rows: args.all,
            worst: args.worst,
            verbose: args.verbose,
            quiet: args.quiet,
        })
    }
}
