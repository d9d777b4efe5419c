//! Where an ONNX node came from in the PyTorch model: its module scope and, where recorded,
//! its Python source line.
//!
//! Pairing lines ONNX nodes up with TorchScript values by module path, so both exporter
//! schemes are read into the same `ScopeLevel` list (outermost first, full dotted paths):
//!
//! - dynamo exporter: node metadata `pkg.torch.onnx.name_scopes` and
//!   `pkg.torch.onnx.class_hierarchy`, Python list reprs such as
//!   `['', 'layer1', 'layer1.0', 'layer1.0.bn1', '_native_batch_norm_legit_no_training']` and
//!   `['__main__.Net', 'torch.nn.modules.container.Sequential', '__main__.Block',
//!   'torch.nn.modules.batchnorm.BatchNorm2d', 'aten._native_batch_norm_legit_no_training.default']`.
//!   torch 2.13 builds both as the module stack (root `''` first) followed by one entry for
//!   the FX node itself (its name, and its target in the class list), so the first and the
//!   last entries are not modules. A node without a module stack gets just `[node_name]`.
//! - legacy exporter: the node name, `/layer1/layer1.0/conv1/Conv`, where every component but
//!   the last (the op, possibly with a `_1` suffix) names a module, relative to the nearest
//!   enclosing non-container module (see [`legacy_scope`]).
//!
//! Graphs that went through a simplifier often have neither: the scope is then empty.

use super::proto;
use crate::capture::display_location;
use crate::capture::ScopeLevel;

/// Metadata key of the dynamo exporter's module path list.
pub const NAME_SCOPES_KEY: &str = "pkg.torch.onnx.name_scopes";
/// Metadata key of the dynamo exporter's module class list.
pub const CLASS_HIERARCHY_KEY: &str = "pkg.torch.onnx.class_hierarchy";
/// Metadata key of the dynamo exporter's Python stack trace.
pub const STACK_TRACE_KEY: &str = "pkg.torch.onnx.stack_trace";

/// The module scope of `node`, outermost first; empty for top-level ops or when the model
/// records no scopes.
pub fn node_scope(node: &proto::NodeProto) -> Vec<ScopeLevel> {
    if let Some(scopes) = metadata(node, NAME_SCOPES_KEY) {
        let classes = metadata(node, CLASS_HIERARCHY_KEY)
            .map(parse_py_str_list)
            .unwrap_or_default();
        return dynamo_scope(&parse_py_str_list(scopes), &classes);
    }
    legacy_scope(node.name())
}

/// Whether the node says where it came from at all: dynamo scope metadata (possibly the
/// empty scope of a top-level op) or a legacy name (`/Add` at top level). Nodes a graph
/// optimiser added carry neither; their empty scope means "unknown", not "top level".
pub fn has_scope_record(node: &proto::NodeProto) -> bool {
    metadata(node, NAME_SCOPES_KEY).is_some() || node.name().starts_with('/')
}

/// The value of a node's metadata entry `key`, if present.
pub fn metadata<'a>(node: &'a proto::NodeProto, key: &str) -> Option<&'a str> {
    node.metadata_props
        .iter()
        .find(|p| p.key() == key)
        .map(|p| p.value())
}

/// Scope from the dynamo exporter's two lists (see the module comment for their shape).
pub fn dynamo_scope(name_scopes: &[String], class_hierarchy: &[String]) -> Vec<ScopeLevel> {
    // The last entry is the FX node, never a module.
    let n = name_scopes.len().saturating_sub(1);
    let classes_align = class_hierarchy.len() == name_scopes.len();
    (0..n)
        .filter(|&i| !name_scopes[i].is_empty())
        .map(|i| ScopeLevel {
            path: name_scopes[i].clone(),
            class: if classes_align {
                short_class(&class_hierarchy[i]).to_string()
            } else {
                String::new()
            },
        })
        .collect()
}

