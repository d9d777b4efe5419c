//! Cutting an ONNX graph at chosen values: the model that computes some values of the graph
//! when other values (the cuts) are given from outside instead of computed.
//!
//! This is what isolating a layer means: each cut value becomes a graph input of the same
//! name, so every node that read it now reads what the caller feeds (PyTorch's value), while
//! the node that produced it still runs, its output renamed with [`ISOLATED`] so that the
//! caller can fetch what ONNX Runtime computes from fed inputs. Only the nodes needed for the
//! fetched values are kept, walking back to the nearest cut or graph input, and only the
//! weights those nodes read go in: the same function gives the one extra model of an isolation
//! run (every layer fetched at once) and the smallest model that reproduces one layer (a
//! repro bundle). Pure protobuf, no ONNX Runtime: tested on hand-built graphs.

use super::expose::{collect_used_names, subgraphs};
use super::proto;
use super::steering::Steering;
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};

/// Appended to the name of a cut value's own node output: the value computed from fed inputs.
pub const ISOLATED: &str = "::isolated";

/// A value given from outside: its name in the graph and the type it is fed with.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub name: String,
    /// ONNX element type (`TensorProto.DataType`).
    pub elem_type: i32,
    /// The concrete shape it is fed with (this run's, not the graph's symbolic one).
    pub shape: Vec<usize>,
}

/// How a segment gets its weights from the model it is cut from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// Copied: the model can give more segments.
    Copy,
    /// Taken out of the model (left empty there): one segment, no second copy of the weights.
    Move,
}

/// A cut model and how to call it.
#[derive(Debug, Clone)]
pub struct Segment {
    pub model: proto::ModelProto,
    /// The graph inputs the caller feeds, in order: the original graph inputs it needs
    /// (weights listed as inputs excepted), then the cuts it needs (a cut no kept node reads
    /// is not an input).
    pub inputs: Vec<String>,
    /// For each fetched value, in the order asked, the graph output that carries it.
    pub outputs: Vec<String>,
}

/// The name under which a fetched value comes back from the segment.
pub fn fetched_name(name: &str, cuts: &HashSet<&str>) -> String {
    if cuts.contains(name) {
        format!("{name}{ISOLATED}")
    } else {
        name.to_string()
    }
}

/// The part of `model` that computes `fetch` (node outputs of the main graph) with every
/// value of `cuts` fed from outside, its weights copied or moved out of `model` as `weights`
/// says. Errors when a fetched value is not a node output of the main graph.
pub fn cut(
    model: &mut proto::ModelProto,
    (cuts, steering): (&[Cut], &Steering),
    fetch: &[String],
    weights: Weights,
) -> Result<Segment> {
    // The values to fetch and feed are those of the graph the capture ran, control flow
    // made observable with the same steering (a no-op when done before).
    super::control_flow::make_observable(model, steering);
    super::fused_sums::make_observable(model);
    // Cut where the capture looked: a quantised value is its float, fed and fetched as such.
    let contract_outputs = model.graph.as_ref().map_or(0, |g| g.output.len());
    super::dequantize::make_observable(model, contract_outputs);
    cut_observable(model, cuts, fetch, weights)
}

/// [`cut`] on a model whose control flow and quantised values are already made observable
/// (the capture's instrumented model), which a runner cutting it once per group of values
/// need not redo each time.
pub fn cut_observable(
    model: &mut proto::ModelProto,
    cuts: &[Cut],
    fetch: &[String],
    weights: Weights,
) -> Result<Segment> {
    let Some(graph) = model.graph.as_mut() else {
        bail!("the ONNX model has no graph");
    };
    let cut_names: HashSet<&str> = cuts.iter().map(|c| c.name.as_str()).collect();
    // Renamed node outputs -> producing node.
    let mut producer: HashMap<String, usize> = HashMap::new();
    for (i, node) in graph.node.iter().enumerate() {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            producer.entry(fetched_name(out, &cut_names)).or_insert(i);
        }
    }
    let outputs: Vec<String> = fetch.iter().map(|f| fetched_name(f, &cut_names)).collect();
    for (asked, name) in fetch.iter().zip(&outputs) {
        if !producer.contains_key(name) {
            bail!(
                "`{}` is not computed by a node of the main graph",
                asked.escape_debug()
            );
        }
    }
    let needed = walk_back(graph, &producer, &outputs);
    let initializer = graph
        .initializer
        .iter_mut()
        .filter(|t| needed.read.contains(t.name()))
        .map(|t| match weights {
            Weights::Copy => t.clone(),
            Weights::Move => std::mem::take(t),
        })
        .collect();
    let (mut segment_graph, inputs) = segment_graph(graph, cuts, &cut_names, &needed, &outputs);
    segment_graph.initializer = initializer;
    let model = proto::ModelProto {
        ir_version: model.ir_version,
        opset_import: model.opset_import.clone(),
        producer_name: Some("align-check".to_string()),
        producer_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        domain: model.domain.clone(),
        model_version: model.model_version,
        graph: Some(segment_graph),
        functions: model.functions.clone(),
        ..Default::default()
    };
    Ok(Segment {
        model,
        inputs,
        outputs,
    })
}

