//! The first run that measures what steers a model's control flow on the check's inputs
//! (`steering`): the condition of each `If` and the iterations of each `Loop` that
//! `control_flow` could not rewrite from constants. A copy of the graph, rewritten with what
//! is known so far, also returns each such `If`'s condition and, for each such `Loop`, a scan
//! output of its iteration numbers (its length is the number of iterations that ran); it runs
//! once per sample. Values that agree on every sample are known; the next round sees the
//! control flow that unrolling or inlining brought into the main graph (an `If` inside a
//! loop body), until nothing new is learned.

use super::capture::run_plain;
use super::control_flow::make_observable;
use super::graph_edit::identity_node;
use super::model::OnnxModel;
use super::proto;
use super::steering::Steering;
use crate::capture::tensor::HostTensor;
use anyhow::{anyhow, Result};
use std::collections::HashSet;
use std::path::Path;

/// Rounds of probing: each brings one more level of nested control flow into the main graph.
const MAX_ROUNDS: usize = 4;

/// One value a probe run returns.
enum Wanted {
    /// An `If`'s condition, by its value name.
    Condition(String),
    /// A `Loop`'s iterations: its node name and the probe output counting them.
    Trips { node: String, output: String },
}

impl Wanted {
    fn output(&self) -> &str {
        match self {
            Wanted::Condition(name) => name,
            Wanted::Trips { output, .. } => output,
        }
    }

    fn key(&self) -> &str {
        match self {
            Wanted::Condition(name) => name,
            Wanted::Trips { node, .. } => node,
        }
    }

    /// What the probe's value says: the condition (0 or 1) or the number of iterations.
    fn read(&self, t: &HostTensor) -> Option<i64> {
        match self {
            Wanted::Condition(_) => (t.numel() == 1).then(|| i64::from(t.data.get_f64(0) != 0.0)),
            Wanted::Trips { .. } => t.shape.first().map(|&n| n as i64),
        }
    }
}

/// The steering of `model`'s control flow on `samples` (each the graph's inputs by name).
pub fn measure(
    model: &OnnxModel,
    samples: &[Vec<(String, HostTensor)>],
    (threads, custom_ops): (usize, Option<&Path>),
) -> Result<Steering> {
    let mut steering = Steering::default();
    for _ in 0..MAX_ROUNDS {
        let mut proto = model.proto.clone();
        make_observable(&mut proto, &steering);
        let wanted = instrument(&mut proto, &steering);
        if wanted.is_empty() || samples.is_empty() {
            break;
        }
        let probe = OnnxModel {
            path: model.path.clone(),
            proto,
            external_data_dir: model.external_data_dir.clone(),
        };
        let mut seen: Vec<Vec<Option<i64>>> = vec![Vec::new(); wanted.len()];
        for sample in samples {
            let outputs = run_plain(&probe, sample, threads, custom_ops)?;
            for (w, seen) in wanted.iter().zip(&mut seen) {
                let (_, t) = outputs
                    .iter()
                    .find(|(n, _)| n == w.output())
                    .ok_or_else(|| anyhow!("the probe run returned no `{}`", w.output()))?;
                seen.push(w.read(t));
            }
        }
        if !learn(&wanted, &seen, &mut steering) {
            break;
        }
    }
    Ok(steering)
}

/// Adds what every sample agrees on to `steering` (the rest to its `differing`); whether
/// anything was learned.
fn learn(wanted: &[Wanted], seen: &[Vec<Option<i64>>], steering: &mut Steering) -> bool {
    let mut learned = false;
    for (w, values) in wanted.iter().zip(seen) {
        let agreed = match values.first() {
            Some(Some(first)) if values.iter().all(|v| *v == Some(*first)) => Some(*first),
            _ => None,
        };
        match (w, agreed) {
            (Wanted::Condition(name), Some(v)) => {
                steering.conditions.insert(name.clone(), v);
            }
            (Wanted::Trips { node, .. }, Some(n)) => {
                steering.trips.insert(node.clone(), n.max(0) as usize);
            }
            (_, None) => {
                steering.differing.insert(w.key().to_string());
                continue;
            }
        }
        learned = true;
    }
    learned
}

fn is_control_flow(node: &proto::NodeProto, op: &str) -> bool {
    matches!(node.domain(), "" | "ai.onnx") && node.op_type() == op
}

/// Makes `proto` (rewritten with what is known) also return what steers its remaining
/// main-graph control flow; what it returns, in order.
fn instrument(proto: &mut proto::ModelProto, steering: &Steering) -> Vec<Wanted> {
    let Some(graph) = proto.graph.as_mut() else {
        return Vec::new();
    };
    let inputs: HashSet<String> = graph.input.iter().map(|i| i.name().to_string()).collect();
    let mut outputs: HashSet<String> = graph.output.iter().map(|o| o.name().to_string()).collect();
    let mut wanted = Vec::new();
    for node in &mut graph.node {
        let open = |key: &str| !key.is_empty() && !steering.differing.contains(key);
        if is_control_flow(node, "If") {
            let cond = node.input.first().cloned().unwrap_or_default();
            // A condition that is a graph input is not a value a run can return.
            if open(&cond) && !steering.conditions.contains_key(&cond) && !inputs.contains(&cond) {
                wanted.push(Wanted::Condition(cond));
            }
        } else if is_control_flow(node, "Loop") {
            let name = node.name().to_string();
            if open(&name) && !steering.trips.contains_key(&name) {
                if let Some(output) = count_iterations(node) {
                    wanted.push(Wanted::Trips { node: name, output });
                }
            }
        }
    }
    for w in &wanted {
        if outputs.insert(w.output().to_string()) {
            graph.output.push(proto::ValueInfoProto {
                name: Some(w.output().to_string()),
                ..Default::default()
            });
        }
    }
    wanted
}

/// Adds to a `Loop` a scan output of its iteration numbers; its output name.
fn count_iterations(node: &mut proto::NodeProto) -> Option<String> {
    let output = format!("{}/probe_iterations", node.name());
    let inner = format!("{}/probe_iteration", node.name());
    let body = node
        .attribute
        .iter_mut()
        .find(|a| a.name() == "body")
        .and_then(|a| a.g.as_mut())?;
    let iteration = body.input.first()?.name().to_string();
    body.node
        .push(identity_node(&format!("{inner}/node"), &iteration, &inner));
    body.output.push(int64_scalar(&inner));
    node.output.push(output.clone());
    Some(output)
}

/// A value info for an int64 scalar, as a Loop body's scan output must be typed.
fn int64_scalar(name: &str) -> proto::ValueInfoProto {
    proto::ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(proto::tensor_proto::DataType::Int64 as i32),
                    shape: Some(proto::TensorShapeProto { dim: Vec::new() }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}
