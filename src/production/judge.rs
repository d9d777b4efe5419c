//! The production session's outputs judged against a sample's references, by the outputs'
//! own tolerance (`compare::output_tolerance`): each output against PyTorch and against the
//! unoptimised session, worst over the samples, and the status that decides the gate.

use super::references::{ReferenceOutput, ReferenceSample};
use super::report::{Difference, ProductionOutput, ProductionStatus};
use crate::capture::tensor::HostTensor;
use crate::compare::stats::{compare, ErrorStats};
use crate::compare::tolerance::TolerancePolicy;
use anyhow::{anyhow, Result};

/// `test` against `reference` under the outputs' rule for `precision`.
fn output_stats(
    reference: &HostTensor,
    test: &HostTensor,
    r: &ReferenceOutput,
    policy: &TolerancePolicy,
) -> Result<ErrorStats> {
    // Shapes that differ only by unit dims hold the same elements in the same order, as
    // pairing accepts them.
    let reshaped;
    let test = if test.shape != reference.shape && test.numel() == reference.numel() {
        reshaped = HostTensor::new(reference.shape.clone(), test.data.clone());
        &reshaped
    } else {
        test
    };
    let mut stats = compare(reference, test, policy.for_output(r.precision))
        .map_err(|e| anyhow!("production output `{}`: {e}", r.name))?;
    policy.outputs.judge(&mut stats);
    if let Some(rule) = &policy.quantized {
        rule.judge_output(&mut stats);
    }
    Ok(stats)
}

fn difference(s: &ErrorStats) -> Difference {
    Difference {
        max_abs: s.max_abs,
        rel_to_range: s.rel_to_range,
        pass: s.pass,
        nonfinite_mismatch: s.nonfinite_mismatch,
    }
}

/// Picks the production value of each reference output out of a run's outputs.
fn value<'a>(produced: &'a [(String, HostTensor)], name: &str) -> Result<&'a HostTensor> {
    produced
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .ok_or_else(|| anyhow!("the production session returned no output `{name}`"))
}

/// One output of one sample: the production session against PyTorch and against the
/// unoptimised session, and the unoptimised session against PyTorch.
#[derive(Debug, Clone, Copy)]
pub struct Judged {
    pub vs_torch: Difference,
    pub vs_unoptimised: Difference,
    pub unoptimised: Difference,
}

/// How much larger than the unoptimised session's own error against PyTorch the production
/// session's must be before it is the production session's doing: each session rounds in its
/// own order, so two independent roundings of the same size can add up to twice either.
const DRIFT_FACTOR: f64 = 2.0;

/// One sample's outputs, judged.
pub fn judge_sample(
    sample: &ReferenceSample,
    produced: &[(String, HostTensor)],
    policy: &TolerancePolicy,
) -> Result<Vec<Judged>> {
    sample
        .outputs
        .iter()
        .map(|r| {
            let test = value(produced, &r.name)?;
            let vs_torch = output_stats(&r.torch, test, r, policy)?;
            let vs_unoptimised = output_stats(&r.unoptimised, test, r, policy)?;
            let unoptimised = output_stats(&r.torch, &r.unoptimised, r, policy)?;
            Ok(Judged {
                vs_torch: difference(&vs_torch),
                vs_unoptimised: difference(&vs_unoptimised),
                unoptimised: difference(&unoptimised),
            })
        })
        .collect()
}

