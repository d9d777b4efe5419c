//! Higher-order ops that only wrap a subgraph in a mode (`wrap_with_autocast` with autocast
//! disabled, `wrap_with_set_grad_enabled`) are replaced by their subgraph's nodes, so that
//! the interpreter runs them as plain calls and every tensor inside is captured like any
//! other.
//!
//! Why inlining is exact: a disabled autocast region changes no kernel (timm's EfficientViT
//! wraps its attention in `torch.autocast(enabled=False)` to keep it in float32, and the
//! casts it wants are already explicit `to` nodes in the subgraph), and grad mode changes no
//! value an inference run computes. An enabled autocast region would pick other kernels, so
//! it is refused in one line rather than run as if disabled.
//!
//! The subgraph's names are its own namespace: its inputs become the wrapper's arguments,
//! its outputs the wrapper's outputs, and every other name gets the subgraph's name as a
//! prefix (`submod_1.matmul`), which no Python identifier of the outer graph can equal.

use super::graph::{name_of, union, NamedArgument, Node};
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// `nodes` with every mode-wrapping higher-order op replaced by its subgraph's nodes,
/// recursively.
pub fn wrappers(nodes: Vec<Node>) -> Result<Vec<Node>> {
    let mut prefixes = HashSet::new();
    inline(nodes, &mut prefixes)
}

fn inline(nodes: Vec<Node>, prefixes: &mut HashSet<String>) -> Result<Vec<Node>> {
    let mut out = Vec::with_capacity(nodes.len());
    for node in nodes {
        let Some(graph_at) = wrapped_graph(&node)? else {
            out.push(node);
            continue;
        };
        let graph_arg = (node.inputs.get(graph_at))
            .ok_or_else(|| anyhow!("`{}` has no subgraph argument", node.target))?;
        let (graph_name, graph) = subgraph(&graph_arg.arg)?;
        let arguments: Vec<&Value> = node.inputs[graph_at + 1..].iter().map(|a| &a.arg).collect();
        let prefix = unique(prefixes, graph_name);
        let inner: Vec<Node> = serde_json::from_value(graph["nodes"].clone())
            .map_err(|e| anyhow!("the subgraph `{graph_name}` cannot be read: {e}"))?;
        let inner = inline(inner, prefixes)?;
        let mut rename = HashMap::new();
        let inputs = graph["inputs"].as_array().cloned().unwrap_or_default();
        if inputs.len() != arguments.len() {
            bail!(
                "the subgraph `{graph_name}` takes {} inputs but is passed {}",
                inputs.len(),
                arguments.len()
            );
        }
        for (inner_arg, outer_arg) in inputs.iter().zip(&arguments) {
            pair_names(inner_arg, outer_arg, &mut rename);
        }
        let passed: HashSet<String> = rename.keys().cloned().collect();
        let results = graph["outputs"].as_array().cloned().unwrap_or_default();
        if results.len() != node.outputs.len() {
            bail!(
                "the subgraph `{graph_name}` returns {} values where its caller names {}",
                results.len(),
                node.outputs.len()
            );
        }
        let mut passthrough = Vec::new();
        for (result, outer) in results.iter().zip(&node.outputs) {
            match (tensor_name(result), tensor_name(outer)) {
                // A subgraph that returns one of its inputs: the caller's name for it is an
                // alias of the argument.
                (Some(r), Some(o)) if passed.contains(r) => {
                    passthrough.push(alias(&rename[r], o, &node))
                }
                _ => pair_names(result, outer, &mut rename),
            }
        }
        for mut n in inner {
            for input in &mut n.inputs {
                rename_in(&mut input.arg, &rename, &prefix);
            }
            for output in &mut n.outputs {
                rename_in(output, &rename, &prefix);
            }
            out.push(n);
        }
        out.extend(passthrough);
    }
    Ok(out)
}

