//! The verdict narrative the terminal, Markdown and HTML reports share: what failed and where
//! (`Headline`), and the sentences that follow it (`Narrative`: the divergence's cause, each
//! failed gate, the other independent origins, an isolation that could not run). Each part
//! is built once from the `Outcome` as a value and worded here, once; a format only supplies
//! its `Markup` (how a name, a layer reference and a sentence's lead are marked up) and lays
//! the sentences out. A new kind of sentence is a new value in this list, worded in one place.

use crate::compare::judged::Cause;
use crate::compare::shared_producer::SharedProducer;
use crate::outcome::{Divergence, Drift, Outcome, Verdict};
use crate::quantized::analysis::QuantizedReport;
use crate::text::{fmt_num, module_label};

/// How one format marks up the parts of a sentence.
pub trait Markup {
    /// align-check's own words, escaped as the format needs.
    fn text(&self, s: &str) -> String;
    /// A name the model supplies (module path, node name, source line).
    fn name(&self, s: &str) -> String;
    /// A reference to layer `index` whose label is already marked up (a link in HTML).
    fn layer(&self, _index: usize, label: String) -> String {
        label
    }
    /// The words a headline opens with (`first divergence at`), lower case.
    fn lead(&self, words: &str) -> String {
        self.text(words)
    }
}

/// Plain text: the terminal's markup.
pub struct Plain;

impl Markup for Plain {
    fn text(&self, s: &str) -> String {
        s.to_string()
    }
    fn name(&self, s: &str) -> String {
        s.to_string()
    }
}

/// What the verdict says first.
pub enum Headline<'a> {
    /// Passed: the account of layers and outputs, and the coverage.
    Pass {
        summary: String,
        coverage: f64,
        /// The reference's name (`TorchScript`, `ExportedProgram`).
        reference: &'static str,
    },
    /// Failed at a first divergence; with its isolated error when isolation measured it.
    Divergence {
        divergence: &'a Divergence,
        isolated: Option<(f64, bool)>,
    },
    /// Failed with no layer failing on its own.
    Drift(&'a Drift),
    /// Failed on gates alone (coverage, baseline, outputs without a divergence).
    Gates,
    /// A quantised model: its story is its quantisation (the output SQNR against the rule,
    /// the layers that cost the most), whatever else the verdict rests on.
    Quantized {
        report: &'a QuantizedReport,
        pass: bool,
    },
}

/// How many of the costliest layers a quantised model's headline names.
const COSTLIEST_LAYERS: usize = 3;

