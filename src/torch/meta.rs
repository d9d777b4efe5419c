//! The shim's static description of an instrumented TorchScript graph, and the turning of
//! libtorch's module-hierarchy strings into scopes with the paths `named_modules()` gives.
//!
//! `getNodesModuleHierarchy` writes `layer1(Sequential).0(BasicBlock).conv1(Conv2d)`: instance
//! names relative to their parent, each with its class. Pairing wants full dotted paths
//! (`layer1.0.conv1`), the form both ONNX exporters' scopes are turned into as well. The call
//! stack alone does not always give them:
//!
//! - a container that is iterated (`for layer in self.layer:`, every Hugging Face encoder;
//!   `for m in self.model:` in Ultralytics) is never called, so its level is missing
//!   (`encoder.0` where the module is `encoder.layer.0`);
//! - one instance shared by several parents (Ultralytics' `Conv.default_act`) is called
//!   through something other than an attribute read and comes out as `INSTANCE_NAME_UNKNOWN`.
//!
//! Both are restored from the loaded archive's own module tree, which the shim lists with
//! each module's class: the missing levels are the unique descendant of the parent with the
//! call frame's name and class (or, for the unnamed instance, the parent's unique child of
//! that class). When the tree cannot decide, the scope ends there: a wrong path is worse than
//! a short one.

use crate::capture::fx_node::FxNode;
use crate::capture::ScopeLevel;
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Debug, Deserialize)]
pub struct GraphMeta {
    /// The module's `forward` arguments after `self`.
    pub inputs: Vec<InputMeta>,
    /// Graph inputs that are tensors, then every tensor value the graph computes, in graph
    /// order (the values of a loop body or an if branch come before the loop or if's own).
    pub values: Vec<ValueMeta>,
    /// Every module of the archive, root (`""`) first.
    #[serde(default)]
    pub modules: Vec<ModuleMeta>,
    /// For each leaf of the graph's outputs, the index into `values` that produced it.
    pub outputs: Vec<Option<usize>>,
    /// libtorch's name of the element type of the module's first floating-point parameter
    /// (`Float`, `Half`, `BFloat16`, `Double`); `""` for a module without one.
    #[serde(default)]
    pub parameter_dtype: String,
    /// Whether the archive's root module was saved with `training` set (scripted modules
    /// read it at run time; the shim switches it off).
    #[serde(default)]
    pub saved_training: bool,
    /// Ops the graph fixes in training mode: batch_norm with batch statistics, active dropout.
    #[serde(default)]
    pub training_ops: Vec<GraphSite>,
    /// Ops whose constant arguments put tensors on a CUDA device.
    #[serde(default)]
    pub cuda_ops: Vec<GraphSite>,
    /// Module attributes `forward` assigns or buffers it writes in place: a module that keeps
    /// state between calls (each run starts from the loaded state).
    #[serde(default)]
    pub state_writes: Vec<String>,
    /// Whether the graph is a torch.export program (`.pt2`), not TorchScript: messages then
    /// name that file and its fix.
    #[serde(default)]
    pub exported: bool,
    /// For an exported program: each user input's dimensions as the program allows them
    /// (its `range_constraints`); empty for TorchScript, which has no such record.
    #[serde(skip)]
    pub input_dims: Vec<(String, Vec<crate::torch::exported::DimRule>)>,
    /// TorchScript: every parameter and buffer by full name in registration order, with
    /// where its data is (equal for two names of one tensor). Empty for an exported program,
    /// whose reader finds the same in the archive.
    #[serde(default)]
    pub state: Vec<(String, String)>,
    /// The attribute paths of a shared instance after its first, each read as the first
    /// (`capture::module_aliases`, found by `torch::shared_attributes`).
    #[serde(skip)]
    pub module_aliases: crate::capture::module_aliases::ModuleAliases,
}

/// One node of the graph that something is said about, with where it is.
#[derive(Debug, Deserialize)]
pub struct GraphSite {
    pub op: String,
    pub hierarchy: String,
    pub source: String,
    /// The CUDA device a `cuda_ops` site names; `""` otherwise.
    #[serde(default)]
    pub device: String,
}