/// Where a mode-wrapping node's subgraph argument is; `None` for any other node, and a
/// refusal for an autocast region that is enabled.
fn wrapped_graph(node: &Node) -> Result<Option<usize>> {
    let flag = |k: usize| {
        node.inputs
            .get(k)
            .and_then(|a| a.arg.get("as_bool")?.as_bool())
    };
    match node.target.as_str() {
        "torch.ops.higher_order.wrap_with_set_grad_enabled" => Ok(Some(1)),
        "torch.ops.higher_order.wrap_with_autocast" => match flag(2) {
            Some(false) => Ok(Some(4)),
            _ => {
                let device = (node.inputs.first())
                    .and_then(|a| a.arg.get("as_string")?.as_str())
                    .unwrap_or("its device");
                bail!(
                    "it calls the higher-order op `wrap_with_autocast` with autocast enabled on \
                     {device}, which this reader does not run (it would pick other kernels): \
                     compare a trace (torch.jit.trace) of the module, or export it without \
                     torch.autocast"
                )
            }
        },
        _ => Ok(None),
    }
}

/// The name and graph of an `as_graph` argument.
fn subgraph(arg: &Value) -> Result<(&str, &Value)> {
    let Some(("as_graph", g)) = union(arg) else {
        bail!("a wrapper op's subgraph argument is not a graph");
    };
    let name = g.get("name").and_then(Value::as_str).unwrap_or("subgraph");
    let graph = g
        .get("graph")
        .ok_or_else(|| anyhow!("`{name}` has no graph"))?;
    Ok((name, graph))
}

/// `name`, or `name_2`, `name_3`... when a wrapper already took it.
fn unique(taken: &mut HashSet<String>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut k = 1;
    while !taken.insert(candidate.clone()) {
        k += 1;
        candidate = format!("{name}_{k}");
    }
    candidate
}

/// Maps each name in `inner` to the name at the same place in `outer` (a tensor to a tensor,
/// a symbolic int to a symbolic int).
fn pair_names(inner: &Value, outer: &Value, rename: &mut HashMap<String, String>) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    names(inner, &mut a);
    names(outer, &mut b);
    for (i, o) in a.into_iter().zip(b) {
        rename.insert(i, o);
    }
}

