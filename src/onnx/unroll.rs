//! Unrolling an ONNX `Loop` whose trip count is a constant and whose condition stays true:
//! its body is copied once per iteration into the graph around it, so that every value the
//! body computes becomes a main-graph value that can be a graph output (nothing inside a
//! subgraph can).
//!
//! `Loop(M, cond, v_1..v_N)` with body inputs `(iteration, cond, v_1..v_N)` and body outputs
//! `(cond', v_1'..v_N')`: copy k reads the loop's initial values (k = 0) or copy k-1's
//! results, its iteration number is a Constant k, and every name it defines gets `@iterK`
//! (the TorchScript side names loop values `name@iterK` too); node names get the same suffix,
//! so the module scope read from a legacy name is unchanged. The last copy's results take
//! the loop's output names, so nothing after the loop changes. A loop with scan outputs
//! (values stacked over iterations) is left as it is.

use super::constant_scalar::Scope;
use super::graph_edit::{constant_node, defined_names, identity_node, rename_node};
use super::proto;
use std::collections::HashMap;

/// Unrolling stops being a help beyond this many copied nodes.
pub const MAX_COPIED_NODES: usize = 4096;

/// The loop's trip count when it can be unrolled, else why it stays a Loop.
pub fn static_trips(scope: &Scope, node: &proto::NodeProto) -> Result<usize, String> {
    let body = body(node).ok_or("it has no body")?;
    if !body.initializer.is_empty() {
        return Err("its body holds initializers of its own".into());
    }
    let carried = body.input.len().saturating_sub(2);
    if body.input.len() < 2 || body.output.len() != carried + 1 {
        return Err(
            "it has scan outputs (values stacked over the iterations), which are not unrolled"
                .into(),
        );
    }
    let trips = match node.input.first().map(String::as_str) {
        None | Some("") => return Err("it has no trip count (it runs until its condition)".into()),
        Some(m) => scope
            .scalar(m)
            .ok_or("its trip count is computed at run time")?,
    };
    let runs = match node.input.get(1).map(String::as_str) {
        None | Some("") => true,
        Some(c) => {
            scope
                .scalar(c)
                .ok_or("its condition is computed at run time")?
                != 0
        }
    };
    let trips = if runs { trips.max(0) as usize } else { 0 };
    let body_scope = Scope {
        nodes: &body.node,
        initializers: &[],
        outer: Some(scope),
    };
    let cond_out = body.output[0].name();
    let stays_true = cond_out == body.input[1].name() || body_scope.scalar(cond_out) == Some(1);
    if trips > 1 && !stays_true {
        return Err("its body computes whether to go on".into());
    }
    if trips.saturating_mul(body.node.len()) > MAX_COPIED_NODES {
        return Err(format!(
            "its {trips} iterations would copy more than {MAX_COPIED_NODES} nodes"
        ));
    }
    Ok(trips)
}

/// The body attribute of a Loop node.
fn body(node: &proto::NodeProto) -> Option<&proto::GraphProto> {
    node.attribute
        .iter()
        .find(|a| a.name() == "body")
        .and_then(|a| a.g.as_ref())
}

/// The nodes that replace `node` (a Loop that `static_trips` accepted) in its graph.
pub fn unroll(node: &proto::NodeProto, trips: usize) -> Vec<proto::NodeProto> {
    let body = body(node).expect("checked by static_trips");
    let carried = body.input.len() - 2;
    let mut current: Vec<String> = (0..carried)
        .map(|j| node.input.get(2 + j).cloned().unwrap_or_default())
        .collect();
    let defined = defined_names(body);
    let mut out = Vec::new();
    for k in 0..trips {
        let mut rename: HashMap<String, String> = HashMap::new();
        for d in &defined {
            rename.insert(d.clone(), format!("{d}@iter{k}"));
        }
        let iteration = format!("{}@iter{k}", body.input[0].name());
        out.push(constant_node(
            &format!("{}/iteration@iter{k}", node.name()),
            &iteration,
            proto::tensor_proto::DataType::Int64,
            k as i64,
        ));
        rename.insert(body.input[0].name().to_string(), iteration);
        let condition = format!("{}@iter{k}", body.input[1].name());
        out.push(constant_node(
            &format!("{}/condition@iter{k}", node.name()),
            &condition,
            proto::tensor_proto::DataType::Bool,
            1,
        ));
        rename.insert(body.input[1].name().to_string(), condition);
        for (j, value) in current.iter().enumerate() {
            rename.insert(body.input[2 + j].name().to_string(), value.clone());
        }
        if k + 1 == trips {
            // The last copy's results are the loop's: they take its output names.
            for (j, result) in body.output[1..].iter().enumerate() {
                let loop_out = node.output.get(j).filter(|o| !o.is_empty());
                if let (Some(o), true) = (loop_out, defined.contains(result.name())) {
                    rename.insert(result.name().to_string(), o.clone());
                }
            }
        }
        for inner in &body.node {
            let mut copy = inner.clone();
            rename_node(&mut copy, &rename);
            copy.name = Some(format!("{}@iter{k}", inner.name()));
            out.push(copy);
        }
        current = body.output[1..]
            .iter()
            .map(|o| {
                rename
                    .get(o.name())
                    .cloned()
                    .unwrap_or_else(|| o.name().to_string())
            })
            .collect();
    }
    // Results the last copy did not name (a value passed through, or no iteration at all).
    for (j, value) in current.iter().enumerate() {
        if let Some(o) = node.output.get(j).filter(|o| !o.is_empty() && *o != value) {
            out.push(identity_node(
                &format!("{}/result{j}", node.name()),
                value,
                o,
            ));
        }
    }
    out
}
