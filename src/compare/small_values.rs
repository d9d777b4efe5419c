//! Layers whose values are too small for the absolute tolerance to mean anything.
//!
//! The element bound `atol * max(1, max|ref|) + rtol * |r|` never falls below `atol`, so a
//! tensor whose every value lies below `atol` (a dead branch of a random network, a
//! near-zero attention bias) passes whatever it holds: ONNX can be off by 10% of its range
//! there and nothing fails. Such a pass is shown, never hidden: every report lists it as a
//! warning, and `--strict-small` gates it (the pair then fails, in isolation too, so it is
//! judged like any other failure).

use serde::Serialize;

use crate::compare::stats::ErrorStats;
use crate::compare::tolerance::Tolerance;

/// The error relative to range above which a tiny-valued pass is suspicious: ten times the
/// relative tolerance, and never below 1e-3 (float32 rounding stays near 1e-6 of range).
fn suspicious_rel_to_range(tol: Tolerance) -> f64 {
    (10.0 * tol.rtol).max(1e-3)
}

/// Whether `stats` passed only because its values lie below the absolute tolerance while
/// the error is large against their range.
pub fn passes_only_by_atol(stats: &ErrorStats) -> bool {
    stats.pass
        && stats.tol.atol > 0.0
        && stats.ref_max_abs < stats.tol.atol
        && stats.max_abs > 0.0
        && stats.rel_to_range > suspicious_rel_to_range(stats.tol)
}

/// Under `--strict-small`, fails a pair that passes only by the absolute tolerance.
pub fn apply_strict(stats: &mut ErrorStats, strict: bool) {
    if strict && passes_only_by_atol(stats) {
        stats.pass = false;
    }
}

/// One warned layer, as every report lists it: "blocks.3.attn differs by 10% of its range,
/// but its values are below 2e-9".
#[derive(Debug, Clone, Serialize)]
pub struct SmallValues {
    pub layer_index: usize,
    pub module: String,
    pub onnx_node: String,
    #[serde(serialize_with = "crate::compare::stats::finite_or_null")]
    pub rel_to_range: f64,
    /// The largest |value| of the reference.
    pub max_value: f64,
    /// The absolute tolerance its values lie below.
    pub atol: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::HostTensor;
    use crate::compare::stats::compare;

    fn stats(r: Vec<f32>, t: Vec<f32>) -> ErrorStats {
        let n = r.len();
        compare(
            &HostTensor::f32(vec![n], r),
            &HostTensor::f32(vec![n], t),
            Tolerance {
                atol: 1e-5,
                rtol: 1e-4,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_ten_percent_error_on_tiny_values_is_flagged_and_strict_fails_it() {
        let mut s = stats(vec![2e-9, -1e-9], vec![2.2e-9, -1e-9]);
        assert!(s.pass, "below atol, the bound cannot fail it");
        assert!(passes_only_by_atol(&s));
        apply_strict(&mut s, false);
        assert!(s.pass);
        apply_strict(&mut s, true);
        assert!(!s.pass);
    }

    #[test]
    fn rounding_on_tiny_values_and_errors_on_normal_values_are_not_flagged() {
        // Rounding-sized error relative to range.
        let s = stats(vec![2e-9, 1e-9], vec![2.000001e-9, 1e-9]);
        assert!(!passes_only_by_atol(&s));
        // Values above atol: the bound is meaningful.
        let s = stats(vec![2.0, 1.0], vec![2.00001, 1.0]);
        assert!(!passes_only_by_atol(&s));
        // Identical zeros.
        let s = stats(vec![0.0, 0.0], vec![0.0, 0.0]);
        assert!(!passes_only_by_atol(&s));
    }
}
