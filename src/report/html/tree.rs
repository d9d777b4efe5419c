//! The module tree of the HTML report: TorchScript module paths (`layer1.0.conv1`) folded into
//! a tree, each module carrying the worst error of the layers under it, so a reader can walk
//! down from the network to the module where the error starts.
//!
//! Under each module, child modules and the module's own layers (a block's residual add)
//! are listed in execution order. The tree is plain serialisable data; the page renders it
//! as nested `<details>` elements,
//! which open and close without any script. Modules on the way to a divergence origin start
//! open.

use crate::outcome::{LayerResult, Outcome};
use crate::report::format::{band_of, fmt_num, severity};
use serde::Serialize;
use std::collections::HashMap;

/// Stand-in name for the values outside any module (`torch.cat` at top level).
const TOP_LEVEL: &str = "(top level)";

#[derive(Debug, Serialize)]
pub struct TreeNode {
    /// Last path segment (`conv1`), or `(top level)`.
    pub name: String,
    /// Full dotted path; empty for the top level.
    pub path: String,
    /// The module's class, where one of its own layers names it.
    pub class: String,
    /// Layers under this module, its own and its descendants'.
    pub layers: usize,
    pub failing: usize,
    /// Index of the module's first layer, which orders it among its siblings.
    #[serde(skip)]
    first: usize,
    /// Largest error relative to range among those layers, formatted.
    pub worst: String,
    /// Colour class of `worst` (see `format::BANDS`).
    pub colour: &'static str,
    pub open: bool,
    /// Child modules and the module's own layers, in execution order.
    pub items: Vec<TreeItem>,
}

/// An entry under a module: a child module or one of the module's own layers.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TreeItem {
    Module(TreeNode),
    Layer(Leaf),
}

impl TreeItem {
    fn first_index(&self) -> usize {
        match self {
            TreeItem::Module(m) => m.first,
            TreeItem::Layer(l) => l.index,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Leaf {
    pub index: usize,
    pub onnx_node: String,
    pub op: String,
    pub rel: String,
    pub colour: &'static str,
    pub status: &'static str,
}

/// A node while the tree is built: children by index into the arena.
struct Building {
    name: String,
    path: String,
    class: String,
    layers: usize,
    failing: usize,
    worst: f64,
    first: usize,
    open: bool,
    children: Vec<usize>,
    own: Vec<Leaf>,
}

/// The tree of every module that has a compared layer, children in execution order.
pub fn module_tree(outcome: &Outcome) -> Vec<TreeItem> {
    let mut arena: Vec<Building> = Vec::new();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut roots: Vec<usize> = Vec::new();
    let origins: Vec<&str> = outcome
        .divergence_origins
        .iter()
        .map(|d| d.module.as_str())
        .collect();

    for layer in &outcome.layers {
        let chain = prefixes(&layer.module);
        let mut parent: Option<usize> = None;
        for (depth, (name, path)) in chain.iter().enumerate() {
            let id = match by_path.get(path.as_str()) {
                Some(&id) => id,
                None => {
                    let id = arena.len();
                    arena.push(Building {
                        name: name.clone(),
                        path: path.clone(),
                        class: String::new(),
                        layers: 0,
                        failing: 0,
                        worst: 0.0,
                        first: layer.index,
                        // Roots start open so the first level is visible at a glance.
                        open: depth == 0 || origins.iter().any(|o| is_within(o, path)),
                        children: Vec::new(),
                        own: Vec::new(),
                    });
                    by_path.insert(path.clone(), id);
                    match parent {
                        Some(p) => arena[p].children.push(id),
                        None => roots.push(id),
                    }
                    id
                }
            };
            let node = &mut arena[id];
            node.layers += 1;
            node.failing += usize::from(!layer.cmp.pass);
            node.worst = node.worst.max(severity(layer.cmp.rel_to_range));
            parent = Some(id);
        }
        let own = parent.expect("a module path has at least one level");
        if arena[own].class.is_empty() {
            arena[own].class = layer.module_type.clone();
        }
        arena[own].own.push(leaf(layer));
    }
    let mut slots: Vec<Option<Building>> = arena.into_iter().map(Some).collect();
    roots
        .iter()
        .map(|&r| TreeItem::Module(finish(&mut slots, r)))
        .collect()
}

/// `layer1.0.conv1` gives (`layer1`, `layer1`), (`0`, `layer1.0`), (`conv1`, `layer1.0.conv1`);
/// an empty path gives the top-level stand-in.
fn prefixes(module: &str) -> Vec<(String, String)> {
    if module.is_empty() {
        return vec![(TOP_LEVEL.to_string(), String::new())];
    }
    let mut out = Vec::new();
    let mut path = String::new();
    for part in module.split('.') {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(part);
        out.push((part.to_string(), path.clone()));
    }
    out
}

/// Whether module `m` is `ancestor` or lies under it (`layer1.0.conv1` is within `layer1`,
/// `layer10` is not).
fn is_within(m: &str, ancestor: &str) -> bool {
    m == ancestor || (m.starts_with(ancestor) && m.as_bytes().get(ancestor.len()) == Some(&b'.'))
}

fn leaf(layer: &LayerResult) -> Leaf {
    Leaf {
        index: layer.index,
        onnx_node: layer.onnx_node.clone(),
        op: if layer.onnx_op.is_empty() {
            layer.torch_op.clone()
        } else {
            layer.onnx_op.clone()
        },
        rel: fmt_num(layer.cmp.rel_to_range),
        colour: band_of(layer.cmp.rel_to_range).class,
        status: layer.status().as_str(),
    }
}

fn finish(slots: &mut [Option<Building>], id: usize) -> TreeNode {
    let b = slots[id].take().expect("each node has one parent");
    let mut items: Vec<TreeItem> = b
        .children
        .iter()
        .map(|&c| TreeItem::Module(finish(slots, c)))
        .chain(b.own.into_iter().map(TreeItem::Layer))
        .collect();
    items.sort_by_key(TreeItem::first_index);
    TreeNode {
        items,
        first: b.first,
        name: b.name,
        path: b.path,
        class: b.class,
        layers: b.layers,
        failing: b.failing,
        worst: fmt_num(b.worst),
        colour: band_of(b.worst).class,
        open: b.open,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fold_into_prefixes() {
        let p = prefixes("layer1.0.conv1");
        assert_eq!(p[1], ("0".to_string(), "layer1.0".to_string()));
        assert_eq!(p.len(), 3);
        assert_eq!(prefixes("")[0].0, TOP_LEVEL);
    }

    #[test]
    fn within_respects_segment_boundaries() {
        assert!(is_within("layer1.0.conv1", "layer1"));
        assert!(is_within("layer1", "layer1"));
        assert!(!is_within("layer10.conv", "layer1"));
    }
}
