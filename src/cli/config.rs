//! Resolved configuration: what a run uses, built once from the raw command line.
//!
//! Validation that needs more than one argument (an output path that would overwrite a
//! model, a coverage ratio outside 0..1, tolerance globs) happens here, so the pipeline can
//! trust every field.

use crate::cli::config_file::{FileConfig, InputsSection, ReportsSection, RuntimeSection};
use crate::cli::{CheckArgs, InputArgs, ReportArgs, RuntimeArgs};
use crate::compare::output_tolerance::OutputTolerance;
use crate::compare::tolerance::{parse_override, Override, Tolerance, TolerancePolicy};
use crate::inputs::parse_shape;
use crate::inputs::InputRequest;
use crate::production::settings::{OptLevel, ProductionSettings};
use crate::quantized::rule::SqnrRule;
use crate::report::{Destination, Output, FORMATS};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub threads: usize,
    pub ort_lib: Option<PathBuf>,
    pub ort_custom_ops: Option<PathBuf>,
    pub torch_ops: Vec<PathBuf>,
    /// `--max-memory` in bytes.
    pub max_memory: Option<u64>,
}

/// The report files a run writes, each format with its destination, in the order of
/// `report::FORMATS`: a flag on the command line, else the configuration file's key.
#[derive(Debug, Clone, Default)]
pub struct Reports {
    pub outputs: Vec<Output>,
}

impl Reports {
    fn resolve(args: &ReportArgs, file: &ReportsSection) -> Reports {
        let outputs = FORMATS
            .iter()
            .copied()
            .filter_map(|format| {
                let path = args.path(format).or_else(|| file.path(format))?;
                Some(Output {
                    format,
                    to: Destination::from_path(path),
                })
            })
            .collect();
        Reports { outputs }
    }

    /// Every report file path (stdout is none).
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.outputs.iter().filter_map(|o| match &o.to {
            Destination::File(path) => Some(path),
            Destination::Stdout => None,
        })
    }

    /// Whether some report is written to stdout (`--json -`), which then holds nothing else.
    pub fn to_stdout(&self) -> bool {
        self.outputs.iter().any(|o| o.to == Destination::Stdout)
    }
}

#[derive(Debug, Clone)]
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
    /// Compare models traced or exported in training mode instead of refusing them.
    pub allow_training_mode: bool,
    /// Measure isolated errors even when every layer and output passes (`--isolate`).
    pub isolate: bool,
    /// `--repro DIR`: where to write the repro bundle.
    pub repro: Option<PathBuf>,
    /// `--repro-layer`: the layer to reproduce instead of the first divergence.
    pub repro_layer: Option<String>,
    /// The ONNX Runtime optimisation level of the per-layer capture (`--ort-optimization`).
    pub capture_level: OptLevel,
    /// The session the user ships, compared after the check; `None` with `--production off`.
    pub production: Option<ProductionSettings>,
    /// The SQNR rule a quantised ONNX model is judged by instead of the float tolerances.
    pub quant_rule: SqnrRule,
    /// `--float-onnx`: the float model a quantised one was made from.
    pub float_onnx: Option<PathBuf>,
    pub reports: Reports,
    pub all_rows: bool,
    pub worst: usize,
    pub verbose: bool,
    pub quiet: bool,
}

