//! Regression gate against a previous JSON report (`--baseline OLD.json`).
//!
//! A layer can stay under tolerance while its error grows tenfold after a change to the model
//! or its export; that growth is the early warning CI needs. Layers are matched by module
//! path, ONNX node and op (with an occurrence count for repeats), outputs by name. The old
//! report is read as plain JSON through the documented keys only, so a baseline written by an
//! older align-check keeps working.

use crate::outcome::{finite_or_null, Outcome};
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// Default for `--max-growth`: how many times larger an error may become than in the baseline.
pub const DEFAULT_MAX_GROWTH: f64 = 4.0;

/// Errors below this share of a tensor's range are fp32 rounding noise; growth is measured
/// on top of it so that 1e-9 becoming 1e-8 is not a regression.
pub const NOISE_FLOOR: f64 = 1e-7;

#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    /// `layer` or `output`.
    pub kind: String,
    /// Layer index in this report, or output position.
    pub index: usize,
    /// Module path (layers) or output name.
    pub name: String,
    pub onnx_node: String,
    #[serde(serialize_with = "finite_or_null")]
    pub baseline_rel_to_range: f64,
    #[serde(serialize_with = "finite_or_null")]
    pub rel_to_range: f64,
    #[serde(serialize_with = "finite_or_null")]
    pub growth: f64,
    pub exceeded: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct BaselineReport {
    pub path: String,
    pub max_growth: f64,
    /// Every compared layer and output with a baseline counterpart.
    pub changes: Vec<Growth>,
    /// Layers of this report without a counterpart in the baseline.
    pub unmatched: usize,
}

impl BaselineReport {
    pub fn exceeded(&self) -> impl Iterator<Item = &Growth> {
        self.changes.iter().filter(|g| g.exceeded)
    }
}

fn growth(old: f64, new: f64) -> f64 {
    (new + NOISE_FLOOR) / (old + NOISE_FLOOR)
}

fn layer_key(module: &str, onnx_node: &str, op: &str) -> String {
    format!("{module}\u{1}{onnx_node}\u{1}{op}")
}

/// Baseline errors by (layer key, occurrence) and by output name.
type BaselineErrors = (HashMap<(String, usize), f64>, HashMap<String, f64>);

/// Reads the baseline's per-layer and per-output errors.
fn read(path: &Path) -> Result<BaselineErrors> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read baseline {}: {e}", path.display()))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "baseline {} is not an align-check JSON report: {e}",
            path.display()
        )
    })?;
    let (Some(layers), Some(outputs)) = (json["layers"].as_array(), json["outputs"].as_array())
    else {
        bail!(
            "baseline {} is not an align-check JSON report (no layers/outputs)",
            path.display()
        );
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut by_layer = HashMap::new();
    for l in layers {
        let key = layer_key(
            l["module"].as_str().unwrap_or(""),
            l["onnx_node"].as_str().unwrap_or(""),
            l["torch_op"].as_str().unwrap_or(""),
        );
        let n = seen.entry(key.clone()).or_insert(0);
        // A null error (non-finite) in the baseline means "already broken": any value passes.
        let rel = l["rel_to_range"].as_f64().unwrap_or(f64::INFINITY);
        by_layer.insert((key, *n), rel);
        *n += 1;
    }
    let by_output = outputs
        .iter()
        .filter_map(|o| {
            Some((
                o["name"].as_str()?.to_string(),
                o["rel_to_range"].as_f64().unwrap_or(f64::INFINITY),
            ))
        })
        .collect();
    Ok((by_layer, by_output))
}

pub fn compare(outcome: &Outcome, path: &Path, max_growth: f64) -> Result<BaselineReport> {
    let (old_layers, old_outputs) = read(path)?;
    let mut changes = Vec::new();
    let mut unmatched = 0;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for l in &outcome.layers {
        let key = layer_key(&l.module, &l.onnx_node, &l.torch_op);
        let n = seen.entry(key.clone()).or_insert(0);
        let old = old_layers.get(&(key, *n)).copied();
        *n += 1;
        let Some(old) = old else {
            unmatched += 1;
            continue;
        };
        let g = growth(old, l.cmp.rel_to_range);
        changes.push(Growth {
            kind: "layer".into(),
            index: l.index,
            name: l.module.clone(),
            onnx_node: l.onnx_node.clone(),
            baseline_rel_to_range: old,
            rel_to_range: l.cmp.rel_to_range,
            growth: g,
            exceeded: g > max_growth,
        });
    }
    for o in &outcome.outputs {
        if let Some(&old) = old_outputs.get(&o.name) {
            let g = growth(old, o.cmp.rel_to_range);
            changes.push(Growth {
                kind: "output".into(),
                index: o.position,
                name: o.name.clone(),
                onnx_node: String::new(),
                baseline_rel_to_range: old,
                rel_to_range: o.cmp.rel_to_range,
                growth: g,
                exceeded: g > max_growth,
            });
        }
    }
    Ok(BaselineReport {
        path: path.display().to_string(),
        max_growth,
        changes,
        unmatched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_measured_above_the_noise_floor() {
        assert!((growth(1e-6, 1e-5) - 9.18).abs() < 0.01);
        assert!(growth(1e-10, 1e-9) < 1.01);
        assert!(growth(f64::INFINITY, 0.5) < 1.0);
    }
}