/// Scope from a legacy exporter node name such as `/layer2/layer2.0/downsample/downsample.0/Conv`.
///
/// A component is a module name relative to the nearest enclosing module that is not a
/// container, so the children of a `Sequential` repeat their container's component as a
/// prefix (`downsample` then `downsample.0`, `seq.1` then `seq.1.0`), while a plain
/// attribute (`conv1`) or a `ModuleList` item (`ml.0`, the list itself is never called, so it
/// has no component) does not. Hence: a component that extends the previous component
/// replaces its last part of the path, any other one is appended to the previous path.
///
/// ONNX Runtime names a node its optimiser made after the node it replaced plus the fusion
/// (`/blocks.0/attn/MatMul/MatMulAddFusion`, `/attn/MatMul_1/MatMulScaleFusion/`): the name
/// ends at that node's op, and what follows is no module.
pub fn legacy_scope(node_name: &str) -> Vec<ScopeLevel> {
    let Some(rest) = node_name.strip_prefix('/') else {
        return Vec::new();
    };
    let mut components: Vec<&str> = rest.split('/').collect();
    if let Some(tag) = (1..components.len())
        .find(|&i| is_fusion_tag(components[i]) && looks_like_op(components[i - 1]))
    {
        components.truncate(tag);
    }
    components.pop(); // the op itself: `Conv`, `Relu_1`
    let mut levels: Vec<ScopeLevel> = Vec::new();
    let mut previous: Option<&str> = None;
    for c in components.into_iter().filter(|c| !c.is_empty()) {
        let path = match (levels.last(), previous) {
            (None, _) | (_, None) => c.to_string(),
            (Some(parent), Some(pc)) => match c.strip_prefix(pc).filter(|r| r.starts_with('.')) {
                Some(suffix) => format!("{}{suffix}", parent.path),
                None => format!("{}.{c}", parent.path),
            },
        };
        levels.push(ScopeLevel {
            path,
            class: String::new(),
        });
        previous = Some(c);
    }
    levels
}

/// A component ONNX Runtime appends to the name of the node a fusion replaced
/// (`MatMulAddFusion`, `SimplifiedLayerNormFusion`).
fn is_fusion_tag(component: &str) -> bool {
    component.len() > "Fusion".len()
        && component.ends_with("Fusion")
        && component.starts_with(|c: char| c.is_ascii_uppercase())
}

/// An exporter's node name component for an op: an op type, maybe numbered (`MatMul`,
/// `Add_3`), never a module attribute (`attn`, `blocks.0`).
fn looks_like_op(component: &str) -> bool {
    let op = match component.rsplit_once('_') {
        Some((op, n)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => op,
        _ => component,
    };
    op.starts_with(|c: char| c.is_ascii_uppercase())
        && op.chars().all(|c| c.is_ascii_alphanumeric())
}

/// `torch.nn.modules.conv.Conv2d` -> `Conv2d`, the form TorchScript's module hierarchy uses.
fn short_class(qualified: &str) -> &str {
    qualified.rsplit('.').next().unwrap_or(qualified)
}

/// Parses a Python `repr` of a list of strings (`['', "it's", 'a\\b']`). Tolerant: anything
/// outside quotes is ignored, so a malformed value yields what could be read, not an error.
pub fn parse_py_str_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\'' && c != '"' {
            continue;
        }
        let quote = c;
        let mut item = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => item.push('\n'),
                    Some('t') => item.push('\t'),
                    Some(other) => item.push(other),
                    None => {}
                },
                c if c == quote => break,
                c => item.push(c),
            }
        }
        out.push(item);
    }
    out
}

/// The innermost user-code frame of the dynamo exporter's stack trace, as `file:line`.
///
/// The trace lists frames outermost first (`File "model.py", line 19, in forward`); frames
/// inside torch itself (`site-packages/torch/nn/modules/conv.py`) say nothing about the
/// user's model, so the last frame outside torch is the one to show. Model code living in
/// other installed packages (torchvision) counts as user code.
pub fn node_source(node: &proto::NodeProto) -> Option<String> {
    let trace = metadata(node, STACK_TRACE_KEY)?;
    let frames: Vec<(String, String)> = trace.lines().filter_map(parse_frame).collect();
    frames
        .iter()
        .rev()
        .find(|(file, _)| !is_torch_internal(file))
        .or(frames.last())
        .map(|(file, line)| display_location(&format!("{file}:{line}")))
}

