//! "Expose everything": a model transform that makes every node output a graph output
//! (Polygraphy's MARK_ALL), plus the description of each exposed value that capture needs.
//!
//! It is a pure function on the protobuf, kept apart from the runner so that it can be tested
//! on hand-built graphs. Extra outputs are added as a `ValueInfoProto` carrying only the
//! name: ONNX Runtime 1.31 infers their types, while half-filled types are rejected. The
//! original outputs keep their positions, so the instrumented model answers the same
//! questions as the original plus more. Control flow is first made observable
//! (`control_flow`: static loops unrolled, an If on a constant inlined); values still computed
//! inside control-flow bodies (If, Loop, Scan subgraphs) cannot be outputs of the main graph;
//! they are listed as uncapturable, with the reason their node stays.

use super::control_flow::{make_observable, Kept};
use super::fused_sums;
pub(crate) use super::graph_edit::{collect_used_names, subgraphs};
use super::proto;
use super::scope::{self, has_scope_record, node_scope, node_source, node_stack};
use super::steering::Steering;
use crate::capture::fx_node::{self, FxNode};
use crate::capture::{ScopeLevel, Uncapturable};
use anyhow::{bail, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// One node output that the instrumented model returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposedValue {
    /// Tensor name in the graph.
    pub name: String,
    /// Index of the producing node in `graph.node` of the original (and the exposed) model.
    pub node_index: usize,
    /// Which output of the producing node this is.
    pub output_index: usize,
    pub node_name: String,
    /// `Conv`; ops of other domains as `domain::Op` (`com.microsoft::FusedConv`).
    pub op_type: String,
    pub scope: Vec<ScopeLevel>,
    /// See `CapturedValue::scope_recorded`.
    pub scope_recorded: bool,
    /// Python `file:line` from the dynamo exporter's stack trace, where present.
    pub source: Option<String>,
    /// That whole stack trace, outermost frame first.
    pub source_stack: Vec<String>,
    /// The producing node's non-empty inputs, in order (weights and constants included).
    pub input_names: Vec<String>,
    /// The torch.export node the dynamo exporter says the producing node came from.
    pub fx_node: Option<FxNode>,
}

/// The instrumented model and what it exposes.
#[derive(Debug, Clone)]
pub struct Exposed {
    /// A copy of the model, its control flow made observable, whose graph outputs are the
    /// original ones followed by every other node output.
    pub model: proto::ModelProto,
    /// Every named node output of that graph in execution (topological) order, the
    /// original graph outputs included.
    pub values: Vec<ExposedValue>,
    /// Values computed inside subgraphs, which cannot be exposed.
    pub uncapturable: Vec<Uncapturable>,
}

/// The torch.export node the dynamo exporter marked `node` with, if any.
fn marked_fx_node(node: &proto::NodeProto) -> Option<FxNode> {
    scope::metadata(node, fx_node::ONNX_METADATA_KEY).and_then(FxNode::parse_printed)
}

/// Builds the instrumented copy of `model`. Errors when the model has no graph or its nodes
/// form a cycle.
pub fn expose_all(model: &proto::ModelProto) -> Result<Exposed> {
    expose_steered(model, &Steering::default())
}

