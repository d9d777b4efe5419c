//! What the passes learn from the captured data, remembered for the whole pairing.
//!
//! Several passes weigh the same pair by its values (the fusion of a chain, the dataflow
//! check, the agreeing twins), and a TorchScript value usually lives in the spill file, so
//! each weighing read both tensors back and scanned them again: on a ViT-B/16 the
//! duplicate search alone compared every block's Add with every earlier one's, 0.23 s of a
//! 0.36 s pairing. A pair's distance is remembered once computed, and a value's
//! fingerprint (a hash of the elements at its two ends) rules out most "same tensor?" questions before any
//! element is compared. Both are pure functions of data that no pass changes.
//!
//! A pass that will weigh many pairs names them first (`prefetch`), and their distances
//! are computed several at once: each scan reads two activations from memory once and is
//! bound by that, so two cores do them in about half the time. Under a memory budget the
//! check reads one pair back at a time (`ReadBack::OneAtATime`), and so does the memo.

use super::relative_distance;
use crate::capture::tensor::TensorData;
use crate::capture::CapturedValue;
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// How many pairs the value checks may read back from the spill file at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadBack {
    /// Several, one per core: no memory budget holds.
    #[default]
    Parallel,
    /// One pair's two tensors at a time, as a memory budget plans for.
    OneAtATime,
}

#[derive(Default)]
pub(super) struct ValueMemo {
    distances: RefCell<HashMap<(usize, usize), f64>>,
    torch_fingerprints: RefCell<HashMap<usize, Option<u64>>>,
    read_back: ReadBack,
}

impl ValueMemo {
    pub fn reading(read_back: ReadBack) -> ValueMemo {
        ValueMemo {
            read_back,
            ..ValueMemo::default()
        }
    }

    /// `relative_distance` of ONNX value `c`'s data from TorchScript value `t`'s, computed
    /// once; infinite when either is not at hand.
    pub fn distance(&self, t: &CapturedValue, c: &CapturedValue) -> f64 {
        if let Some(&d) = self.distances.borrow().get(&(t.id, c.id)) {
            return d;
        }
        let d = computed_distance(t, c);
        self.distances.borrow_mut().insert((t.id, c.id), d);
        d
    }

    /// Computes the distances of the pairs (TorchScript value, ONNX value) not known yet, on
    /// every core; `distance` then finds them. Reading one pair at a time, it leaves them to
    /// `distance`, which reads each when it is asked for.
    pub fn prefetch(&self, pairs: &[(&CapturedValue, &CapturedValue)]) {
        if self.read_back == ReadBack::OneAtATime {
            return;
        }
        let missing: Vec<_> = {
            let known = self.distances.borrow();
            let mut seen = std::collections::HashSet::new();
            pairs
                .iter()
                .filter(|(t, c)| !known.contains_key(&(t.id, c.id)) && seen.insert((t.id, c.id)))
                .collect()
        };
        let found: Vec<((usize, usize), f64)> = missing
            .par_iter()
            .map(|(t, c)| ((t.id, c.id), computed_distance(t, c)))
            .collect();
        self.distances.borrow_mut().extend(found);
    }

    /// Whether TorchScript values `a` and `b` hold exactly the same tensor (element for
    /// element as f64, so -0.0 equals 0.0 and NaN equals nothing). Fingerprints decide
    /// when they differ; equal fingerprints are confirmed element by element.
    pub fn same_torch_data(&self, a: &CapturedValue, b: &CapturedValue) -> bool {
        if a.shape != b.shape || a.dtype != b.dtype {
            return false;
        }
        match (self.torch_fingerprint(a), self.torch_fingerprint(b)) {
            (Some(x), Some(y)) if x == y => same_elements(a, b),
            _ => false,
        }
    }

    /// A hash of the value's size and of the elements at its two ends, `None` when its data
    /// is not at hand or holds a NaN there (such a value equals no other).
    fn torch_fingerprint(&self, v: &CapturedValue) -> Option<u64> {
        if let Some(&f) = self.torch_fingerprints.borrow().get(&v.id) {
            return f;
        }
        let f = v
            .edges(EDGE)
            .ok()
            .and_then(|e| fingerprint(v.shape.iter().product(), &e));
        self.torch_fingerprints.borrow_mut().insert(v.id, f);
        f
    }
}

