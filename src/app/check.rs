//! The main job: both models, one set of inputs, every layer compared, one `Outcome`.
//!
//! Stages run in order (load, capture each side, pair, evaluate) and are timed; the outcome
//! goes to the report sinks and decides the exit code. A mismatch is a value in the outcome,
//! never an error: errors are reserved for "could not do the job" (exit 2).

use crate::app::control_steering;
use crate::app::isolation;
use crate::app::onnx_loading::{self, LoadedOnnx, OnnxSettings};
use crate::app::progress::Progress;
use crate::app::rounding_reference;
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
use crate::compare::shared_producer;
use crate::inputs::preset::{self, Preset};
use crate::inputs::samples::Sample;
use crate::inputs::torch_args;
use crate::inputs::{InputRequest, ResolvedInput};
use crate::onnx;
use crate::onnx::capture::OnnxRunner;
use crate::onnx::signature::InputSpec;
use crate::onnx::steering::Steering;
use crate::outcome::reference::{Reference, ReferenceFormat};
use crate::outcome::verdict;
use crate::outcome::{
    AccumulatedError, CoverageReport, FileInfo, FirstNonFinite, IsolationReport, MemoryReport,
    Outcome, SteeredControlFlow, Timing, ToleranceInfo, Verdict, SCHEMA_VERSION,
};
use crate::pairing::Pairing;
use crate::pairing::{pair_reading, ReadBack};
use crate::production::references::ReferenceSample;
use crate::report::json::Json;
use crate::report::terminal::{TableOptions, Terminal};
use crate::report::{self, Destination, Output};
use crate::signature::mapping::Mapping;
use crate::signature::types::ArgValue;
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

/// A check ready to capture: both models loaded, the input samples resolved, and, when the
/// ONNX side loaded on its own thread, the first sample's TorchScript side captured
/// meanwhile.
pub struct Started {
    pub models: Models,
    pub mapping: Mapping,
    pub samples: Vec<Sample>,
    pub first_torch: Option<TorchSide>,
}

/// One sample's TorchScript capture, made before the memory plan, and where its tensors went.
pub struct TorchSide {
    capture: Capture,
    keep: Keep,
}

/// Loads both models and resolves the input samples. Where the machine has room for it the
/// ONNX side loads on a thread of its own while libtorch loads the TorchScript model and
/// captures the first sample (`onnx_loading`); otherwise, and always under `--max-memory`,
/// the ONNX side loads first and then the TorchScript side, which peaks lower.
pub fn start(cfg: &CheckConfig, progress: &Progress, timing: &mut Timing) -> Result<Started> {
    memory::prepare(cfg.runtime.max_memory);
    crate::app::runtimes::init(&cfg.runtime, true)?;
    onnx::runtime::set_capture_level(cfg.capture_level);
    let settings = OnnxSettings {
        path: cfg.onnx_path.clone(),
        threads: cfg.runtime.threads,
        custom_ops: cfg.runtime.ort_custom_ops.clone(),
        allow_training_mode: cfg.allow_training_mode,
        per_group: cfg.runtime.max_memory.is_some(),
    };
    if !onnx_loading::in_parallel(cfg) {
        // The instrumented session is built first and takes over the ONNX weights, so that
        // the ONNX file's bytes and the serialised model are gone before libtorch's copy
        // arrives: loading peaks lower.
        let onnx = onnx_loading::load(&settings, |_| {})?;
        let t = Instant::now();
        let torch = load_torch(cfg)?;
        timing.load_s += onnx.seconds + t.elapsed().as_secs_f64();
        let (mapping, samples) = resolve(cfg, &torch.0, &onnx.specs)?;
        let onnx = control_steering::steer(&settings, onnx, &samples, progress)?;
        let models = models(cfg, torch, onnx)?;
        return Ok(Started {
            models,
            mapping,
            samples,
            first_torch: None,
        });
    }
    let mut loading = onnx_loading::spawn(settings.clone());
    let t = Instant::now();
    let torch = match load_torch(cfg) {
        Ok(torch) => torch,
        Err(e) => return Err(loading.first_error(e)),
    };
    timing.load_s += t.elapsed().as_secs_f64();
    let specs = loading.specs()?;
    // Errors on this side wait for the ONNX side's: a sequential load reports those first.
    let early = resolve(cfg, &torch.0, &specs).and_then(|(mapping, samples)| {
        // Spilled as it would be without a budget; should the plan choose one, the ONNX side
        // joins this file (`MemoryPlan::onnx_keep_after`).
        let keep = Keep::spill(false)?;
        let mut torch = torch;
        let capture = match samples.first() {
            Some(sample) => Some(capture_side(
                &mut torch.0,
                sample,
                &keep,
                None,
                progress,
                timing,
            )?),
            None => None,
        };
        let first = capture.map(|capture| TorchSide { capture, keep });
        Ok((torch, mapping, samples, first))
    });
    let (torch, mapping, samples, first_torch) = match early {
        Ok(early) => early,
        Err(e) => return Err(loading.first_error(e)),
    };
    let onnx = loading.finish()?;
    timing.load_s += onnx.seconds;
    let onnx = control_steering::steer(&settings, onnx, &samples, progress)?;
    Ok(Started {
        models: models(cfg, torch, onnx)?,
        mapping,
        samples,
        first_torch,
    })
}

