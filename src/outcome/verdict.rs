//! The gates a run is held to, each judged once into the `Outcome` as a `Gate` (name, passed,
//! one line saying why): every paired layer within tolerance, every output within tolerance,
//! enough of the TorchScript layers compared (`--min-coverage`), and, with `--baseline`, no
//! error grown past `--max-growth`. The verdict fails when any gate fails; the reports read
//! the gates and never judge again, so a terminal, a JUnit file and a JSON report of one run
//! cannot disagree on why it failed.

use crate::outcome::baseline::BaselineReport;
use crate::outcome::{Drift, Gate, GateName, LayerResult, Outcome};
use crate::report::format::{fmt_num, growth, module_label};

/// The gates every run has, judged on its layers, outputs and coverage.
pub fn gates(outcome: &Outcome) -> Vec<Gate> {
    vec![
        layers_gate(&outcome.layers, outcome.accumulated_drift.as_ref()),
        outputs_gate(outcome),
        coverage_gate(outcome),
    ]
}

fn layers_gate(layers: &[LayerResult], drift: Option<&Drift>) -> Gate {
    let failing = layers.iter().filter(|l| l.fails()).count();
    let detail = if failing > 0 {
        let mut sentence = format!(
            "{failing} of {} layers exceed their tolerance",
            layers.len()
        );
        if differs_from_the_start(layers, failing) {
            sentence.push_str(
                ", from the very first one on: the weights differ from the start; were both \
                 files exported from the same checkpoint?",
            );
        } else if let Some(drift) = drift {
            sentence.push_str(&drift_sentence(drift));
        }
        sentence
    } else {
        let unconfirmed = layers.iter().filter(|l| l.unconfirmed).count();
        let mut sentence = format!(
            "{} layers within their tolerance",
            layers.len() - unconfirmed
        );
        if unconfirmed > 0 {
            sentence.push_str(&format!(
                "; {unconfirmed} unconfirmed (a doubtful pair, not gated)"
            ));
        }
        sentence
    };
    Gate {
        name: GateName::Layers,
        passed: failing == 0,
        detail,
    }
}

/// What an accumulated-drift verdict adds to the failing gate's line.
pub fn drift_sentence(drift: &Drift) -> String {
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

/// The signature of two files from different checkpoints: the first compared layer is
/// already off by a large part of its range (other weights, not a rounding or an epsilon),
/// and (nearly) every layer after it fails too. A single wrong op starts later, leaves most
/// layers passing, or is off by less where it starts (a LayerNorm epsilon: 7e-2 of range;
/// other random weights: above 1).
fn differs_from_the_start(layers: &[LayerResult], failing: usize) -> bool {
    const LARGE: f64 = 0.5;
    // Counted by the per-layer rule: below a first layer this far off, every layer carries
    // its error, and those that pass in isolation are not gated but still differ.
    let beyond = layers
        .iter()
        .filter(|l| !l.cmp.pass && !l.unconfirmed)
        .count();
    layers.len() >= 3
        && layers[0].fails()
        && layers[0].cmp.rel_to_range >= LARGE
        && failing > 0
        && beyond * 10 >= layers.len() * 9
}

fn outputs_gate(outcome: &Outcome) -> Gate {
    let failing: Vec<&str> = outcome
        .outputs
        .iter()
        .filter(|o| !o.cmp.pass)
        .map(|o| o.name.as_str())
        .collect();
    Gate {
        name: GateName::Outputs,
        passed: failing.is_empty(),
        detail: if failing.is_empty() {
            format!("{} output(s) within their tolerance", outcome.outputs.len())
        } else {
            let mut sentence = format!("output(s) {} exceed their tolerance", failing.join(", "));
            // Said once: on the layers' gate when layers fail too.
            if outcome.layers.iter().all(|l| !l.fails()) {
                if let Some(drift) = &outcome.accumulated_drift {
                    sentence.push_str(&drift_sentence(drift));
                }
            }
            sentence
        },
    }
}

fn coverage_gate(outcome: &Outcome) -> Gate {
    let c = &outcome.coverage;
    let passed = c.torch_ratio >= c.min_coverage;
    let detail = if passed {
        format!(
            "{:.1}% of TorchScript layers were compared (--min-coverage {:.1}%)",
            c.torch_ratio * 100.0,
            c.min_coverage * 100.0
        )
    } else {
        format!(
            "only {:.1}% of TorchScript layers were compared (--min-coverage {:.1}%)",
            c.torch_ratio * 100.0,
            c.min_coverage * 100.0
        )
    };
    Gate {
        name: GateName::Coverage,
        passed,
        detail,
    }
}

/// `--baseline`: fails where a layer's or an output's error grew more than the allowed factor.
pub fn baseline_gate(report: &BaselineReport) -> Gate {
    let grown: Vec<String> = report
        .exceeded()
        .map(|g| format!("{} ({}x)", module_label(&g.name), growth(g.growth)))
        .collect();
    let detail = if !grown.is_empty() {
        format!(
            "error grew more than {}x since the baseline at: {}",
            report.max_growth,
            grown.join(", ")
        )
    } else {
        match report.changes.iter().map(|g| g.growth).reduce(f64::max) {
            Some(largest) => format!(
                "no error grew more than {}x since the baseline (largest {}x)",
                report.max_growth,
                growth(largest)
            ),
            None => "no layer or output has a counterpart in the baseline".to_string(),
        }
    };
    Gate {
        name: GateName::Baseline,
        passed: grown.is_empty(),
        detail,
    }
}
