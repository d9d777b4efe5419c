//! The gates a run is held to, each judged once into the `Outcome` as a `Gate` (name, passed,
//! and what it found, as values: `gate`): every paired layer within tolerance, every output within tolerance,
//! enough of the TorchScript layers compared (`--min-coverage`), and, with `--baseline`, no
//! error grown past `--max-growth`. The verdict fails when any gate fails; the reports read
//! the gates and never judge again, so a terminal, a JUnit file and a JSON report of one run
//! cannot disagree on why it failed.

use crate::outcome::baseline::BaselineReport;
use crate::outcome::gate::{Gate, GateFinding, GateName, Grown};
use crate::outcome::{Drift, LayerResult, Outcome};

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
    Gate {
        name: GateName::Layers,
        passed: failing == 0,
        finding: GateFinding::Layers {
            total: layers.len(),
            failing,
            unconfirmed: layers.iter().filter(|l| l.unconfirmed).count(),
            from_the_start: failing > 0 && differs_from_the_start(layers, failing),
            drift: drift.cloned(),
        },
    }
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
    let failing: Vec<String> = outcome
        .outputs
        .iter()
        .filter(|o| !o.passes())
        .map(|o| o.name.clone())
        .collect();
    // Said once: on the layers' gate when layers fail too.
    let drift = outcome
        .accumulated_drift
        .clone()
        .filter(|_| outcome.layers.iter().all(|l| !l.fails()));
    Gate {
        name: GateName::Outputs,
        passed: failing.is_empty(),
        finding: GateFinding::Outputs {
            total: outcome.outputs.len(),
            failing,
            drift,
        },
    }
}

fn coverage_gate(outcome: &Outcome) -> Gate {
    let c = &outcome.coverage;
    let (passed, ratio) = coverage_judged(
        outcome.layers.len(),
        c.counts.torch_layers_total,
        c.torch_ratio,
        c.min_coverage,
    );
    Gate {
        name: GateName::Coverage,
        passed,
        finding: GateFinding::Coverage {
            ratio,
            min: c.min_coverage,
            reference: outcome.reference.name(),
        },
    }
}

/// (passed, the share the gate reports) of `total` reference layers counted `ratio` covered,
/// `compared` of them compared. Layers counted as covered while not one was compared (each
/// accounted for by a reason, say over a dataflow the capture recorded wrongly) are no
/// coverage: a share of 0, which only `--min-coverage 0` accepts.
fn coverage_judged(compared: usize, total: usize, ratio: f64, min: f64) -> (bool, f64) {
    if compared == 0 && total > 0 {
        return (min <= 0.0, 0.0);
    }
    (ratio >= min, ratio)
}

/// `--baseline`: fails where a layer's or an output's error grew more than the allowed factor.
pub fn baseline_gate(report: &BaselineReport) -> Gate {
    let grown: Vec<Grown> = report
        .exceeded()
        .map(|g| Grown {
            name: g.name.clone(),
            growth: g.growth,
        })
        .collect();
    Gate {
        name: GateName::Baseline,
        passed: grown.is_empty(),
        finding: GateFinding::Baseline {
            max_growth: report.max_growth,
            grown,
            largest: report.changes.iter().map(|g| g.growth).reduce(f64::max),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::coverage_judged;

    #[test]
    fn coverage_without_a_single_compared_layer_never_passes() {
        // 237 of 237 layers counted covered, none compared: an efficientnet .pt2 whose
        // captured dataflow was cut once read as a pass with 0 layers compared.
        assert_eq!(coverage_judged(0, 237, 1.0, 0.9), (false, 0.0));
        assert_eq!(
            coverage_judged(0, 237, 1.0, 0.0),
            (true, 0.0),
            "--min-coverage 0"
        );
        assert_eq!(coverage_judged(188, 237, 1.0, 0.9), (true, 1.0));
        assert_eq!(coverage_judged(10, 237, 0.5, 0.9), (false, 0.5));
        // A network of its outputs alone has no layer to compare.
        assert_eq!(coverage_judged(0, 0, 0.0, 0.9).1, 0.0);
    }
}