/// The TorchScript model, its training mode judged.
fn load_torch(cfg: &CheckConfig) -> Result<(TorchModel, Vec<String>)> {
    let torch = TorchModel::load(&cfg.torch_path)?;
    let training_mode =
        crate::app::training_mode::judge([torch.training_mode(), None], cfg.allow_training_mode)?;
    Ok((torch, training_mode))
}

/// Both loaded models with the memory plan made against what loading left resident.
fn models(
    cfg: &CheckConfig,
    (torch, mut training_mode): (TorchModel, Vec<String>),
    onnx: LoadedOnnx,
) -> Result<Models> {
    training_mode.extend(onnx.training_mode);
    let (onnx_runner, memory) = crate::app::memory_plan::plan(cfg, onnx.runner)?;
    Ok(Models {
        torch,
        onnx: onnx_runner,
        specs: onnx.specs,
        memory,
        training_mode,
        quantization: onnx.quantization,
    })
}

/// The input samples, and how the two signatures map onto each other.
fn resolve(
    cfg: &CheckConfig,
    torch: &TorchModel,
    specs: &[InputSpec],
) -> Result<(Mapping, Vec<Sample>)> {
    // Shapes an exported program's range constraints exclude are refused before anything runs.
    let resolve_with = |request: &InputRequest| {
        let resolved =
            torch_args::resolve_samples(torch.inputs(), &torch.element_reads(), specs, request)?;
        for sample in &resolved.1 {
            torch.check_input_shapes(&sample.torch)?;
        }
        Ok::<_, anyhow::Error>(resolved)
    };
    let preset = match torch.sample_inputs() {
        Some(found) if preset::user_gave_none(&cfg.inputs) => found,
        _ => return resolve_with(&cfg.inputs),
    };
    let with_preset = preset.and_then(|(origin, tensors)| {
        let preset = Preset { origin, tensors };
        let request = InputRequest {
            preset: Some(preset.clone()),
            ..cfg.inputs.clone()
        };
        let (mapping, mut samples) = resolve_with(&request)?;
        samples[0].notes.push(preset::used_note(&preset));
        Ok((mapping, samples))
    });
    // Sample inputs that do not fit the ONNX signature are the archive's matter, not the
    // user's: the check goes on with the inputs it would have made without them.
    with_preset.or_else(|why| {
        let (mapping, mut samples) = resolve_with(&cfg.inputs)?;
        if let Some(first) = samples.first_mut() {
            first.notes.push(preset::fallback_note(&why));
        }
        Ok((mapping, samples))
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
    /// TorchScript's forward arguments, for the float64 rounding reference.
    pub args: Vec<ArgValue>,
}

/// One runtime's capture of one sample, timed.
fn capture_side(
    runner: &mut dyn Runner,
    sample: &Sample,
    keep: &Keep,
    group_bytes: Option<u64>,
    progress: &Progress,
    timing: &mut Timing,
) -> Result<Capture> {
    let started = Instant::now();
    progress.stage(&format!(
        "{}: running {}",
        sample.label,
        runner.side().runtime()
    ));
    let capture = runner.capture(sample, keep, group_bytes)?;
    let seconds = started.elapsed().as_secs_f64();
    match runner.side() {
        Side::Torch => timing.torch_run_s += seconds,
        Side::Onnx => {
            timing.onnx_run_s += seconds;
            timing.onnx_runs += runner.runs_last_capture();
        }
    }
    Ok(capture)
}

/// Captures `sample` on both sides; `torch`, when given, is its TorchScript side already
/// captured (while the ONNX side loaded).
pub fn capture_sample(
    models: &mut Models,
    (sample, mapping): (Sample, &Mapping),
    torch: Option<TorchSide>,
    progress: &Progress,
    timing: &mut Timing,
) -> Result<Captured> {
    let group_bytes = models.memory.group_bytes;
    let (mut torch, keep_torch, keep_onnx) = match torch {
        Some(TorchSide { capture, keep }) => {
            let keep_onnx = models.memory.onnx_keep_after(&keep)?;
            (capture, keep, keep_onnx)
        }
        None => {
            let (keep_torch, keep_onnx) = models.memory.keeps_for_sample()?;
            let capture = capture_side(
                &mut models.torch,
                &sample,
                &keep_torch,
                group_bytes,
                progress,
                timing,
            )?;
            (capture, keep_torch, keep_onnx)
        }
    };
    let mut onnx = capture_side(
        &mut models.onnx,
        &sample,
        &keep_onnx,
        group_bytes,
        progress,
        timing,
    )?;
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
        [
            sample.notes.clone(),
            crate::inputs::signature_notes(&sample.inputs),
        ]
        .concat(),
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
        args: sample.torch,
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
    /// The worst sample's TorchScript arguments.
    worst_args: Vec<ArgValue>,
    first_inputs: Vec<ResolvedInput>,
    signature: SignatureReport,
    labels: Vec<String>,
    spilled_bytes: u64,
    /// Every sample's inputs and outputs, for the production session and the check of a
    /// quantised model's exclude list (when they run).
    pub production: Vec<ReferenceSample>,
    /// The control flow the inputs steered (`probe`): isolation cuts the graph the capture ran.
    pub steering: Steering,
}

impl Accumulator {
    /// The repro bundle `--repro` asks for, written.
    fn repro(
        &self,
        cfg: &CheckConfig,
        progress: &Progress,
        eval: &Evaluation,
        (torch, onnx): (&Capture, &Capture),
    ) -> Result<Option<crate::outcome::ReproReport>> {
        let Some(dir) = &cfg.repro else {
            return Ok(None);
        };
        progress.stage("writing the repro bundle");
        let steered = (cfg, &self.steering);
        let written = crate::app::repro::write(steered, dir, &eval.layers, torch, onnx)?;
        if written.is_none() && !cfg.quiet {
            eprintln!("align-check: {}", crate::app::repro::NOTHING_TO_REPRODUCE);
        }
        Ok(written)
    }

    /// Folds in one sample; `parallel` compares several pairs at once (the memory plan
    /// says whether that fits).
    pub fn add(&mut self, cfg: &CheckConfig, captured: Captured, parallel: bool) -> Result<()> {
        let Captured {
            label,
            inputs,
            signature,
            torch,
            mut onnx,
            spilled_bytes,
            args,
        } = captured;
        self.spilled_bytes += spilled_bytes;
        // A dynamo export names a shared instance's calls by attribute, as torch.export
        // does; the .pt2's values were read as its first attribute, so the ONNX side is too.
        onnx.read_scopes_as(&torch.module_aliases);
        if self.pairing.is_none() {
            let t = Instant::now();
            // Under a budget the value checks read one pair back at a time, as comparing does.
            let read_back = if parallel {
                ReadBack::Parallel
            } else {
                ReadBack::OneAtATime
            };
            let mut pairing = pair_reading(&torch, &onnx, read_back)?;
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
            self.worst_args = args;
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
        let isolation =
            isolation::judge_origins(cfg, (plan, &self.steering), &torch, &onnx, &mut eval);
        if isolation.is_some() {
            self.timing.isolation_s = t.elapsed().as_secs_f64();
        }
        let rounding = rounding_reference::needed(&eval).then(|| {
            progress.stage("float64 reference: what rounding alone does to the outputs");
            rounding_reference::apply(
                &cfg.torch_path,
                (&self.worst_args, &torch, &pairing),
                &mut eval,
                &cfg.policy.outputs,
            )
        });
        let repro = self.repro(cfg, progress, &eval, (&torch, &onnx))?;
        let shared = shared_producer::find(&torch, &pairing, &eval.layers, &eval.origins);
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
        outcome.coverage.steered_control_flow = SteeredControlFlow {
            if_conditions: self.steering.conditions.len(),
            loop_trips: self.steering.trips.len(),
        };
        outcome.rounding_reference = rounding;
        outcome.shared_producer = shared;
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
    let Started {
        mut models,
        mapping,
        samples,
        mut first_torch,
    } = start(cfg, progress, &mut acc.timing)?;
    acc.steering = models.onnx.steering.clone();
    // A quantised model is judged by SQNR from here on, every layer in isolation.
    let quantization = models.quantization.take();
    let cfg = match &quantization {
        Some(_) => {
            quantized = cfg.for_quantized();
            &quantized
        }
        None => cfg,
    };
    for sample in samples {
        let captured = capture_sample(
            &mut models,
            (sample, &mapping),
            first_torch.take(),
            progress,
            &mut acc.timing,
        )?;
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
    // The production session reads the model file itself and needs only its signature.
    let shipped = onnx.signature();
    drop((torch, onnx));
    memory::release_freed();
    let references = std::mem::take(&mut acc.production);
    let mut outcome = acc.finish(cfg, (started, progress), &plan, files)?;
    outcome.training_mode = training_mode;
    crate::app::production::check(cfg, &mut outcome, (&references, &shipped), progress);
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
        reference: Reference::new(if crate::torch::is_exported_archive(&cfg.torch_path) {
            ReferenceFormat::Pt2
        } else {
            ReferenceFormat::Torchscript
        }),
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
        rounding_reference: None,
        repro: None,
        first_nonfinite: FirstNonFinite::find(&eval.layers),
        shared_producer: None,
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
            steered_control_flow: Default::default(),
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