#[derive(Debug, Deserialize)]
pub struct InputMeta {
    pub name: String,
    /// The type as forward's schema writes it: `Tensor`, `int`, `Optional[Tensor]`,
    /// `Dict[str, Tensor]`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The schema's default value, as libtorch prints it, when the argument has one.
    #[serde(default)]
    pub default: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ValueMeta {
    pub name: String,
    pub op: String,
    pub hierarchy: String,
    /// Per frame of `hierarchy`, the path the frame's module type resolves to in the
    /// archive's tree (`""` where the type does not name one module).
    #[serde(default)]
    pub type_paths: Vec<String>,
    pub source: String,
    /// Every frame of the Python stack that produced the value, outermost first
    /// (`file:line`); empty where the archive kept none.
    #[serde(default)]
    pub stack: Vec<String>,
    /// `""` at the top level, `"loop"` inside a loop body (observed once per iteration),
    /// `"if"` inside an if branch (observed only when the branch runs).
    #[serde(default)]
    pub block: String,
    pub inputs: Vec<usize>,
    /// For a tensor unpacked from a tuple or list built in the graph: the producers of that
    /// element alone (`inputs` lists everything packed beside it).
    #[serde(default)]
    pub element_inputs: Option<Vec<usize>>,
    /// For a tensor read straight out of a container or Optional argument: that argument's
    /// graph name (`inputs.1`) and the key it was read at (`input_ids`, `0`; `""` for an
    /// Optional); both `""` otherwise.
    #[serde(default)]
    pub element_of: String,
    #[serde(default)]
    pub element_key: String,
    /// The exported program's node that computed it (`.pt2` only; the shim sends none).
    #[serde(default)]
    pub fx_node: Option<FxNode>,
}

#[derive(Debug, Deserialize)]
pub struct ModuleMeta {
    pub path: String,
    pub class: String,
}

/// The archive's module tree: qualified path to class name.
#[derive(Debug, Default)]
pub struct ModuleTree {
    classes: HashMap<String, String>,
}

/// One call frame of a hierarchy string: instance name and class as libtorch wrote them.
fn frames(hierarchy: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = hierarchy.trim();
    while !rest.is_empty() {
        let Some(open) = rest.find('(') else { break };
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        out.push((&rest[..open], &rest[open + 1..open + close]));
        rest = rest[open + close + 1..].trim_start_matches('.');
    }
    out
}

impl GraphSite {
    /// Where the site is, for a message: its module path, op and source line.
    pub fn describe(&self) -> String {
        let path: Vec<&str> = frames(&self.hierarchy)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let mut out = format!("`{}`", self.op);
        if !path.is_empty() {
            out = format!("{} ({out})", path.join("."));
        }
        if !self.source.is_empty() {
            let source = crate::capture::display_location(&self.source);
            out.push_str(&format!(" at {source}"));
        }
        out
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

impl ModuleTree {
    pub fn new(modules: &[ModuleMeta]) -> ModuleTree {
        ModuleTree {
            classes: modules
                .iter()
                .map(|m| (m.path.clone(), m.class.clone()))
                .collect(),
        }
    }

    /// The path of the module called as `name` (of class `class`) from the module at
    /// `parent`, when the tree names exactly one.
    fn child(&self, parent: &str, name: &str, class: &str) -> Option<String> {
        let unnamed = name == "INSTANCE_NAME_UNKNOWN";
        if self.classes.is_empty() {
            // An archive description without a tree: trust the call stack as written.
            return (!unnamed).then(|| join(parent, name));
        }
        let direct = join(parent, name);
        if !unnamed && self.classes.contains_key(&direct) {
            return Some(direct);
        }
        let prefix = if parent.is_empty() {
            String::new()
        } else {
            format!("{parent}.")
        };
        // Descendants of `parent` that can be the frame, nearest first; the missing levels
        // are containers between the parent and the module.
        let mut best: Option<(usize, Vec<&String>)> = None;
        for (path, c) in &self.classes {
            let Some(rel) = path.strip_prefix(&prefix) else {
                continue;
            };
            if rel.is_empty() || c != class {
                continue;
            }
            let depth = rel.split('.').count();
            let last = rel.rsplit('.').next().unwrap_or(rel);
            if (unnamed && depth != 1) || (!unnamed && (depth < 2 || last != name)) {
                continue;
            }
            match &mut best {
                Some((d, paths)) if *d == depth => paths.push(path),
                Some((d, _)) if *d < depth => {}
                _ => best = Some((depth, vec![path])),
            }
        }
        match best {
            Some((_, paths)) if paths.len() == 1 => Some(paths[0].clone()),
            _ => None,
        }
    }

    /// Scopes, outermost first, for a hierarchy string such as
    /// `encoder(BertEncoder).0(BertLayer).attention(BertAttention)`. `type_paths` holds, per
    /// frame, the path the frame's module type names (traced modules each have a type of
    /// their own), which settles what names alone cannot (Ultralytics' `cv2.0` and `cv3.0`
    /// both called as `0`); it is only taken where it lies under the path resolved so far.
    pub fn scope(&self, hierarchy: &str, type_paths: &[String]) -> Vec<ScopeLevel> {
        let mut levels: Vec<ScopeLevel> = Vec::new();
        for (k, (name, class)) in frames(hierarchy).into_iter().enumerate() {
            if name.is_empty() || name == "UNKNOWN_INSTANCE" {
                break;
            }
            // A scripted module calling one of its own methods adds `SELF(Class)`: same module.
            if name == "SELF" {
                continue;
            }
            let parent = levels.last().map(|l| l.path.as_str()).unwrap_or("");
            let by_type = type_paths
                .get(k)
                .filter(|p| {
                    !p.is_empty() && (parent.is_empty() || p.starts_with(&format!("{parent}.")))
                })
                .cloned();
            let Some(path) = by_type.or_else(|| self.child(parent, name, class)) else {
                break;
            };
            levels.push(ScopeLevel {
                path,
                class: if class == "UNKNOWN_TYPE" {
                    String::new()
                } else {
                    class.to_string()
                },
            });
        }
        levels
    }
}

/// Scopes for a hierarchy string, trusting the call stack (no module tree to consult).
pub fn parse_hierarchy(hierarchy: &str) -> Vec<ScopeLevel> {
    ModuleTree::default().scope(hierarchy, &[])
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

    fn tree(paths: &[(&str, &str)]) -> ModuleTree {
        ModuleTree::new(
            &paths
                .iter()
                .map(|(p, c)| ModuleMeta {
                    path: p.to_string(),
                    class: c.to_string(),
                })
                .collect::<Vec<_>>(),
        )
    }

    fn paths(levels: &[ScopeLevel]) -> Vec<&str> {
        levels.iter().map(|l| l.path.as_str()).collect()
    }

    #[test]
    fn iterated_container_level_is_restored_from_the_tree() {
        let t = tree(&[
            ("", "BertModel"),
            ("encoder", "BertEncoder"),
            ("encoder.layer", "ModuleList"),
            ("encoder.layer.0", "BertLayer"),
            ("encoder.layer.0.attention", "BertAttention"),
        ]);
        let s = t.scope(
            "encoder(BertEncoder).0(BertLayer).attention(BertAttention)",
            &[],
        );
        assert_eq!(
            paths(&s),
            ["encoder", "encoder.layer.0", "encoder.layer.0.attention"]
        );
    }

    #[test]
    fn top_level_iterated_sequential_is_restored() {
        let t = tree(&[
            ("", "DetectionModel"),
            ("model", "Sequential"),
            ("model.2", "C2f"),
            ("model.2.m", "ModuleList"),
            ("model.2.m.0", "Bottleneck"),
            ("model.2.m.0.cv1", "Conv"),
        ]);
        let s = t.scope("2(C2f).0(Bottleneck).cv1(Conv)", &[]);
        assert_eq!(paths(&s), ["model.2", "model.2.m.0", "model.2.m.0.cv1"]);
    }

    #[test]
    fn shared_instance_is_named_by_the_parent_it_was_called_through() {
        let t = tree(&[
            ("", "Net"),
            ("model", "Sequential"),
            ("model.0", "Conv"),
            ("model.0.conv", "Conv2d"),
            ("model.0.act", "SiLU"),
            ("model.1", "Conv"),
            ("model.1.act", "SiLU"),
        ]);
        let s = t.scope("model(Sequential).1(Conv).INSTANCE_NAME_UNKNOWN(SiLU)", &[]);
        assert_eq!(paths(&s), ["model", "model.1", "model.1.act"]);
    }

    #[test]
    fn module_types_settle_sibling_branches_of_the_same_shape() {
        let t = tree(&[
            ("", "DetectionModel"),
            ("model", "Sequential"),
            ("model.22", "Detect"),
            ("model.22.cv2", "ModuleList"),
            ("model.22.cv2.0", "Sequential"),
            ("model.22.cv3", "ModuleList"),
            ("model.22.cv3.0", "Sequential"),
        ]);
        let by_name = t.scope("22(Detect).0(Sequential)", &[]);
        assert_eq!(paths(&by_name), ["model.22"]);
        let typed = ["model.22".to_string(), "model.22.cv3.0".to_string()];
        let by_type = t.scope("22(Detect).0(Sequential)", &typed);
        assert_eq!(paths(&by_type), ["model.22", "model.22.cv3.0"]);
        // A type path outside the parent resolved so far is not taken.
        let stray = ["model.22".to_string(), "model.5".to_string()];
        assert_eq!(
            paths(&t.scope("22(Detect).0(Sequential)", &stray)),
            ["model.22"]
        );
    }

    #[test]
    fn ambiguous_frames_end_the_scope() {
        let t = tree(&[
            ("", "Net"),
            ("a", "Block"),
            ("a.x", "ModuleList"),
            ("a.x.0", "Conv2d"),
            ("a.y", "ModuleList"),
            ("a.y.0", "Conv2d"),
        ]);
        assert_eq!(paths(&t.scope("a(Block).0(Conv2d)", &[])), ["a"]);
        assert_eq!(
            paths(&t.scope("a(Block).INSTANCE_NAME_UNKNOWN(Conv2d)", &[])),
            ["a"]
        );
    }
}
