//! The shim's static description of an instrumented TorchScript graph, and the parsing of
//! libtorch's module-hierarchy strings into scopes.
//!
//! `getNodesModuleHierarchy` writes `layer1(Sequential).0(BasicBlock).conv1(Conv2d)`: instance
//! names relative to their parent, each with its class. Pairing wants full dotted paths
//! (`layer1.0.conv1`), the form both ONNX exporters' scopes are turned into as well.

use crate::capture::ScopeLevel;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct GraphMeta {
    /// The module's `forward` arguments after `self`.
    pub inputs: Vec<InputMeta>,
    /// Graph inputs that are tensors, then every top-level tensor value, in execution order.
    pub values: Vec<ValueMeta>,
    pub uncapturable: Vec<UncapturableMeta>,
    /// For each leaf of the graph's outputs, the index into `values` that produced it.
    pub outputs: Vec<Option<usize>>,
}

#[derive(Debug, Deserialize)]
pub struct InputMeta {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
}

#[derive(Debug, Deserialize)]
pub struct ValueMeta {
    pub name: String,
    pub op: String,
    pub hierarchy: String,
    pub source: String,
    pub inputs: Vec<usize>,
}

#[derive(Debug, Deserialize)]
pub struct UncapturableMeta {
    pub name: String,
    pub op: String,
    pub hierarchy: String,
    pub reason: String,
}

/// Parses `layer1(Sequential).0(BasicBlock).conv1(Conv2d)` into scopes with full paths.
/// Unknown parts (`UNKNOWN_INSTANCE`) end the scope: a wrong path is worse than a short one.
pub fn parse_hierarchy(hierarchy: &str) -> Vec<ScopeLevel> {
    let mut levels = Vec::new();
    let mut path = String::new();
    let mut rest = hierarchy.trim();
    while !rest.is_empty() {
        let Some(open) = rest.find('(') else { break };
        let name = &rest[..open];
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let class = &rest[open + 1..open + close];
        if name.is_empty() || name == "UNKNOWN_INSTANCE" {
            break;
        }
        // A scripted module calling one of its own methods adds `SELF(Class)`: same module.
        if name == "SELF" {
            rest = rest[open + close + 1..].trim_start_matches('.');
            continue;
        }
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
        levels.push(ScopeLevel {
            path: path.clone(),
            class: if class == "UNKNOWN_TYPE" {
                String::new()
            } else {
                class.to_string()
            },
        });
        rest = rest[open + close + 1..].trim_start_matches('.');
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_hierarchy_becomes_full_paths_with_classes() {
        let levels = parse_hierarchy("layer1(Sequential).0(BasicBlock).conv1(Conv2d)");
        let paths: Vec<_> = levels.iter().map(|l| l.path.as_str()).collect();
        let classes: Vec<_> = levels.iter().map(|l| l.class.as_str()).collect();
        assert_eq!(paths, ["layer1", "layer1.0", "layer1.0.conv1"]);
        assert_eq!(classes, ["Sequential", "BasicBlock", "Conv2d"]);
    }

    #[test]
    fn scripted_self_segments_are_the_same_module() {
        let levels = parse_hierarchy("body(LoopIfBody).conv(Conv2d).SELF(Conv2d)");
        let paths: Vec<_> = levels.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["body", "body.conv"]);
    }

    #[test]
    fn empty_hierarchy_is_top_level() {
        assert!(parse_hierarchy("").is_empty());
    }

    #[test]
    fn unknown_instance_stops_the_scope() {
        let levels = parse_hierarchy("a(A).UNKNOWN_INSTANCE(UNKNOWN_TYPE).b(B)");
        assert_eq!(levels.len(), 1);
        assert_eq!(levels[0].path, "a");
    }
}
