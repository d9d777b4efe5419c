//! What float32 rounding alone does to a network's outputs, measured on PyTorch itself, and
//! whether it explains the difference ONNX Runtime shows there.
//!
//! A deep network amplifies the rounding of every op: a softmax over large logits, a DFL
//! head, a detector's near-tied scores, a randomly initialised network that is chaotic. The
//! same TorchScript module run once more in float64 shows how far PyTorch's own float32
//! result is from the exact one (`float64_max_abs`). ONNX Runtime computes the same ops in
//! float32 in another order; when its difference from PyTorch stays within `FACTOR` times
//! PyTorch's own distance from float64, it is as close to PyTorch as PyTorch's float32 is to
//! the exact result, and the output carries rounding, not an export bug. A systematic error
//! (a weight off by 1.5e-5 in every block, an epsilon) does not depend on rounding and stays
//! orders of magnitude above it. The run is made by `app::rounding_reference`, only when the
//! outputs fail and no layer introduces an error.

use serde::Serialize;

use crate::capture::tensor::HostTensor;
use crate::compare::stats::{finite_or_null, ErrorStats};

/// How many times PyTorch's own float32 distance from float64 ONNX Runtime's difference from
/// PyTorch may reach and still be rounding: two float32 computations of the same ops in a
/// different order each sit about that far from the exact result, and a runtime's kernels
/// (other blockings, fused multiply-adds) can round a few times more. Calibrated on the
/// sweep's clean float32 pairs whose outputs exceed their tolerance (docs/tolerances.md).
pub const FACTOR: f64 = 16.0;

/// Whether the reference ran, how long it took, and why it could not run when it did not.
#[derive(Debug, Clone, Serialize)]
pub struct RoundingRun {
    pub seconds: f64,
    /// Why the float64 run failed; the outputs are then judged by their tolerance alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One output's rounding reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundingReference {
    /// Largest difference between PyTorch's float32 output and its float64 one (infinite
    /// when rounding changes the output's shape).
    #[serde(serialize_with = "finite_or_null")]
    pub float64_max_abs: f64,
    /// The same, relative to the range of PyTorch's float32 output.
    #[serde(serialize_with = "finite_or_null")]
    pub float64_rel_to_range: f64,
    /// For an integer or bool output: the share of elements the float64 run changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub float64_mismatch_ratio: Option<f64>,
    pub factor: f64,
    /// Whether ONNX Runtime's difference is within `factor` times the float64 one.
    pub explains: bool,
    /// Whether that decides the gate: only under the default output tolerance. An output
    /// tolerance the user set (`--output-atol`, `--output-rtol`, `--output-rel-to-range`) is
    /// their call, and the reference is then information.
    pub decides: bool,
}

/// The reference for one output: PyTorch's float32 value `float32`, its float64 value
/// `float64`, and `cmp`, the statistics of ONNX Runtime's value against PyTorch's.
pub fn judge(
    cmp: &ErrorStats,
    (float32, float64): (&HostTensor, &HostTensor),
    decides: bool,
) -> RoundingReference {
    let exact = !float32.dtype().is_float();
    if float32.shape != float64.shape {
        // Rounding alone changes how many detections survive: the shape ONNX Runtime's
        // output has is no evidence against it.
        return RoundingReference {
            float64_max_abs: f64::INFINITY,
            float64_rel_to_range: f64::INFINITY,
            float64_mismatch_ratio: exact.then_some(1.0),
            factor: FACTOR,
            explains: true,
            decides,
        };
    }
    let (a, b) = (float32.data.to_f64_vec(), float64.data.to_f64_vec());
    let finite = |x: &f64| x.is_finite();
    let (mut max_abs, mut changed, mut lo, mut hi) = (0.0f64, 0usize, f64::MAX, f64::MIN);
    for (x, y) in a.iter().zip(&b) {
        if finite(x) {
            lo = lo.min(*x);
            hi = hi.max(*x);
        }
        if finite(x) && finite(y) {
            max_abs = max_abs.max((x - y).abs());
        }
        if x != y && !(x.is_nan() && y.is_nan()) {
            changed += 1;
        }
    }
    let range = if hi > lo { hi - lo } else { 1.0 };
    let ratio = changed as f64 / a.len().max(1) as f64;
    let explains = if exact {
        cmp.mismatch_ratio <= FACTOR * ratio && ratio > 0.0
    } else {
        cmp.max_abs <= FACTOR * max_abs
    };
    RoundingReference {
        float64_max_abs: max_abs,
        float64_rel_to_range: max_abs / range,
        float64_mismatch_ratio: exact.then_some(ratio),
        factor: FACTOR,
        explains,
        decides,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::TensorData;

    fn output(max_abs: f64) -> ErrorStats {
        let mut stats = crate::compare::evaluate::tests::layer_result(0).cmp.stats;
        stats.pass = false;
        stats.max_abs = max_abs;
        stats
    }

    fn f64s(values: &[f64]) -> HostTensor {
        HostTensor::new(vec![values.len()], TensorData::F64(values.to_vec()))
    }

    #[test]
    fn a_difference_of_the_size_rounding_makes_is_explained() {
        let t32 = HostTensor::f32(vec![3], vec![1.0, 2.0, 3.0]);
        let t64 = f64s(&[1.0, 2.0 + 1e-4, 3.0]);
        let r = judge(&output(5e-4), (&t32, &t64), true);
        assert!(r.explains, "{r:?}");
        assert!((r.float64_max_abs - 1e-4).abs() < 1e-9);
        assert!((r.float64_rel_to_range - 5e-5).abs() < 1e-9);
    }

    #[test]
    fn a_systematic_error_far_beyond_rounding_is_not() {
        let t32 = HostTensor::f32(vec![3], vec![1.0, 2.0, 3.0]);
        let t64 = f64s(&[1.0, 2.0 + 1e-7, 3.0]);
        assert!(!judge(&output(3.5e-4), (&t32, &t64), true).explains);
        // A network that rounds identically in float64 explains nothing.
        assert!(!judge(&output(1e-6), (&t32, &f64s(&[1.0, 2.0, 3.0])), true).explains);
    }

    #[test]
    fn a_shape_that_rounding_changes_explains_a_different_shape() {
        let t32 = HostTensor::f32(vec![3], vec![1.0, 2.0, 3.0]);
        let t64 = f64s(&[1.0, 2.0]);
        let r = judge(&output(f64::INFINITY), (&t32, &t64), true);
        assert!(r.explains && r.float64_max_abs.is_infinite());
    }

    #[test]
    fn indices_are_explained_only_when_float64_changes_them_too() {
        let idx = |v: &[i64]| HostTensor::new(vec![v.len()], TensorData::I64(v.to_vec()));
        let mut out = output(1.0);
        out.mismatch_ratio = 0.25;
        let t32 = idx(&[0, 1, 2, 3]);
        assert!(judge(&out, (&t32, &idx(&[0, 2, 1, 3])), true).explains);
        assert!(!judge(&out, (&t32, &idx(&[0, 1, 2, 3])), true).explains);
    }
}
