//! The metadata of an exported program in the shape the TorchScript shim hands Rust
//! (`meta::GraphMeta`), so that capture, pairing, isolation and reports read a `.pt2` exactly
//! as they read TorchScript: one value per captured tensor, in capture-id order, with its op
//! (`aten::conv2d`), module hierarchy (from `nn_module_stack`), source line and stack (from
//! `stack_trace`) and producers; the module tree with classes; the outputs' producers; and
//! the hazards the TorchScript side reports (ops fixed in training mode, CUDA devices).

use super::graph::{input_spec, name_of, union, InputKind, Model, Node};
use super::scope::{hierarchy, module_frames, source_line, stack_frames, top_level, Frame};
use super::translate::{device, names_in, operator, Translation};
use crate::capture::fx_node::FxNode;
use crate::capture::module_aliases::ModuleAliases;
use crate::torch::meta::{GraphMeta, GraphSite, InputMeta, ModuleMeta, ValueMeta};
use crate::torch::shared_attributes;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// `storage`: where each stored tensor's bytes are, by name (`Archive::storage`).
pub fn describe(
    model: &Model,
    t: &Translation,
    parameter_dtype: String,
    storage: &HashMap<String, String>,
) -> GraphMeta {
    let nodes = &model.graph_module.graph.nodes;
    let top = &Scopes::new(model, storage);
    let values = t
        .captured
        .iter()
        .map(|c| match c.node {
            None => input_value(&c.name),
            Some(k) => node_value(&nodes[k], &c.name, c.inputs.clone(), top),
        })
        .collect();
    GraphMeta {
        inputs: t
            .inputs
            .iter()
            .map(|name| InputMeta {
                name: name.clone(),
                type_name: "Tensor".to_string(),
                default: None,
            })
            .collect(),
        values,
        modules: modules(nodes, top),
        outputs: t.outputs.clone(),
        parameter_dtype,
        saved_training: false,
        training_ops: sites(nodes, top, training_flag),
        cuda_ops: sites(nodes, top, cuda_device),
        state_writes: Vec::new(),
        exported: true,
        input_dims: Vec::new(),
        state: Vec::new(),
        module_aliases: top.aliases.clone(),
    }
}

fn input_value(name: &str) -> ValueMeta {
    ValueMeta {
        name: name.to_string(),
        op: "input".to_string(),
        hierarchy: String::new(),
        type_paths: Vec::new(),
        source: String::new(),
        stack: Vec::new(),
        block: String::new(),
        inputs: Vec::new(),
        element_inputs: None,
        element_of: String::new(),
        element_key: String::new(),
        fx_node: None,
    }
}

fn node_value(node: &Node, name: &str, inputs: Vec<usize>, top: &Scopes) -> ValueMeta {
    let (op, _) = operator(&node.target).unwrap_or_default();
    let meta = |key: &str| node.metadata.get(key).map(String::as_str).unwrap_or("");
    let stack = stack_frames(meta("stack_trace"));
    ValueMeta {
        name: name.to_string(),
        op,
        hierarchy: hierarchy(&top.frames(node)),
        type_paths: Vec::new(),
        source: source_line(&stack),
        stack,
        inputs,
        fx_node: fx_node(node, name),
        ..input_value(name)
    }
}

/// The node as the dynamo ONNX exporter names it in its metadata, when it returns the one
/// tensor `name` (a node of several outputs is named by no value: they are its `getitem`s).
fn fx_node(node: &Node, name: &str) -> Option<FxNode> {
    let [output] = node.outputs.as_slice() else {
        return None;
    };
    let (_, tensor) = union(output)?;
    if name_of(tensor) != Some(name) {
        return None;
    }
    let mut reads = Vec::new();
    for input in &node.inputs {
        names_in(&input.arg, &mut |n| reads.push(n.to_string()));
    }
    Some(FxNode::new(name.to_string(), node.target.clone(), reads))
}

