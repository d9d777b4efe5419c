//! Whether an ONNX model was exported in training mode (`torch.onnx.export(...,
//! training=TrainingMode.TRAINING)`): BatchNormalization nodes with `training_mode=1` and
//! stored running statistics use the batch's statistics instead, and Dropout nodes whose
//! `training_mode` input is a constant true drop values at random. Read from the graph, never
//! from names.

use super::proto::{GraphProto, NodeProto, TensorProto};
use super::OnnxModel;

/// One line naming what in the graph runs in training mode, if anything does.
pub fn training_mode(model: &OnnxModel) -> Option<String> {
    let graph = model.graph();
    let sites: Vec<String> = graph
        .node
        .iter()
        .filter_map(|node| match node.op_type() {
            "BatchNormalization"
                if attribute_int(node, "training_mode") == Some(1)
                    && has_running_statistics(graph, node) =>
            {
                Some(format!(
                    "{} (BatchNormalization, training_mode=1)",
                    node.name()
                ))
            }
            "Dropout" if dropout_is_active(graph, node) => {
                Some(format!("{} (Dropout, training_mode=true)", node.name()))
            }
            _ => None,
        })
        .collect();
    let first = sites.first()?;
    let more = match sites.len() {
        1 => String::new(),
        n => format!(" and {} more node(s)", n - 1),
    };
    Some(format!(
        "the ONNX model was exported in training mode: {first}{more}; export it after \
         model.eval() with torch.onnx.export(..., training=torch.onnx.TrainingMode.EVAL) \
         (the default)"
    ))
}

/// Whether the node's running mean is a stored buffer (an initializer). A BatchNorm without
/// running statistics (`track_running_stats=False`) is exported with `training_mode=1` in eval
/// mode too, its mean computed from the batch by the nodes before it: that is not training.
fn has_running_statistics(graph: &GraphProto, node: &NodeProto) -> bool {
    node.input
        .get(3)
        .is_some_and(|mean| graph.initializer.iter().any(|t| t.name() == mean))
}

fn attribute_int(node: &NodeProto, name: &str) -> Option<i64> {
    node.attribute
        .iter()
        .find(|a| a.name() == name)
        .and_then(|a| a.i)
}

/// Dropout's third input, `training_mode`, when it is a constant (an initializer or a
/// Constant node's value) holding true.
fn dropout_is_active(graph: &GraphProto, node: &NodeProto) -> bool {
    let Some(flag) = node.input.get(2).filter(|n| !n.is_empty()) else {
        return false;
    };
    let from_initializer = graph.initializer.iter().find(|t| t.name() == flag);
    let from_constant = graph
        .node
        .iter()
        .filter(|n| n.op_type() == "Constant" && n.output.iter().any(|o| o == flag))
        .find_map(|n| n.attribute.iter().find(|a| a.name() == "value")?.t.as_ref());
    from_initializer.or(from_constant).is_some_and(holds_true)
}

/// Whether a scalar boolean tensor holds true, stored either way the format allows.
fn holds_true(t: &TensorProto) -> bool {
    match &t.raw_data {
        Some(raw) => raw.first().is_some_and(|&b| b != 0),
        None => t.int32_data.first().is_some_and(|&v| v != 0),
    }
}
