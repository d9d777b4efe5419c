//! How many float ops an isolated layer's segment runs: what its rounding floor may allow.
//!
//! A layer's isolated segment is every ONNX node between the values it is fed from PyTorch
//! and the layer's own value. Each op of it rounds, at most about as much as the rounding
//! of its inputs moves the result, and the errors of independent ops add; so the floor
//! (`rounding::floor_factor`) grows with the number of ops. A lone op (a Conv with a folded
//! BatchNorm, one BatchNormalization) rounds its inputs, its weights and its result once
//! each; allowing it the sixteen roundings that a fused attention's dozen ops may reach
//! hid a float16 Conv weight scaled by 2.3% (3.1e-2 of range against a floor of 3.1e-2).

use std::collections::HashSet;

use crate::capture::{Capture, ValueRole};

/// The float values that ONNX computes between the fed values and value `start` (itself
/// included): the walk goes up through producers and stops at fed values, graph inputs and
/// constants. Integer values (shapes, indices) do not round and are not counted.
pub fn float_ops(onnx: &Capture, fed: &HashSet<&str>, start: usize) -> usize {
    let values = &onnx.values;
    let mut seen: HashSet<usize> = HashSet::from([start]);
    let mut todo = vec![start];
    let mut ops = 0;
    while let Some(id) = todo.pop() {
        let v = &values[id];
        if v.inputs.is_empty() || matches!(v.role, ValueRole::Input(_)) {
            continue;
        }
        if v.dtype.is_float() {
            ops += 1;
        }
        for &input in &v.inputs {
            if !fed.contains(values[input].name.as_str()) && seen.insert(input) {
                todo.push(input);
            }
        }
    }
    ops
}
