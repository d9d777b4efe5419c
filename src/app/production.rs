//! The production-session stage of a check: builds ONNX Runtime sessions over the unmodified
//! model as the user ships it, runs them on the check's own inputs, judges the outputs
//! (`production::judge`), bisects ONNX Runtime's optimisers when only this session differs
//! (`production::bisect`), and records the result and its gate in the outcome.
//!
//! Cost: one session and one run per sample when the production session agrees (or differs
//! as the unoptimised run does); the bisection's sessions, on one sample, only when it
//! differs on its own, and with a named pass two more (the paired layers exposed, with and
//! without the pass: `production::layers`). A production session that cannot be built or run is reported, not
//! fatal: the per-layer check stands on its own.

use crate::app::progress::Progress;
use crate::capture::tensor::{DType, HostTensor};
use crate::cli::config::CheckConfig;
use crate::onnx;
use crate::onnx::capture::Signature;
use crate::onnx::model::OnnxModel;
use crate::onnx::runtime::{session_tuned, session_tuned_from_file, Tuning};
use crate::outcome::{Gate, GateFinding, GateName, LayerResult, Outcome};
use crate::production::bisect::{bisect, Finding};
use crate::production::judge::{fold, judge_sample, production_only};
use crate::production::layers::{first_changed, LayerFinding, LayerValue};
use crate::production::references::ReferenceSample;
use crate::production::report::{ProductionReport, ProductionStatus, Workaround};
use crate::production::settings::{OptLevel, ProductionSettings};
use anyhow::Result;
use prost::Message;
use std::time::Instant;

/// Runs the production session on `samples` (the check's, in order) and adds its record and
/// gate to `outcome`. Does nothing with `--production off`.
pub fn check(
    cfg: &CheckConfig,
    outcome: &mut Outcome,
    (samples, signature): (&[ReferenceSample], &Signature),
    progress: &Progress,
) {
    let Some(settings) = &cfg.production else {
        return;
    };
    if samples.is_empty() {
        return;
    }
    let started = Instant::now();
    progress.stage(&format!(
        "running the production session (ONNX Runtime {})",
        settings.level
    ));
    let mut sessions = 0;
    // Under a budget (given or chosen) the session keeps to it: what the check freed goes
    // back to the OS first, and the session reserves no block for every intermediate.
    let budgeted = outcome.memory.budget_bytes.is_some();
    crate::capture::memory::release_freed();
    let layers = layer_values(&outcome.layers);
    let run_with = (settings, budgeted, layers.as_slice());
    let mut report = match run(cfg, run_with, (samples, signature), progress, &mut sessions) {
        Ok(report) => report,
        Err(e) => failed(settings, e.to_string()),
    };
    report.sessions = sessions;
    let seconds = started.elapsed().as_secs_f64();
    outcome.timing.production_s = seconds;
    outcome.timing.total_s += seconds;
    outcome.add_gate(Gate {
        name: GateName::Production,
        passed: report.gate_passed(),
        finding: GateFinding::Production {
            line: report.line(),
        },
    });
    outcome.production = Some(report);
}

/// The model as the user ships it, ready to build sessions from.
struct Shipped {
    source: Source,
    /// The check ran under a memory budget, which the production session keeps too.
    lean: bool,
}

/// Where a production session's model comes from.
enum Source {
    /// The file as saved, which ONNX Runtime reads itself; its signature is the one the
    /// check read before instrumenting the graph.
    File(Signature),
    /// A model edited here (more graph outputs), given to ONNX Runtime as its bytes; the
    /// model is kept for its signature.
    Edited {
        model: Box<OnnxModel>,
        bytes: Vec<u8>,
    },
}

impl Shipped {
    /// The outputs of `sample` in a session at `level` with the user's settings and
    /// `disabled` transformers turned off besides.
    fn outputs(
        &self,
        cfg: &CheckConfig,
        (settings, level, disabled): (&ProductionSettings, OptLevel, &[&str]),
        samples: &[ReferenceSample],
        sessions: &mut usize,
    ) -> Result<Vec<Vec<(String, crate::capture::tensor::HostTensor)>>> {
        let config = settings.config_disabling(disabled);
        let tuning = Tuning {
            level,
            threads: settings.threads,
            config: &config,
            lean: self.lean,
        };
        let custom_ops = cfg.runtime.ort_custom_ops.as_deref();
        *sessions += 1;
        match &self.source {
            Source::File(signature) => {
                let mut session = session_tuned_from_file(&signature.path, custom_ops, &tuning)?;
                samples
                    .iter()
                    .map(|s| signature.outputs(&mut session, &s.inputs))
                    .collect()
            }
            Source::Edited { model, bytes } => {
                let mut session = session_tuned(model, bytes, custom_ops, &tuning)?;
                samples
                    .iter()
                    .map(|s| onnx::capture::outputs_of(&mut session, model, &s.inputs))
                    .collect()
            }
        }
    }
}