/// Whether some output fails against PyTorch in the production session while the
/// unoptimised session's passes, the production session is beyond the outputs' tolerance of
/// the unoptimised one too, and its error is more than `DRIFT_FACTOR` times the unoptimised
/// session's own: the question every bisection step asks.
///
/// Two float32 implementations of one graph each round in their own order: on a deep
/// network the unoptimised run may sit just inside the tolerance and the optimised kernels
/// (NCHWc convolutions summing in another order) just outside it, at another element, while
/// the two sessions are within the tolerance of each other. That is rounding, not a pass that
/// changed the computation, and it must not fail a build. The two sessions may also land on
/// opposite sides of PyTorch at one element, each within the tolerance of PyTorch and the
/// pair beyond it of each other; the production session's error is then no larger than the
/// two roundings together. A pass that does change the computation (an approximated GELU, a
/// fused Pad that changes the padding) moves the outputs beyond the tolerance of the
/// unoptimised run and well beyond its error.
pub fn production_only(judged: &[Judged]) -> bool {
    judged.iter().any(|j| {
        // Written as a comparison that holds, so that a NaN error counts as beyond it.
        let within_drift = j.vs_torch.max_abs <= DRIFT_FACTOR * j.unoptimised.max_abs;
        !j.vs_torch.pass && !j.vs_unoptimised.pass && j.unoptimised.pass && !within_drift
    })
}

