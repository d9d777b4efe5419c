//! The main job: both models, one set of inputs, every layer compared, one `Outcome`.
//!
//! Stages run in order (load, capture each side, pair, evaluate) and are timed; the outcome
//! goes to the report sinks and decides the exit code. A mismatch is a value in the outcome,
//! never an error: errors are reserved for "could not do the job" (exit 2).

use crate::app::isolation;
use crate::app::progress::Progress;
use crate::app::runner::Runner;
use crate::app::runtimes::environment;
use crate::capture::memory::{self, MemoryPlan};
use crate::capture::store::Keep;
use crate::capture::{Capture, Side, Uncapturable};
use crate::cli::config::CheckConfig;
use crate::compare::details::LayerDetail;
use crate::compare::evaluate::{
    badness, compare_pairs, details, judge, Evaluation, SampleAggregate,
};
use crate::inputs::samples::Sample;
use crate::inputs::torch_args;
use crate::inputs::ResolvedInput;
use crate::onnx;
use crate::onnx::capture::OnnxRunner;
use crate::onnx::signature::InputSpec;
use crate::outcome::verdict;
use crate::outcome::{
    AccumulatedError, CoverageReport, FileInfo, FirstNonFinite, IsolationReport, MemoryReport,
    Outcome, Timing, ToleranceInfo, Verdict, SCHEMA_VERSION,
};
use crate::pairing::pair;
use crate::pairing::Pairing;
use crate::production::references::ReferenceSample;
use crate::report::json::Json;
use crate::report::terminal::{TableOptions, Terminal};
use crate::report::{self, Destination, Output};
use crate::signature::mapping::Mapping;
use crate::signature::{accounting, boundary, SignatureReport};
use crate::torch::TorchModel;
use anyhow::Result;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

fn file_info(path: &Path) -> Result<FileInfo> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let size_bytes = std::io::copy(&mut file, &mut hasher)?;
    Ok(FileInfo {
        path: path.display().to_string(),
        size_bytes,
        sha256: format!("{:x}", hasher.finalize()),
    })
}

/// Both models, loaded once for every sample, and how their tensors are kept.
pub struct Models {
    torch: TorchModel,
    onnx: OnnxRunner,
    pub specs: Vec<InputSpec>,
    memory: MemoryPlan,
    /// What runs in training mode, compared anyway under `--allow-training-mode`.
    pub training_mode: Vec<String>,
    /// How the ONNX model is quantised, if it is.
    pub quantization: Option<crate::quantized::detect::Quantization>,
}

pub fn load_models(cfg: &CheckConfig, timing: &mut Timing) -> Result<Models> {
    memory::prepare(cfg.runtime.max_memory);
    crate::app::runtimes::init(&cfg.runtime, true)?;
    onnx::runtime::set_capture_level(cfg.capture_level);
    let t0 = Instant::now();
    let onnx_model = onnx::model::load(&cfg.onnx_path)?;
    let specs = onnx::signature::inputs(&onnx_model)?;
    let quantization = crate::quantized::detect::detect(&onnx_model);
    // Refused before ONNX Runtime builds a session, which is the slow part of loading.
    let onnx_training = crate::app::training_mode::judge(
        [None, onnx::training::training_mode(&onnx_model)],
        cfg.allow_training_mode,
    )?;
    // The instrumented session is built once and takes over the ONNX weights. It comes
    // before the TorchScript module so that the protobuf's transient copies of the weights
    // are gone before libtorch's copy arrives: loading peaks lower.
    let onnx = OnnxRunner::from_model(
        onnx_model,
        cfg.runtime.threads,
        cfg.runtime.ort_custom_ops.as_deref(),
        cfg.runtime.max_memory.is_some(),
    )?;
    memory::release_freed();
    let torch = TorchModel::load(&cfg.torch_path)?;
    let mut training_mode =
        crate::app::training_mode::judge([torch.training_mode(), None], cfg.allow_training_mode)?;
    training_mode.extend(onnx_training);
    timing.load_s += t0.elapsed().as_secs_f64();
    let (onnx, memory) = crate::app::memory_plan::plan(cfg, onnx)?;
    Ok(Models {
        torch,
        onnx,
        specs,
        memory,
        training_mode,
        quantization,
    })
}

/// One sample's inputs and what each runtime computed from them.
pub struct Captured {
    pub label: String,
    pub inputs: Vec<ResolvedInput>,
    /// What the reports say about the two signatures, as this sample met them.
    pub signature: SignatureReport,
    pub torch: Capture,
    pub onnx: Capture,
    /// Bytes this sample's tensors took in the spill file (0 without a budget).
    pub spilled_bytes: u64,
}

