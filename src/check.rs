//! The main job: both models, one set of inputs, every layer compared, one `Outcome`.
//!
//! Stages run in order (load, capture each side, pair, evaluate) and are timed; the outcome
//! goes to the report sinks and decides the exit code. A mismatch is a value in the outcome,
//! never an error: errors are reserved for "could not do the job" (exit 2).

use crate::capture::Capture;
use crate::config::CheckConfig;
use crate::evaluate::evaluate;
use crate::inputs::{resolve, ResolvedInput};
use crate::onnx;
use crate::outcome::{
    CoverageReport, FileInfo, Outcome, Timing, ToleranceInfo, Verdict, SCHEMA_VERSION,
};
use crate::pairing::pair;
use crate::progress::Progress;
use crate::report::{self, terminal};
use crate::torch::TorchModel;
use anyhow::Result;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

fn file_info(path: &Path) -> FileInfo {
    FileInfo {
        path: path.display().to_string(),
        size_bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
    }
}

/// Loads both models and runs both captures on the same inputs.
pub struct Captured {
    pub inputs: Vec<ResolvedInput>,
    pub torch: Capture,
    pub onnx: Capture,
    pub timing: Timing,
}

pub fn capture_both(cfg: &CheckConfig, progress: &Progress) -> Result<Captured> {
    let mut timing = Timing::default();
    crate::runtimes::init(&cfg.runtime, true)?;
    let t0 = Instant::now();
    progress.stage("loading models");
    let onnx_model = onnx::model::load(&cfg.onnx_path)?;
    let specs = onnx::signature::inputs(&onnx_model)?;
    let inputs = resolve(&specs, &cfg.inputs)?;
    let torch_model = TorchModel::load(&cfg.torch_path)?;
    timing.load_s = t0.elapsed().as_secs_f64();

    let tensors: Vec<_> = inputs.iter().map(|i| i.tensor.clone()).collect();
    let t1 = Instant::now();
    progress.stage("running TorchScript");
    let torch = torch_model.capture(&tensors)?;
    timing.torch_run_s = t1.elapsed().as_secs_f64();

    let t2 = Instant::now();
    progress.stage("running ONNX Runtime");
    let named: Vec<(String, _)> = inputs
        .iter()
        .map(|i| (i.name.clone(), i.tensor.clone()))
        .collect();
    let onnx = onnx::capture::capture(
        &onnx_model,
        &named,
        cfg.runtime.threads,
        cfg.runtime.ort_custom_ops.as_deref(),
    )?;
    timing.onnx_run_s = t2.elapsed().as_secs_f64();
    Ok(Captured {
        inputs,
        torch,
        onnx,
        timing,
    })
}

pub fn build_outcome(cfg: &CheckConfig, captured: Captured, started: Instant) -> Result<Outcome> {
    let Captured {
        inputs,
        torch,
        onnx,
        mut timing,
    } = captured;
    let t3 = Instant::now();
    let pairing = pair(&torch, &onnx)?;
    timing.pairing_s = t3.elapsed().as_secs_f64();

    let t4 = Instant::now();
    let eval = evaluate(&torch, &onnx, &pairing, &cfg.policy)?;
    timing.statistics_s = t4.elapsed().as_secs_f64();

    let mut gate_failures = Vec::new();
    let failing = eval.layers.iter().filter(|l| !l.cmp.pass).count();
    if failing > 0 {
        gate_failures.push(format!(
            "{failing} of {} layers exceed their tolerance",
            eval.layers.len()
        ));
    }
    let failing_outputs: Vec<&str> = eval
        .outputs
        .iter()
        .filter(|o| !o.cmp.pass)
        .map(|o| o.name.as_str())
        .collect();
    if !failing_outputs.is_empty() {
        gate_failures.push(format!(
            "output(s) {} exceed their tolerance",
            failing_outputs.join(", ")
        ));
    }
    let coverage = pairing.coverage.clone();
    if coverage.torch_ratio() < cfg.min_coverage {
        gate_failures.push(format!(
            "only {:.1}% of TorchScript layers were compared (--min-coverage {:.1}%)",
            coverage.torch_ratio() * 100.0,
            cfg.min_coverage * 100.0
        ));
    }
    let verdict = if gate_failures.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    timing.total_s = started.elapsed().as_secs_f64();
    let mut uncapturable = torch.uncapturable.clone();
    uncapturable.extend(onnx.uncapturable.iter().cloned());
    Ok(Outcome {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        verdict,
        gate_failures,
        first_divergence: eval.origins.first().cloned(),
        divergence_origins: eval.origins,
        torch_model: file_info(&cfg.torch_path),
        onnx_model: file_info(&cfg.onnx_path),
        inputs,
        tolerances: cfg
            .policy
            .describe()
            .into_iter()
            .map(|(applies_to, t)| ToleranceInfo {
                applies_to,
                atol: t.atol,
                rtol: t.rtol,
            })
            .collect(),
        layers: eval.layers,
        outputs: eval.outputs,
        coverage: CoverageReport {
            torch_ratio: coverage.torch_ratio(),
            onnx_ratio: coverage.onnx_ratio(),
            counts: coverage,
            min_coverage: cfg.min_coverage,
            unpaired: pairing.unpaired,
            uncapturable,
        },
        timing,
    })
}

pub fn run(cfg: &CheckConfig) -> Result<ExitCode> {
    let started = Instant::now();
    let progress = Progress::new(!cfg.quiet);
    let captured = capture_both(cfg, &progress)?;
    progress.stage("comparing layers");
    let outcome = build_outcome(cfg, captured, started)?;
    progress.finish();

    if let Some(path) = &cfg.json {
        report::write_output(path, &report::json::render(&outcome)?)?;
    }
    let json_on_stdout = cfg.json.as_deref() == Some(Path::new("-"));
    if !cfg.quiet && !json_on_stdout {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let text = terminal::render(
            &outcome,
            &terminal::TableOptions {
                all_rows: cfg.all_rows,
                worst: cfg.worst,
                color,
                verbose: cfg.verbose,
            },
        );
        print!("{text}");
    }
    Ok(match (outcome.verdict, cfg.exit_zero) {
        (Verdict::Pass, _) | (_, true) => ExitCode::SUCCESS,
        (Verdict::Fail, false) => ExitCode::from(1),
    })
}