/// Inputs as requested on the command line, with the config file's `[inputs]` underneath.
pub fn input_request(args: &InputArgs, file: Option<&InputsSection>) -> Result<InputRequest> {
    let empty = InputsSection::default();
    let file = file.unwrap_or(&empty);
    let mut files: Vec<(String, PathBuf)> = args
        .input_files
        .iter()
        .map(|(n, p)| (n.clone(), PathBuf::from(p)))
        .collect();
    for (name, path) in &file.files {
        if !files.iter().any(|(n, _)| n == name) {
            files.push((name.clone(), path.clone()));
        }
    }
    let mut shapes = args.shapes.clone();
    for (name, shape) in &file.shapes {
        if !shapes.iter().any(|(n, _)| n == name) {
            let dims = parse_shape(shape)
                .map_err(|e| anyhow::anyhow!("config [inputs.shapes] {name}: {e}"))?;
            shapes.push((name.clone(), dims));
        }
    }
    let mut maps = args.maps.clone();
    for (torch, onnx) in &file.map {
        if !maps.iter().any(|(t, _)| t == torch) {
            maps.push((torch.clone(), onnx.clone()));
        }
    }
    let mut values = args.args.clone();
    for (name, value) in &file.args {
        if !values.iter().any(|(n, _)| n == name) {
            // A TOML string is the text itself; numbers and booleans as TOML writes them.
            let text = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            values.push((name.clone(), text));
        }
    }
    let onnx_archive = args
        .onnx_inputs
        .clone()
        .or_else(|| file.onnx_archive.clone());
    let archive = args.inputs_archive.clone().or_else(|| file.archive.clone());
    if onnx_archive.is_some() && archive.is_some() {
        anyhow::bail!("--inputs and --onnx-inputs both name the ONNX model's inputs: give one (--onnx-inputs goes with --torch-inputs)");
    }
    Ok(InputRequest {
        seed: args.seed.or(file.seed).unwrap_or(0),
        files,
        archive: archive.or(onnx_archive),
        samples: args.samples.or(file.samples).unwrap_or(1),
        shapes,
        maps,
        args: values,
        torch_archive: args
            .torch_inputs
            .clone()
            .or_else(|| file.torch_archive.clone()),
        zero_filled: Vec::new(),
        aliases: Vec::new(),
        random_asked: args.seed.or(file.seed).is_some() || args.samples.or(file.samples).is_some(),
        preset: None,
    })
}

