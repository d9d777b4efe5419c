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

/// One sample's outputs: (vs PyTorch, vs unoptimised, unoptimised passes) per output.
pub fn judge_sample(
    sample: &ReferenceSample,
    produced: &[(String, HostTensor)],
    policy: &TolerancePolicy,
) -> Result<Vec<(Difference, Difference, bool)>> {
    sample
        .outputs
        .iter()
        .map(|r| {
            let test = value(produced, &r.name)?;
            let vs_torch = output_stats(&r.torch, test, r, policy)?;
            let vs_unoptimised = output_stats(&r.unoptimised, test, r, policy)?;
            let unoptimised = output_stats(&r.torch, &r.unoptimised, r, policy)?;
            Ok((
                difference(&vs_torch),
                difference(&vs_unoptimised),
                unoptimised.pass,
            ))
        })
        .collect()
}

/// Whether some output fails against PyTorch in the production session while the
/// unoptimised session's passes: the question every bisection step asks.
pub fn production_only(judged: &[(Difference, Difference, bool)]) -> bool {
    judged
        .iter()
        .any(|(vs_torch, _, unoptimised_passes)| !vs_torch.pass && *unoptimised_passes)
}

/// Folds the samples' judgements into one per output (the worst sample for each), and the
/// status of the whole: `(outputs, status, index of the sample that shows it most)`.
pub fn fold(
    names: &[String],
    per_sample: &[Vec<(Difference, Difference, bool)>],
) -> (Vec<ProductionOutput>, ProductionStatus, usize) {
    let mut outputs: Vec<ProductionOutput> = names
        .iter()
        .map(|name| ProductionOutput {
            name: name.clone(),
            vs_torch: Difference {
                max_abs: 0.0,
                rel_to_range: 0.0,
                pass: true,
            },
            vs_unoptimised: Difference {
                max_abs: 0.0,
                rel_to_range: 0.0,
                pass: true,
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
        for (o, (vs_torch, vs_unopt, unopt_passes)) in outputs.iter_mut().zip(judged) {
            if worse(&o.vs_torch, vs_torch) {
                o.vs_torch = *vs_torch;
            }
            if worse(&o.vs_unoptimised, vs_unopt) {
                o.vs_unoptimised = *vs_unopt;
            }
            o.unoptimised_passes &= *unopt_passes;
        }
        let only = production_only(judged);
        let size = judged
            .iter()
            .map(|(d, _, _)| d.rel_to_range)
            .fold(0.0, f64::max);
        if (only, size) > (telling.2, telling.1) || s == 0 {
            telling = (s, size, only);
        }
    }
    let status = if per_sample.iter().any(|j| production_only(j)) {
        ProductionStatus::ProductionOnly
    } else if outputs.iter().all(|o| o.vs_torch.pass) {
        ProductionStatus::Agrees
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