impl<'a> Headline<'a> {
    pub fn of(outcome: &'a Outcome) -> Headline<'a> {
        if let Some(report) = &outcome.quantized {
            return Headline::Quantized {
                report,
                pass: outcome.verdict == Verdict::Pass,
            };
        }
        if outcome.verdict == Verdict::Pass {
            return Headline::Pass {
                summary: super::findings::pass_summary(outcome),
                coverage: outcome.coverage.torch_ratio,
                reference: outcome.reference.name(),
            };
        }
        match (&outcome.first_divergence, &outcome.accumulated_drift) {
            (Some(d), _) => Headline::Divergence {
                divergence: d,
                isolated: outcome
                    .layers
                    .get(d.layer_index)
                    .and_then(|l| l.isolated.as_ref())
                    .map(|iso| (iso.rel_to_range, iso.pass)),
            },
            (None, Some(drift)) => Headline::Drift(drift),
            (None, None) => Headline::Gates,
        }
    }

    pub fn render(&self, m: &dyn Markup) -> String {
        match self {
            Headline::Pass {
                summary,
                coverage,
                reference,
            } => m.text(&format!(
                "{summary}; {:.1}% of {reference} layers compared",
                coverage * 100.0
            )),
            Headline::Divergence {
                divergence,
                isolated,
            } => {
                // An overflow is said first: it is why the layer diverges.
                let lead = match &divergence.cause {
                    Some(Cause::Overflow {
                        precision, limit, ..
                    }) => format!("{precision} overflow (largest finite value {limit}) at"),
                    None => "first divergence at".to_string(),
                };
                format!(
                    "{} {}",
                    m.lead(&lead),
                    divergence_sentence(divergence, *isolated, m)
                )
            }
            Headline::Drift(drift) => {
                let mut line = format!(
                    "{} {}",
                    m.lead("accumulated drift:"),
                    m.text("no layer fails in isolation, many small differences add up")
                );
                if !drift.contributors.is_empty() {
                    line.push_str(&m.text("; largest isolated error, of range: "));
                    line.push_str(&contributors(drift, m));
                }
                line
            }
            Headline::Gates => format!(
                "{} {}",
                m.lead("no layer diverges:"),
                m.text("the check failed on its gates")
            ),
            Headline::Quantized { report, pass } => quantized_sentence(report, *pass, m),
        }
    }
}

/// "int8 QDQ quantised model: output SQNR 15.9 dB against the 35 dB rule; most error
/// introduced at blocks.3.fc (12.1 dB), ...".
fn quantized_sentence(q: &QuantizedReport, pass: bool, m: &dyn Markup) -> String {
    let types = q.integer_types.join("/");
    let mut s = format!(
        "{} {}",
        m.lead(&format!("{types} {} quantised model:", q.format.label())),
        m.text(&format!(
            "output SQNR {:.1} dB {} the {} dB rule",
            q.output_sqnr_db,
            if pass { "meets" } else { "against" },
            q.rule.output_db
        ))
    );
    let costliest: Vec<String> = q
        .ranking
        .iter()
        .take(COSTLIEST_LAYERS)
        .map(|r| {
            format!(
                "{} {}",
                m.layer(r.layer_index, m.name(module_label(&r.module))),
                m.text(&format!("({:.1} dB)", r.isolated_sqnr_db))
            )
        })
        .collect();
    if !costliest.is_empty() {
        s.push_str(&m.text("; most error introduced at "));
        s.push_str(&costliest.join(&m.text(", ")));
    }
    s
}

/// "blocks.12.fc (Linear) = ONNX /blocks.12/fc/Gemm [Gemm]: error 0.0196 of range (max abs
/// 0.0363), source model.py:49; fails in isolation too (0.0196 of range)".
fn divergence_sentence(d: &Divergence, isolated: Option<(f64, bool)>, m: &dyn Markup) -> String {
    let class = if d.module_type.is_empty() {
        &d.torch_op
    } else {
        &d.module_type
    };
    // The brackets round the op are the sentence's own punctuation, never escaped as the
    // op's name is.
    let mut s = format!(
        "{} {} {} [{}]{}",
        m.layer(d.layer_index, m.name(module_label(&d.module))),
        m.text(&format!("({class}) = ONNX")),
        m.name(&d.onnx_node),
        m.text(&d.onnx_op),
        m.text(&format!(
            ": error {} of range (max abs {})",
            fmt_num(d.rel_to_range),
            fmt_num(d.max_abs)
        ))
    );
    if let Some(src) = &d.source {
        s.push_str(&format!("{} {}", m.text(", source"), m.name(src)));
    }
    match isolated {
        Some((rel, false)) => s.push_str(&m.text(&format!(
            "; fails in isolation too ({} of range)",
            fmt_num(rel)
        ))),
        Some((rel, true)) => {
            s.push_str(&m.text(&format!("; {} of range in isolation", fmt_num(rel))))
        }
        None => {}
    }
    s
}

/// "; the suspect is what 2 of them read that was not compared: norm (aten::mul), not
/// compared: REASON".
fn shared_producer_clause(s: &SharedProducer, m: &dyn Markup) -> String {
    format!(
        "{}{} {}",
        m.text(&format!(
            "; the suspect is what {} of them read that was not compared: ",
            s.origins.len()
        )),
        m.name(module_label(&s.module)),
        m.text(&format!(
            "({}){}",
            s.torch_op,
            s.reason
                .as_ref()
                .map(|r| format!(", not compared: {r}"))
                .unwrap_or_default()
        ))
    )
}

/// "blocks.3.fc 2.00e-5, blocks.7.fc 1.90e-5": the layers adding the most error in isolation.
fn contributors(drift: &Drift, m: &dyn Markup) -> String {
    drift
        .contributors
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                m.layer(c.layer_index, m.name(module_label(&c.module))),
                m.text(&fmt_num(c.isolated_rel_to_range))
            )
        })
        .collect::<Vec<_>>()
        .join(&m.text(", "))
}

/// The sentences after the headline, each a part of the verdict worded once.
pub struct Narrative {
    /// Why the first divergence fails, when known beyond its error (a float16 overflow).
    pub cause: Option<String>,
    /// Each failed gate's line (without the drift clause the headline says).
    pub gates: Vec<String>,
    /// The independent origins on parallel branches, when there are several.
    pub origins: Option<String>,
    /// Isolation was asked for or needed and could not run.
    pub isolation_failed: Option<String>,
}