fn computed_distance(t: &CapturedValue, c: &CapturedValue) -> f64 {
    match (t.data(), c.data()) {
        (Ok(reference), Ok(test)) => relative_distance(&test, &reference),
        _ => f64::INFINITY,
    }
}

/// The elements read at each end of a value for its fingerprint: enough to tell apart
/// nearly every pair of different activations, few enough that reading them from the
/// spill file costs nothing.
const EDGE: usize = 256;

fn fingerprint(numel: usize, edges: &[f64]) -> Option<u64> {
    // A multiplicative hash (FxHash's step): a fingerprint, not a defence against
    // crafted collisions, which would only cost an element-by-element comparison.
    let step = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    let mut h = numel as u64;
    for &x in edges {
        if x.is_nan() {
            return None;
        }
        // 0.0 and -0.0 compare equal, so they must hash alike.
        h = step(h, if x == 0.0 { 0 } else { x.to_bits() });
    }
    Some(h)
}

/// Whether two values hold exactly the same tensor, stopping at the first element apart.
fn same_elements(a: &CapturedValue, b: &CapturedValue) -> bool {
    match (a.data(), b.data()) {
        // float32 compares as f64 does (-0.0 equals 0.0, NaN nothing), without a type
        // dispatch per element.
        (Ok(x), Ok(y)) => match (&x.data, &y.data) {
            (TensorData::F32(a), TensorData::F32(b)) => a == b,
            _ => {
                x.numel() == y.numel()
                    && (0..x.numel()).all(|i| x.data.get_f64(i) == y.data.get_f64(i))
            }
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::store::Stored;
    use crate::capture::tensor::{DType, HostTensor};
    use crate::capture::ValueRole;

    fn value(id: usize, values: Vec<f32>) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: "aten::add".to_string(),
            node: String::new(),
            scope: Vec::new(),
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role: ValueRole::Intermediate,
            dtype: DType::F32,
            shape: vec![values.len()],
            inputs: Vec::new(),
            tensor: Some(Stored::Memory(HostTensor::f32(vec![values.len()], values))),
        }
    }

    #[test]
    fn equal_tensors_are_the_same_data_whatever_their_sign_of_zero() {
        let memo = ValueMemo::default();
        let n = 3 * EDGE;
        let a: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
        // -0.0 where `a` holds 0.0, at an end that the fingerprints read.
        let mut b = a.clone();
        assert_eq!(a[3], 0.0);
        b[3] = -0.0;
        assert!(memo.same_torch_data(&value(0, a.clone()), &value(1, b)));
        // A difference in the middle, which no fingerprint reads, is still found.
        let mut c = a.clone();
        c[n / 2] += 1.0;
        assert!(!memo.same_torch_data(&value(0, a.clone()), &value(2, c)));
        // A difference at an end is told by the fingerprints alone.
        let mut d = a.clone();
        d[n - 1] += 1.0;
        assert!(!memo.same_torch_data(&value(0, a), &value(3, d)));
    }

    #[test]
    fn distances_named_ahead_are_computed_at_once_unless_read_one_at_a_time() {
        let (t, c) = (value(0, vec![1.0, 2.0]), value(1, vec![1.0, 2.5]));
        let ahead = ValueMemo::default();
        ahead.prefetch(&[(&t, &c), (&t, &c)]);
        assert_eq!(ahead.distances.borrow().get(&(0, 1)), Some(&0.25));
        // Under a budget nothing is read ahead; the distance is read when asked for.
        let one_at_a_time = ValueMemo::reading(ReadBack::OneAtATime);
        one_at_a_time.prefetch(&[(&t, &c)]);
        assert!(one_at_a_time.distances.borrow().is_empty());
        assert_eq!(one_at_a_time.distance(&t, &c), 0.25);
    }

    #[test]
    fn a_tensor_holding_nan_equals_no_other() {
        let memo = ValueMemo::default();
        let a = vec![1.0, f32::NAN, 2.0];
        assert!(!memo.same_torch_data(&value(0, a.clone()), &value(1, a)));
    }
}
