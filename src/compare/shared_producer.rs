//! The producer that independent origins share without it having been compared.
//!
//! Parallel branches can hold several divergence origins: the query and the key projection
//! of an attention both fail, each in isolation too. When both read one value that no pair
//! compared (a normalisation the exporter decomposed past recognition, a fused op), that
//! value is the likelier place the error was made: an error made there reaches every branch
//! that reads it, and isolation, which feeds only paired values from PyTorch, feeds each
//! branch ONNX's own version of it. So the report names it as the suspect, with why it was
//! not compared, instead of leaving the reader with two unrelated-looking origins.

use crate::capture::{Capture, ValueRole};
use crate::compare::judged::Divergence;
use crate::compare::judged::LayerResult;
use crate::pairing::ops::is_bookkeeping;
use crate::pairing::{Pairing, UnpairedReason};
use serde::Serialize;
use std::collections::HashSet;

/// An uncompared value that every divergence origin is computed from, the nearest such.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SharedProducer {
    /// The TorchScript value, its op and module.
    pub torch_value: String,
    pub torch_op: String,
    pub module: String,
    /// Why pairing left it without a twin (`coverage.unpaired`'s reason), when it said.
    pub reason: Option<UnpairedReason>,
    /// The origins' layer indices that read it.
    pub origins: Vec<usize>,
}

/// The nearest uncompared floating-point value computed from the inputs that at least two
/// origins read through uncompared values only; `None` with fewer than two origins or no
/// such value.
pub fn find(
    torch: &Capture,
    pairing: &Pairing,
    layers: &[LayerResult],
    origins: &[Divergence],
) -> Option<SharedProducer> {
    if origins.len() < 2 {
        return None;
    }
    let compared: HashSet<usize> = pairing
        .layers
        .iter()
        .chain(&pairing.inputs)
        .map(|p| p.torch)
        .collect();
    let reach: Vec<(usize, HashSet<usize>)> = origins
        .iter()
        .filter_map(|d| layers.get(d.layer_index))
        .map(|l| (l.index, uncompared_upstream(torch, &compared, l.torch_id)))
        .collect();
    // The latest value (nearest the origins) that two or more of them reach.
    let shared = reach
        .iter()
        .flat_map(|(_, set)| set.iter().copied())
        .filter(|v| reach.iter().filter(|(_, set)| set.contains(v)).count() >= 2)
        .max()?;
    let v = &torch.values[shared];
    Some(SharedProducer {
        torch_value: v.name.clone(),
        torch_op: v.op.clone(),
        module: v.module_path().to_string(),
        reason: pairing
            .unpaired
            .iter()
            .find(|u| u.side == crate::capture::Side::Torch && u.id == shared)
            .map(|u| u.reason.clone()),
        origins: reach
            .iter()
            .filter(|(_, set)| set.contains(&shared))
            .map(|(index, _)| *index)
            .collect(),
    })
}

/// The uncompared computing values `start` is computed from, walking up through uncompared
/// values only (a compared value is where PyTorch's own value was fed in isolation).
fn uncompared_upstream(torch: &Capture, compared: &HashSet<usize>, start: usize) -> HashSet<usize> {
    let values = &torch.values;
    let mut found = HashSet::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = values[start].inputs.clone();
    while let Some(u) = stack.pop() {
        if u >= values.len() || compared.contains(&u) || !seen.insert(u) {
            continue;
        }
        let v = &values[u];
        if v.role != ValueRole::Intermediate {
            continue;
        }
        if v.dtype.is_float() && !is_bookkeeping(v) {
            found.insert(u);
        }
        stack.extend(&v.inputs);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::{CapturedValue, Side};
    use crate::pairing::{Pair, Unpaired};

    fn value(id: usize, op: &str, role: ValueRole, inputs: &[usize]) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: op.into(),
            node: String::new(),
            scope: vec![],
            scope_recorded: true,
            source: None,
            source_stack: vec![],
            role,
            dtype: DType::F32,
            shape: vec![4],
            inputs: inputs.to_vec(),
            tensor: None,
        }
    }

    fn pair(torch: usize) -> Pair {
        Pair {
            torch,
            onnx: torch,
            paired_by: "module_output",
            fused: vec![],
            follows_dataflow: true,
            certain: true,
        }
    }

    fn origin(layers: &[LayerResult], index: usize) -> Divergence {
        crate::compare::evaluate::divergence_of(&layers[index])
    }

    #[test]
    fn two_origins_reading_one_uncompared_norm_name_it_one_origin_names_nothing() {
        // input 0 -> norm 1 (uncompared) -> mul 2 (uncompared) -> q 3, k 4 (both failing).
        let torch = Capture {
            side: Side::Torch,
            values: vec![
                value(0, "input", ValueRole::Input(0), &[]),
                value(1, "aten::rsqrt", ValueRole::Intermediate, &[0]),
                value(2, "aten::mul", ValueRole::Intermediate, &[0, 1]),
                value(3, "aten::linear", ValueRole::Intermediate, &[2]),
                value(4, "aten::linear", ValueRole::Intermediate, &[2]),
            ],
            uncapturable: vec![],
            element_inputs: Default::default(),
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
        };
        let pairing = Pairing {
            inputs: vec![pair(0)],
            layers: vec![pair(3), pair(4)],
            unpaired: vec![Unpaired {
                side: Side::Torch,
                id: 2,
                name: "v2".into(),
                op: "aten::mul".into(),
                module: "norm".into(),
                reason: UnpairedReason::NoCompatibleOnnxOp {
                    scope: "norm".into(),
                },
                accounted: false,
            }],
            ..Default::default()
        };
        let mut layers = vec![
            crate::compare::evaluate::tests::layer_result(0),
            crate::compare::evaluate::tests::layer_result(1),
        ];
        layers[0].torch_id = 3;
        layers[1].torch_id = 4;
        let both = [origin(&layers, 0), origin(&layers, 1)];
        let found = find(&torch, &pairing, &layers, &both).expect("a shared producer");
        assert_eq!(found.torch_value, "v2");
        assert_eq!(found.origins, vec![0, 1]);
        assert_eq!(
            found.reason,
            Some(UnpairedReason::NoCompatibleOnnxOp {
                scope: "norm".into()
            })
        );
        assert_eq!(find(&torch, &pairing, &layers, &both[..1]), None);
        // Compared in between: the mul is paired, so each origin was fed PyTorch's value.
        let mut compared = pairing.clone();
        compared.layers.push(pair(2));
        assert_eq!(find(&torch, &compared, &layers, &both), None);
    }
}
