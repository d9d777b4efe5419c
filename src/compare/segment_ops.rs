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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::{CapturedValue, Side};

    /// A value named `v{id}` read from `inputs`; no inputs is a constant.
    fn value(id: usize, inputs: &[usize], dtype: DType, role: ValueRole) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: "Op".to_string(),
            node: String::new(),
            scope: Vec::new(),
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role,
            dtype,
            shape: vec![1],
            inputs: inputs.to_vec(),
            tensor: None,
        }
    }

    #[test]
    fn a_segment_counts_its_float_ops_up_to_the_fed_values() {
        use DType::{F32, I64};
        use ValueRole::{Input, Intermediate};
        // 0 input -> 1 fed -> 2 -> 3 (also reads 4, a shape computed from 1, and 5, a
        // constant) -> 6, which also reads 1 again.
        let onnx = Capture {
            side: Side::Onnx,
            values: vec![
                value(0, &[], F32, Input(0)),
                value(1, &[0], F32, Intermediate),
                value(2, &[1], F32, Intermediate),
                value(3, &[2, 4, 5], F32, Intermediate),
                value(4, &[1], I64, Intermediate),
                value(5, &[], F32, Intermediate),
                value(6, &[3, 1], F32, Intermediate),
            ],
            uncapturable: vec![],
            element_inputs: Default::default(),
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
        };
        let fed: HashSet<&str> = HashSet::from(["v1"]);
        assert_eq!(
            float_ops(&onnx, &fed, 6),
            3,
            "6, 3 and 2; not the shape or the constant"
        );
        assert_eq!(float_ops(&onnx, &fed, 2), 1, "a lone op");
        // Nothing fed: the walk goes up to the graph input.
        assert_eq!(float_ops(&onnx, &HashSet::new(), 2), 2);
    }
}
