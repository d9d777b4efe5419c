//! The constant factors a value may hold against its twin (one, or one per channel) and
//! whether a reader's weights could have absorbed them: the arithmetic of the
//! `folded_scale` and `attention_scale` passes.

use super::lanes::{for_each_lane, max_of, LANES};
use super::ops::{onnx_families, Families, Family};
use super::wide_scan;
use super::Pairer;
use crate::capture::tensor::{HostTensor, TensorData};
use crate::capture::{CapturedValue, ValueRole};

/// How far from 1 a factor must be to be a factor, not rounding.
pub(super) const NOT_ONE: f64 = 1e-3;

/// The largest deviation from exact proportionality, relative to the value's range, still
/// taken as exact (float32 rounding through a decomposition).
const EXACT: f64 = 1e-4;

fn families_include(onnx_op: &str, wanted: &[Family]) -> bool {
    onnx_families(onnx_op).meets(Families::of(wanted))
}

/// Fewer elements per channel than this say nothing about a factor per channel.
const MIN_PER_CHANNEL: usize = 4;

/// The factors `k[c]` with `test == k[c] * reference` elementwise, `c` the index along
/// `axis` (one factor for all when `axis` is `None`), when there are such factors.
fn factors(test: &HostTensor, reference: &HostTensor, axis: Option<usize>) -> Option<Vec<f64>> {
    let n = test.numel();
    if n == 0 || n != reference.numel() {
        return None;
    }
    let shape = &reference.shape;
    let (channels, stride) = match axis {
        None => (1, n),
        Some(a) if a < shape.len() && test.shape == *shape => {
            (shape[a], shape[a + 1..].iter().product::<usize>())
        }
        Some(_) => return None,
    };
    if channels == 0 || stride == 0 || (axis.is_some() && n / channels < MIN_PER_CHANNEL) {
        return None;
    }
    // float32 is nearly every case: scanned wide, without a type dispatch per element.
    match (&test.data, &reference.data) {
        (TensorData::F32(a), TensorData::F32(b)) => fit(
            |start, len| {
                let e = wide_scan::scan(&a[start..start + len], &b[start..start + len]);
                Sums {
                    xy: e.xy,
                    yy: e.yy,
                    range: f64::from(e.max_x),
                    reference_range: f64::from(e.max_y),
                    apart: f64::from(e.max_apart),
                }
            },
            |i| (f64::from(a[i]), f64::from(b[i])),
            n,
            (channels, stride),
        ),
        (a, b) => {
            let x = |i| (a.get_f64(i), b.get_f64(i));
            fit(
                |start, len| Sums::of(&x, start, len),
                x,
                n,
                (channels, stride),
            )
        }
    }
}

/// `factors` over `n` elements laid out as blocks of `stride` elements whose channel is the
/// block's index modulo `channels`; `block(start, len)` scans a block, `x(i)` reads element
/// `i` of both sides (test, reference) for the second scan that only an inexact fit needs.
fn fit(
    block: impl Fn(usize, usize) -> Sums,
    x: impl Fn(usize) -> (f64, f64),
    n: usize,
    (channels, stride): (usize, usize),
) -> Option<Vec<f64>> {
    let (mut ab, mut bb) = (vec![0.0; channels], vec![0.0; channels]);
    let (mut range, mut reference_range, mut apart) = (0.0f64, 0.0f64, 0.0f64);
    for b in 0..n / stride {
        let s = block(b * stride, stride);
        ab[b % channels] += s.xy;
        bb[b % channels] += s.yy;
        range = range.max(s.range);
        reference_range = reference_range.max(s.reference_range);
        apart = apart.max(s.apart);
    }
    // A channel that is zero throughout on the reference side takes factor 1: any works.
    let k: Vec<f64> = ab
        .iter()
        .zip(&bb)
        .map(|(&ab, &bb)| if bb == 0.0 { 1.0 } else { ab / bb })
        .collect();
    if k.iter().any(|k| !k.is_finite()) || range <= 0.0 {
        return None;
    }
    // |x - k y| <= |x - y| + |k - 1| |y|: when that bound is within EXACT, so is the fit,
    // and the second scan is not needed (every clean pair, whose factor is 1).
    let off_one = k.iter().fold(0.0f64, |m, k| m.max((k - 1.0).abs()));
    if apart + off_one * reference_range <= EXACT * range {
        return Some(k);
    }
    let worst = (0..n).fold(0.0f64, |m, i| {
        let (x, y) = x(i);
        m.max((x - k[(i / stride) % channels] * y).abs())
    });
    (worst <= EXACT * range).then_some(k)
}

/// What one block's scan found: sums of x·y and y², the largest |x|, |y| and |x - y|.
struct Sums {
    xy: f64,
    yy: f64,
    range: f64,
    reference_range: f64,
    apart: f64,
}