fn names(v: &Value, found: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (key, x) in map {
                match (key.as_str(), x) {
                    ("name" | "as_name", Value::String(s)) => found.push(s.clone()),
                    _ => names(x, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| names(x, found)),
        _ => {}
    }
}

fn tensor_name(v: &Value) -> Option<&str> {
    match union(v) {
        Some(("as_tensor", t)) => name_of(t),
        _ => None,
    }
}

/// Renames every value a node argument or output refers to.
fn rename_in(v: &mut Value, rename: &HashMap<String, String>, prefix: &str) {
    match v {
        Value::Object(map) => {
            for (key, x) in map.iter_mut() {
                match (key.as_str(), &mut *x) {
                    ("name" | "as_name", Value::String(s)) => {
                        *s = (rename.get(s.as_str()).cloned())
                            .unwrap_or_else(|| format!("{prefix}.{s}"));
                    }
                    _ => rename_in(x, rename, prefix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| rename_in(x, rename, prefix)),
        _ => {}
    }
}

/// `aten.alias(source)` named `name`, with the wrapper's metadata.
fn alias(source: &str, name: &str, wrapper: &Node) -> Node {
    Node {
        target: "torch.ops.aten.alias.default".to_string(),
        inputs: vec![NamedArgument {
            name: "self".to_string(),
            arg: json!({"as_tensor": {"name": source}}),
        }],
        outputs: vec![json!({"as_tensor": {"name": name}})],
        metadata: wrapper.metadata.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: Value) -> Node {
        serde_json::from_value(text).unwrap()
    }

    fn tensor(name: &str) -> Value {
        json!({"as_tensor": {"name": name}})
    }

    /// `wrap_with_autocast("cpu", bf16, enabled, False, submod, x, w)` whose subgraph computes
    /// `matmul = mm(x, w); to = to(matmul)` and returns `to`, followed by a reader of its
    /// result under the caller's name.
    fn program(enabled: bool) -> Vec<Node> {
        let sub_nodes = json!([
            {"target": "torch.ops.aten.mm.default",
             "inputs": [{"name": "self", "arg": tensor("x")}, {"name": "mat2", "arg": tensor("w")}],
             "outputs": [tensor("matmul")]},
            {"target": "torch.ops.aten.relu.default",
             "inputs": [{"name": "self", "arg": tensor("matmul")}],
             "outputs": [tensor("to")]},
        ]);
        vec![
            node(
                json!({"target": "torch.ops.higher_order.wrap_with_autocast",
                "inputs": [
                    {"name": "", "arg": {"as_string": "cpu"}},
                    {"name": "", "arg": {"as_scalar_type": 13}},
                    {"name": "", "arg": {"as_bool": enabled}},
                    {"name": "", "arg": {"as_bool": false}},
                    {"name": "", "arg": {"as_graph": {"name": "submod_1", "graph": {
                        "inputs": [tensor("x"), tensor("w")],
                        "outputs": [tensor("to")],
                        "nodes": sub_nodes}}}},
                    {"name": "", "arg": tensor("a")},
                    {"name": "", "arg": tensor("to")},
                ],
                "outputs": [tensor("getitem")]}),
            ),
            node(json!({"target": "torch.ops.aten.relu.default",
                "inputs": [{"name": "self", "arg": tensor("getitem")}],
                "outputs": [tensor("matmul")]})),
        ]
    }

    fn args_and_outputs(n: &Node) -> (Vec<String>, Vec<String>) {
        let mut a = Vec::new();
        let mut o = Vec::new();
        n.inputs.iter().for_each(|i| names(&i.arg, &mut a));
        n.outputs.iter().for_each(|x| names(x, &mut o));
        (a, o)
    }

    /// The subgraph's inputs become the caller's arguments (`to` here is an outer name that
    /// the subgraph also uses inside), its output the caller's result, and its own names
    /// cannot collide with the outer graph's (`matmul` exists on both sides).
    #[test]
    fn a_disabled_autocast_region_runs_as_its_subgraphs_nodes_under_the_callers_names() {
        let flat = wrappers(program(false)).unwrap();
        let targets: Vec<&str> = flat.iter().map(|n| n.target.as_str()).collect();
        assert_eq!(
            targets,
            [
                "torch.ops.aten.mm.default",
                "torch.ops.aten.relu.default",
                "torch.ops.aten.relu.default"
            ]
        );
        assert_eq!(
            args_and_outputs(&flat[0]),
            (
                vec!["a".into(), "to".into()],
                vec!["submod_1.matmul".into()]
            )
        );
        assert_eq!(
            args_and_outputs(&flat[1]),
            (vec!["submod_1.matmul".into()], vec!["getitem".into()])
        );
        assert_eq!(
            args_and_outputs(&flat[2]),
            (vec!["getitem".into()], vec!["matmul".into()])
        );
    }

    #[test]
    fn an_enabled_autocast_region_is_refused_in_one_line_naming_the_op() {
        let e = wrappers(program(true)).unwrap_err().to_string();
        assert!(
            e.contains("`wrap_with_autocast`") && e.contains("enabled on cpu"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    /// A subgraph that hands one of its inputs back: the caller's name becomes an alias of
    /// the argument, so its readers find it computed.
    #[test]
    fn a_subgraph_returning_its_input_leaves_an_alias_of_the_argument() {
        let wrapper = node(
            json!({"target": "torch.ops.higher_order.wrap_with_set_grad_enabled",
            "inputs": [
                {"name": "", "arg": {"as_bool": false}},
                {"name": "", "arg": {"as_graph": {"name": "submod_0", "graph": {
                    "inputs": [tensor("x")], "outputs": [tensor("x")], "nodes": []}}}},
                {"name": "", "arg": tensor("y")},
            ],
            "outputs": [tensor("getitem")]}),
        );
        let flat = wrappers(vec![wrapper]).unwrap();
        assert_eq!(flat.len(), 1);
        assert_eq!(flat[0].target, "torch.ops.aten.alias.default");
        assert_eq!(
            args_and_outputs(&flat[0]),
            (vec!["y".into()], vec!["getitem".into()])
        );
    }
}
