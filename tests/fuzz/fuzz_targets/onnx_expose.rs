//! Fuzz target: structured graphs for the "expose everything" rewrite.
//!
//! Random bytes rarely decode into a graph whose nodes share value names, so the byte-level
//! `onnx_model` target seldom reaches the interesting cases of `topological_order` and
//! `expose_all`: stored orders that are not topological, cycles, self-loops, values produced
//! twice, empty optional names, values used only inside nested subgraphs, and node names and
//! metadata that the scope parsers read. Here the graph is built from a small pool of value
//! names, so those collide all the time, and the results are checked against what capture
//! relies on:
//!
//! - the order is a permutation of the nodes in which every producer comes before its users;
//! - every named node output is exposed once, the original graph outputs keep their places;
//! - a cycle (through at least two nodes) is the only way to get an error.
//!
//! The graph is also encoded and read back through `model::from_bytes`, as a file would be.
//! With `FUZZ_WRITE_ONNX=PATH` set, the encoded model is written there first: that is how
//! scripts/fuzz.sh turns a crashing input of this target into a regression `.onnx` file.

#![no_main]

use align_check::onnx::expose::{expose_all, topological_order};
use align_check::onnx::proto;
use align_check::onnx::{model, output_names, scope};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Arbitrary, Debug)]
struct Graph {
    nodes: Vec<Node>,
    inputs: Vec<u8>,
    outputs: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Node {
    /// Either a legacy-style scope path built from `components`, or `raw` as is.
    legacy_name: bool,
    components: Vec<u8>,
    raw: String,
    custom_domain: bool,
    inputs: Vec<u8>,
    outputs: Vec<u8>,
    metadata: Vec<(u8, String)>,
    subgraph: Option<Box<Graph>>,
}

/// `v0`..`v11`; 255 is the empty name of an absent optional value.
fn value(k: u8) -> String {
    if k == 255 {
        String::new()
    } else {
        format!("v{}", k % 12)
    }
}

const COMPONENTS: [&str; 6] = ["layer1", "layer1.0", "conv", "seq", "seq.1", ""];

fn node_proto(n: &Node) -> proto::NodeProto {
    let name = if n.legacy_name {
        let mut s: String = n
            .components
            .iter()
            .map(|&c| format!("/{}", COMPONENTS[c as usize % COMPONENTS.len()]))
            .collect();
        s.push_str("/Relu_1");
        s
    } else {
        n.raw.clone()
    };
    let keys = [
        scope::NAME_SCOPES_KEY,
        scope::CLASS_HIERARCHY_KEY,
        scope::STACK_TRACE_KEY,
        "other",
    ];
    proto::NodeProto {
        name: Some(name),
        op_type: Some("Relu".into()),
        domain: n.custom_domain.then(|| "custom.ops".to_string()),
        input: n.inputs.iter().map(|&k| value(k)).collect(),
        output: n.outputs.iter().map(|&k| value(k)).collect(),
        metadata_props: n
            .metadata
            .iter()
            .map(|(k, v)| proto::StringStringEntryProto {
                key: Some(keys[*k as usize % keys.len()].to_string()),
                value: Some(v.clone()),
            })
            .collect(),
        attribute: n
            .subgraph
            .iter()
            .map(|g| proto::AttributeProto {
                name: Some("body".into()),
                g: Some(graph_proto(g)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn graph_proto(g: &Graph) -> proto::GraphProto {
    let vi = |&k: &u8| proto::ValueInfoProto {
        name: Some(value(k)),
        ..Default::default()
    };
    proto::GraphProto {
        node: g.nodes.iter().map(node_proto).collect(),
        input: g.inputs.iter().map(vi).collect(),
        output: g.outputs.iter().map(vi).collect(),
        ..Default::default()
    }
}

/// Names used by `node` and by every node of its subgraphs, as the sort counts them.
fn used_names<'a>(node: &'a proto::NodeProto, out: &mut Vec<&'a str>) {
    out.extend(node.input.iter().map(String::as_str));
    for a in &node.attribute {
        for g in a.g.iter().chain(&a.graphs) {
            for n in &g.node {
                used_names(n, out);
            }
        }
    }
}

fuzz_target!(|g: Graph| {
    let graph = graph_proto(&g);
    let m = proto::ModelProto {
        ir_version: Some(9),
        graph: Some(graph.clone()),
        ..Default::default()
    };
    static WRITE_TO: OnceLock<Option<PathBuf>> = OnceLock::new();
    if let Some(path) =
        WRITE_TO.get_or_init(|| std::env::var_os("FUZZ_WRITE_ONNX").map(PathBuf::from))
    {
        std::fs::write(path, m.encode_to_vec()).expect("FUZZ_WRITE_ONNX is writable");
    }

    // The first producer of each name, as the sort and the rewrite define it.
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.entry(o.as_str()).or_insert(i);
        }
    }

    match topological_order(&graph) {
        Ok(order) => {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..graph.node.len()).collect::<Vec<_>>());
            let mut position = vec![0; order.len()];
            for (p, &i) in order.iter().enumerate() {
                position[i] = p;
            }
            for (i, n) in graph.node.iter().enumerate() {
                let mut used = Vec::new();
                used_names(n, &mut used);
                for name in used {
                    if let Some(&j) = producer.get(name) {
                        assert!(j == i || position[j] < position[i], "{j} after {i}");
                    }
                }
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("cycle") && !msg.contains('\n'), "{msg}");
        }
    }

    match expose_all(&m) {
        Ok(exposed) => {
            let names: Vec<&str> = exposed.values.iter().map(|v| v.name.as_str()).collect();
            let unique: HashSet<&str> = names.iter().copied().collect();
            assert_eq!(unique.len(), names.len(), "a value exposed twice");
            let expected: HashSet<&str> = producer.keys().copied().collect();
            assert_eq!(unique, expected);
            let outs = &exposed.model.graph.as_ref().unwrap().output;
            for (o, original) in outs.iter().zip(&graph.output) {
                assert_eq!(o.name(), original.name());
            }
            for v in &exposed.values {
                assert_eq!(graph.node[v.node_index].output[v.output_index], v.name);
                assert!(outs.iter().any(|o| o.name() == v.name));
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }

    // The same graph as a file.
    let bytes = m.encode_to_vec();
    if let Ok(loaded) = model::from_bytes(Path::new("fuzz.onnx"), &bytes) {
        assert_eq!(loaded.graph().node.len(), graph.node.len());
        let _ = output_names(&loaded);
        let _ = expose_all(&loaded.proto);
    }
});
