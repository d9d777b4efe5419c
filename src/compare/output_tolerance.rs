//! The outputs' own tolerance: what the user's application sees, judged in the user's terms
//! rather than by the per-layer rule that looks for where an export goes wrong.
//!
//! A layer is gated by the error it introduces (its isolated error, see `compare::isolation`);
//! the error a deep network accumulates from float32 rounding in a different order is not an
//! export bug, and it grows with depth and with the network's conditioning (a softmax over
//! large logits, a DFL head, a 32-block ConvMixer). The outputs therefore get a looser
//! default, `--output-atol`/`--output-rtol` to replace it, and `--output-rel-to-range` to judge
//! an output by its error relative to range alone. The same bound decides a failing layer whose
//! error could not be isolated and that sits below other failing layers
//! (`within_accumulated_bound`):
//! what rounding may accumulate at the outputs, it may accumulate there.

use serde::Serialize;

use crate::capture::tensor::DType;
use crate::compare::bound::Tolerance;
use crate::compare::stats::ErrorStats;
use crate::compare::tolerance_rule::ToleranceRule;

/// Default output tolerance per element type: 10x the per-layer float tolerances, calibrated
/// on clean deep networks with trained-like activations (README, "Tolerances"). Integer and
/// bool outputs stay exact: an index or a mask that changed is a different answer.
const DEFAULT_OUTPUT_TOLERANCES: [(DType, Tolerance); 4] = [
    (
        DType::F32,
        Tolerance {
            atol: 1e-4,
            rtol: 1e-3,
        },
    ),
    (
        DType::F64,
        Tolerance {
            atol: 1e-4,
            rtol: 1e-3,
        },
    ),
    (
        DType::F16,
        Tolerance {
            atol: 3e-2,
            rtol: 3e-2,
        },
    ),
    (
        DType::Bf16,
        Tolerance {
            atol: 1e-1,
            rtol: 1e-1,
        },
    ),
];

/// The output rule of one run, resolved from the command line and the config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OutputTolerance {
    /// `--output-atol`: replaces the default absolute part for every output.
    pub atol: Option<f64>,
    /// `--output-rtol`: replaces the default relative part for every output.
    pub rtol: Option<f64>,
    /// `--output-rel-to-range R`: an output passes when `max|onnx - torch| <= R * max|torch|`
    /// (and NaN/Inf agree), whatever its elements do one by one.
    pub rel_to_range: Option<f64>,
}

impl OutputTolerance {
    /// Checks the numbers as `TolerancePolicy::new` checks the per-layer ones.
    pub fn validated(self) -> Result<Self, String> {
        for (name, value) in [
            ("--output-atol", self.atol),
            ("--output-rtol", self.rtol),
            ("--output-rel-to-range", self.rel_to_range),
        ] {
            if let Some(v) = value {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(format!("{name} must be a finite number >= 0, got {v}"));
                }
            }
        }
        Ok(self)
    }

    /// The element tolerance outputs of `dtype` are held to.
    pub fn for_dtype(&self, dtype: DType) -> Tolerance {
        let default = default_for(dtype);
        Tolerance {
            atol: self.atol.unwrap_or(default.atol),
            rtol: self.rtol.unwrap_or(default.rtol),
        }
    }

    /// Applies `--output-rel-to-range` to an output's statistics, computed under `for_dtype`.
    pub fn judge(&self, stats: &mut ErrorStats) {
        if let Some(limit) = self.rel_to_range {
            stats.pass = stats.nonfinite_mismatch == 0 && stats.rel_to_range <= limit;
        }
    }

    /// Whether a layer of `dtype` whose own contribution could not be isolated carries no more
    /// error from upstream than the outputs may: its largest error within the output rule's
    /// absolute part (scaled as every bound is, by `max(1, max|ref|)`), or within
    /// `--output-rel-to-range` of its range when that is the rule.
    pub fn within_accumulated_bound(&self, stats: &ErrorStats, dtype: DType) -> bool {
        match self.rel_to_range {
            Some(limit) => stats.rel_to_range <= limit,
            None => {
                let bound = self.for_dtype(dtype).bound_for(stats.ref_max_abs);
                stats.nonfinite_mismatch == 0 && stats.max_abs <= bound.atol_scaled
            }
        }
    }

    /// Every output rule in force, for reports.
    pub fn describe(&self) -> Vec<(ToleranceRule, Tolerance)> {
        let mut rules: Vec<(ToleranceRule, Tolerance)> = DEFAULT_OUTPUT_TOLERANCES
            .iter()
            .map(|(dtype, _)| (ToleranceRule::Outputs(*dtype), self.for_dtype(*dtype)))
            .collect();
        if let Some(r) = self.rel_to_range {
            rules.push((
                ToleranceRule::OutputsRelativeToRange,
                Tolerance { atol: r, rtol: 0.0 },
            ));
        }
        rules
    }
}

/// The default output tolerance of `dtype`; exact for integers and bool.
pub fn default_for(dtype: DType) -> Tolerance {
    DEFAULT_OUTPUT_TOLERANCES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map(|(_, tol)| *tol)
        .unwrap_or(Tolerance::EXACT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::HostTensor;
    use crate::compare::stats::compare;

    #[test]
    fn outputs_are_looser_than_layers_for_floats_and_exact_for_integers() {
        for dtype in DType::ALL {
            let layer = Tolerance::default_for(dtype);
            let output = default_for(dtype);
            if dtype.is_float() {
                assert!(
                    output.atol > layer.atol && output.rtol > layer.rtol,
                    "{dtype:?}"
                );
            } else {
                assert_eq!(output, Tolerance::EXACT, "{dtype:?}");
            }
        }
    }

    #[test]
    fn cli_values_replace_each_field_and_bad_ones_are_refused() {
        let o = OutputTolerance {
            atol: Some(1e-3),
            ..Default::default()
        };
        assert_eq!(o.for_dtype(DType::F32).atol, 1e-3);
        assert_eq!(o.for_dtype(DType::F32).rtol, default_for(DType::F32).rtol);
        let bad = OutputTolerance {
            rtol: Some(-1.0),
            ..Default::default()
        };
        assert!(bad.validated().unwrap_err().contains("--output-rtol"));
    }

    #[test]
    fn relative_to_range_judges_the_tensor_as_a_whole() {
        // One element off by 5e-3 of range; per element it fails a tight rule.
        let r = HostTensor::f32(vec![3], vec![100.0, 0.0, 1.0]);
        let t = HostTensor::f32(vec![3], vec![100.0, 0.5, 1.0]);
        let mut s = compare(
            &r,
            &t,
            Tolerance {
                atol: 1e-5,
                rtol: 0.0,
            },
        )
        .unwrap();
        assert!(!s.pass);
        let rule = OutputTolerance {
            rel_to_range: Some(1e-2),
            ..Default::default()
        };
        rule.judge(&mut s);
        assert!(s.pass);
        let tight = OutputTolerance {
            rel_to_range: Some(1e-3),
            ..Default::default()
        };
        tight.judge(&mut s);
        assert!(!s.pass);
        // 0.5 at a range of 100: beyond 1e-3 of range and beyond the default absolute part
        // (1e-4 * 100), within an absolute part of 1e-2 * 100.
        assert!(!tight.within_accumulated_bound(&s, DType::F32));
        assert!(!OutputTolerance::default().within_accumulated_bound(&s, DType::F32));
        let loose = OutputTolerance {
            atol: Some(1e-2),
            ..Default::default()
        };
        assert!(loose.within_accumulated_bound(&s, DType::F32));
    }
}
