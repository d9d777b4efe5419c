//! The torch.export graph node a value came from, where both sides can name it.
//!
//! An ExportedProgram's values are its FX nodes' outputs, named as the program names them
//! (`relu`, `add_3`). The dynamo ONNX exporter writes, into the metadata of every ONNX node it
//! emits for an FX node, that node as FX prints it (`pkg.torch.onnx.fx_node`):
//!
//! ```text
//! %relu : [num_users=1] = call_function[target=torch.ops.aten.relu.default](args = (%getitem,), kwargs = {})
//! ```
//!
//! The exporter names the nodes of its own run of torch.export, after its decompositions, so a
//! name alone can mean another node (a decomposed `linear`'s `permute` takes the name the
//! model's own next `permute` has in the `.pt2`). A node is the same node on both sides only
//! when its name, its target and the names of everything it reads all agree: that is what
//! [`FxNode`] holds and what equality compares.

use serde::Deserialize;

/// One FX `call_function` node: its name, its target and the names it reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
pub struct FxNode {
    /// The node's name, which is also its output's (`relu`).
    pub name: String,
    /// The op, as FX prints it (`torch.ops.aten.relu.default`).
    pub target: String,
    /// The names of the values and sizes it reads (arguments and keyword arguments), sorted:
    /// the exporter prints them in call order, the archive in schema order.
    pub reads: Vec<String>,
}

/// The metadata key under which the dynamo exporter prints the FX node of an ONNX node.
pub const ONNX_METADATA_KEY: &str = "pkg.torch.onnx.fx_node";

impl FxNode {
    pub fn new(name: String, target: String, mut reads: Vec<String>) -> FxNode {
        reads.sort();
        reads.dedup();
        FxNode {
            name,
            target,
            reads,
        }
    }

    /// Reads the exporter's print of a `call_function` node; `None` for any other node kind
    /// (placeholders, `get_attr`) or a text of another shape.
    pub fn parse_printed(text: &str) -> Option<FxNode> {
        let rest = text.trim().strip_prefix('%')?;
        let (name, rest) = rest.split_once(" : ")?;
        let (_, call) = rest.split_once(" = call_function[target=")?;
        let (target, arguments) = call.split_once("](")?;
        if name.is_empty() || target.is_empty() {
            return None;
        }
        Some(FxNode::new(
            name.to_string(),
            target.to_string(),
            printed_reads(arguments),
        ))
    }
}

/// Every `%name` in the printed arguments: the values and sizes the node reads.
fn printed_reads(arguments: &str) -> Vec<String> {
    arguments
        .split('%')
        .skip(1)
        .map(|s| {
            s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")
                .to_string()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporters_print_gives_name_target_and_reads() {
        let printed = "%linear : [num_users=1] = call_function[target=torch.ops.aten.linear.default](args = (%mean, %p_l_weight, %p_l_bias), kwargs = {})";
        let node = FxNode::parse_printed(printed).unwrap();
        assert_eq!(node.name, "linear");
        assert_eq!(node.target, "torch.ops.aten.linear.default");
        assert_eq!(node.reads, ["mean", "p_l_bias", "p_l_weight"]);
    }

    #[test]
    fn keyword_reads_and_constants_are_read_apart() {
        let printed = "%mean : [num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%relu, [2, 3]), kwargs = {dtype: torch.float32, other: %sym_size_int_1})";
        let node = FxNode::parse_printed(printed).unwrap();
        assert_eq!(node.reads, ["relu", "sym_size_int_1"]);
    }

    #[test]
    fn nodes_that_call_nothing_name_no_fx_node() {
        assert_eq!(
            FxNode::parse_printed("%x : [num_users=1] = placeholder[target=x]"),
            None
        );
        assert_eq!(FxNode::parse_printed("not an fx node"), None);
        assert_eq!(FxNode::parse_printed(""), None);
    }

    #[test]
    fn the_same_node_needs_the_same_reads() {
        let a = FxNode::new("relu".into(), "t".into(), vec!["b".into(), "a".into()]);
        let b = FxNode::new("relu".into(), "t".into(), vec!["a".into(), "b".into()]);
        let c = FxNode::new("relu".into(), "t".into(), vec!["getitem".into()]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
