//! Quantised values made observable: a model transform that turns the integer output of a
//! quantised operator (QOperator's `QLinearConv`, `QLinearMatMul`, com.microsoft's
//! `QLinearAdd`, `QGemm`, ..., dynamic quantisation's `DynamicQuantizeLinear`) into the float
//! value it stands for, so that it pairs and compares with PyTorch's float exactly as a QDQ
//! model's DequantizeLinear outputs do.
//!
//! Each such operator declares its output's scale and zero point: as inputs (QLinearConv's
//! inputs 6 and 7, `y_scale` and `y_zero_point`) or, for DynamicQuantizeLinear, as its own
//! outputs 1 and 2. Ops that only move data (Flatten, Reshape, MaxPool, ...) keep their
//! input's codes and so its scale and zero point. For every such value `y` (not a graph
//! output, whose type is the model's contract) the producer's output becomes `y::codes`, a
//! `DequantizeLinear(y::codes, scale, zero point)` computes the float `y`, and a
//! `QuantizeLinear(y, scale, zero point)` gives the consumers `y::requantized`, which equals
//! the codes bit for bit: `(q - zp) * s` divided by `s` rounds back to `q - zp` for every
//! integer code. The model's answer is therefore unchanged, the capture sees floats, and an
//! isolation run that feeds PyTorch's float value at `y` quantises it with the model's own
//! parameters before the consumers read it.
//!
//! Only per-tensor parameters are dequantised (a one-element scale stored in the graph, or
//! one DynamicQuantizeLinear computes, which is always a scalar); a value quantised per axis
//! stays integer and is left out of the ranking as before. Pure protobuf, idempotent.

use super::proto::{self, NodeProto};
use std::collections::{HashMap, HashSet};

/// The integer codes a quantised operator wrote, renamed so that the float value keeps the
/// original name.
pub const CODES: &str = "::codes";
/// The codes again, quantised back from the float value, as the consumers read them.
pub const REQUANTIZED: &str = "::requantized";

/// Where an operator declares its first output's scale and zero point among its inputs, from
/// the ONNX and com.microsoft operator specifications (`y_scale`, `y_zero_point`).
const DECLARED: [(&str, usize, usize); 14] = [
    ("QLinearConv", 6, 7),
    ("QLinearMatMul", 6, 7),
    ("QLinearAdd", 6, 7),
    ("QLinearMul", 6, 7),
    ("QLinearAveragePool", 3, 4),
    ("QLinearGlobalAveragePool", 3, 4),
    ("QLinearSigmoid", 3, 4),
    ("QLinearLeakyRelu", 3, 4),
    ("QLinearSoftmax", 3, 4),
    ("QLinearReduceMean", 3, 4),
    ("QLinearConcat", 0, 1),
    ("QLinearWhere", 7, 8),
    ("QGemm", 7, 8),
    ("QLinearConvTranspose", 6, 7),
];

/// Ops whose outputs are their first input's codes moved or selected, never recomputed: the
/// codes keep that input's scale and zero point.
const DATA_MOVEMENT: [&str; 18] = [
    "Flatten",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "MaxPool",
    "GlobalMaxPool",
    "Slice",
    "Gather",
    "Split",
    "Expand",
    "Tile",
    "Pad",
    "DepthToSpace",
    "SpaceToDepth",
    "ReduceMax",
    "ReduceMin",
];

/// Whether `op_type` is an operator that declares its output's quantisation (for detection).
pub fn declares_output_quantization(op_type: &str) -> bool {
    op_type == "DynamicQuantizeLinear" || DECLARED.iter().any(|(op, _, _)| *op == op_type)
}

/// A value's quantisation: the names of its scale and zero point (`None`: uint8, zero 0).
#[derive(Debug, Clone, PartialEq)]
struct Params {
    scale: String,
    zero_point: Option<String>,
}