pub fn runtime_config(args: &RuntimeArgs, file: Option<&RuntimeSection>) -> Result<RuntimeConfig> {
    let empty = RuntimeSection::default();
    let file = file.unwrap_or(&empty);
    let threads = match args.threads.or(file.threads).unwrap_or(0) {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    };
    let torch_ops = if args.torch_ops.is_empty() {
        file.torch_ops.clone()
    } else {
        args.torch_ops.clone()
    };
    let max_memory = match (args.max_memory, &file.max_memory) {
        (Some(b), _) => Some(b),
        (None, Some(text)) => Some(
            crate::capture::memory::parse_size(text)
                .map_err(|e| anyhow::anyhow!("config [runtime] max_memory: {e}"))?,
        ),
        (None, None) => None,
    };
    Ok(RuntimeConfig {
        threads,
        ort_lib: args.ort_lib.clone().or_else(|| file.ort_lib.clone()),
        ort_custom_ops: args
            .ort_custom_ops
            .clone()
            .or_else(|| file.ort_custom_ops.clone()),
        torch_ops,
        max_memory,
    })
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

/// The tolerances: the command line's, then the configuration file's, per-layer overrides
/// in that order (the first matching pattern wins), and the outputs' own rule.
fn tolerance_policy(args: &CheckArgs, file: &FileConfig) -> Result<TolerancePolicy> {
    // Command-line overrides come first: the first matching pattern wins.
    let mut overrides = args
        .tolerances
        .iter()
        .map(|s| parse_override(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()
        .context("--tolerance")?;
    overrides.extend(file.tolerances.overrides.iter().map(|o| Override {
        pattern: o.pattern.clone(),
        tol: Tolerance {
            atol: o.atol,
            rtol: o.rtol,
        },
    }));
    TolerancePolicy::new(
        args.atol.or(file.tolerances.atol),
        args.rtol.or(file.tolerances.rtol),
        overrides,
    )
    .and_then(|p| {
        p.with_output_rule(
            OutputTolerance {
                atol: args.output_atol.or(file.tolerances.output_atol),
                rtol: args.output_rtol.or(file.tolerances.output_rtol),
                rel_to_range: args
                    .output_rel_to_range
                    .or(file.tolerances.output_rel_to_range),
            },
            args.strict_small || file.tolerances.strict_small.unwrap_or(false),
        )
    })
    .map_err(anyhow::Error::msg)
}

impl CheckConfig {
    /// The configuration for a quantised ONNX model: layers and outputs judged by the SQNR
    /// rule, and every layer's isolated error measured (it is what a layer is judged by).
    pub fn for_quantized(&self) -> CheckConfig {
        let mut cfg = self.clone();
        cfg.policy.quantized = Some(self.quant_rule);
        cfg.isolate = true;
        cfg
    }

    pub fn from_args(args: &CheckArgs) -> Result<CheckConfig> {
        let file = crate::cli::config_file::load(args.config.as_deref())?.unwrap_or_default();
        let torch_path = args.model_pt.as_ref().or(file.torch_model.as_ref());
        let onnx_path = args.model_onnx.as_ref().or(file.onnx_model.as_ref());
        let (Some(torch_path), Some(onnx_path)) = (torch_path, onnx_path) else {
            bail!("give both models: align-check MODEL_PT MODEL_ONNX (or torch_model and onnx_model in align-check.toml)");
        };
        let min_coverage = args.min_coverage.or(file.gate.min_coverage).unwrap_or(0.9);
        if !(0.0..=1.0).contains(&min_coverage) {
            bail!("--min-coverage must be between 0 and 1, got {min_coverage}");
        }
        let policy = tolerance_policy(args, &file)?;
        let reports = Reports::resolve(&args.reports, &file.reports);
        let baseline = args.baseline.clone().or_else(|| file.gate.baseline.clone());
        if args.update_baseline && baseline.is_none() {
            bail!("--update-baseline needs a baseline path: --baseline PATH or [gate] baseline in align-check.toml");
        }
        for out in reports.paths().chain(baseline.as_ref()) {
            check_output_path(out, &[torch_path, onnx_path])?;
        }
        let max_growth = args
            .max_growth
            .or(file.gate.max_growth)
            .unwrap_or(crate::outcome::baseline::DEFAULT_MAX_GROWTH);
        if !(max_growth.is_finite() && max_growth >= 1.0) {
            bail!("--max-growth must be a number of at least 1, got {max_growth}");
        }
        let repro = args.repro.clone().or_else(|| file.diagnosis.repro.clone());
        if repro.is_none() && file.diagnosis.repro_layer.is_some() {
            bail!(
                "[diagnosis] repro_layer needs a bundle folder: --repro DIR or [diagnosis] repro"
            );
        }
        if let Some(dir) = &repro {
            check_output_path(dir, &[torch_path, onnx_path])?;
        }
        let runtime = runtime_config(&args.runtime, Some(&file.runtime))?;
        let production =
            crate::cli::production::settings(&args.production, &file.production, runtime.threads)?;
        Ok(CheckConfig {
            torch_path: torch_path.clone(),
            onnx_path: onnx_path.clone(),
            inputs: input_request(&args.inputs, Some(&file.inputs))?,
            capture_level: crate::cli::production::capture_level(
                &args.production,
                &file.production,
            )?,
            production,
            quant_rule: crate::cli::quantized::rule(&args.quantized, &file.quantized)?,
            float_onnx: crate::cli::quantized::float_onnx(&args.quantized, &file.quantized),
            runtime,
            policy,
            min_coverage,
            baseline,
            max_growth,
            update_baseline: args.update_baseline,
            exit_zero: args.exit_zero || file.gate.exit_zero.unwrap_or(false),
            allow_training_mode: args.allow_training_mode
                || file.gate.allow_training_mode.unwrap_or(false),
            isolate: args.isolate || file.diagnosis.isolate.unwrap_or(false),
            repro,
            repro_layer: args
                .repro_layer
                .clone()
                .or_else(|| file.diagnosis.repro_layer.clone()),
            reports,
            all_rows: args.all,
            worst: args.worst,
            verbose: args.verbose,
            quiet: args.quiet,
        })
    }
}