/// What computing some values needs: which nodes, and which names no kept node computes
/// (cuts, graph inputs, weights).
struct Needed {
    keep: Vec<bool>,
    read: HashSet<String>,
}

/// Walks back from `outputs` through their producers (and the names their subgraphs use) to
/// the names nothing in the segment computes.
fn walk_back(
    graph: &proto::GraphProto,
    producer: &HashMap<String, usize>,
    outputs: &[String],
) -> Needed {
    let mut needed = Needed {
        keep: vec![false; graph.node.len()],
        read: HashSet::new(),
    };
    let mut pending: Vec<String> = outputs.to_vec();
    while let Some(name) = pending.pop() {
        let Some(&i) = producer.get(&name) else {
            needed.read.insert(name);
            continue;
        };
        if std::mem::replace(&mut needed.keep[i], true) {
            continue;
        }
        let node = &graph.node[i];
        let mut used: Vec<&str> = node.input.iter().map(String::as_str).collect();
        for (_, sub) in subgraphs(node) {
            collect_used_names(sub, &mut used);
        }
        pending.extend(
            used.into_iter()
                .filter(|n| !n.is_empty())
                .map(str::to_string),
        );
    }
    needed
}

/// The segment's graph (kept nodes with cut outputs renamed, the inputs and sparse weights
/// they read, the fetched outputs; dense weights are the caller's) and the names of its
/// inputs in order.
fn segment_graph(
    graph: &proto::GraphProto,
    cuts: &[Cut],
    cut_names: &HashSet<&str>,
    needed: &Needed,
    outputs: &[String],
) -> (proto::GraphProto, Vec<String>) {
    let read = &needed.read;
    let kept = || {
        graph
            .node
            .iter()
            .zip(&needed.keep)
            .filter(|(_, &k)| k)
            .map(|(n, _)| n)
    };
    let nodes: Vec<proto::NodeProto> = kept()
        .map(|node| {
            let mut node = node.clone();
            for out in node.output.iter_mut().filter(|o| !o.is_empty()) {
                *out = fetched_name(out, cut_names);
            }
            node
        })
        .collect();
    let computed: HashSet<&str> = kept()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    // Models of IR version 3 list their weights among the graph inputs too; those keep
    // their stored values and are nothing the caller feeds.
    let weights: HashSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
    let mut input = Vec::new();
    let mut inputs = Vec::new();
    for vi in graph.input.iter().filter(|vi| read.contains(vi.name())) {
        input.push(vi.clone());
        if !weights.contains(vi.name()) {
            inputs.push(vi.name().to_string());
        }
    }
    for c in cuts.iter().filter(|c| read.contains(&c.name)) {
        input.push(typed_value(c));
        inputs.push(c.name.clone());
    }
    let mut seen_outputs = HashSet::new();
    let output = outputs
        .iter()
        .filter(|n| seen_outputs.insert(n.as_str()))
        .map(|n| proto::ValueInfoProto {
            name: Some(n.clone()),
            ..Default::default()
        })
        .collect();
    let segment = proto::GraphProto {
        node: nodes,
        name: graph.name.clone(),
        sparse_initializer: graph
            .sparse_initializer
            .iter()
            .filter(|s| s.values.as_ref().is_some_and(|v| read.contains(v.name())))
            .cloned()
            .collect(),
        input,
        output,
        // Type records of values the segment still computes or reads, cuts excepted: their
        // record is now the typed input.
        value_info: graph
            .value_info
            .iter()
            .filter(|vi| !cut_names.contains(vi.name()))
            .filter(|vi| read.contains(vi.name()) || computed.contains(vi.name()))
            .cloned()
            .collect(),
        ..Default::default()
    };
    (segment, inputs)
}

