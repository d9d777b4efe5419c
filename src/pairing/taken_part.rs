//! Sibling selects told apart by which part of their input each one takes.
//!
//! `boxes[:, 2] - boxes[:, 0]` and `boxes[:, 3] - boxes[:, 1]` are four selects of one
//! input: to the dataflow they are siblings, and ONNX Runtime's saved graph may run the
//! second subtraction first, so the order pairs `boxes[:, 2]` with the Gather of column 1.
//! Their values cannot settle it when the input itself already differs a little between the
//! two sides (accumulated rounding, a tie in a top-k before it), so `uncross_siblings`' value
//! permutation finds nothing close. What each one computes can: within its own side, a
//! select's output equals exactly one slice `input.select(dim, index)` of its input, and the
//! ONNX Gather's output equals one slice of the ONNX input. When the two inputs have the same
//! shape, twins take the same (dim, index), whatever the values of the input. A fault in the
//! input changes both sides' slices alike; a fault in a Gather's indices makes its part differ
//! from every TorchScript sibling's, and then nothing is moved.

use super::Pairer;
use crate::capture::tensor::HostTensor;
use crate::capture::CapturedValue;

/// Above this many element comparisons a group is left to the values: the selects this is for
/// read small tensors (boxes, coordinates), and a feature map's channels are not siblings.
const MAX_WORK: usize = 1 << 24;

/// The (dim, index) slices of `input` that `output` equals element for element (empty when
/// the shapes say it cannot be one).
fn parts_taken(input: &HostTensor, output: &HostTensor) -> Vec<(usize, usize)> {
    let (shape, numel) = (&input.shape, input.data.len());
    let (inp, out) = (input.data.to_f64_vec(), output.data.to_f64_vec());
    let mut parts = Vec::new();
    for (dim, &size) in shape.iter().enumerate() {
        if size == 0 || numel / size != out.len() {
            continue;
        }
        let inner: usize = shape[dim + 1..].iter().product();
        for index in 0..size {
            // Element k of the slice: outer block k / inner, offset k % inner, at `index`.
            let equal = (0..out.len()).all(|k| {
                let at = (k / inner) * size * inner + index * inner + k % inner;
                inp[at].to_bits() == out[k].to_bits() || inp[at] == out[k]
            });
            if equal {
                parts.push((dim, index));
            }
        }
    }
    parts
}

impl Pairer<'_> {
    /// The parts of its data input (the first: a select's `self`, a Gather's `data`) that
    /// value `v` of side `values` takes, or `None` when its data are not at hand.
    fn parts_of(&self, values: &[CapturedValue], v: usize) -> Option<Vec<(usize, usize)>> {
        let &input = values[v].inputs.first()?;
        let (inp, out) = (values[input].data().ok()?, values[v].data().ok()?);
        Some(parts_taken(&inp, &out))
    }

    /// For sibling TorchScript values `group`, each holding the ONNX value of the same
    /// position in `held`, the assignment (`group[i]` takes `held[perm[i]]`) under which every
    /// pair takes the same part of twin inputs of one shape, when exactly one value of `held`
    /// takes each member's part. `None` when the parts do not tell them apart.
    pub(super) fn assignment_by_part(&self, group: &[usize], held: &[usize]) -> Option<Vec<usize>> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let one_input = |v: &CapturedValue| v.inputs.first().copied();
        // Each member's input is scanned once per side and candidate.
        let numel = |v: usize| tv[v].shape.iter().product::<usize>();
        let inputs: usize = group
            .iter()
            .filter_map(|&t| one_input(&tv[t]))
            .map(numel)
            .sum();
        if inputs.saturating_mul(held.len() + 1) > MAX_WORK {
            return None;
        }
        let mut perm = Vec::with_capacity(group.len());
        for &t in group {
            let t_in = one_input(&tv[t])?;
            let mine = self.parts_of(tv, t)?;
            if mine.is_empty() {
                return None;
            }
            let takers: Vec<usize> = held
                .iter()
                .enumerate()
                .filter(|&(_, &o)| {
                    one_input(&ov[o]).is_some_and(|o_in| ov[o_in].shape == tv[t_in].shape)
                })
                .filter(|&(_, &o)| {
                    self.parts_of(ov, o)
                        .is_some_and(|theirs| theirs.iter().any(|p| mine.contains(p)))
                })
                .map(|(j, _)| j)
                .collect();
            let [j] = takers[..] else {
                return None;
            };
            if perm.contains(&j) {
                return None;
            }
            perm.push(j);
        }
        Some(perm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_found_by_dim_and_index() {
        // 2 x 3, rows [1 2 3], [4 5 6]: column 1 is [2 5], row 1 is [4 5 6].
        let x = HostTensor::f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            parts_taken(&x, &HostTensor::f32(vec![2], vec![2.0, 5.0])),
            [(1, 1)]
        );
        assert_eq!(
            parts_taken(&x, &HostTensor::f32(vec![3], vec![4.0, 5.0, 6.0])),
            [(0, 1)]
        );
        assert!(parts_taken(&x, &HostTensor::f32(vec![2], vec![2.0, 6.0])).is_empty());
    }
}