fn module_stack(node: &Node) -> &str {
    node.metadata
        .get("nn_module_stack")
        .map_or("", String::as_str)
}

/// How the program's module stacks read as module paths: full paths (`scope::module_frames`)
/// with a shared instance's later attributes named as its first (`aliases`).
struct Scopes {
    top: HashSet<String>,
    aliases: ModuleAliases,
}

impl Scopes {
    fn new(model: &Model, storage: &HashMap<String, String>) -> Scopes {
        let nodes = &model.graph_module.graph.nodes;
        let top = top_level(nodes.iter().map(module_stack));
        let mut classes: HashMap<String, String> = HashMap::new();
        for node in nodes {
            for Frame { path, class } in module_frames(module_stack(node), &top) {
                classes.entry(path).or_insert(class);
            }
        }
        let specs = &model.graph_module.signature.input_specs;
        let stored: Vec<(String, &String)> = (specs.iter())
            .filter_map(|spec| match input_spec(spec).1 {
                InputKind::Stored(name) => storage.get(&name).map(|key| (name, key)),
                _ => None,
            })
            .collect();
        let aliases = shared_attributes::from_state(
            stored
                .iter()
                .map(|(name, key)| (name.as_str(), key.as_str())),
            |path| classes.get(path).map(String::as_str),
        );
        Scopes { top, aliases }
    }

    /// The node's module frames, outermost first, each path as TorchScript names it.
    fn frames(&self, node: &Node) -> Vec<Frame> {
        let mut frames = module_frames(module_stack(node), &self.top);
        if !self.aliases.is_empty() {
            for frame in &mut frames {
                frame.path = self.aliases.canonical(&frame.path);
            }
        }
        frames
    }
}

/// Every module some node was computed in, root first, with its class.
fn modules(nodes: &[Node], top: &Scopes) -> Vec<ModuleMeta> {
    let mut out: Vec<ModuleMeta> = Vec::new();
    for node in nodes {
        for frame in top.frames(node) {
            if !out.iter().any(|m| m.path == frame.path) {
                out.push(ModuleMeta {
                    path: frame.path,
                    class: frame.class,
                });
            }
        }
    }
    if let Some(root) = out.iter().position(|m| m.path.is_empty()) {
        let root = out.remove(root);
        out.insert(0, root);
    }
    out
}

/// The nodes `flag` says something about, as sites with their module and source line.
fn sites(nodes: &[Node], top: &Scopes, flag: impl Fn(&Node) -> Option<String>) -> Vec<GraphSite> {
    nodes
        .iter()
        .filter_map(|node| {
            let device = flag(node)?;
            let value = node_value(node, "", Vec::new(), top);
            Some(GraphSite {
                op: value.op,
                hierarchy: value.hierarchy,
                source: value.source,
                device,
            })
        })
        .collect()
}

/// A batch norm or dropout with its training switch on (`Some("")`).
fn training_flag(node: &Node) -> Option<String> {
    let (op, _) = operator(&node.target).ok()?;
    let switch = match op.as_str() {
        "aten::batch_norm" => "training",
        "aten::dropout" | "aten::feature_dropout" | "aten::alpha_dropout" => "train",
        _ => return None,
    };
    let on = node
        .inputs
        .iter()
        .any(|i| i.name == switch && i.arg.get("as_bool") == Some(&Value::Bool(true)));
    // Without running statistics a batch norm uses the batch's in eval mode too.
    let no_running_stats = node
        .inputs
        .iter()
        .any(|i| i.name == "running_mean" && union(&i.arg).is_some_and(|(k, _)| k == "as_none"));
    (on && !no_running_stats).then(String::new)
}

/// The CUDA device a node's argument names.
fn cuda_device(node: &Node) -> Option<String> {
    node.inputs.iter().find_map(|i| match union(&i.arg) {
        Some(("as_device", d)) => Some(device(d)).filter(|d| d.starts_with("cuda")),
        _ => None,
    })
}