/// A graph input of the cut value's element type and concrete shape.
fn typed_value(c: &Cut) -> proto::ValueInfoProto {
    use proto::tensor_shape_proto::{dimension::Value, Dimension};
    let dim = c
        .shape
        .iter()
        .map(|&d| Dimension {
            value: Some(Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    proto::ValueInfoProto {
        name: Some(c.name.clone()),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(c.elem_type),
                    shape: Some(proto::TensorShapeProto { dim }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> proto::NodeProto {
        proto::NodeProto {
            op_type: Some(op.to_string()),
            name: Some(format!("/{op}_{}", outputs[0])),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn weight(name: &str) -> proto::TensorProto {
        proto::TensorProto {
            name: Some(name.to_string()),
            dims: vec![1],
            data_type: Some(1),
            float_data: vec![2.0],
            ..Default::default()
        }
    }

    /// x -> Mul(w1) -> a -> Relu -> b -> Mul(w2) -> c -> Add(a) -> d
    fn chain() -> proto::ModelProto {
        let input = proto::ValueInfoProto {
            name: Some("x".to_string()),
            ..Default::default()
        };
        proto::ModelProto {
            ir_version: Some(8),
            graph: Some(proto::GraphProto {
                node: vec![
                    node("Mul", &["x", "w1"], &["a"]),
                    node("Relu", &["a"], &["b"]),
                    node("Mul", &["b", "w2"], &["c"]),
                    node("Add", &["c", "a"], &["d"]),
                ],
                initializer: vec![weight("w1"), weight("w2")],
                input: vec![input],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cut_of(name: &str) -> Cut {
        Cut {
            name: name.to_string(),
            elem_type: 1,
            shape: vec![1, 4],
        }
    }

    fn names(v: &[proto::ValueInfoProto]) -> Vec<&str> {
        v.iter().map(|i| i.name()).collect()
    }

    #[test]
    fn consumers_of_a_cut_read_the_fed_value_and_its_producer_still_runs() {
        let cuts = [cut_of("a"), cut_of("b"), cut_of("c")];
        let s = cut(
            &mut chain(),
            (&cuts, &Steering::default()),
            &["a".into(), "c".into(), "d".into()],
            Weights::Copy,
        )
        .unwrap();
        let g = s.model.graph.as_ref().unwrap();
        assert_eq!(s.outputs, ["a::isolated", "c::isolated", "d"]);
        // Mul reads x; the second Mul reads the fed b; Add reads the fed c and a; Relu is
        // not needed (b is fed).
        let ops: Vec<(&str, Vec<&str>)> = g
            .node
            .iter()
            .map(|n| {
                (
                    n.output[0].as_str(),
                    n.input.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            [
                ("a::isolated", vec!["x", "w1"]),
                ("c::isolated", vec!["b", "w2"]),
                ("d", vec!["c", "a"]),
            ]
        );
        assert_eq!(s.inputs, ["x", "a", "b", "c"]);
        assert_eq!(names(&g.input), ["x", "a", "b", "c"]);
        let fed = &g.input[1];
        let Some(proto::type_proto::Value::TensorType(t)) =
            fed.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            panic!("a cut input carries its type")
        };
        assert_eq!(t.elem_type(), 1);
        assert_eq!(t.shape.as_ref().unwrap().dim.len(), 2);
    }

    #[test]
    fn only_the_weights_and_inputs_of_kept_nodes_go_in() {
        let mut model = chain();
        let s = cut(
            &mut model,
            (&[cut_of("b")], &Steering::default()),
            &["c".into()],
            Weights::Move,
        )
        .unwrap();
        let g = s.model.graph.as_ref().unwrap();
        assert_eq!(g.node.len(), 1);
        assert_eq!(s.inputs, ["b"]);
        let weights: Vec<&str> = g.initializer.iter().map(|t| t.name()).collect();
        assert_eq!(weights, ["w2"]);
        assert_eq!(names(&g.output), ["c"]);
        // Moved, not copied: the model keeps an empty record in its place.
        let left = &model.graph.as_ref().unwrap().initializer;
        assert_eq!(left[1], proto::TensorProto::default());
        assert_eq!(left[0].name(), "w1");
    }

    #[test]
    fn weights_listed_as_graph_inputs_are_not_fed() {
        let mut model = chain();
        let graph = model.graph.as_mut().unwrap();
        graph.input.push(proto::ValueInfoProto {
            name: Some("w2".to_string()),
            ..Default::default()
        });
        let s = cut(
            &mut model,
            (&[cut_of("b")], &Steering::default()),
            &["c".into()],
            Weights::Copy,
        )
        .unwrap();
        assert_eq!(s.inputs, ["b"]);
        let g = s.model.graph.as_ref().unwrap();
        assert_eq!(names(&g.input), ["w2", "b"]);
        assert_eq!(g.initializer.len(), 1);
    }

    #[test]
    fn asking_for_a_value_no_node_computes_is_an_error() {
        let err = cut(
            &mut chain(),
            (&[], &Steering::default()),
            &["x".into()],
            Weights::Copy,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not computed by a node"), "{err}");
        assert!(cut(
            &mut chain(),
            (&[], &Steering::default()),
            &["nope".into()],
            Weights::Copy
        )
        .is_err());
    }
}
