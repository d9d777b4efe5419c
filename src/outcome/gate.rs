//! A gate's result as a value: which gate, whether it passed, and what it found in numbers
//! and names (`GateFinding`), never a finished sentence. The one sentence the JSON contract
//! carries as `detail` (and `gate_failures`) is written here from those values, once; the
//! human reports list the same sentence without the accumulated-drift clause their headline
//! already says (`Gate::line`), with no parsing of text back into parts.

use crate::compare::judged::Drift;
use crate::text::{fmt_num, growth, module_label};
use serde::ser::{Serialize, SerializeStruct, Serializer};

/// The checks a run must pass; the verdict fails when any of them does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateName {
    /// Every paired layer within its tolerance (unconfirmed pairs are not gated).
    Layers,
    /// Every graph output within its tolerance.
    Outputs,
    /// At least `--min-coverage` of the TorchScript layers compared.
    Coverage,
    /// No error grew more than `--max-growth` times since `--baseline` (only with one).
    Baseline,
    /// The production session (`--production`) differs from PyTorch only where the
    /// unoptimised run does (not with `--production off`; `--no-production-gate` passes it).
    Production,
}

impl GateName {
    pub fn as_str(self) -> &'static str {
        match self {
            GateName::Layers => "layers",
            GateName::Outputs => "outputs",
            GateName::Coverage => "coverage",
            GateName::Baseline => "baseline",
            GateName::Production => "production",
        }
    }
}

/// What one gate found, as data.
#[derive(Debug, Clone)]
pub enum GateFinding {
    Layers {
        total: usize,
        /// Layers counting against the gate (`LayerResult::fails`).
        failing: usize,
        /// Doubtful pairs beyond tolerance, reported but not gated.
        unconfirmed: usize,
        /// The first compared layer is already far off and nearly every layer fails: two
        /// checkpoints rather than one wrong op (`verdict::differs_from_the_start`).
        from_the_start: bool,
        /// Accumulated drift the failure is explained by, when no layer fails in isolation.
        drift: Option<Drift>,
    },
    Outputs {
        total: usize,
        /// Names of the outputs beyond their tolerance.
        failing: Vec<String>,
        /// Accumulated drift, said here only when no layer fails (else on the layers gate).
        drift: Option<Drift>,
    },
    Coverage {
        /// Share of the reference's layers compared, and the `--min-coverage` it was held to.
        ratio: f64,
        min: f64,
        /// The reference's name (`TorchScript`, `ExportedProgram`), for the sentence.
        reference: &'static str,
    },
    Baseline {
        max_growth: f64,
        /// Layers and outputs whose error grew past `max_growth`, in report order.
        grown: Vec<Grown>,
        /// The largest growth of any layer or output with a counterpart in the baseline.
        largest: Option<f64>,
    },
    /// The production session's line (`production::report::ProductionReport::line`), which
    /// its report words from its own values.
    Production { line: String },
}

/// One layer or output whose error grew past the baseline's limit.
#[derive(Debug, Clone)]
pub struct Grown {
    pub name: String,
    pub growth: f64,
}

/// One gate's result, computed once (`crate::outcome::verdict`) and read by every report.
/// Serialised as the JSON contract has it: `name`, `passed` and the `detail` sentence.
#[derive(Debug, Clone)]
pub struct Gate {
    pub name: GateName,
    pub passed: bool,
    pub finding: GateFinding,
}

impl Gate {
    /// One line: why it failed, or what it found when it passed (the JSON's `detail`).
    pub fn detail(&self) -> String {
        self.sentence(true)
    }

    /// The detail as the human reports list it: without the accumulated-drift clause,
    /// since their headline says it in full (with the contributors).
    pub fn line(&self) -> String {
        self.sentence(false)
    }

    fn sentence(&self, with_drift: bool) -> String {
        match &self.finding {
            GateFinding::Layers {
                total,
                failing,
                unconfirmed,
                from_the_start,
                drift,
            } => layers_sentence(
                *total,
                *failing,
                *unconfirmed,
                *from_the_start,
                drift,
                with_drift,
            ),
            GateFinding::Outputs {
                total,
                failing,
                drift,
            } => {
                if failing.is_empty() {
                    return format!("{total} output(s) within their tolerance");
                }
                let mut sentence =
                    format!("output(s) {} exceed their tolerance", failing.join(", "));
                if let (Some(drift), true) = (drift, with_drift) {
                    sentence.push_str(&drift_clause(drift));
                }
                sentence
            }
            GateFinding::Coverage {
                ratio,
                min,
                reference,
            } if *ratio == 0.0 => format!(
                "no {reference} layer computed from the inputs was compared \
                 (--min-coverage {:.1}%): only the outputs were",
                min * 100.0
            ),
            GateFinding::Coverage {
                ratio,
                min,
                reference,
            } => format!(
                "{}{:.1}% of {reference} layers were compared (--min-coverage {:.1}%)",
                if self.passed { "" } else { "only " },
                ratio * 100.0,
                min * 100.0
            ),
            GateFinding::Baseline {
                max_growth,
                grown,
                largest,
            } => baseline_sentence(*max_growth, grown, *largest),
            GateFinding::Production { line } => line.clone(),
        }
    }
}