pub fn capture_sample(
    models: &mut Models,
    (sample, mapping): (Sample, &Mapping),
    progress: &Progress,
    timing: &mut Timing,
) -> Result<Captured> {
    let (keep_torch, keep_onnx) = models.memory.keeps_for_sample()?;
    let group_bytes = models.memory.group_bytes;
    let runners: [(&mut dyn Runner, &Keep); 2] = [
        (&mut models.torch, &keep_torch),
        (&mut models.onnx, &keep_onnx),
    ];
    let mut captures = Vec::with_capacity(2);
    for (runner, keep) in runners {
        let started = Instant::now();
        progress.stage(&format!(
            "{}: running {}",
            sample.label,
            runner.side().runtime()
        ));
        captures.push(runner.capture(&sample, keep, group_bytes)?);
        let seconds = started.elapsed().as_secs_f64();
        match runner.side() {
            Side::Torch => timing.torch_run_s += seconds,
            Side::Onnx => {
                timing.onnx_run_s += seconds;
                timing.onnx_runs += runner.runs_last_capture();
            }
        }
    }
    let (onnx, torch) = (captures.pop(), captures.pop());
    let (Some(mut torch), Some(mut onnx)) = (torch, onnx) else {
        unreachable!("one capture per runner")
    };
    // The graph inputs and outputs that correspond, one to one, as pairing expects them.
    boundary::align_inputs(
        &mut torch,
        &mut onnx,
        &sample.pairs,
        (&mapping.torch_only, &sample.placeholders),
    )?;
    let one_sided = boundary::align_outputs(&mut torch, &mut onnx)?;
    let arg_names: Vec<String> = torch_args::torch_signature(models.torch.inputs(), &[])
        .into_iter()
        .map(|a| a.name)
        .collect();
    let signature = SignatureReport::new(
        mapping,
        &arg_names,
        &sample.torch,
        crate::inputs::signature_notes(&sample.inputs),
        one_sided,
        models.torch.state_writes().to_vec(),
    );
    Ok(Captured {
        label: sample.label,
        inputs: sample.inputs,
        signature,
        torch,
        onnx,
        // Under a budget both sides share one file.
        spilled_bytes: keep_torch.spilled_bytes().max(keep_onnx.spilled_bytes()),
    })
}

/// Folds samples into one outcome: pairs once (the graphs are the same for every sample),
/// compares every sample, keeps the worst case per pair, and keeps the captures of the
/// worst sample only, for the element-level detail of the reports.
#[derive(Default)]
pub struct Accumulator {
    pub timing: Timing,
    pairing: Option<Pairing>,
    aggregate: Option<SampleAggregate>,
    worst: Option<((usize, f64), Capture, Capture)>,
    first_inputs: Vec<ResolvedInput>,
    signature: SignatureReport,
    labels: Vec<String>,
    spilled_bytes: u64,
    /// Every sample's inputs and outputs, for the production session and the check of a
    /// quantised model's exclude list (when they run).
    pub production: Vec<ReferenceSample>,
}

impl Accumulator {
    /// Folds in one sample; `parallel` compares several pairs at once (the memory plan
    /// says whether that fits).
    pub fn add(&mut self, cfg: &CheckConfig, captured: Captured, parallel: bool) -> Result<()> {
        let Captured {
            label,
            inputs,
            signature,
            torch,
            onnx,
            spilled_bytes,
        } = captured;
        self.spilled_bytes += spilled_bytes;
        if self.pairing.is_none() {
            let t = Instant::now();
            let mut pairing = pair(&torch, &onnx)?;
            accounting::account_one_sided(&mut pairing, &torch, &onnx);
            self.pairing = Some(pairing);
            self.timing.pairing_s += t.elapsed().as_secs_f64();
            self.first_inputs = inputs;
            self.signature = signature;
        }
        let pairing = self.pairing.as_ref().expect("paired above");
        if cfg.production.is_some() || cfg.policy.quantized.is_some() {
            self.production
                .push(ReferenceSample::from_captures(&torch, &onnx, pairing)?);
        }
        let t = Instant::now();
        let cmps = compare_pairs(&torch, &onnx, pairing, &cfg.policy, parallel)?;
        let bad = badness(&cmps);
        let sample = self.labels.len();
        match &mut self.aggregate {
            None => self.aggregate = Some(SampleAggregate::new(cmps)),
            Some(agg) => agg.add(cmps, sample),
        }
        self.timing.statistics_s += t.elapsed().as_secs_f64();
        let is_worst = match &self.worst {
            None => true,
            Some((b, _, _)) => bad.0 > b.0 || (bad.0 == b.0 && bad.1 > b.1),
        };
        if is_worst {
            self.worst = Some((bad, torch, onnx));
        }
        self.labels.push(label);
        Ok(())
    }