impl Narrative {
    pub fn of(outcome: &Outcome, m: &dyn Markup) -> Narrative {
        let failed = outcome.verdict == Verdict::Fail;
        let origins = &outcome.divergence_origins;
        Narrative {
            cause: outcome
                .first_divergence
                .as_ref()
                .and_then(|d| d.cause.as_ref())
                .map(|c| m.text(&c.sentence())),
            gates: outcome.failed_gates().map(|g| m.text(&g.line())).collect(),
            origins: (failed && origins.len() > 1).then(|| {
                let named: Vec<String> = origins
                    .iter()
                    .map(|d| m.layer(d.layer_index, m.name(module_label(&d.module))))
                    .collect();
                let mut line = format!(
                    "{}{}",
                    m.text(&format!(
                        "{} independent origins (parallel branches): ",
                        origins.len()
                    )),
                    named.join(&m.text(", "))
                );
                if let Some(s) = &outcome.shared_producer {
                    line.push_str(&shared_producer_clause(s, m));
                }
                line
            }),
            isolation_failed: outcome
                .isolation
                .as_ref()
                .and_then(|i| i.error.as_ref())
                .map(|error| {
                    m.text(&format!(
                        "isolation could not run: {error}; origins judged from accumulated error"
                    ))
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Cause, DriftContributor};

    /// Marks every part so a test can see which markup each word went through.
    struct Tagged;

    impl Markup for Tagged {
        fn text(&self, s: &str) -> String {
            s.to_string()
        }
        fn name(&self, s: &str) -> String {
            format!("<{s}>")
        }
        fn layer(&self, index: usize, label: String) -> String {
            format!("#{index}:{label}")
        }
        fn lead(&self, words: &str) -> String {
            format!("*{words}*")
        }
    }

    fn divergence(source: Option<&str>) -> Divergence {
        Divergence {
            module: "blocks.12.fc".into(),
            module_type: String::new(),
            onnx_node: "/blocks.12/fc/Gemm".into(),
            onnx_op: "Gemm".into(),
            torch_op: "aten::linear".into(),
            source: source.map(str::to_string),
            layer_index: 24,
            rel_to_range: 0.0196,
            max_abs: 0.0363,
            cause: Some(Cause::Overflow {
                precision: "float16".into(),
                module: "blocks.12.fc".into(),
                max_reference: 8.94e4,
                limit: 65504.0,
            }),
        }
    }

    #[test]
    fn a_divergence_names_its_layer_node_op_error_source_and_isolation() {
        let mut d = divergence(Some("model.py:49"));
        d.cause = None;
        let headline = Headline::Divergence {
            divergence: &d,
            isolated: Some((0.0196, false)),
        };
        assert_eq!(
            headline.render(&Plain),
            "first divergence at blocks.12.fc (aten::linear) = ONNX /blocks.12/fc/Gemm [Gemm]: \
             error 0.0196 of range (max abs 0.0363), source model.py:49; fails in isolation \
             too (0.0196 of range)"
        );
        assert_eq!(
            headline.render(&Tagged),
            "*first divergence at* #24:<blocks.12.fc> (aten::linear) = ONNX \
             </blocks.12/fc/Gemm> [Gemm]: error 0.0196 of range (max abs 0.0363), source \
             <model.py:49>; fails in isolation too (0.0196 of range)"
        );
        let passes_alone = Headline::Divergence {
            divergence: &divergence(None),
            isolated: Some((1e-7, true)),
        }
        .render(&Plain);
        assert!(passes_alone.ends_with("(max abs 0.0363); 1.00e-7 of range in isolation"));
    }

    #[test]
    fn an_overflow_is_what_the_headline_says_first() {
        let d = divergence(None);
        let line = Headline::Divergence {
            divergence: &d,
            isolated: Some((0.0196, false)),
        }
        .render(&Plain);
        assert!(
            line.starts_with("float16 overflow (largest finite value 65504) at blocks.12.fc"),
            "{line}"
        );
    }

    #[test]
    fn drift_names_its_contributors_as_layers() {
        let drift = Drift {
            contributors: vec![
                DriftContributor {
                    layer_index: 3,
                    module: "a".into(),
                    isolated_rel_to_range: 2e-5,
                },
                DriftContributor {
                    layer_index: 7,
                    module: String::new(),
                    isolated_rel_to_range: 1e-5,
                },
            ],
        };
        assert_eq!(
            Headline::Drift(&drift).render(&Tagged),
            "*accumulated drift:* no layer fails in isolation, many small differences add up; \
             largest isolated error, of range: #3:<a> 2.00e-5, #7:<(top level)> 1.00e-5"
        );
        assert_eq!(
            Headline::Drift(&Drift {
                contributors: vec![]
            })
            .render(&Plain),
            "accumulated drift: no layer fails in isolation, many small differences add up"
        );
    }

    #[test]
    fn the_cause_is_worded_from_its_values() {
        let d = divergence(None);
        assert_eq!(
            d.cause.unwrap().sentence(),
            "float16 overflow at blocks.12.fc: max |reference| 8.94e4 exceeds 65504"
        );
    }

    #[test]
    fn a_shared_producer_says_in_words_why_it_was_not_compared() {
        let mut s = SharedProducer {
            torch_value: "v5".into(),
            torch_op: "aten::mul".into(),
            module: "norm".into(),
            reason: Some(crate::pairing::UnpairedReason::NoCompatibleOnnxOp {
                scope: "norm".into(),
            }),
            origins: vec![3, 4],
        };
        assert_eq!(
            shared_producer_clause(&s, &Tagged),
            "; the suspect is what 2 of them read that was not compared: <norm> (aten::mul), \
             not compared: no ONNX op of a compatible kind and shape in scope 'norm'"
        );
        s.reason = None;
        assert_eq!(
            shared_producer_clause(&s, &Tagged),
            "; the suspect is what 2 of them read that was not compared: <norm> (aten::mul)"
        );
    }
}
