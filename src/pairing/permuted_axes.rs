//! Whether one tensor is another with its axes permuted (and adjacent axes merged or split).
//!
//! An optimiser that moves a Transpose through a Reshape leaves an op's output in ONNX only
//! in another layout: the same tensor read with its axes in another order, its unit axes
//! dropped or added, adjacent axes merged or split. That is provable element by element:
//! some permutation of the axes maps every element onto its twin. Holding the same values in
//! another order is not enough (two swapped output channels of a Linear hold exactly that);
//! a channel swap moves elements inside one axis, which no permutation of whole axes does,
//! so the proof fails and the fault stays compared where it was made.

use super::wiring::permutations;
use crate::capture::tensor::HostTensor;

/// More axes than this (after unit axes are dropped) are not searched: 6! = 720
/// permutations, each usually refuted at its first elements.
const MAX_AXES: usize = 6;

/// Whether `b` is `a` with its axes permuted, then adjacent axes merged or split (unit axes
/// ignored), every element within `apart` of `b`'s range (the measure `relative_distance`
/// uses).
pub(super) fn holds_permuted_axes(a: &HostTensor, b: &HostTensor, apart: f64) -> bool {
    if a.numel() != b.numel() || a.numel() == 0 {
        return false;
    }
    // Unit axes carry no order; the strides of the others are those of the full shape.
    let strides = row_major_strides(&a.shape);
    let axes: Vec<(usize, usize)> = a
        .shape
        .iter()
        .zip(&strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let target: Vec<usize> = b.shape.iter().copied().filter(|&d| d != 1).collect();
    if axes.len() > MAX_AXES {
        return false;
    }
    let range = (0..b.numel()).fold(0.0f64, |m, i| m.max(b.data.get_f64(i).abs()));
    let limit = if range == 0.0 { apart } else { apart * range };
    permutations(axes.len()).into_iter().any(|order| {
        let permuted: Vec<(usize, usize)> = order.iter().map(|&i| axes[i]).collect();
        let dims: Vec<usize> = permuted.iter().map(|&(d, _)| d).collect();
        merges_or_splits(&dims, &target) && reads_as(a, &permuted, b, limit)
    })
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Whether shape `to` comes from shape `from` by merging runs of adjacent axes or splitting
/// axes into adjacent ones: both cut into consecutive groups of equal size, each group a
/// single axis on at least one side. (Any two shapes of one size are a flat reshape apart;
/// this is the narrower claim that the axes themselves are kept, only regrouped.)
fn merges_or_splits(from: &[usize], to: &[usize]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < from.len() && j < to.len() {
        let (start_i, start_j) = (i, j);
        let (mut a, mut b) = (from[i], to[j]);
        while a != b {
            if a < b {
                i += 1;
                let Some(&d) = from.get(i) else { return false };
                a *= d;
            } else {
                j += 1;
                let Some(&d) = to.get(j) else { return false };
                b *= d;
            }
        }
        if i > start_i && j > start_j {
            return false;
        }
        i += 1;
        j += 1;
    }
    i == from.len() && j == to.len()
}

/// Whether reading `a` along `axes` (sizes and strides, outermost first) gives `b`'s
/// elements in `b`'s order, each within `limit`.
fn reads_as(a: &HostTensor, axes: &[(usize, usize)], b: &HostTensor, limit: f64) -> bool {
    let mut index = vec![0usize; axes.len()];
    let mut offset = 0usize;
    for j in 0..b.numel() {
        if (a.data.get_f64(offset) - b.data.get_f64(j)).abs() > limit {
            return false;
        }
        // Advance the innermost axis, carrying into the outer ones.
        for k in (0..axes.len()).rev() {
            index[k] += 1;
            offset += axes[k].1;
            if index[k] < axes[k].0 {
                break;
            }
            offset -= axes[k].1 * axes[k].0;
            index[k] = 0;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[usize], values: Vec<f32>) -> HostTensor {
        HostTensor::f32(shape.to_vec(), values)
    }

    /// A [2, 3, 4] tensor of distinct values.
    fn cube() -> HostTensor {
        tensor(&[2, 3, 4], (0..24).map(|v| v as f32 * 0.5 - 3.0).collect())
    }

    /// `a` ([2, 3, 4]) with axes 0 and 1 exchanged: [3, 2, 4].
    fn swapped_01(a: &HostTensor) -> Vec<f32> {
        let mut out = Vec::new();
        for j in 0..3 {
            for i in 0..2 {
                for k in 0..4 {
                    out.push(a.data.get_f64(i * 12 + j * 4 + k) as f32);
                }
            }
        }
        out
    }

    #[test]
    fn a_transpose_with_unit_axes_and_merged_axes_is_found() {
        let a = cube();
        let moved = swapped_01(&a);
        // [3, 2, 4] itself, with a unit axis added ([3, 1, 2, 4]), and with its last two axes
        // merged ([3, 8]).
        assert!(holds_permuted_axes(
            &a,
            &tensor(&[3, 2, 4], moved.clone()),
            1e-5
        ));
        assert!(holds_permuted_axes(
            &a,
            &tensor(&[3, 1, 2, 4], moved.clone()),
            1e-5
        ));
        assert!(holds_permuted_axes(&a, &tensor(&[3, 8], moved), 1e-5));
        // A plain copy is the identity permutation.
        assert!(holds_permuted_axes(&a, &cube(), 1e-5));
    }

    #[test]
    fn a_channel_swap_is_not_an_axis_permutation() {
        let a = cube();
        // Channels 0 and 1 of the last axis exchanged: the same values in another order.
        let mut swapped: Vec<f32> = (0..24).map(|i| a.data.get_f64(i) as f32).collect();
        for row in swapped.chunks_mut(4) {
            row.swap(0, 1);
        }
        assert!(!holds_permuted_axes(&a, &tensor(&[2, 3, 4], swapped), 1e-2));
        // Nor is the transposed layout with a channel swapped after it.
        let mut moved = swapped_01(&a);
        moved.swap(0, 1);
        assert!(!holds_permuted_axes(&a, &tensor(&[3, 2, 4], moved), 1e-2));
    }

    #[test]
    fn scaled_data_or_a_flat_reshape_across_axes_is_not() {
        let a = cube();
        let scaled: Vec<f32> = swapped_01(&a).iter().map(|v| v * 1.05).collect();
        assert!(!holds_permuted_axes(&a, &tensor(&[3, 2, 4], scaled), 1e-2));
        // [2, 3, 4] read flat as [4, 6]: no grouping of whole axes gives it.
        assert!(!merges_or_splits(&[2, 3, 4], &[4, 6]));
        assert!(merges_or_splits(&[2, 3, 4], &[6, 2, 2]));
    }
}