/// [`expose_all`] with the control flow the check's inputs steer made observable too.
pub fn expose_steered(model: &proto::ModelProto, steering: &Steering) -> Result<Exposed> {
    if model.graph.is_none() {
        bail!("the ONNX model has no graph");
    }
    let mut exposed_model = model.clone();
    // On a model the runner made observable already, what stays and why.
    let kept = make_observable(&mut exposed_model, steering);
    fused_sums::make_observable(&mut exposed_model);
    let graph = exposed_model.graph.as_ref().expect("checked above");
    let order = topological_order(graph)?;

    let mut values = Vec::new();
    let mut uncapturable = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for &i in &order {
        let node = &graph.node[i];
        let scope = node_scope(node);
        let source = node_source(node);
        let source_stack = node_stack(node);
        let input_names: Vec<String> = node
            .input
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect();
        let op = op_name(node);
        for (k, out) in outputs_in_order(node) {
            // An empty name is an optional output the node does not produce.
            if out.is_empty() || !seen.insert(out.as_str()) {
                continue;
            }
            let (op_type, input_names) = match sum_of(node) {
                Some(_) if k == fused_sums::SUM_OUTPUT => {
                    (fused_sums::sum_op_name(&op), input_names.clone())
                }
                // The normalised output is computed from the sum (and the norm's weights).
                Some(sum) => (
                    op.clone(),
                    std::iter::once(sum)
                        .chain(node.input.get(2))
                        .cloned()
                        .collect(),
                ),
                None => (op.clone(), input_names.clone()),
            };
            values.push(ExposedValue {
                name: out.clone(),
                node_index: i,
                output_index: k,
                node_name: node.name().to_string(),
                op_type,
                scope: scope.clone(),
                scope_recorded: has_scope_record(node),
                source: source.clone(),
                source_stack: source_stack.clone(),
                input_names,
                fx_node: marked_fx_node(node),
            });
        }
        for (attr, sub) in subgraphs(node) {
            list_subgraph_values(node, attr, sub, &kept, &mut uncapturable);
        }
    }

    let g = exposed_model.graph.as_mut().expect("checked above");
    let already: HashSet<String> = g.output.iter().map(|o| o.name().to_string()).collect();
    for v in &values {
        if !already.contains(&v.name) {
            g.output.push(proto::ValueInfoProto {
                name: Some(v.name.clone()),
                ..Default::default()
            });
        }
    }
    Ok(Exposed {
        model: exposed_model,
        values,
        uncapturable,
    })
}

/// A node's outputs with their positions, an intermediate the node computes (a fused
/// residual sum) before the outputs computed from it.
fn outputs_in_order(node: &proto::NodeProto) -> Vec<(usize, &String)> {
    let mut outputs: Vec<(usize, &String)> = node.output.iter().enumerate().collect();
    if sum_of(node).is_some() {
        outputs.sort_by_key(|&(k, _)| k != fused_sums::SUM_OUTPUT);
    }
    outputs
}

/// The name of the residual sum `node` computes as an output, if it is a fused
/// residual-and-norm that outputs it.
fn sum_of(node: &proto::NodeProto) -> Option<&String> {
    if !fused_sums::has_sum_output(node) {
        return None;
    }
    node.output
        .get(fused_sums::SUM_OUTPUT)
        .filter(|o| !o.is_empty())
}

/// `Conv` for the default domain, `domain::Op` otherwise, so a custom op is never mistaken
/// for the standard op of the same name.
pub fn op_name(node: &proto::NodeProto) -> String {
    match node.domain() {
        "" | "ai.onnx" => node.op_type().to_string(),
        d => format!("{d}::{}", node.op_type()),
    }
}

/// Node indices of `graph` in an execution order: the stored order when it is already
/// topological (the ONNX spec requires it), else a stable topological sort. Values used
/// inside a node's subgraphs count as that node's inputs.
pub fn topological_order(graph: &proto::GraphProto) -> Result<Vec<usize>> {
    let n = graph.node.len();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.node.iter().enumerate() {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            producer.entry(out.as_str()).or_insert(i);
        }
    }
    let deps: Vec<Vec<usize>> = graph
        .node
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let mut names: Vec<&str> = node.input.iter().map(String::as_str).collect();
            for (_, sub) in subgraphs(node) {
                collect_used_names(sub, &mut names);
            }
            let mut d: Vec<usize> = names
                .into_iter()
                .filter_map(|name| producer.get(name).copied())
                .filter(|&j| j != i)
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();

    if deps
        .iter()
        .enumerate()
        .all(|(i, d)| d.iter().all(|&j| j < i))
    {
        return Ok((0..n).collect());
    }

    // Kahn's algorithm, always taking the lowest stored index that is ready, so the result
    // stays as close to the stored order as the dependencies allow.
    let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            users[j].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| pending[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n).find(|&i| pending[i] > 0).unwrap_or(0);
        let node = &graph.node[stuck];
        // Names come from the file and may hold newlines (found by fuzzing): escape them so
        // the error stays one line.
        bail!(
            "the ONNX graph has a cycle: node `{}` ({}) depends on its own output",
            node.name().escape_debug(),
            op_name(node).escape_debug()
        );
    }
    Ok(order)
}