/// Every frame of the dynamo exporter's stack trace, outermost first, as `file:line`.
pub fn node_stack(node: &proto::NodeProto) -> Vec<String> {
    metadata(node, STACK_TRACE_KEY)
        .map(|trace| {
            trace
                .lines()
                .filter_map(parse_frame)
                .map(|(file, line)| display_location(&format!("{file}:{line}")))
                .collect()
        })
        .unwrap_or_default()
}

/// `  File "/x/model.py", line 19, in forward` -> (`/x/model.py`, `19`).
fn parse_frame(line: &str) -> Option<(String, String)> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (file, rest) = rest.split_once('"')?;
    let rest = rest.trim_start().strip_prefix(',')?.trim_start();
    let number = rest.strip_prefix("line ")?;
    let digits: String = number.chars().take_while(|c| c.is_ascii_digit()).collect();
    (!digits.is_empty()).then(|| (file.to_string(), digits))
}

fn is_torch_internal(file: &str) -> bool {
    let f = file.replace('\\', "/");
    f.contains("-packages/torch/") || f.starts_with('<')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(levels: &[ScopeLevel]) -> Vec<&str> {
        levels.iter().map(|l| l.path.as_str()).collect()
    }

    fn node_with(name: &str, meta: &[(&str, &str)]) -> proto::NodeProto {
        proto::NodeProto {
            name: Some(name.into()),
            metadata_props: meta
                .iter()
                .map(|(k, v)| proto::StringStringEntryProto {
                    key: Some(k.to_string()),
                    value: Some(v.to_string()),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn legacy_names_become_full_dotted_paths() {
        let s = legacy_scope("/layer1/layer1.0/conv1/Conv");
        assert_eq!(paths(&s), ["layer1", "layer1.0", "layer1.0.conv1"]);
        assert!(s.iter().all(|l| l.class.is_empty()));
        let s = legacy_scope("/layer2/layer2.0/downsample/downsample.0/Conv_1");
        assert_eq!(
            paths(&s),
            [
                "layer2",
                "layer2.0",
                "layer2.0.downsample",
                "layer2.0.downsample.0"
            ]
        );
        // A second call of the same module keeps its suffix; pairing resolves it.
        let s = legacy_scope("/layer1/layer1.0/relu_1/Relu");
        assert_eq!(paths(&s), ["layer1", "layer1.0", "layer1.0.relu_1"]);
        // Top-level functional ops and names without scopes.
        assert!(legacy_scope("/Flatten").is_empty());
        assert!(legacy_scope("Conv_0").is_empty());
        assert!(legacy_scope("").is_empty());
        assert_eq!(paths(&legacy_scope("/stem/Conv")), ["stem"]);
    }

    #[test]
    fn a_fusion_tag_of_onnx_runtime_is_no_module() {
        let s = legacy_scope("/blocks.0/attn/MatMul/MatMulAddFusion");
        assert_eq!(paths(&s), ["blocks.0", "blocks.0.attn"]);
        let s = legacy_scope("/blocks.0/attn/MatMul_1/MatMulScaleFusion/");
        assert_eq!(paths(&s), ["blocks.0", "blocks.0.attn"]);
        // A module whose name ends so, under a module component, stays a module.
        let s = legacy_scope("/late/LateFusion/Conv");
        assert_eq!(paths(&s), ["late", "late.LateFusion"]);
        // Nested containers and a ModuleList, as torch 2.13's legacy exporter names them.
        let s = legacy_scope("/body/body.0/seq/seq.1/seq.1.1/Conv");
        assert_eq!(
            paths(&s),
            [
                "body",
                "body.0",
                "body.0.seq",
                "body.0.seq.1",
                "body.0.seq.1.1"
            ]
        );
        let s = legacy_scope("/body/body.0/ml.0/Relu");
        assert_eq!(paths(&s), ["body", "body.0", "body.0.ml.0"]);
        let s = legacy_scope("/body/body.1/body.1.0/body.1.0.0/Tanh");
        assert_eq!(paths(&s), ["body", "body.1", "body.1.0", "body.1.0.0"]);
        // A component that merely shares a prefix is not an extension.
        let s = legacy_scope("/conv/conv2/Conv");
        assert_eq!(paths(&s), ["conv", "conv.conv2"]);
    }

    #[test]
    fn dynamo_metadata_drops_root_and_node_entries() {
        let n = node_with(
            "node_Conv_33",
            &[
                (
                    NAME_SCOPES_KEY,
                    "['', 'layer1', 'layer1.0', 'layer1.0.bn1', '_native_batch_norm_legit_no_training']",
                ),
                (
                    CLASS_HIERARCHY_KEY,
                    "['__main__.Net', 'torch.nn.modules.container.Sequential', '__main__.Block', \
                     'torch.nn.modules.batchnorm.BatchNorm2d', 'aten._native_batch_norm_legit_no_training.default']",
                ),
            ],
        );
        let s = node_scope(&n);
        assert_eq!(paths(&s), ["layer1", "layer1.0", "layer1.0.bn1"]);
        let classes: Vec<_> = s.iter().map(|l| l.class.as_str()).collect();
        assert_eq!(classes, ["Sequential", "Block", "BatchNorm2d"]);
    }

    #[test]
    fn dynamo_metadata_wins_over_the_node_name_and_handles_top_level() {
        let n = node_with(
            "/layer9/Conv",
            &[
                (NAME_SCOPES_KEY, "['', 'mean']"),
                (CLASS_HIERARCHY_KEY, "['__main__.Net', 'aten.mean.dim']"),
            ],
        );
        assert!(node_scope(&n).is_empty());
        // No module stack at all: the exporter writes just the node name.
        let n = node_with("node_x", &[(NAME_SCOPES_KEY, "['add_3']")]);
        assert!(node_scope(&n).is_empty());
        // Class list of another length: paths survive, classes stay unknown.
        let n = node_with(
            "n",
            &[
                (NAME_SCOPES_KEY, "['', 'fc', 'linear']"),
                (CLASS_HIERARCHY_KEY, "['X']"),
            ],
        );
        let s = node_scope(&n);
        assert_eq!(paths(&s), ["fc"]);
        assert_eq!(s[0].class, "");
    }

    #[test]
    fn odd_quoting_is_read() {
        assert_eq!(
            parse_py_str_list(r#"["", "it's", 'a\'b', 'c\\d', "e\"f"]"#),
            ["", "it's", "a'b", "c\\d", "e\"f"]
        );
        assert!(parse_py_str_list("[]").is_empty());
        assert!(parse_py_str_list("").is_empty());
        assert_eq!(parse_py_str_list("['unterminated"), ["unterminated"]);
    }

    #[test]
    fn no_scope_information_means_empty_scope() {
        assert!(node_scope(&node_with("node_Conv_295", &[])).is_empty());
        assert!(node_scope(&node_with("", &[])).is_empty());
    }

    #[test]
    fn source_is_the_innermost_user_frame() {
        let trace = "File \"/tmp/m/export.py\", line 19, in forward\n    x = s.layer1(x)\n  \
                     File \"/v/lib/python3.11/site-packages/torch/nn/modules/container.py\", line 253, in forward\n    input = module(input)\n  \
                     File \"/tmp/m/export.py\", line 9, in forward\n    y = s.relu(s.bn1(s.conv1(x)))\n  \
                     File \"/v/lib/python3.11/site-packages/torch/nn/modules/activation.py\", line 143, in forward\n    return F.relu(input)";
        let n = node_with("n", &[(STACK_TRACE_KEY, trace)]);
        assert_eq!(node_source(&n).as_deref(), Some("/tmp/m/export.py:9"));
        let n = node_with("n", &[(STACK_TRACE_KEY, "")]);
        assert_eq!(node_source(&n), None);
        assert_eq!(node_source(&node_with("n", &[])), None);
    }
}