    /// Judges the folded samples into the outcome. An isolation run keeps to the memory
    /// `plan` as the captures did.
    pub fn finish(
        mut self,
        cfg: &CheckConfig,
        (started, progress): (Instant, &Progress),
        plan: &MemoryPlan,
        files: (FileInfo, FileInfo),
    ) -> Result<Outcome> {
        let (Some(pairing), Some(aggregate), Some((_, torch, onnx))) = (
            self.pairing.take(),
            self.aggregate.take(),
            self.worst.take(),
        ) else {
            anyhow::bail!("no input sample was checked");
        };
        let t = Instant::now();
        let mut eval = judge(&torch, &onnx, &pairing, aggregate.finish());
        self.timing.statistics_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        if isolation::reason(cfg.isolate, &eval).is_some() {
            progress.stage("isolating layers: ONNX Runtime fed PyTorch's values");
        }
        let isolation = isolation::judge_origins(cfg, plan, &torch, &onnx, &mut eval);
        if isolation.is_some() {
            self.timing.isolation_s = t.elapsed().as_secs_f64();
        }
        let repro = match &cfg.repro {
            Some(dir) => {
                progress.stage("writing the repro bundle");
                let written = crate::app::repro::write(cfg, dir, &eval.layers, &torch, &onnx)?;
                if written.is_none() && !cfg.quiet {
                    eprintln!("align-check: {}", crate::app::repro::NOTHING_TO_REPRODUCE);
                }
                written
            }
            None => None,
        };
        let t = Instant::now();
        let details = details(&eval.layers, &torch, &onnx)?;
        self.timing.statistics_s += t.elapsed().as_secs_f64();
        let mut uncapturable = torch.uncapturable.clone();
        uncapturable.extend(onnx.uncapturable.iter().cloned());
        drop((torch, onnx));
        let mut timing = self.timing;
        timing.total_s = started.elapsed().as_secs_f64();
        let memory = MemoryReport {
            peak_rss_bytes: memory::peak_rss(),
            budget_bytes: plan.budget,
            spilled_bytes: self.spilled_bytes,
        };
        let mut outcome = assemble(
            cfg,
            Parts {
                pairing,
                eval,
                isolation,
                details,
                uncapturable,
                inputs: self.first_inputs,
                samples: self.labels,
                timing,
                memory,
                files,
            },
        );
        outcome.repro = repro;
        outcome.signature = self.signature;
        Ok(outcome)
    }
}

/// The whole check on every input sample the configuration names.
pub fn outcome(cfg: &CheckConfig, progress: &Progress) -> Result<Outcome> {
    let quantized;
    let started = Instant::now();
    // Hashing hundreds of megabytes of weights takes a noticeable share of a run: it happens
    // on its own thread while the models load and run.
    let hashing = {
        let (t, o) = (cfg.torch_path.clone(), cfg.onnx_path.clone());
        std::thread::spawn(move || -> Result<(FileInfo, FileInfo)> {
            Ok((file_info(&t)?, file_info(&o)?))
        })
    };
    let mut acc = Accumulator::default();
    progress.stage("loading models");
    let mut models = load_models(cfg, &mut acc.timing)?;
    // A quantised model is judged by SQNR from here on, every layer in isolation.
    let quantization = models.quantization.take();
    let cfg = match &quantization {
        Some(_) => {
            quantized = cfg.for_quantized();
            &quantized
        }
        None => cfg,
    };
    let (mapping, samples) = torch_args::resolve_samples(
        models.torch.inputs(),
        &models.torch.element_reads(),
        &models.specs,
        &cfg.inputs,
    )?;
    for sample in samples {
        let captured = capture_sample(&mut models, (sample, &mapping), progress, &mut acc.timing)?;
        acc.add(cfg, captured, models.memory.compare_in_parallel())?;
    }
    progress.stage("comparing layers");
    let files = hashing
        .join()
        .map_err(|_| anyhow::anyhow!("internal error while hashing the model files"))??;
    // Both runtimes' copies of the weights go before judging: an isolation run loads the
    // ONNX weights again.
    let Models {
        torch,
        onnx,
        memory: plan,
        training_mode,
        ..
    } = models;
    drop((torch, onnx));
    memory::release_freed();
    let references = std::mem::take(&mut acc.production);
    let mut outcome = acc.finish(cfg, (started, progress), &plan, files)?;
    outcome.training_mode = training_mode;
    crate::app::production::check(cfg, &mut outcome, &references, progress);
    if let Some(q) = quantization {
        let mut report = crate::quantized::analysis::analyse(
            &outcome.layers,
            &outcome.outputs,
            &q,
            cfg.quant_rule,
        );
        crate::app::quantized::verify(cfg, &mut report, &references);
        outcome.quantized = Some(report);
    }
    Ok(outcome)
}

