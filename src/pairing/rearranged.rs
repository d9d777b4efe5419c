//! Whether one tensor holds the same values as another, in some other arrangement.
//!
//! A layout op only moves data. When ONNX merged two transposes into one and the merged
//! result happens to have the TorchScript value's shape (16 tokens and a head of 16
//! channels), the two values differ at every element although neither graph is wrong. That
//! is provable from the data alone: both hold the same values, only in another order. The
//! proof needs nothing downstream, so it still holds when a fault after the layout op makes
//! everything it feeds disagree; and a fault before it or in it changes the values
//! themselves, so the proof fails and the pair is compared.

use crate::capture::tensor::HostTensor;

/// Whether `a` and `b` hold the same values (as multisets) within `apart` of `b`'s range,
/// the measure `relative_distance` uses.
pub(super) fn holds_same_values(a: &HostTensor, b: &HostTensor, apart: f64) -> bool {
    if a.numel() != b.numel() {
        return false;
    }
    let sorted = |t: &HostTensor| {
        let mut v: Vec<f64> = (0..t.numel()).map(|i| t.data.get_f64(i)).collect();
        v.sort_unstable_by(f64::total_cmp);
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    let range = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let limit = if range == 0.0 { apart } else { apart * range };
    a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[usize], values: Vec<f32>) -> HostTensor {
        HostTensor::f32(shape.to_vec(), values)
    }

    #[test]
    fn a_transposed_copy_holds_the_same_values() {
        // [[1, 2], [3, 4]] and its transpose [[1, 3], [2, 4]].
        let a = tensor(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = tensor(&[2, 2], vec![1.0, 3.0, 2.0, 4.0]);
        assert!(holds_same_values(&a, &b, 1e-2));
    }

    #[test]
    fn scaled_or_other_values_do_not() {
        let a = tensor(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        // A 5% scale (a faulted projection) is other data, rearranged or not.
        let scaled = tensor(&[2, 2], vec![1.05, 3.15, 2.1, 4.2]);
        assert!(!holds_same_values(&a, &scaled, 1e-2));
        let other = tensor(&[2, 2], vec![1.0, 3.0, 2.0, 2.0]);
        assert!(!holds_same_values(&a, &other, 1e-2));
        let fewer = tensor(&[3], vec![1.0, 2.0, 3.0]);
        assert!(!holds_same_values(&a, &fewer, 1e-2));
    }
}