/// Lists the named node outputs inside `sub` (recursively) as uncapturable.
fn list_subgraph_values(
    owner: &proto::NodeProto,
    attr: &str,
    sub: &proto::GraphProto,
    kept: &Kept,
    out: &mut Vec<Uncapturable>,
) {
    // The first clause names where the value is; `pairing` quotes it.
    let why = kept
        .get(owner.name())
        .map(|w| match owner.op_type() {
            "Loop" => format!(", and this Loop is not unrolled: {w}"),
            _ => format!(", and this If is not inlined: {w}"),
        })
        .unwrap_or_default();
    for node in &sub.node {
        let module = node_scope(node)
            .last()
            .map(|l| l.path.clone())
            .unwrap_or_default();
        let place = format!(
            "the `{attr}` subgraph of {} node `{}`",
            op_name(owner),
            owner.name()
        );
        for name in node.output.iter().filter(|o| !o.is_empty()) {
            out.push(Uncapturable {
                name: name.clone(),
                op: op_name(node),
                module: module.clone(),
                reason: format!(
                    "computed inside {place}; values inside control-flow bodies cannot be \
                     graph outputs{why}"
                ),
                subgraph: Some(place.clone()),
            });
        }
        for (inner_attr, inner) in subgraphs(node) {
            list_subgraph_values(node, inner_attr, inner, kept, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_graph::{node, vi};

    fn model(nodes: Vec<proto::NodeProto>, outputs: &[&str]) -> proto::ModelProto {
        proto::ModelProto {
            graph: Some(proto::GraphProto {
                node: nodes,
                input: vec![vi("x")],
                initializer: vec![proto::TensorProto {
                    name: Some("w".into()),
                    ..Default::default()
                }],
                output: outputs.iter().map(|o| vi(o)).collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn output_names(m: &proto::ModelProto) -> Vec<&str> {
        m.graph
            .as_ref()
            .unwrap()
            .output
            .iter()
            .map(|o| o.name())
            .collect()
    }

    #[test]
    fn every_node_output_becomes_a_graph_output_once() {
        let m = model(
            vec![
                node("/conv1/Conv", "Conv", &["x", "w"], &["a"]),
                node("/relu/Relu", "Relu", &["a"], &["b"]),
                node("/Split", "Split", &["b"], &["c", "", "d"]),
                node("/Add", "Add", &["c", "d"], &["y"]),
            ],
            &["y"],
        );
        let e = expose_all(&m).unwrap();
        // The original output keeps position 0; the rest follow in node order.
        assert_eq!(output_names(&e.model), ["y", "a", "b", "c", "d"]);
        let added = &e.model.graph.as_ref().unwrap().output[1];
        assert!(added.r#type.is_none(), "extra outputs carry only a name");
        let names: Vec<_> = e.values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "y"]);
        let d = &e.values[3];
        assert_eq!((d.node_index, d.output_index), (2, 2));
        assert_eq!(d.node_name, "/Split");
        assert_eq!(e.values[0].input_names, ["x", "w"]);
        assert_eq!(e.values[0].scope[0].path, "conv1");
        assert!(e.uncapturable.is_empty());
        // The input model is untouched.
        assert_eq!(output_names(&m), ["y"]);
    }

    #[test]
    fn custom_domains_prefix_the_op() {
        let mut n = node("n", "MyAdd", &["x", "x"], &["y"]);
        n.domain = Some("custom.ops".into());
        let e = expose_all(&model(vec![n], &["y"])).unwrap();
        assert_eq!(e.values[0].op_type, "custom.ops::MyAdd");
        let mut n = node("n", "Relu", &["x"], &["y"]);
        n.domain = Some("ai.onnx".into());
        assert_eq!(op_name(&n), "Relu");
    }

    #[test]
    fn a_fused_residual_norm_gives_its_sum_first_and_normalises_it() {
        let mut n = node(
            "SkipLayerNorm_AddBias_0",
            "SkipLayerNormalization",
            &["x", "skip", "gamma", "beta", "bias"],
            &["y"],
        );
        n.domain = Some("com.microsoft".into());
        let e = expose_all(&model(vec![n], &["y"])).unwrap();
        let sum = "y::input_skip_bias_sum";
        let names: Vec<&str> = e.values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, [sum, "y"]);
        let ops: Vec<&str> = e.values.iter().map(|v| v.op_type.as_str()).collect();
        assert_eq!(
            ops,
            [
                "com.microsoft::SkipLayerNormalization.sum",
                "com.microsoft::SkipLayerNormalization"
            ]
        );
        assert_eq!(
            e.values[0].input_names,
            ["x", "skip", "gamma", "beta", "bias"]
        );
        assert_eq!(e.values[1].input_names, [sum, "gamma"]);
        // The model answers as before, and returns the sum too.
        let g = e.model.graph.as_ref().unwrap();
        assert_eq!(g.output[0].name(), "y");
        assert!(g.output.iter().any(|o| o.name() == sum));
    }

    #[test]
    fn unsorted_graphs_are_sorted_stably() {
        let m = model(
            vec![
                node("second", "Relu", &["a"], &["b"]),
                node("other", "Neg", &["x"], &["z"]),
                node("first", "Abs", &["x"], &["a"]),
            ],
            &["b", "z"],
        );
        let order = topological_order(m.graph.as_ref().unwrap()).unwrap();
        assert_eq!(order, [1, 2, 0]);
        let e = expose_all(&m).unwrap();
        let names: Vec<_> = e.values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["z", "a", "b"]);
        assert_eq!(e.values[1].node_index, 2);
        assert_eq!(output_names(&e.model), ["b", "z", "a"]);
    }

    #[test]
    fn cycles_are_an_error() {
        let m = model(
            vec![
                node("p", "Add", &["x", "q_out"], &["p_out"]),
                node("q", "Relu", &["p_out"], &["q_out"]),
            ],
            &["q_out"],
        );
        let e = expose_all(&m).unwrap_err().to_string();
        assert!(e.contains("cycle") && e.contains("`p`"), "{e}");
    }

    #[test]
    fn subgraph_values_are_uncapturable_and_count_as_dependencies() {
        let then_branch = proto::GraphProto {
            node: vec![node("/blk/inner/Relu", "Relu", &["a"], &["t"])],
            output: vec![vi("t")],
            ..Default::default()
        };
        let mut if_node = node("/If", "If", &["cond"], &["out"]);
        if_node.attribute.push(proto::AttributeProto {
            name: Some("then_branch".into()),
            g: Some(then_branch),
            ..Default::default()
        });
        // The If node uses `a` only inside its body, and is stored before `a`'s producer.
        let m = model(
            vec![
                if_node,
                node("/Abs", "Abs", &["x"], &["a"]),
                node("/c", "Cast", &["x"], &["cond"]),
            ],
            &["out"],
        );
        let e = expose_all(&m).unwrap();
        let names: Vec<_> = e.values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a", "cond", "out"]);
        assert_eq!(e.uncapturable.len(), 1);
        let u = &e.uncapturable[0];
        assert_eq!(
            (u.name.as_str(), u.op.as_str(), u.module.as_str()),
            ("t", "Relu", "blk.inner")
        );
        assert!(
            u.reason.contains("then_branch") && u.reason.contains("`/If`"),
            "{}",
            u.reason
        );
        assert!(!output_names(&e.model).contains(&"t"));
    }

    #[test]
    fn a_model_without_graph_is_an_error() {
        assert!(expose_all(&proto::ModelProto::default()).is_err());
    }
}
