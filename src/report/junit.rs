//! The JUnit XML report, for CI systems that show test results (GitLab, Jenkins, Azure,
//! GitHub test reporters): one test suite with a test case per graph output, one per group of
//! layers under the same top-level module (`layer1`, `(top level)` for values outside any
//! module), and one per other gate of the outcome (coverage, baseline growth), so that every
//! gate the verdict failed on shows up as a failed case. Pass or fail comes from the
//! outcome's gates, never judged here. Case names are stable from run to run (CI tracks
//! history by name); a failure's message names the failing layers and their error.
//!
//! Every string is XML-escaped, and characters XML 1.0 cannot carry are replaced, so a
//! hostile or odd node name cannot break the document.

use super::format::{fmt_num, module_label};
use super::{Format, Report};
use crate::capture::tensor::format_shape;
use crate::outcome::reference::Reference;
use crate::outcome::{Gate, GateName, LayerResult, LayerStatus, Outcome};
use crate::pairing::Unpaired;
use anyhow::Result;
use std::io::Write;

/// Failing layers named in a failure's `message` attribute; the element's text lists them all.
const MESSAGE_LAYERS: usize = 5;

/// `s` escaped for XML text and attribute values, with the characters XML 1.0 forbids
/// (controls other than tab and newline) replaced by U+FFFD.
pub(super) fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' => out.push(c),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The top-level module of a layer: `layer1` for `layer1.0.conv1`.
fn group_of(layer: &LayerResult) -> &str {
    match layer.module.split('.').next() {
        Some(first) if !first.is_empty() => first,
        _ => module_label(""),
    }
}

/// One line about a failing layer, as the failure text lists it.
fn describe(l: &LayerResult) -> String {
    format!(
        "#{} {} ({}) = ONNX {} [{}] {}: error {} of range, max abs {} (atol {}, rtol {}), {:.2}% of elements outside tolerance{}{}",
        l.index,
        module_label(&l.module),
        if l.module_type.is_empty() { &l.torch_op } else { &l.module_type },
        l.onnx_node,
        l.onnx_op,
        format_shape(&l.cmp.shape),
        fmt_num(l.cmp.rel_to_range),
        fmt_num(l.cmp.max_abs),
        fmt_num(l.cmp.tol.atol),
        fmt_num(l.cmp.tol.rtol),
        l.cmp.mismatch_ratio * 100.0,
        match l.status() {
            LayerStatus::Inherited => ", inherited from upstream",
            LayerStatus::Accumulated => ", accumulated from upstream (passes in isolation)",
            _ => ", divergence origin",
        },
        l.source.as_ref().map(|s| format!(", source {s}")).unwrap_or_default()
    )
}

struct Case {
    classname: &'static str,
    name: String,
    failure: Option<(String, String)>,
}

