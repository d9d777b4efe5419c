//! The Model Explorer report: each paired ONNX node's error as node data for Google's Model
//! Explorer (github.com/google-ai-edge/model-explorer), which paints it over the ONNX graph,
//! so the first divergence can be found by looking at the network itself.
//!
//! The file is one `GraphNodeData` object (the format of Model Explorer's
//! `node_data_builder.py`): `results` maps a node id to its `value`, and `thresholds` colour
//! the values. Without a graph id at the top, Model Explorer applies it to the graph it is
//! showing; the ONNX adapter names that graph after the ONNX graph and each node by its ONNX
//! node name, which is the `onnx_node` of the JSON report. `value` is the error relative to
//! range (`rel_to_range`; `"nan"` or `"inf"` when it is not finite), coloured on the same
//! decade scale as the HTML report; a failing node has its own `bgColor` (the HTML report's
//! red for a divergence origin, its salmon for an inherited failure), which wins over the
//! thresholds. Each result also carries `max_abs`, `pass`, `status` (`ok`, `origin`,
//! `accumulated`, `inherited`, `unconfirmed`) and `layer`, its index in the JSON report's
//! `layers`, which Model Explorer ignores and scripts can read. A node paired with several
//! layers shows the worst of them.

use super::format::{fmt_num, severity, BANDS};
use super::{Format, Report};
use crate::outcome::{LayerResult, LayerStatus, Outcome};
use anyhow::Result;
use serde::{Serialize, Serializer};
use std::collections::HashMap;
use std::io::Write;

pub const FORMAT: Format = Format {
    key: "model_explorer",
    flag: "model-explorer",
    help: "Write each paired ONNX node's error as node data for Google's Model Explorer (an \
           overlay on the ONNX graph) to PATH",
    writer: &ModelExplorer,
};

/// What Model Explorer shows as the name of the node data.
const NAME: &str = "align-check: error / range";

/// Background of a divergence origin and of an inherited failure (the HTML report's
/// `--fail` and `--inherited`).
const ORIGIN_COLOUR: &str = "#c62828";
const INHERITED_COLOUR: &str = "#e8836f";

#[derive(Debug)]
pub struct ModelExplorer;

impl Report for ModelExplorer {
    fn write(&self, outcome: &Outcome, out: &mut dyn Write) -> Result<()> {
        serde_json::to_writer_pretty(&mut *out, &node_data(outcome))?;
        out.write_all(b"\n")?;
        Ok(())
    }
}

/// `GraphNodeData`, less the fields left at their defaults.
#[derive(Serialize)]
struct GraphNodeData {
    name: &'static str,
    #[serde(serialize_with = "in_order")]
    results: Vec<(String, NodeResult)>,
    thresholds: Vec<Threshold>,
}

/// `NodeDataResult`, with align-check's own fields after Model Explorer's.
#[derive(Serialize)]
struct NodeResult {
    value: Value,
    #[serde(rename = "bgColor", skip_serializing_if = "Option::is_none")]
    bg_color: Option<&'static str>,
    #[serde(serialize_with = "crate::outcome::finite_or_null")]
    max_abs: f64,
    pass: bool,
    status: &'static str,
    layer: usize,
}

/// A number where JSON can hold it, else its name.
#[derive(Serialize)]
#[serde(untagged)]
enum Value {
    Number(f64),
    Text(String),
}

/// `ThresholdItem`: values up to `value` get `bgColor`.
#[derive(Serialize)]
struct Threshold {
    value: f64,
    #[serde(rename = "bgColor")]
    bg_color: &'static str,
}

/// The results as a JSON object whose keys keep the layers' execution order.
fn in_order<S: Serializer>(
    results: &[(String, NodeResult)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_map(results.iter().map(|(k, v)| (k, v)))
}

fn node_data(outcome: &Outcome) -> GraphNodeData {
    // One entry per named node, at its first layer's place; the worst layer speaks for it.
    let mut chosen: Vec<&LayerResult> = Vec::new();
    let mut slot: HashMap<&str, usize> = HashMap::new();
    for layer in outcome.layers.iter().filter(|l| !l.onnx_node.is_empty()) {
        match slot.get(layer.onnx_node.as_str()) {
            Some(&i) if rank(layer) > rank(chosen[i]) => chosen[i] = layer,
            Some(_) => {}
            None => {
                slot.insert(&layer.onnx_node, chosen.len());
                chosen.push(layer);
            }
        }
    }
    GraphNodeData {
        name: NAME,
        results: chosen
            .into_iter()
            .map(|l| (l.onnx_node.clone(), result(l)))
            .collect(),
        thresholds: thresholds(),
    }
}

/// How bad a layer is: failing before unconfirmed before passing, then by error.
fn rank(layer: &LayerResult) -> (u8, f64) {
    let status = match layer.status() {
        LayerStatus::Ok => 0,
        LayerStatus::Unconfirmed => 1,
        LayerStatus::Inherited | LayerStatus::Accumulated => 2,
        LayerStatus::Origin => 3,
    };
    (status, severity(layer.cmp.rel_to_range))
}

fn result(layer: &LayerResult) -> NodeResult {
    let rel = layer.cmp.rel_to_range;
    let status = layer.status();
    NodeResult {
        value: if rel.is_finite() {
            Value::Number(rel)
        } else {
            Value::Text(fmt_num(rel))
        },
        bg_color: match status {
            LayerStatus::Origin => Some(ORIGIN_COLOUR),
            LayerStatus::Inherited | LayerStatus::Accumulated => Some(INHERITED_COLOUR),
            LayerStatus::Ok | LayerStatus::Unconfirmed => None,
        },
        max_abs: layer.cmp.max_abs,
        pass: layer.cmp.pass,
        status: status.as_str(),
        layer: layer.index,
    }
}

/// The decade scale of the HTML report as upper bounds; the last band's bound is the
/// largest number JSON holds.
fn thresholds() -> Vec<Threshold> {
    BANDS
        .iter()
        .map(|b| Threshold {
            value: if b.below.is_finite() {
                b.below
            } else {
                f64::MAX
            },
            bg_color: b.colour,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_rise_and_end_at_the_largest_number() {
        let t = thresholds();
        assert!(t.windows(2).all(|w| w[0].value < w[1].value));
        assert_eq!(t.last().map(|t| t.value), Some(f64::MAX));
        assert_eq!(t[0].bg_color, BANDS[0].colour);
    }

    #[test]
    fn values_json_cannot_hold_are_named() {
        let json = |v: Value| serde_json::to_string(&v).unwrap();
        assert_eq!(json(Value::Number(1.5e-7)), "1.5e-7");
        assert_eq!(json(Value::Text(fmt_num(f64::NAN))), "\"nan\"");
    }
}