/// Everything a finished check hands to the outcome, by name.
struct Parts {
    pairing: Pairing,
    eval: Evaluation,
    isolation: Option<IsolationReport>,
    details: Vec<LayerDetail>,
    uncapturable: Vec<Uncapturable>,
    /// The first sample's inputs, and every sample's label.
    inputs: Vec<ResolvedInput>,
    samples: Vec<String>,
    timing: Timing,
    memory: MemoryReport,
    /// The TorchScript and the ONNX file.
    files: (FileInfo, FileInfo),
}

/// The outcome of a finished check, its gates judged.
fn assemble(cfg: &CheckConfig, parts: Parts) -> Outcome {
    let Parts {
        pairing,
        eval,
        isolation,
        details,
        uncapturable,
        inputs,
        samples,
        timing,
        memory,
        files: (torch_model, onnx_model),
    } = parts;
    let coverage = pairing.coverage.clone();
    let mut outcome = Outcome {
        schema_version: SCHEMA_VERSION,
        environment: environment(cfg.runtime.threads),
        verdict: Verdict::Pass,
        gate_failures: Vec::new(),
        gates: Vec::new(),
        first_divergence: eval.origins.first().cloned(),
        divergence_origins: eval.origins,
        accumulated_drift: crate::compare::isolation::drift(&eval.layers, &eval.outputs),
        accumulated: AccumulatedError::of(&eval.layers),
        small_values: eval.small_values,
        discrete_flips: eval.flips,
        isolation,
        repro: None,
        first_nonfinite: FirstNonFinite::find(&eval.layers),
        training_mode: Vec::new(),
        signature: SignatureReport::default(),
        torch_model,
        onnx_model,
        inputs,
        samples,
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
        baseline: None,
        details,
        timing,
        memory,
        production: None,
        quantized: None,
    };
    for gate in verdict::gates(&outcome) {
        outcome.add_gate(gate);
    }
    outcome
}

/// Applies `--baseline`: adds the growth of every layer and its gate. A missing baseline file
/// is only allowed when it is about to be written.
fn apply_baseline(cfg: &CheckConfig, outcome: &mut Outcome) -> Result<()> {
    let Some(path) = &cfg.baseline else {
        return Ok(());
    };
    if !path.exists() && cfg.update_baseline {
        return Ok(());
    }
    let report = crate::outcome::baseline::compare(outcome, path, cfg.max_growth)?;
    outcome.add_gate(verdict::baseline_gate(&report));
    outcome.baseline = Some(report);
    Ok(())
}

/// Every report file the configuration asks for, each derived from the same outcome through
/// the same `Report` trait. Those that carry the time the others took (the JSON) go last.
fn write_reports(cfg: &CheckConfig, outcome: &mut Outcome) -> Result<()> {
    let started = Instant::now();
    let (timed, others): (Vec<&Output>, Vec<&Output>) = cfg
        .reports
        .outputs
        .iter()
        .partition(|o| o.format.writer.includes_report_time());
    for output in others {
        report::emit(output.format.writer, outcome, &output.to)?;
    }
    outcome.timing.reports_s = started.elapsed().as_secs_f64();
    for output in timed {
        report::emit(output.format.writer, outcome, &output.to)?;
    }
    Ok(())
}

pub fn run(cfg: &CheckConfig) -> Result<ExitCode> {
    let progress = Progress::new(!cfg.quiet);
    let mut outcome = outcome(cfg, &progress)?;
    progress.finish();
    apply_baseline(cfg, &mut outcome)?;

    write_reports(cfg, &mut outcome)?;
    if let (Some(repro), false) = (&outcome.repro, cfg.quiet) {
        eprintln!(
            "align-check: wrote repro bundle {} for layer {} ({}): run python repro.py there",
            repro.dir,
            repro.layer_index,
            crate::text::module_label(&repro.module)
        );
    }
    if let (true, Some(path)) = (cfg.update_baseline, &cfg.baseline) {
        report::emit(&Json, &outcome, &Destination::from_path(path))?;
        if !cfg.quiet {
            eprintln!("align-check: wrote new baseline {}", path.display());
        }
    }
    // A report on stdout (`--json -`) is all stdout holds.
    if !cfg.quiet && !cfg.reports.to_stdout() {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let table = Terminal(TableOptions {
            all_rows: cfg.all_rows,
            worst: cfg.worst,
            color,
            verbose: cfg.verbose,
        });
        report::emit(&table, &outcome, &Destination::Stdout)?;
    }
    Ok(match (outcome.verdict, cfg.exit_zero) {
        (Verdict::Pass, _) | (_, true) => ExitCode::SUCCESS,
        (Verdict::Fail, false) => ExitCode::from(1),
    })
}
