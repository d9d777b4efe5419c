//! Small, pure edits and walks over ONNX graphs that the rewrites share: the subgraphs of a
//! node, the names a graph reads and defines, renaming a node with everything nested in it,
//! and the few nodes a rewrite adds (a scalar Constant, an Identity).

use super::proto;
use std::collections::{HashMap, HashSet};

/// The subgraph attributes of a node (`then_branch`, `else_branch`, `body`, ...).
pub fn subgraphs(node: &proto::NodeProto) -> impl Iterator<Item = (&str, &proto::GraphProto)> {
    node.attribute.iter().flat_map(|a| {
        a.g.iter()
            .chain(a.graphs.iter())
            .map(move |g| (a.name(), g))
    })
}

/// Every input name used by nodes of `graph` and its nested subgraphs.
pub fn collect_used_names<'a>(graph: &'a proto::GraphProto, names: &mut Vec<&'a str>) {
    for node in &graph.node {
        names.extend(node.input.iter().map(String::as_str));
        for (_, sub) in subgraphs(node) {
            collect_used_names(sub, names);
        }
    }
}

/// Every name `graph` defines: its nodes' outputs and, in nested subgraphs, their inputs and
/// their nodes' outputs.
pub fn defined_names(graph: &proto::GraphProto) -> HashSet<String> {
    let mut names = HashSet::new();
    collect_defined(graph, &mut names);
    names
}

fn collect_defined(graph: &proto::GraphProto, names: &mut HashSet<String>) {
    for node in &graph.node {
        names.extend(node.output.iter().filter(|o| !o.is_empty()).cloned());
        for (_, sub) in subgraphs(node) {
            names.extend(sub.input.iter().map(|i| i.name().to_string()));
            collect_defined(sub, names);
        }
    }
}

/// Renames `node`'s inputs and outputs, and every name in its subgraphs, by `map`; names it
/// does not list stay.
pub fn rename_node(node: &mut proto::NodeProto, map: &HashMap<String, String>) {
    for name in node.input.iter_mut().chain(node.output.iter_mut()) {
        if let Some(new) = map.get(name.as_str()) {
            name.clone_from(new);
        }
    }
    for attr in &mut node.attribute {
        for g in attr.g.iter_mut().chain(attr.graphs.iter_mut()) {
            for v in g.input.iter_mut().chain(g.output.iter_mut()) {
                if let Some(new) = v.name.as_ref().and_then(|n| map.get(n)) {
                    v.name = Some(new.clone());
                }
            }
            for inner in &mut g.node {
                rename_node(inner, map);
            }
        }
    }
}

/// A Constant node holding one scalar of `dtype` (Int64 or Bool).
pub fn constant_node(
    name: &str,
    output: &str,
    dtype: proto::tensor_proto::DataType,
    value: i64,
) -> proto::NodeProto {
    let raw = match dtype {
        proto::tensor_proto::DataType::Bool => vec![u8::from(value != 0)],
        _ => value.to_le_bytes().to_vec(),
    };
    proto::NodeProto {
        name: Some(name.to_string()),
        op_type: Some("Constant".into()),
        output: vec![output.to_string()],
        attribute: vec![proto::AttributeProto {
            name: Some("value".into()),
            r#type: Some(proto::attribute_proto::AttributeType::Tensor as i32),
            t: Some(proto::TensorProto {
                data_type: Some(dtype as i32),
                raw_data: Some(raw.into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `to = Identity(from)`, named `name`.
pub fn identity_node(name: &str, from: &str, to: &str) -> proto::NodeProto {
    proto::NodeProto {
        name: Some(name.to_string()),
        op_type: Some("Identity".into()),
        input: vec![from.to_string()],
        output: vec![to.to_string()],
        ..Default::default()
    }
}