fn run(
    cfg: &CheckConfig,
    (settings, budgeted, layers): (&ProductionSettings, bool, &[LayerValue]),
    (samples, signature): (&[ReferenceSample], &Signature),
    progress: &Progress,
    sessions: &mut usize,
) -> Result<ProductionReport> {
    // ONNX Runtime reads the file itself: the model as shipped, not as decoded, and never
    // held whole here besides ONNX Runtime's own copy of the weights.
    let shipped = Shipped {
        source: Source::File(signature.clone()),
        lean: budgeted,
    };
    let produced = shipped.outputs(cfg, (settings, settings.level, &[]), samples, sessions)?;
    let judged = samples
        .iter()
        .zip(&produced)
        .map(|(s, p)| judge_sample(s, p, &cfg.policy))
        .collect::<Result<Vec<_>>>()?;
    drop(produced);
    let names: Vec<String> = samples[0].outputs.iter().map(|o| o.name.clone()).collect();
    let (outputs, status, telling) = fold(&names, &judged);
    let mut report = ProductionReport {
        status,
        outputs,
        ..record(settings)
    };
    if status != ProductionStatus::ProductionOnly {
        return Ok(report);
    }
    progress.stage("the production session differs: bisecting ONNX Runtime's optimisers");
    // One sample, the one that shows the difference most, decides every step.
    let sample = std::slice::from_ref(&samples[telling]);
    let found = bisect(settings.level, |level, disabled| {
        let produced = shipped.outputs(cfg, (settings, level, disabled), sample, sessions)?;
        Ok(production_only(&judge_sample(
            &sample[0],
            &produced[0],
            &cfg.policy,
        )?))
    });
    match found {
        Ok(b) => {
            if let Finding::Pass { name, .. } = &b.finding {
                report.workaround = Some(Workaround::disabling(settings, name));
                progress.stage(&format!("looking for the first layer {name} changes"));
                // The pass stands named even if its layers cannot be looked for.
                let found = locate(cfg, settings, (name, layers), &sample[0], sessions)
                    .unwrap_or_else(|e| LayerFinding::NotRun {
                        reason: e.to_string(),
                    });
                report.layer = Some(found);
            }
            report.finding = Some(b.finding);
        }
        // The difference stands; only its cause is unknown.
        Err(e) => report.error = Some(format!("the bisection could not run: {e}")),
    }
    Ok(report)
}

/// The record of a production session that could not run.
fn failed(settings: &ProductionSettings, error: String) -> ProductionReport {
    ProductionReport {
        status: ProductionStatus::Error,
        error: Some(error),
        ..record(settings)
    }
}

/// A record of the session `settings` describe, with nothing found yet.
fn record(settings: &ProductionSettings) -> ProductionReport {
    ProductionReport {
        level: settings.level,
        threads: settings.threads,
        config: settings
            .config
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        gated: settings.gate,
        status: ProductionStatus::Error,
        outputs: Vec::new(),
        finding: None,
        workaround: None,
        layer: None,
        error: None,
        sessions: 0,
    }
}

/// The paired layers a pass could change, in execution order: those whose ONNX value a node
/// computes (graph inputs are fed, not computed).
fn layer_values(layers: &[LayerResult]) -> Vec<LayerValue> {
    layers
        .iter()
        .filter(|l| !l.onnx_value.is_empty() && l.onnx_op != "input")
        .map(|l| LayerValue {
            index: l.index,
            module: l.module.clone(),
            onnx_node: l.onnx_node.clone(),
            value: l.onnx_value.clone(),
            precision: DType::from_name(&l.cmp.precision).unwrap_or(DType::F32),
        })
        .collect()
}

/// Runs the shipped model with every paired layer's value made a graph output, at the
/// production level with and without `pass`, on `sample`, and names the first layer the pass
/// changes (`production::layers`). Two sessions.
fn locate(
    cfg: &CheckConfig,
    settings: &ProductionSettings,
    (pass, layers): (&str, &[LayerValue]),
    sample: &ReferenceSample,
    sessions: &mut usize,
) -> Result<LayerFinding> {
    let mut model = onnx::model::load(&cfg.onnx_path)?;
    if let Some(graph) = model.proto.graph.as_mut() {
        let mut outputs: std::collections::HashSet<String> =
            graph.output.iter().map(|o| o.name().to_string()).collect();
        for l in layers {
            if outputs.insert(l.value.clone()) {
                graph.output.push(crate::onnx::proto::ValueInfoProto {
                    name: Some(l.value.clone()),
                    ..Default::default()
                });
            }
        }
    }
    let bytes = model.proto.encode_to_vec();
    // Only the bytes need the weights; the model is read for its signature, which still
    // needs the initializers' names (weights listed among the graph inputs are no inputs).
    if let Some(graph) = model.proto.graph.as_mut() {
        onnx::model_without_weights::drop_weight_data(graph);
    }
    let exposed = Shipped {
        source: Source::Edited {
            model: Box::new(model),
            bytes,
        },
        lean: false,
    };
    let mut values = |disabled: &[&str]| -> Result<Vec<(String, HostTensor)>> {
        let settings_level = (settings, settings.level, disabled);
        let sample = std::slice::from_ref(sample);
        Ok(exposed
            .outputs(cfg, settings_level, sample, sessions)?
            .remove(0))
    };
    let with = values(&[])?;
    let without = values(&[pass])?;
    let still_differs = production_only(&judge_sample(sample, &with, &cfg.policy)?);
    Ok(first_changed(
        layers,
        &with,
        &without,
        still_differs,
        &cfg.policy,
    ))
}
