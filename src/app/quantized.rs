//! Checks a quantised model's estimated exclude list by running it: the QDQ model with those
//! nodes left in float (`quantized::exclude`, with the float model's weights when
//! `--float-onnx` gives it) runs once, unoptimised, on the check's first sample, and its output
//! SQNR against PyTorch goes into the report next to the estimate. The list is then completed
//! with the nodes whose outputs those nodes read (see `Surgery::producers`), so that
//! `quantize_static` is given what was run. One ONNX Runtime session, only when the output
//! fails its rule and there is a list to check.

use crate::cli::config::CheckConfig;
use crate::compare::stats::compare;
use crate::onnx;
use crate::production::references::ReferenceSample;
use crate::quantized::analysis::QuantizedReport;
use crate::quantized::detect::Format;
use crate::quantized::exclude::leave_in_float;
use anyhow::{anyhow, Result};
use prost::Message;

pub fn verify(cfg: &CheckConfig, report: &mut QuantizedReport, samples: &[ReferenceSample]) {
    if report.format != Format::Qdq || report.nodes_to_exclude.is_empty() {
        return;
    }
    let Some(sample) = samples.first() else {
        return;
    };
    match run(cfg, report, sample) {
        Ok((db, float_weights, producers)) => {
            report.verified_output_sqnr_db = Some(db);
            report.verified_with_float_weights = float_weights;
            // The list quantize_static needs for the float inputs this run had.
            for p in producers {
                if !report.nodes_to_exclude.contains(&p) {
                    report.nodes_to_exclude.push(p);
                }
            }
        }
        Err(e) => report.verification_error = Some(e.to_string()),
    }
}

/// The worst output SQNR with the nodes left in float, whether float weights were used, and
/// the producers of the activations they now read unquantised.
fn run(
    cfg: &CheckConfig,
    report: &QuantizedReport,
    sample: &ReferenceSample,
) -> Result<(f64, bool, Vec<String>)> {
    let mut model = onnx::model::load(&cfg.onnx_path)?;
    let float = match &cfg.float_onnx {
        Some(path) => Some(onnx::model::load(path)?),
        None => None,
    };
    let done = leave_in_float(
        &mut model.proto,
        &report.nodes_to_exclude,
        float.as_ref().map(|f| &f.proto),
    );
    if done.nodes == 0 {
        return Err(anyhow!(
            "none of the nodes to exclude is in {}",
            model.path.display()
        ));
    }
    let bytes = model.proto.encode_to_vec();
    let mut session = onnx::runtime::session(
        &model,
        &bytes,
        cfg.runtime.threads,
        cfg.runtime.ort_custom_ops.as_deref(),
    )?;
    let produced = onnx::capture::outputs_of(&mut session, &model, &sample.inputs)?;
    let mut worst = f64::INFINITY;
    for r in &sample.outputs {
        let (_, test) = produced
            .iter()
            .find(|(n, _)| *n == r.name)
            .ok_or_else(|| anyhow!("no output `{}`", r.name))?;
        let stats = compare(&r.torch, test, cfg.policy.for_output(r.precision))
            .map_err(|e| anyhow!("output `{}`: {e}", r.name))?;
        worst = worst.min(stats.snr_db);
    }
    Ok((worst, done.float_weights > 0, done.producers))
}
