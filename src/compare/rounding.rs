//! How much float rounding alone can move a layer's isolated result: its rounding floor.
//!
//! An isolated segment is every ONNX node between the paired values it is fed and the layer
//! it computes. When nothing inside a module pairs (a fused `nn.MultiheadAttention`, a
//! softmax over large logits), that segment is a dozen ops, and float32 arithmetic in a
//! different order can move its result by far more than one op's rounding: the segment
//! amplifies it. A fixed tolerance then calls clean rounding an introduced error.
//!
//! The floor is measured, not guessed: the segment is run once more with every fed value moved
//! by one unit in the last place (a deterministic pseudo-random sign per element, the size of
//! the rounding a single op leaves), and the change of its result is the segment's response to
//! rounding. A layer whose isolated error stays within `FLOOR_FACTOR` times that response
//! introduces nothing rounding could not; a real fault (a scaled weight, a wrong epsilon, an
//! approximated GELU) does not depend on how its inputs were rounded and stays far above it.

use half::{bf16, f16};

use crate::capture::tensor::{HostTensor, TensorData};

/// How many times the response to one rounding of the inputs a segment's error may reach and
/// still be rounding, at most: the segment's own ops round too (each at most as sensitive as
/// the inputs), and errors of independent ops add. Calibrated so that clean isolated segments
/// of the sweep stay below it and every planted fault of the fixture zoo stays above it
/// (README, "Tolerances").
pub const FLOOR_FACTOR: f64 = 16.0;

/// The share of `FLOOR_FACTOR` one op of the segment earns: a lone op rounds its inputs, its
/// weights and its result once each, so four roundings cover it with room; four ops or more
/// get the whole factor.
pub const FLOOR_PER_OP: f64 = 4.0;

/// The factor for a segment of `ops` float ops (`segment_ops::float_ops`).
pub fn floor_factor(ops: usize) -> f64 {
    (FLOOR_PER_OP * ops.max(1) as f64).min(FLOOR_FACTOR)
}

/// A deterministic sign per element: a cheap integer hash of the index.
fn sign(i: usize) -> f64 {
    let mut h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 31;
    if h & 1 == 0 {
        1.0
    } else {
        -1.0
    }
}

/// `t` with every float element moved by about one unit in the last place of its type;
/// integer and bool tensors (indices, masks) are returned unchanged. An element that moving
/// away from zero would carry past the type's largest value moves toward zero instead: an
/// attention mask holds the float minimum, and turning it into -inf made a Softmax over it
/// respond by half its range, a floor that hid a Softmax on the wrong axis (0.99 of range).
pub fn perturbed(t: &HostTensor) -> HostTensor {
    // Relative size of one unit in the last place of each float type.
    const F32_ULP: f64 = f32::EPSILON as f64;
    const F16_ULP: f64 = 9.765_625e-4;
    const BF16_ULP: f64 = 7.812_5e-3;
    // `x` moved by `ulp` in the direction `sign(i)` gives, in the type `to` converts to.
    fn moved<T>(
        x: f64,
        i: usize,
        ulp: f64,
        to: impl Fn(f64) -> T,
        finite: impl Fn(&T) -> bool,
    ) -> T {
        let away = to(x * (1.0 + sign(i) * ulp));
        if finite(&away) || !x.is_finite() {
            away
        } else {
            to(x * (1.0 - ulp))
        }
    }
    let data = match &t.data {
        TensorData::F32(v) => TensorData::F32(
            v.iter()
                .enumerate()
                .map(|(i, &x)| moved(x as f64, i, F32_ULP, |y| y as f32, |y| y.is_finite()))
                .collect(),
        ),
        TensorData::F64(v) => TensorData::F64(
            v.iter()
                .enumerate()
                .map(|(i, &x)| moved(x, i, f64::EPSILON, |y| y, |y| y.is_finite()))
                .collect(),
        ),
        TensorData::F16(v) => TensorData::F16(
            v.iter()
                .enumerate()
                .map(|(i, &x)| moved(x.to_f64(), i, F16_ULP, f16::from_f64, |y| y.is_finite()))
                .collect(),
        ),
        TensorData::Bf16(v) => TensorData::Bf16(
            v.iter()
                .enumerate()
                .map(|(i, &x)| moved(x.to_f64(), i, BF16_ULP, bf16::from_f64, |y| y.is_finite()))
                .collect(),
        ),
        other => other.clone(),
    };
    HostTensor::new(t.shape.clone(), data)
}

/// Whether an isolated error of `isolated_rel` (of range) is within what rounding can do to a
/// segment of `ops` float ops whose result moves by `response_rel` (of range) when its inputs
/// are rounded once.
pub fn within_floor(isolated_rel: f64, response_rel: f64, ops: usize) -> bool {
    isolated_rel.is_finite()
        && response_rel.is_finite()
        && isolated_rel <= floor_factor(ops) * response_rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_move_by_one_ulp_and_integers_not_at_all() {
        let t = HostTensor::f32(vec![4], vec![1.0, -2.0, 0.0, 3.0]);
        let p = perturbed(&t);
        let (TensorData::F32(a), TensorData::F32(b)) = (&t.data, &p.data) else {
            panic!("float32 stays float32")
        };
        for (x, y) in a.iter().zip(b) {
            let moved = ((y - x) / x.abs().max(f32::MIN_POSITIVE)).abs();
            assert!(moved <= 2.0 * f32::EPSILON, "{x} -> {y}");
        }
        assert!(a.iter().zip(b).any(|(x, y)| x != y), "something moves");
        assert_eq!(perturbed(&t).data, p.data, "deterministic");
        let ints = HostTensor::new(vec![2], TensorData::I64(vec![3, 4]));
        assert_eq!(perturbed(&ints).data, ints.data);
        // The largest values stay finite (a mask's float minimum), infinities stay.
        let extremes = HostTensor::f32(vec![4], vec![f32::MIN, f32::MAX, f32::MIN, f32::INFINITY]);
        let TensorData::F32(moved) = perturbed(&extremes).data else {
            panic!("float32 stays float32")
        };
        assert!(moved[..3].iter().all(|x| x.is_finite()), "{moved:?}");
        assert_eq!(moved[3], f32::INFINITY);
        let half = HostTensor::new(vec![2], TensorData::F16(vec![f16::MAX, f16::MIN]));
        let TensorData::F16(moved) = perturbed(&half).data else {
            panic!("float16 stays float16")
        };
        assert!(moved.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn the_floor_scales_the_response_by_the_segments_ops() {
        assert!(within_floor(3.7e-3, 1e-3, 12));
        assert!(!within_floor(2e-2, 1e-3, 12));
        assert!(
            !within_floor(1e-6, 0.0, 12),
            "a segment that does not respond has no floor"
        );
        // A lone op: four roundings, not sixteen (a float16 Conv weight scaled by 2.3%
        // moved its segment 16x its response and hid under the whole factor).
        assert!(within_floor(3.9e-3, 1e-3, 1));
        assert!(!within_floor(1.6e-2, 1e-3, 1));
        assert_eq!(floor_factor(0), floor_factor(1));
        assert_eq!(floor_factor(2), 8.0);
        assert_eq!(floor_factor(40), FLOOR_FACTOR);
    }
}