fn layers_sentence(
    total: usize,
    failing: usize,
    unconfirmed: usize,
    from_the_start: bool,
    drift: &Option<Drift>,
    with_drift: bool,
) -> String {
    if failing == 0 {
        let mut sentence = format!("{} layers within their tolerance", total - unconfirmed);
        if unconfirmed > 0 {
            sentence.push_str(&format!(
                "; {unconfirmed} unconfirmed (a doubtful pair, not gated)"
            ));
        }
        return sentence;
    }
    let mut sentence = format!("{failing} of {total} layers exceed their tolerance");
    if from_the_start {
        sentence.push_str(
            ", from the very first one on: the weights differ from the start; were both \
             files exported from the same checkpoint?",
        );
    } else if let (Some(drift), true) = (drift, with_drift) {
        sentence.push_str(&drift_clause(drift));
    }
    sentence
}

/// What an accumulated-drift verdict adds to the failing gate's sentence.
fn drift_clause(drift: &Drift) -> String {
    let named: Vec<String> = drift
        .contributors
        .iter()
        .map(|c| {
            format!(
                "{} ({})",
                module_label(&c.module),
                fmt_num(c.isolated_rel_to_range)
            )
        })
        .collect();
    let mut sentence =
        "; none fails in isolation: accumulated drift, many small differences adding up"
            .to_string();
    if !named.is_empty() {
        sentence.push_str(&format!(
            " (largest isolated error, of range: {})",
            named.join(", ")
        ));
    }
    sentence
}

fn baseline_sentence(max_growth: f64, grown: &[Grown], largest: Option<f64>) -> String {
    if !grown.is_empty() {
        let named: Vec<String> = grown
            .iter()
            .map(|g| format!("{} ({}x)", module_label(&g.name), growth(g.growth)))
            .collect();
        return format!(
            "error grew more than {max_growth}x since the baseline at: {}",
            named.join(", ")
        );
    }
    match largest {
        Some(largest) => format!(
            "no error grew more than {max_growth}x since the baseline (largest {}x)",
            growth(largest)
        ),
        None => "no layer or output has a counterpart in the baseline".to_string(),
    }
}

impl Serialize for Gate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Gate", 3)?;
        s.serialize_field("name", &self.name)?;
        s.serialize_field("passed", &self.passed)?;
        s.serialize_field("detail", &self.detail())?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::judged::DriftContributor;

    fn drift() -> Drift {
        Drift {
            contributors: vec![DriftContributor {
                layer_index: 3,
                module: String::new(),
                isolated_rel_to_range: 2e-5,
            }],
        }
    }

    #[test]
    fn the_drift_clause_is_in_the_detail_and_not_in_the_line() {
        let gate = Gate {
            name: GateName::Outputs,
            passed: false,
            finding: GateFinding::Outputs {
                total: 2,
                failing: vec!["y".into()],
                drift: Some(drift()),
            },
        };
        assert_eq!(gate.line(), "output(s) y exceed their tolerance");
        assert_eq!(
            gate.detail(),
            "output(s) y exceed their tolerance; none fails in isolation: accumulated drift, \
             many small differences adding up (largest isolated error, of range: (top level) \
             (2.00e-5))"
        );
        let json = serde_json::to_value(&gate).unwrap();
        assert_eq!(json["detail"], gate.detail());
        assert_eq!(json["name"], "outputs");
        assert_eq!(json["passed"], false);
    }

    #[test]
    fn coverage_says_only_when_it_fails() {
        let gate = |passed| Gate {
            name: GateName::Coverage,
            passed,
            finding: GateFinding::Coverage {
                ratio: 0.5,
                min: 0.9,
                reference: "TorchScript",
            },
        };
        assert_eq!(
            gate(false).detail(),
            "only 50.0% of TorchScript layers were compared (--min-coverage 90.0%)"
        );
        assert!(gate(true).detail().starts_with("50.0% of"));
    }
}