fn layer_cases(outcome: &Outcome) -> Vec<Case> {
    // Groups in order of first appearance, so the suite reads like the network.
    let mut groups: Vec<(&str, Vec<&LayerResult>)> = Vec::new();
    for l in &outcome.layers {
        let g = group_of(l);
        match groups.iter_mut().find(|(name, _)| *name == g) {
            Some((_, v)) => v.push(l),
            None => groups.push((g, vec![l])),
        }
    }
    groups
        .into_iter()
        .map(|(group, layers)| {
            let failing: Vec<&&LayerResult> = layers.iter().filter(|l| l.fails()).collect();
            let failure = (!failing.is_empty()).then(|| {
                let named: Vec<String> = failing
                    .iter()
                    .take(MESSAGE_LAYERS)
                    .map(|l| {
                        format!(
                            "{} (error {} of range{})",
                            module_label(&l.module),
                            fmt_num(l.cmp.rel_to_range),
                            if l.is_origin() { "" } else { ", inherited" }
                        )
                    })
                    .collect();
                let more = failing.len().saturating_sub(MESSAGE_LAYERS);
                let message = format!(
                    "{} of {} layers exceed tolerance: {}{}",
                    failing.len(),
                    layers.len(),
                    named.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
                let body = failing
                    .iter()
                    .map(|l| describe(l))
                    .collect::<Vec<_>>()
                    .join("\n");
                (message, body)
            });
            Case {
                classname: "align-check.layers",
                // The name is the group alone, so that CI keeps one history per group.
                name: group.to_string(),
                failure,
            }
        })
        .collect()
}

fn output_cases(outcome: &Outcome) -> Vec<Case> {
    outcome
        .outputs
        .iter()
        .map(|o| {
            let c = &o.cmp;
            Case {
                classname: "align-check.outputs",
                name: format!("output {}", o.name),
                failure: (!c.pass).then(|| {
                    (
                        format!(
                            "output {} exceeds tolerance: error {} of range, max abs {}",
                            o.name,
                            fmt_num(c.rel_to_range),
                            fmt_num(c.max_abs)
                        ),
                        format!(
                            "shape {}, max abs {}, error / range {}, cosine {}, {:.2}% of elements outside tolerance (atol {}, rtol {})",
                            format_shape(&c.shape),
                            fmt_num(c.max_abs),
                            fmt_num(c.rel_to_range),
                            fmt_num(c.cosine),
                            c.mismatch_ratio * 100.0,
                            fmt_num(c.tol.atol),
                            fmt_num(c.tol.rtol)
                        ),
                    )
                }),
            }
        })
        .collect()
}

/// The case of a gate that the per-layer and per-output cases do not already tell: those
/// fail exactly where the layers and outputs gates count a failure.
fn gate_case(outcome: &Outcome, gate: &Gate) -> Option<Case> {
    let (classname, name, body) = match gate.name {
        GateName::Layers | GateName::Outputs => return None,
        GateName::Coverage => (
            "align-check.coverage",
            format!("coverage of {} layers", outcome.reference.name()),
            unpaired_lines(&outcome.coverage.unpaired, outcome.reference),
        ),
        GateName::Baseline => (
            "align-check.baseline",
            "baseline growth".to_string(),
            grown_lines(outcome),
        ),
        GateName::Production => (
            "align-check.production",
            "production session".to_string(),
            outcome
                .production
                .as_ref()
                .map(crate::production::report::ProductionReport::output_lines)
                .unwrap_or_default(),
        ),
    };
    Some(Case {
        classname,
        name,
        failure: (!gate.passed).then(|| (gate.detail(), body)),
    })
}

/// TorchScript and ONNX values left unpaired that no rule accounts for, one a line.
fn unpaired_lines(unpaired: &[Unpaired], reference: Reference) -> String {
    unpaired
        .iter()
        .filter(|u| !u.accounted)
        .map(|u| {
            format!(
                "unpaired {} {} [{}] in {}: {}",
                reference.side_label(u.side),
                u.name,
                u.op,
                module_label(&u.module),
                u.reason
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Layers and outputs whose error grew past the baseline's limit, one a line.
fn grown_lines(outcome: &Outcome) -> String {
    let Some(b) = &outcome.baseline else {
        return String::new();
    };
    b.exceeded()
        .map(|g| {
            format!(
                "{} {} {}: error {} of range, {} in the baseline ({}x, limit {}x)",
                g.kind,
                g.index,
                module_label(&g.name),
                fmt_num(g.rel_to_range),
                fmt_num(g.baseline_rel_to_range),
                fmt_num(g.growth),
                b.max_growth
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub const FORMAT: Format = Format {
    key: "junit",
    flag: "junit",
    help: "Write JUnit XML (one test case per output and per top-level module) to PATH",
    writer: &Junit,
};

#[derive(Debug)]
pub struct Junit;

impl Report for Junit {
    fn write(&self, outcome: &Outcome, out: &mut dyn Write) -> Result<()> {
        write_suite(outcome, out)
    }
}

/// The JUnit XML report of `outcome`.
pub fn render(outcome: &Outcome) -> String {
    let bytes = super::render_to_vec(&Junit, outcome).expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the report is UTF-8")
}

fn write_suite(outcome: &Outcome, out: &mut dyn Write) -> Result<()> {
    let mut cases = output_cases(outcome);
    cases.extend(layer_cases(outcome));
    cases.extend(outcome.gates.iter().filter_map(|g| gate_case(outcome, g)));
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let suite = format!(
        "align-check {} vs {}",
        outcome.torch_model.path, outcome.onnx_model.path
    );
    let time = format!("{:.3}", outcome.timing.total_s);
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="align-check" tests="{}" failures="{failures}" errors="0" time="{time}">"#,
        cases.len()
    )?;
    writeln!(
        out,
        r#"  <testsuite name="{}" tests="{}" failures="{failures}" errors="0" skipped="0" time="{time}">"#,
        xml(&suite),
        cases.len()
    )?;
    let e = &outcome.environment;
    writeln!(out, "    <properties>")?;
    for (name, value) in [
        ("align-check", e.align_check.as_str()),
        ("libtorch", e.libtorch.as_str()),
        ("onnxruntime", e.onnxruntime.as_str()),
        ("torch_model_sha256", outcome.torch_model.sha256.as_str()),
        ("onnx_model_sha256", outcome.onnx_model.sha256.as_str()),
    ] {
        writeln!(
            out,
            r#"      <property name="{}" value="{}"/>"#,
            xml(name),
            xml(value)
        )?;
    }
    for line in outcome.signature.lines() {
        writeln!(
            out,
            r#"      <property name="signature" value="{}"/>"#,
            xml(&line)
        )?;
    }
    writeln!(out, "    </properties>")?;
    for case in &cases {
        let open = format!(
            r#"    <testcase classname="{}" name="{}" time="0""#,
            case.classname,
            xml(&case.name)
        );
        match &case.failure {
            None => {
                writeln!(out, "{open}/>")?;
            }
            Some((message, body)) => {
                writeln!(out, "{open}>")?;
                writeln!(
                    out,
                    r#"      <failure message="{}" type="tolerance">{}</failure>"#,
                    xml(message),
                    xml(body)
                )?;
                writeln!(out, "    </testcase>")?;
            }
        }
    }
    writeln!(out, "  </testsuite>")?;
    writeln!(out, "</testsuites>")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_forbidden_characters() {
        assert_eq!(
            xml("<script>alert('1')</script> & \"x\"\u{1}"),
            "&lt;script&gt;alert(&apos;1&apos;)&lt;/script&gt; &amp; &quot;x&quot;\u{FFFD}"
        );
    }

    #[test]
    fn unaccounted_values_are_listed_with_their_reason_in_words() {
        use crate::capture::Side;
        use crate::outcome::reference::ReferenceFormat;
        use crate::pairing::UnpairedReason;
        let value = |side, name: &str, reason: UnpairedReason| Unpaired {
            side,
            id: 0,
            name: name.into(),
            op: "aten::mul".into(),
            module: "blocks.0.norm".into(),
            accounted: reason.covered(),
            reason,
        };
        let unpaired = [
            value(
                Side::Torch,
                "v7",
                UnpairedReason::LacksBias {
                    node: "/fc/MatMul".into(),
                },
            ),
            value(Side::Torch, "v8", UnpairedReason::VanishesInEval),
            value(
                Side::Onnx,
                "/x/Mul",
                UnpairedReason::NoTorchCall {
                    scope: "blocks.0.extra".into(),
                },
            ),
        ];
        let lines = unpaired_lines(&unpaired, Reference::new(ReferenceFormat::Torchscript));
        assert_eq!(
            lines,
            "unpaired TorchScript v7 [aten::mul] in blocks.0.norm: its ONNX value /fc/MatMul \
             lacks the bias, which a later node adds\n\
             unpaired ONNX /x/Mul [aten::mul] in blocks.0.norm: scope 'blocks.0.extra' has no \
             PyTorch module call to match"
        );
    }
}
