//! Unrolling an ONNX `Loop` whose trip count is known (a constant trip count and a condition
//! that stays true, or the iterations it ran on the check's inputs, `steering`):
//! its body is copied once per iteration into the graph around it, so that every value the
//! body computes becomes a main-graph value that can be a graph output (nothing inside a
//! subgraph can).
//!
//! `Loop(M, cond, v_1..v_N)` with body inputs `(iteration, cond, v_1..v_N)` and body outputs
//! `(cond', v_1'..v_N')`: copy k reads the loop's initial values (k = 0) or copy k-1's
//! results, its iteration number is a Constant k, and every name it defines gets `@iterK`
//! (the TorchScript side names loop values `name@iterK` too); node names get the same suffix,
//! so the module scope read from a legacy name is unchanged. The last copy's results take
//! the loop's output names, so nothing after the loop changes. A scan output (a value stacked
//! over the iterations) is each copy's value stacked again after the last copy.

use super::constant_scalar::Scope;
use super::graph_edit::{constant_node, defined_names, identity_node, rename_node};
use super::proto;
use std::collections::HashMap;

/// Unrolling a loop constants fix stops being a help beyond this many copied nodes.
pub const MAX_COPIED_NODES: usize = 4096;

/// The same for a loop the check's inputs steer, whose values are otherwise not compared at
/// all: a detector's per-detection loop (100 detections of a 111-node keypoint decoder) is
/// still worth its copies.
pub const MAX_MEASURED_COPIES: usize = 32768;

/// The loop's trip count when it can be unrolled, else why it stays a Loop. `measured`: the
/// iterations it ran on the check's inputs (`steering`), which fix the count whatever
/// computes the trip count or the condition.
pub fn static_trips(
    scope: &Scope,
    node: &proto::NodeProto,
    measured: Option<usize>,
) -> Result<usize, String> {
    let body = body(node).ok_or("it has no body")?;
    if !body.initializer.is_empty() {
        return Err("its body holds initializers of its own".into());
    }
    let carried = body.input.len().saturating_sub(2);
    if body.input.len() < 2 || body.output.len() < carried + 1 {
        return Err("its body's inputs and outputs do not match".into());
    }
    let trips = match measured {
        Some(trips) => trips,
        None => constant_trips(scope, node, body)?,
    };
    let limit = match measured {
        Some(_) => MAX_MEASURED_COPIES,
        None => MAX_COPIED_NODES,
    };
    if trips.saturating_mul(body.node.len() + 2) > limit {
        return Err(format!(
            "its {trips} iterations would copy more than {limit} nodes"
        ));
    }
    Ok(trips)
}

/// The trip count constants fix: a constant `M`, a constant initial condition, and a body
/// that keeps the condition true.
fn constant_trips(
    scope: &Scope,
    node: &proto::NodeProto,
    body: &proto::GraphProto,
) -> Result<usize, String> {
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
    Ok(trips)
}

/// How many scan outputs (values stacked over the iterations) a Loop has.
pub fn scan_outputs(node: &proto::NodeProto) -> usize {
    body(node).map_or(0, |b| {
        let carried = b.input.len().saturating_sub(2);
        b.output.len().saturating_sub(1 + carried)
    })
}

/// The body attribute of a Loop node.
fn body(node: &proto::NodeProto) -> Option<&proto::GraphProto> {
    node.attribute
        .iter()
        .find(|a| a.name() == "body")
        .and_then(|a| a.g.as_ref())
}

/// The nodes that replace `node` (a Loop that `static_trips` accepted) in its graph; `None`
/// for a loop with scan outputs that ran no iteration (an empty stack has no element to
/// take its shape from).
pub fn unroll(node: &proto::NodeProto, trips: usize) -> Option<Vec<proto::NodeProto>> {
    let body = body(node)?;
    let carried = body.input.len() - 2;
    let scans = body.output.len() - 1 - carried;
    if scans > 0 && trips == 0 {
        return None;
    }
    // Each iteration's scan values, stacked after the last copy.
    let mut stacked: Vec<Vec<String>> = vec![Vec::new(); scans];
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
            for (j, result) in body.output[1..=carried].iter().enumerate() {
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
        let renamed = |o: &proto::ValueInfoProto| {
            rename
                .get(o.name())
                .cloned()
                .unwrap_or_else(|| o.name().to_string())
        };
        current = body.output[1..=carried].iter().map(renamed).collect();
        for (j, scan) in body.output[1 + carried..].iter().enumerate() {
            stacked[j].push(renamed(scan));
        }
    }
    out.extend(loop_results(node, &current, &stacked));
    Some(out)
}

/// The nodes that give the loop's outputs their values after the copies: each scan output
/// stacked from the copies' values, and each carried result the last copy did not name (a
/// value passed through, or no iteration at all).
fn loop_results(
    node: &proto::NodeProto,
    current: &[String],
    stacked: &[Vec<String>],
) -> Vec<proto::NodeProto> {
    let mut out = Vec::new();
    let carried = current.len();
    for (j, values) in stacked.iter().enumerate() {
        if let Some(o) = node.output.get(carried + j).filter(|o| !o.is_empty()) {
            out.extend(stack_node(node.name(), j, values, o));
        }
    }
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

/// `output = stack(values)` along a new first axis, as a Loop stacks a scan output: the
/// values in a sequence, concatenated with a new axis (opset 11 and later, as Loop's scan
/// outputs of any exporter that writes them).
fn stack_node(loop_name: &str, j: usize, values: &[String], output: &str) -> Vec<proto::NodeProto> {
    let sequence = format!("{loop_name}/scan{j}/sequence");
    let construct = proto::NodeProto {
        name: Some(format!("{loop_name}/scan{j}/construct")),
        op_type: Some("SequenceConstruct".into()),
        input: values.to_vec(),
        output: vec![sequence.clone()],
        ..Default::default()
    };
    let int = |name: &str, i: i64| proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        i: Some(i),
        ..Default::default()
    };
    let concat = proto::NodeProto {
        name: Some(format!("{loop_name}/scan{j}/stack")),
        op_type: Some("ConcatFromSequence".into()),
        input: vec![sequence],
        output: vec![output.to_string()],
        attribute: vec![int("axis", 0), int("new_axis", 1)],
        ..Default::default()
    };
    vec![construct, concat]
}
