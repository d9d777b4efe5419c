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

use super::graph::{name_of, union, GraphModule, Node};
use anyhow::{anyhow, bail, Result};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The graph's nodes with every mode-wrapping higher-order op replaced by its subgraph's
/// nodes, recursively. A wrapper result that is one of the subgraph's inputs handed back is
/// no new value: later nodes and the program's outputs read the argument itself (an `alias`
/// node in its place would be a captured value no ONNX node computes).
pub fn wrappers(module: &mut GraphModule) -> Result<()> {
    let mut prefixes = HashSet::new();
    let (nodes, same) = inline(std::mem::take(&mut module.graph.nodes), &mut prefixes)?;
    module.graph.nodes = nodes;
    for spec in &mut module.signature.output_specs {
        substitute(spec, &same);
    }
    Ok(())
}

/// `nodes` flattened, and the names that now stand for another (`getitem` for `x`).
fn inline(
    nodes: Vec<Node>,
    prefixes: &mut HashSet<String>,
) -> Result<(Vec<Node>, HashMap<String, String>)> {
    let mut out = Vec::with_capacity(nodes.len());
    let mut same: HashMap<String, String> = HashMap::new();
    for mut node in nodes {
        for input in &mut node.inputs {
            substitute(&mut input.arg, &same);
        }
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
        let (inner, inner_same) = inline(inner, prefixes)?;
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
        let mut results = graph["outputs"].as_array().cloned().unwrap_or_default();
        if results.len() != node.outputs.len() {
            bail!(
                "the subgraph `{graph_name}` returns {} values where its caller names {}",
                results.len(),
                node.outputs.len()
            );
        }
        for (result, outer) in results.iter_mut().zip(&node.outputs) {
            substitute(result, &inner_same);
            match (tensor_name(result), tensor_name(outer)) {
                (Some(r), Some(o)) if passed.contains(r) => {
                    same.insert(o.to_string(), rename[r].clone());
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
    }
    Ok((out, same))
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

/// Renames every value a node argument or output refers to: by `rename`, else with
/// `prefix` (`submod_1.matmul`).
fn rename_in(v: &mut Value, rename: &HashMap<String, String>, prefix: &str) {
    rename_values(v, rename, Some(prefix));
}

/// Renames the values in `same` (and only those) wherever `v` refers to them.
fn substitute(v: &mut Value, same: &HashMap<String, String>) {
    if !same.is_empty() {
        rename_values(v, same, None);
    }
}

fn rename_values(v: &mut Value, map: &HashMap<String, String>, prefix: Option<&str>) {
    match v {
        Value::Object(entries) => {
            for (key, x) in entries.iter_mut() {
                match (key.as_str(), &mut *x) {
                    ("name" | "as_name", Value::String(s)) => {
                        if let Some(to) = map.get(s.as_str()) {
                            *s = to.clone();
                        } else if let Some(prefix) = prefix {
                            *s = format!("{prefix}.{s}");
                        }
                    }
                    _ => rename_values(x, map, prefix),
                }
            }
        }
        Value::Array(items) => (items.iter_mut()).for_each(|x| rename_values(x, map, prefix)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let (flat, _) = inline(program(false), &mut HashSet::new()).unwrap();
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
        let e = inline(program(true), &mut HashSet::new())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`wrap_with_autocast`") && e.contains("enabled on cpu"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    /// A subgraph that hands one of its inputs back: the caller's name for it stands for
    /// the argument, in later nodes and in the program's outputs alike, and no node is made
    /// for it (an alias would be a captured value no ONNX node computes).
    #[test]
    fn a_subgraph_returning_its_input_makes_its_callers_name_the_argument() {
        let mut module: GraphModule = serde_json::from_value(json!({
            "graph": {"nodes": [
                {"target": "torch.ops.higher_order.wrap_with_set_grad_enabled",
                 "inputs": [
                    {"name": "", "arg": {"as_bool": false}},
                    {"name": "", "arg": {"as_graph": {"name": "submod_0", "graph": {
                        "inputs": [tensor("x")], "outputs": [tensor("x")], "nodes": []}}}},
                    {"name": "", "arg": tensor("y")}],
                 "outputs": [tensor("getitem")]},
                {"target": "torch.ops.aten.relu.default",
                 "inputs": [{"name": "self", "arg": tensor("getitem")}],
                 "outputs": [tensor("relu")]}]},
            "signature": {"input_specs": [], "output_specs": [
                {"user_output": {"arg": tensor("getitem")}},
                {"user_output": {"arg": tensor("relu")}}]}
        }))
        .unwrap();
        wrappers(&mut module).unwrap();
        let nodes = &module.graph.nodes;
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            args_and_outputs(&nodes[0]),
            (vec!["y".into()], vec!["relu".into()])
        );
        let mut returned = Vec::new();
        names(
            &Value::Array(module.signature.output_specs.clone()),
            &mut returned,
        );
        assert_eq!(returned, ["y", "relu"]);
    }
}