/// Folds the samples' judgements into one per output (the worst sample for each), and the
/// status of the whole: `(outputs, status, index of the sample that shows it most)`.
pub fn fold(
    names: &[String],
    per_sample: &[Vec<Judged>],
) -> (Vec<ProductionOutput>, ProductionStatus, usize) {
    let mut outputs: Vec<ProductionOutput> = names
        .iter()
        .map(|name| ProductionOutput {
            name: name.clone(),
            vs_torch: Difference {
                max_abs: 0.0,
                rel_to_range: 0.0,
                pass: true,
                nonfinite_mismatch: 0,
            },
            vs_unoptimised: Difference {
                max_abs: 0.0,
                rel_to_range: 0.0,
                pass: true,
                nonfinite_mismatch: 0,
            },
            unoptimised_passes: true,
        })
        .collect();
    // A failing sample is worse than any passing one; then the larger error (NaN largest).
    let worse = |a: &Difference, b: &Difference| match (a.pass, b.pass) {
        (true, false) => true,
        (false, true) => false,
        _ => b.rel_to_range.is_nan() || b.rel_to_range > a.rel_to_range,
    };
    let mut telling = (0, f64::NEG_INFINITY, false);
    for (s, judged) in per_sample.iter().enumerate() {
        for (o, j) in outputs.iter_mut().zip(judged) {
            if worse(&o.vs_torch, &j.vs_torch) {
                o.vs_torch = j.vs_torch;
            }
            if worse(&o.vs_unoptimised, &j.vs_unoptimised) {
                o.vs_unoptimised = j.vs_unoptimised;
            }
            o.unoptimised_passes &= j.unoptimised.pass;
        }
        let only = production_only(judged);
        let size = judged
            .iter()
            .map(|j| j.vs_torch.rel_to_range)
            .fold(0.0, f64::max);
        if (only, size) > (telling.2, telling.1) || s == 0 {
            telling = (s, size, only);
        }
    }
    let status = if per_sample.iter().any(|j| production_only(j)) {
        ProductionStatus::ProductionOnly
    } else if outputs.iter().all(|o| o.vs_torch.pass) {
        ProductionStatus::Agrees
    } else if outputs
        .iter()
        .all(|o| o.vs_torch.pass || o.unoptimised_passes)
    {
        // Beyond tolerance only against PyTorch, within it of an unoptimised run that
        // passes: the two sessions' rounding added up (see `production_only`).
        ProductionStatus::Rounding
    } else {
        ProductionStatus::DiffersAsUnoptimised
    };
    (outputs, status, telling.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::{DType, TensorData};
    use crate::compare::output_tolerance::OutputTolerance;

    fn policy() -> TolerancePolicy {
        TolerancePolicy::new(None, None, Vec::new())
            .and_then(|p| p.with_output_rule(OutputTolerance::default(), false))
            .unwrap()
    }

    fn sample(torch: &[f32], unoptimised: &[f32]) -> ReferenceSample {
        let t = |v: &[f32]| HostTensor::new(vec![v.len()], TensorData::F32(v.to_vec()));
        ReferenceSample {
            inputs: Vec::new(),
            outputs: vec![ReferenceOutput {
                name: "y".into(),
                torch: t(torch),
                unoptimised: t(unoptimised),
                precision: DType::F32,
            }],
        }
    }

    fn produced(v: &[f32]) -> Vec<(String, HostTensor)> {
        vec![(
            "y".into(),
            HostTensor::new(vec![v.len()], TensorData::F32(v.to_vec())),
        )]
    }

    #[test]
    fn a_difference_only_production_shows_is_production_only() {
        let s = sample(&[0.1, -0.02], &[0.1, -0.02]);
        // 5e-4 off at a small value: beyond atol 1e-4 + rtol 1e-3 * 0.02.
        let j = judge_sample(&s, &produced(&[0.1, -0.0205]), &policy()).unwrap();
        assert!(production_only(&j));
        let (outputs, status, _) = fold(&["y".into()], &[j]);
        assert_eq!(status, ProductionStatus::ProductionOnly);
        assert!(!outputs[0].vs_torch.pass && !outputs[0].vs_unoptimised.pass);
        assert!((outputs[0].vs_torch.max_abs - 5e-4).abs() < 1e-6);
    }

    #[test]
    fn rounding_agrees_and_a_shared_difference_is_not_production_only() {
        let s = sample(&[0.1, -0.02], &[0.1, -0.02]);
        let j = judge_sample(&s, &produced(&[0.100_000_01, -0.02]), &policy()).unwrap();
        assert_eq!(fold(&["y".into()], &[j]).1, ProductionStatus::Agrees);
        let s = sample(&[0.1, -0.02], &[0.2, -0.02]);
        let j = judge_sample(&s, &produced(&[0.2, -0.02]), &policy()).unwrap();
        assert!(!production_only(&j));
        assert_eq!(
            fold(&["y".into()], &[j]).1,
            ProductionStatus::DiffersAsUnoptimised
        );
    }

    #[test]
    fn two_roundings_that_add_up_beyond_tolerance_are_not_production_only() {
        // At PyTorch's 0.02 the bound is atol 1e-4 * 1 (the range) + rtol 1e-3 * 0.02 =
        // 1.2e-4: the unoptimised run is 1.1e-4 off, production 2e-5 further, 1.3e-4 off.
        let s = sample(&[1.0, 0.02], &[1.0, 0.020_11]);
        let j = judge_sample(&s, &produced(&[1.0, 0.020_13]), &policy()).unwrap();
        let Judged {
            vs_torch,
            vs_unoptimised,
            unoptimised,
        } = j[0];
        assert!(!vs_torch.pass && unoptimised.pass, "{j:?}");
        assert!(vs_unoptimised.pass, "{j:?}");
        assert!(!production_only(&j));
        assert_eq!(fold(&["y".into()], &[j]).1, ProductionStatus::Rounding);
        // Opposite sides of PyTorch: the unoptimised run 1.1e-4 above, production 1.3e-4
        // below, 2.4e-4 apart (beyond the bound of each other), no more than twice the
        // unoptimised run's own error from PyTorch.
        let s = sample(&[1.0, 0.02], &[1.0, 0.020_11]);
        let j = judge_sample(&s, &produced(&[1.0, 0.019_87]), &policy()).unwrap();
        assert!(!j[0].vs_torch.pass && !j[0].vs_unoptimised.pass, "{j:?}");
        assert!(!production_only(&j));
        assert_eq!(fold(&["y".into()], &[j]).1, ProductionStatus::Rounding);
    }

    #[test]
    fn the_worst_sample_is_kept_and_a_missing_output_is_an_error() {
        let good = sample(&[1.0], &[1.0]);
        let a = judge_sample(&good, &produced(&[1.0]), &policy()).unwrap();
        let b = judge_sample(&good, &produced(&[1.5]), &policy()).unwrap();
        let (outputs, status, telling) = fold(&["y".into()], &[a, b]);
        assert_eq!((status, telling), (ProductionStatus::ProductionOnly, 1));
        assert!((outputs[0].vs_torch.max_abs - 0.5).abs() < 1e-9);
        let e = judge_sample(&good, &[], &policy()).unwrap_err().to_string();
        assert!(e.contains("no output `y`"), "{e}");
    }
}