/// Rewrites `model` so that every per-tensor quantised value is a float value of the same
/// name (see the file's head); returns how many values it dequantised. The first
/// `contract_outputs` graph outputs are the model's own and keep their type (an instrumented
/// copy lists every exposed value after them). A model already rewritten, or whose default
/// opset has no DequantizeLinear (below 10), is left alone.
pub fn make_observable(model: &mut proto::ModelProto, contract_outputs: usize) -> usize {
    if super::model::opset_of(model) < 10 {
        return 0;
    }
    let Some(graph) = model.graph.as_mut() else {
        return 0;
    };
    if graph
        .node
        .iter()
        .any(|n| n.output.iter().any(|o| o.ends_with(CODES)))
    {
        return 0;
    }
    let chosen = quantised_values(graph, contract_outputs);
    if chosen.is_empty() {
        return 0;
    }
    let renamed: HashSet<&str> = chosen.iter().map(|(_, v, _)| v.as_str()).collect();
    // Consumers read the requantised codes; the producer writes the codes.
    for node in graph.node.iter_mut() {
        for input in node.input.iter_mut() {
            if renamed.contains(input.as_str()) {
                *input = format!("{input}{REQUANTIZED}");
            }
        }
    }
    // A recorded type of `y` is the codes' type.
    for vi in graph.value_info.iter_mut() {
        if renamed.contains(vi.name()) {
            vi.name = Some(format!("{}{CODES}", vi.name()));
        }
    }
    // Inserted from the back so that earlier producers keep their positions.
    let mut chosen = chosen;
    chosen.sort_by_key(|(at, _, _)| std::cmp::Reverse(*at));
    for (at, value, params) in &chosen {
        let producer = &mut graph.node[*at];
        let base = producer.name().to_string();
        for out in producer.output.iter_mut().filter(|o| *o == value) {
            *out = format!("{value}{CODES}");
        }
        let with = |first: String| {
            let mut inputs = vec![first, params.scale.clone()];
            inputs.extend(params.zero_point.clone());
            inputs
        };
        let dequantize = NodeProto {
            name: Some(format!("{base}{CODES}/DequantizeLinear")),
            op_type: Some("DequantizeLinear".into()),
            input: with(format!("{value}{CODES}")),
            output: vec![value.clone()],
            ..Default::default()
        };
        let requantize = NodeProto {
            name: Some(format!("{base}{REQUANTIZED}/QuantizeLinear")),
            op_type: Some("QuantizeLinear".into()),
            input: with(value.clone()),
            output: vec![format!("{value}{REQUANTIZED}")],
            ..Default::default()
        };
        graph.node.insert(at + 1, requantize);
        graph.node.insert(at + 1, dequantize);
    }
    chosen.len()
}