impl Sums {
    /// Scans elements `start..start + len` read by `x` (test, reference) on four lanes.
    fn of(x: &impl Fn(usize) -> (f64, f64), start: usize, len: usize) -> Sums {
        let (mut ab, mut bb) = ([0.0f64; LANES], [0.0f64; LANES]);
        let (mut r, mut rr, mut ap) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
        for_each_lane(start, len, |lane, i| {
            let (x, y) = x(i);
            ab[lane] += x * y;
            bb[lane] += y * y;
            r[lane] = r[lane].max(x.abs());
            rr[lane] = rr[lane].max(y.abs());
            ap[lane] = ap[lane].max((x - y).abs());
        });
        Sums {
            xy: ab.iter().sum(),
            yy: bb.iter().sum(),
            range: max_of(r),
            reference_range: max_of(rr),
            apart: max_of(ap),
        }
    }
}

/// The one factor `k` with `test == k * reference` at every element, when there is one.
pub(super) fn single_factor(test: &HostTensor, reference: &HostTensor) -> Option<f64> {
    factors(test, reference, None).map(|k| k[0])
}

/// The axis of a value that the weights of all its readers index: the channels of a Conv's
/// input, the last dim of a MatMul's or Gemm's, and of a Mul's (a 1-D constant broadcasts
/// along the last dim).
fn weighted_axis(readers: &[&str], rank: usize) -> Option<usize> {
    if readers.iter().all(|r| families_include(r, &[Family::Conv])) {
        (rank >= 2).then_some(1)
    } else if readers
        .iter()
        .all(|r| families_include(r, &[Family::MatMul, Family::Mul]))
    {
        rank.checked_sub(1)
    } else {
        None
    }
}

impl Pairer<'_> {}

/// Whether ONNX value `o` could carry a factor its `readers` absorbed: it is not itself
/// computed with weights, and every reader is a Conv, MatMul or Mul whose other operands
/// are constants (an attention's MatMul of two activations absorbs nothing).
pub(super) fn could_be_folded(ov: &[CapturedValue], o: usize, readers: &[usize]) -> bool {
    !families_include(&ov[o].op, &[Family::Conv, Family::MatMul, Family::Norm])
        && !readers.is_empty()
        && readers.iter().all(|&r| {
            families_include(&ov[r].op, &[Family::Conv, Family::MatMul, Family::Mul])
                && ov[r].inputs.iter().all(|&i| {
                    i == o || (ov[i].role == ValueRole::Intermediate && ov[i].inputs.is_empty())
                })
        })
}

/// The factors that make ONNX value `test` TorchScript's `reference`: one for all elements,
/// or else one per channel of the axis the readers' weights index.
pub(super) fn fitted_factors(
    test: &CapturedValue,
    reference: &CapturedValue,
    reader_ops: &[&str],
) -> Option<Vec<f64>> {
    let (Ok(test), Ok(reference)) = (test.data(), reference.data()) else {
        return None;
    };
    let axis = weighted_axis(reader_ops, reference.shape.len());
    factors(&test, &reference, None)
        .or_else(|| axis.and_then(|a| factors(&test, &reference, Some(a))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[usize], values: Vec<f32>) -> HostTensor {
        HostTensor::f32(shape.to_vec(), values)
    }

    #[test]
    fn factors_are_found_globally_and_per_channel_and_rounding_is_one() {
        let reference: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin() + 0.1).collect();
        let r = tensor(&[2, 3, 4], reference.clone());
        let halved = tensor(&[2, 3, 4], reference.iter().map(|x| x * 0.5).collect());
        assert_eq!(factors(&halved, &r, None), Some(vec![0.5]));
        // One factor per channel along axis 1 (blocks of 4 elements, channel = block % 3).
        let per_channel: Vec<f32> = reference
            .iter()
            .enumerate()
            .map(|(i, x)| x * [1.0, 2.0, 4.0][(i / 4) % 3])
            .collect();
        let k = factors(&tensor(&[2, 3, 4], per_channel), &r, Some(1)).unwrap();
        assert_eq!(k, vec![1.0, 2.0, 4.0]);
        // Float32 rounding alone: a factor of 1 (the one-scan bound decides).
        let rounded: Vec<f32> = reference.iter().map(|x| x * (1.0 + 1e-7)).collect();
        let k = factors(&tensor(&[2, 3, 4], rounded), &r, None).unwrap();
        assert!((k[0] - 1.0).abs() < 1e-6);
        // Not proportional: no factor, globally or per channel.
        let mut apart = reference.clone();
        apart[5] += 0.5;
        assert_eq!(factors(&tensor(&[2, 3, 4], apart.clone()), &r, None), None);
        assert_eq!(factors(&tensor(&[2, 3, 4], apart), &r, Some(1)), None);
    }
}
