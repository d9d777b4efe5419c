//! Inlining the branch an ONNX `If` takes when its condition is fixed before the run (a
//! constant, an initializer, or either through Identity/Cast): the branch's nodes move into
//! the graph around it, so that their values can be graph outputs, and the branch results
//! take the If's output names. An If on data computed at run time stays: which branch runs
//! depends on the input, and the capture is made for many inputs by one instrumented model.

use super::constant_scalar::Scope;
use super::graph_edit::{defined_names, identity_node, rename_node};
use super::proto;
use std::collections::HashMap;

/// The branch attribute (`then_branch` or `else_branch`) the If takes, else why it stays.
/// `measured`: the condition the check's inputs gave it (`steering`), where constants do not
/// fix it.
pub fn taken_branch(
    scope: &Scope,
    node: &proto::NodeProto,
    measured: Option<i64>,
) -> Result<&'static str, String> {
    let cond = node.input.first().map(String::as_str).unwrap_or_default();
    match scope.scalar(cond).or(measured) {
        Some(0) => Ok("else_branch"),
        Some(_) => Ok("then_branch"),
        None => Err("its condition is computed from the data at run time".into()),
    }
}

/// The nodes that replace `node` (an If) when it takes `branch`; `None` when the node has no
/// such branch, its outputs do not match the If's, or it holds initializers of its own.
pub fn inline(node: &proto::NodeProto, branch: &str) -> Option<Vec<proto::NodeProto>> {
    let graph = node
        .attribute
        .iter()
        .find(|a| a.name() == branch)
        .and_then(|a| a.g.as_ref())?;
    // Initializers of the branch's own would have to move too; exporters do not write them.
    if graph.output.len() != node.output.len() || !graph.initializer.is_empty() {
        return None;
    }
    let defined = defined_names(graph);
    let mut rename: HashMap<String, String> = HashMap::new();
    let mut passed = Vec::new();
    for (result, out) in graph.output.iter().zip(&node.output) {
        if out.is_empty() {
            continue;
        }
        if defined.contains(result.name()) && !rename.contains_key(result.name()) {
            rename.insert(result.name().to_string(), out.clone());
        } else {
            passed.push((result.name().to_string(), out.clone()));
        }
    }
    let mut nodes: Vec<proto::NodeProto> = graph.node.clone();
    for n in &mut nodes {
        rename_node(n, &rename);
    }
    for (j, (from, to)) in passed.iter().enumerate() {
        let from = rename.get(from).unwrap_or(from);
        nodes.push(identity_node(
            &format!("{}/result{j}", node.name()),
            from,
            to,
        ));
    }
    Some(nodes)
}