/// `(producer index, value, its quantisation)` for every value the transform dequantises, in
/// graph order: node outputs with per-tensor parameters that are not graph outputs and are
/// not read inside a subgraph (which would keep reading the old name's type).
fn quantised_values(
    graph: &proto::GraphProto,
    contract_outputs: usize,
) -> Vec<(usize, String, Params)> {
    let one_element: HashSet<&str> = graph
        .initializer
        .iter()
        .filter(|t| t.dims.iter().product::<i64>() == 1)
        .map(|t| t.name())
        .collect();
    let graph_outputs: HashSet<&str> = graph
        .output
        .iter()
        .take(contract_outputs)
        .map(|o| o.name())
        .collect();
    let mut in_subgraphs = Vec::new();
    for node in &graph.node {
        for (_, sub) in super::expose::subgraphs(node) {
            super::expose::collect_used_names(sub, &mut in_subgraphs);
        }
    }
    let in_subgraphs: HashSet<&str> = in_subgraphs.into_iter().collect();
    let present = |i: Option<&String>| i.filter(|n| !n.is_empty()).cloned();

    let mut params_of: HashMap<&str, Params> = HashMap::new();
    let mut chosen = Vec::new();
    for (at, node) in graph.node.iter().enumerate() {
        let op = node.op_type();
        let found: Vec<(&String, Params)> = if op == "DynamicQuantizeLinear" {
            // Its scale and zero point are its own outputs 1 and 2, scalars by definition.
            match (node.output.first(), present(node.output.get(1))) {
                (Some(y), Some(scale)) => vec![(
                    y,
                    Params {
                        scale,
                        zero_point: present(node.output.get(2)),
                    },
                )],
                _ => Vec::new(),
            }
        } else if let Some(&(_, s, z)) = DECLARED.iter().find(|(o, _, _)| *o == op) {
            // An absent output scale means a float output (QGemm without y_scale).
            match (node.output.first(), present(node.input.get(s))) {
                (Some(y), Some(scale)) if one_element.contains(scale.as_str()) => {
                    let zero_point = present(node.input.get(z));
                    let zp_ok = zero_point
                        .as_deref()
                        .is_none_or(|zp| one_element.contains(zp));
                    if zp_ok {
                        vec![(y, Params { scale, zero_point })]
                    } else {
                        Vec::new()
                    }
                }
                _ => Vec::new(),
            }
        } else if DATA_MOVEMENT.contains(&op) {
            match node.input.first().and_then(|i| params_of.get(i.as_str())) {
                Some(p) => node.output.iter().map(|o| (o, p.clone())).collect(),
                None => Vec::new(),
            }
        } else {
            Vec::new()
        };
        for (y, params) in found {
            if y.is_empty() {
                continue;
            }
            params_of.insert(y.as_str(), params.clone());
            if !graph_outputs.contains(y.as_str()) && !in_subgraphs.contains(y.as_str()) {
                chosen.push((at, y.clone(), params));
            }
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_graph::node;
    use proto::{GraphProto, ModelProto, OperatorSetIdProto, TensorProto, ValueInfoProto};

    fn scalar(name: &str) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            ..Default::default()
        }
    }

    fn model(nodes: Vec<NodeProto>, initializers: Vec<TensorProto>) -> ModelProto {
        ModelProto {
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(17),
            }],
            graph: Some(GraphProto {
                node: nodes,
                initializer: initializers,
                output: vec![ValueInfoProto {
                    name: Some("out".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn qconv(name: &str, x: &str, y: &str) -> NodeProto {
        node(
            name,
            "QLinearConv",
            &[x, "xs", "xz", "w", "ws", "wz", "ys", "yz"],
            &[y],
        )
    }

    #[test]
    fn an_operators_declared_output_quantisation_dequantises_its_output() {
        let mut m = model(
            vec![
                qconv("conv", "xq", "y"),
                node("flat", "Flatten", &["y"], &["f"]),
                qconv("conv2", "f", "out"),
            ],
            ["ys", "yz"].map(scalar).to_vec(),
        );
        assert_eq!(make_observable(&mut m, usize::MAX), 2);
        let g = m.graph.as_ref().unwrap();
        let ops: Vec<(&str, &[String], &[String])> = g
            .node
            .iter()
            .map(|n| (n.op_type(), &n.input[..], &n.output[..]))
            .collect();
        // conv writes codes; y is their float value; the Flatten reads the codes again and
        // its own output (y's codes moved) is dequantised with y's parameters.
        assert_eq!(ops[0].2, ["y::codes"]);
        assert_eq!(
            ops[1],
            (
                "DequantizeLinear",
                &["y::codes".to_string(), "ys".into(), "yz".into()][..],
                &["y".to_string()][..]
            )
        );
        assert_eq!(ops[2].0, "QuantizeLinear");
        assert_eq!(ops[2].2, ["y::requantized"]);
        assert_eq!(ops[3].1, ["y::requantized"]);
        assert_eq!(ops[3].2, ["f::codes"]);
        assert_eq!(ops[4].1[1..], ["ys".to_string(), "yz".into()]);
        // The graph output keeps its type: the last conv is untouched but reads f requantised.
        assert_eq!(ops[6].1[0], "f::requantized");
        assert_eq!(ops[6].2, ["out"]);
        // Idempotent.
        assert_eq!(make_observable(&mut m, usize::MAX), 0);
    }

    #[test]
    fn dynamic_quantisation_uses_its_own_scale_outputs() {
        let mut m = model(
            vec![
                node("dq", "DynamicQuantizeLinear", &["x"], &["q", "s", "z"]),
                node("mm", "MatMulInteger", &["q", "w", "z", "wz"], &["out"]),
            ],
            Vec::new(),
        );
        assert_eq!(make_observable(&mut m, usize::MAX), 1);
        let g = m.graph.as_ref().unwrap();
        assert_eq!(g.node[0].output, ["q::codes", "s", "z"]);
        assert_eq!(g.node[1].input, ["q::codes", "s", "z"]);
        assert_eq!(g.node[1].output, ["q"]);
        assert_eq!(g.node[3].input, ["q::requantized", "w", "z", "wz"]);
    }

    #[test]
    fn per_axis_parameters_and_float_models_are_left_alone() {
        let mut per_axis = scalar("ys");
        per_axis.dims = vec![16];
        let mut m = model(
            vec![qconv("conv", "xq", "y"), qconv("conv2", "y", "out")],
            vec![per_axis, scalar("yz")],
        );
        assert_eq!(make_observable(&mut m, usize::MAX), 0);
        let mut f = model(vec![node("relu", "Relu", &["x"], &["out"])], Vec::new());
        assert_eq!(make_observable(&mut f, usize::MAX), 0);
    }
}
