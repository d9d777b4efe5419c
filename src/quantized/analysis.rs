//! What a quantised model's check adds to its outcome (JSON `quantized`): the layers ranked
//! by the error they introduce (isolated SQNR, lowest first), the accumulated SQNR along the
//! network, and a `nodes_to_exclude` list for `quantize_static`.
//!
//! The exclude list is an estimate, and says so: quantisation noise of different layers is
//! close to independent, so noise powers add; each node's share of the output's noise is
//! taken as its share of the summed isolated noise-to-signal ratios, scaled so that all of
//! them together give the output's measured SQNR. Nodes are taken largest share first until
//! the estimated output SQNR reaches the output rule. Re-quantising with the list and
//! checking again is what confirms it (docs/quantized.md has the numbers measured on the
//! fixtures).

use super::detect::{Format, Quantization};
use super::rule::SqnrRule;
use crate::capture::tensor::DType;
use crate::compare::judged::{LayerResult, OutputResult};
use crate::compare::stats::finite_or_null;
use crate::text::{fmt_num, module_label};
use serde::Serialize;

/// How many ranked layers the sentence names.
const NAMED: usize = 3;

#[derive(Debug, Clone, Serialize)]
pub struct RankedLayer {
    pub layer_index: usize,
    pub module: String,
    pub onnx_node: String,
    /// The float node `nodes_to_exclude` names for it (`null` where none is known).
    pub node_to_exclude: Option<String>,
    #[serde(serialize_with = "finite_or_null")]
    pub isolated_sqnr_db: f64,
    /// Within the layer rule.
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CurvePoint {
    pub layer_index: usize,
    #[serde(serialize_with = "finite_or_null")]
    pub sqnr_db: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QuantizedReport {
    pub format: Format,
    pub integer_types: Vec<String>,
    pub quantized_nodes: usize,
    pub rule: SqnrRule,
    /// The worst output's SQNR against PyTorch.
    #[serde(serialize_with = "finite_or_null")]
    pub output_sqnr_db: f64,
    /// Layers with an isolated error, most error introduced first.
    pub ranking: Vec<RankedLayer>,
    /// Every layer's accumulated SQNR, in execution order.
    pub accumulated_sqnr: Vec<CurvePoint>,
    /// Nodes to leave in float so that the output meets the rule (empty when it does).
    pub nodes_to_exclude: Vec<String>,
    /// The output SQNR estimated with `nodes_to_exclude` left in float.
    pub estimated_output_sqnr_db: Option<f64>,
    /// Always true: the list is chosen from isolated errors; `verified_output_sqnr_db` is
    /// what running it measured.
    pub exclude_is_estimate: bool,
    /// The worst output's SQNR with `nodes_to_exclude` left in float, measured (QDQ only).
    pub verified_output_sqnr_db: Option<f64>,
    /// Whether that run used the float model's weights (`--float-onnx`) for those nodes,
    /// rather than their dequantised int8 weights.
    pub verified_with_float_weights: bool,
    /// Why the check of the list could not run.
    pub verification_error: Option<String>,
}

fn nsr(db: f64) -> f64 {
    10f64.powf(-db / 10.0)
}

fn db(nsr: f64) -> f64 {
    if nsr <= 0.0 {
        f64::INFINITY
    } else {
        -10.0 * nsr.log10()
    }
}

/// The quantised model's analysis, from the judged layers (with isolated errors) and outputs.
pub fn analyse(
    layers: &[LayerResult],
    outputs: &[OutputResult],
    q: &Quantization,
    rule: SqnrRule,
) -> QuantizedReport {
    let mut ranking: Vec<RankedLayer> = layers
        .iter()
        // An integer-typed ONNX value (a QOperator or dynamic model's quantised tensor) holds
        // codes, not values: its SQNR against PyTorch's float says nothing.
        .filter(|l| DType::from_name(&l.cmp.onnx_dtype).is_none_or(|d| d.is_float()))
        .filter_map(|l| {
            let iso = l.isolated.as_ref()?;
            // No error at all serialises as null: infinitely good.
            let sqnr = iso.snr_db.unwrap_or(f64::INFINITY);
            Some(RankedLayer {
                layer_index: l.index,
                module: l.module.clone(),
                onnx_node: l.onnx_node.clone(),
                node_to_exclude: q.exclude_name.get(&l.onnx_node).cloned(),
                isolated_sqnr_db: sqnr,
                pass: iso.pass,
            })
        })
        .collect();
    ranking.sort_by(|a, b| a.isolated_sqnr_db.total_cmp(&b.isolated_sqnr_db));
    let accumulated_sqnr = layers
        .iter()
        .map(|l| CurvePoint {
            layer_index: l.index,
            sqnr_db: l.cmp.snr_db,
        })
        .collect();
    let output_sqnr_db = outputs
        .iter()
        .map(|o| o.cmp.snr_db)
        .fold(f64::INFINITY, f64::min);
    let (nodes_to_exclude, estimated_output_sqnr_db) =
        exclude_list(&ranking, output_sqnr_db, rule.output_db);
    QuantizedReport {
        format: q.format,
        integer_types: q.integer_types.clone(),
        quantized_nodes: q.quantized_nodes,
        rule,
        output_sqnr_db,
        ranking,
        accumulated_sqnr,
        nodes_to_exclude,
        estimated_output_sqnr_db,
        exclude_is_estimate: true,
        verified_output_sqnr_db: None,
        verified_with_float_weights: false,
        verification_error: None,
    }
}

/// The estimated exclude list (see the file's head) and the output SQNR it leads to.
fn exclude_list(
    ranking: &[RankedLayer],
    output_db: f64,
    target_db: f64,
) -> (Vec<String>, Option<f64>) {
    if !output_db.is_finite() || output_db >= target_db {
        return (Vec::new(), None);
    }
    // One share per node: a DequantizeLinear and the op it quantises are one exclusion.
    let mut shares: Vec<(String, f64)> = Vec::new();
    for r in ranking {
        let Some(node) = &r.node_to_exclude else {
            continue;
        };
        let n = nsr(r.isolated_sqnr_db);
        match shares.iter_mut().find(|(name, _)| name == node) {
            Some((_, s)) => *s = s.max(n),
            None => shares.push((node.clone(), n)),
        }
    }
    let total: f64 = shares.iter().map(|(_, s)| s).sum();
    if total <= 0.0 {
        return (Vec::new(), None);
    }
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    let out_nsr = nsr(output_db);
    let mut removed = 0.0;
    let mut list = Vec::new();
    for (node, share) in shares {
        if db(out_nsr * (1.0 - removed / total)) >= target_db {
            break;
        }
        removed += share;
        list.push(node);
    }
    let estimate = db(out_nsr * (1.0 - removed / total).max(0.0));
    (list, Some(estimate))
}

impl QuantizedReport {
    /// "quantised model (QDQ int8, 30 quantised nodes), judged by SQNR (layers at least 33
    /// dB in isolation, outputs 35 dB): output 30.4 dB; most error introduced by features.2.1
    /// (30.9 dB), ...; nodes_to_exclude=[...] (about 36.8 dB), checked: 35.7 dB".
    pub fn line(&self) -> String {
        let types = if self.integer_types.is_empty() {
            String::new()
        } else {
            format!(" {}", self.integer_types.join("/"))
        };
        let mut line = format!(
            "quantised model ({}{types}, {} quantised nodes), judged by SQNR (layers >= {} dB \
             in isolation, outputs >= {} dB): output {} dB",
            self.format.label(),
            self.quantized_nodes,
            self.rule.layer_db,
            self.rule.output_db,
            fmt_db(self.output_sqnr_db)
        );
        let named: Vec<String> = self
            .ranking
            .iter()
            .take(NAMED)
            .map(|r| {
                format!(
                    "{} ({}, {} dB)",
                    module_label(&r.module),
                    r.node_to_exclude.as_deref().unwrap_or(&r.onnx_node),
                    fmt_db(r.isolated_sqnr_db)
                )
            })
            .collect();
        if !named.is_empty() {
            line.push_str(&format!("; most error introduced by {}", named.join(", ")));
        }
        match self.estimated_output_sqnr_db {
            Some(estimate) if !self.nodes_to_exclude.is_empty() => {
                let quoted: Vec<String> = self
                    .nodes_to_exclude
                    .iter()
                    .map(|n| format!("\"{n}\""))
                    .collect();
                if self.format == Format::Qdq {
                    line.push_str(&format!(
                        "; quantize_static(..., nodes_to_exclude=[{}]) should bring the output \
                         to about {} dB (chosen from the isolated errors, with the nodes whose \
                         outputs they read)",
                        quoted.join(", "),
                        fmt_db(estimate)
                    ));
                    line.push_str(&self.verification());
                } else {
                    // An integer op replaces its float node under another name, and only a
                    // QDQ graph can be re-run with nodes left in float.
                    line.push_str(&format!(
                        "; leaving the float nodes that [{}] replaced unquantised should bring \
                         the output to about {} dB (an estimate from the isolated errors, not \
                         run; nodes_to_exclude takes the float model's node names)",
                        quoted.join(", "),
                        fmt_db(estimate)
                    ));
                }
            }
            _ => {}
        }
        line
    }
}

impl QuantizedReport {
    /// What running the list measured, for the sentence.
    fn verification(&self) -> String {
        if let Some(e) = &self.verification_error {
            return format!("; it could not be checked: {e}");
        }
        let Some(db) = self.verified_output_sqnr_db else {
            return String::new();
        };
        let weights = if self.verified_with_float_weights {
            "float weights from --float-onnx"
        } else {
            "their int8 weights dequantised; --float-onnx gives the float ones"
        };
        let verdict = if db >= self.rule.output_db {
            "within the rule"
        } else {
            "still below the rule: exclude more, starting with the next ranked layers"
        };
        format!(
            "; run with them left in float ({weights}): output {} dB, {verdict}",
            fmt_db(db)
        )
    }
}

fn fmt_db(v: f64) -> String {
    if v.is_infinite() && v > 0.0 {
        "inf".into()
    } else if v.is_finite() {
        format!("{v:.1}")
    } else {
        fmt_num(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(node: &str, db: f64) -> RankedLayer {
        RankedLayer {
            layer_index: 0,
            module: node.into(),
            onnx_node: node.into(),
            node_to_exclude: Some(node.into()),
            isolated_sqnr_db: db,
            pass: db >= 30.0,
        }
    }

    #[test]
    fn the_largest_noise_goes_first_until_the_output_is_estimated_to_pass() {
        // Noise shares 1e-2.5 (a), 1e-4 (b), 1e-4 (c): a carries 94% of it.
        let ranking = [ranked("a", 25.0), ranked("b", 40.0), ranked("c", 40.0)];
        let (list, estimate) = exclude_list(&ranking, 30.0, 35.0);
        assert_eq!(list, ["a"]);
        let estimate = estimate.unwrap();
        assert!((41.0..43.0).contains(&estimate), "{estimate}");
        // Already within the rule: nothing to exclude.
        assert_eq!(exclude_list(&ranking, 36.0, 35.0), (Vec::new(), None));
        // A stricter target takes more nodes.
        assert_eq!(exclude_list(&ranking, 30.0, 45.0).0, ["a", "b"]);
    }

    #[test]
    fn a_quantiser_pair_and_its_op_are_one_exclusion() {
        let mut dq = ranked("conv_DequantizeLinear", 24.0);
        dq.node_to_exclude = Some("conv".into());
        let ranking = [dq, ranked("conv", 25.0), ranked("fc", 40.0)];
        let (list, _) = exclude_list(&ranking, 28.0, 35.0);
        assert_eq!(list, ["conv"]);
    }
}
