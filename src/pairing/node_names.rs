//! What the exporters' node names say: which op a node is named after, and its number.
//!
//! The legacy exporter names a node after its scope and op type and numbers the repeats of
//! that op type in that scope as it writes them (`/roi_heads/Sub`, `/roi_heads/Sub_1`); the
//! dynamo exporter names a node `node_<op>_<n>` after the ONNX op or the TorchScript op it
//! comes from (`node_Conv_1379`, `node_layer_norm_8`), numbered as it writes them too. Graph
//! tools keep names. So a name gives a node's place in the order it was exported
//! (`export_order`), and where a call has as many nodes named after an op as TorchScript ops
//! of that name, the TorchScript op each node comes from (`torch_places`).

use super::is_layer_candidate;
use super::ops::{bare_name, same_op_name};
use super::scopes::GroupKey;
use crate::capture::CapturedValue;
use std::collections::{BTreeMap, HashSet};

/// A node's run (its name without the number; the op type is part of the run too), the word
/// that names its op, and its number in the run. The legacy exporter names a node
/// `<scope>/<Op>` or `<scope>/<Op>_<n>` (`/roi_heads/Sub_1` is number 1 of `/roi_heads/Sub`),
/// the dynamo exporter `node_<op>_<n>` after the ONNX op or the TorchScript op it comes from
/// (`node_Conv_1379`, `node_layer_norm_8`; `node_add_4` and `node_Add_100` count apart): a
/// name that ends in its own op type or in the name of a TorchScript op (`words`), as a word
/// of its own and case aside, then a number after an underscore or none (number 0). Any
/// other name (a fused node, a name a tool made up: `SkipLayerNorm_AddBias_1`,
/// `Transpose_token_20`) is in no run.
pub(super) fn numbered<'v>(
    v: &'v CapturedValue,
    words: &[String],
) -> Option<(&'v str, &'v str, usize)> {
    let op = bare_name(&v.op);
    let (base, number) = match v.node.rsplit_once('_') {
        Some((base, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (base, digits.parse().ok()?)
        }
        _ => (v.node.as_str(), 0),
    };
    let ends_in = |word: &str| {
        let cut = base.len().checked_sub(word.len())?;
        let (prefix, own) = (base.get(..cut)?, base.get(cut..)?);
        let whole = prefix.is_empty() || prefix.ends_with('/') || prefix.ends_with('_');
        (whole && own.eq_ignore_ascii_case(word)).then_some(own)
    };
    let word = std::iter::once(op)
        .chain(words.iter().map(String::as_str))
        .filter_map(ends_in)
        .max_by_key(|w| w.len())?;
    Some((base, word, number))
}

/// The names of the TorchScript ops, as an exporter spells them in node names: `aten::relu_`
/// is `relu`, `aten::layer_norm` is `layer_norm`.
pub(super) fn torch_words(torch: &[CapturedValue]) -> Vec<String> {
    let mut words: Vec<String> = torch
        .iter()
        .map(|v| {
            let bare = bare_name(&v.op);
            bare.strip_suffix('_')
                .unwrap_or(bare)
                .trim_start_matches('_')
                .to_string()
        })
        .filter(|w| !w.is_empty())
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// The TorchScript position (value id) the names give an ONNX value: in a call whose ONNX
/// nodes named after one op are as many as its TorchScript ops of that name, the k-th node
/// by number is placed at the k-th op. Other values get none.
pub(super) fn torch_places(
    torch: &[CapturedValue],
    torch_groups: &BTreeMap<GroupKey, Vec<usize>>,
    onnx: &[CapturedValue],
    onnx_groups: &BTreeMap<GroupKey, Vec<usize>>,
    words: &[String],
) -> Vec<Option<usize>> {
    let mut places = vec![None; onnx.len()];
    for (key, o_ids) in onnx_groups {
        let Some(t_ids) = torch_groups.get(key) else {
            continue;
        };
        // Per word, the group's numbered nodes: (number, first value id).
        let mut by_type: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
        let mut seen_nodes = HashSet::new();
        for &o in o_ids {
            if !seen_nodes.insert(onnx[o].node.as_str()) {
                continue;
            }
            if let Some((_, word, number)) = numbered(&onnx[o], words) {
                by_type.entry(word).or_default().push((number, o));
            }
        }
        for (op, mut members) in by_type {
            let ops: Vec<usize> = t_ids
                .iter()
                .copied()
                .filter(|&t| same_op_name(&torch[t].op, op))
                .collect();
            if ops.len() != members.len() {
                continue;
            }
            members.sort_unstable();
            for ((_, o), t) in members.into_iter().zip(ops) {
                places[o] = Some(t);
            }
        }
    }
    places
}

/// `torch_places` per call where the ONNX graph has scopes; over the whole graph, one call,
/// where it has none (a simplifier's output): there only the names can place a node.
pub(super) fn places_by_names(
    torch: &[CapturedValue],
    torch_groups: &BTreeMap<GroupKey, Vec<usize>>,
    onnx: &[CapturedValue],
    onnx_groups: &BTreeMap<GroupKey, Vec<usize>>,
    onnx_has_scopes: bool,
    words: &[String],
) -> Vec<Option<usize>> {
    if onnx_has_scopes {
        return torch_places(torch, torch_groups, onnx, onnx_groups, words);
    }
    let mut torch_ids: Vec<usize> = torch_groups.values().flatten().copied().collect();
    torch_ids.sort_unstable();
    let onnx_ids = (0..onnx.len()).filter(|&o| is_layer_candidate(&onnx[o]));
    let whole_torch = BTreeMap::from([(GroupKey::new(), torch_ids)]);
    let whole_onnx = BTreeMap::from([(GroupKey::new(), onnx_ids.collect())]);
    torch_places(torch, &whole_torch, onnx, &whole_onnx, words)
}

#[cfg(test)]
mod tests {
    use super::super::export_order::tests::value;
    use super::*;

    #[test]
    fn a_type_whose_count_differs_between_the_sides_is_not_placed() {
        // Two ONNX Muls, three aten::mul (one fused away): no node of the type is placed.
        let torch: Vec<CapturedValue> = (0..3).map(|id| value(id, "", "aten::mul", &[])).collect();
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/s/Mul_1", "Mul", &[0]),
            value(2, "/s/Mul", "Mul", &[0]),
        ];
        let torch_groups = BTreeMap::from([("s".to_string(), vec![0, 1, 2])]);
        let onnx_groups = BTreeMap::from([("s".to_string(), vec![1, 2])]);
        let places = torch_places(&torch, &torch_groups, &values, &onnx_groups, &[]);
        assert_eq!(places, [None, None, None]);
    }

    #[test]
    fn names_of_both_exporters_are_numbered_and_made_up_names_are_not() {
        let words = ["layer_norm".to_string(), "linear".to_string()];
        let named = |node: &str, op: &str| {
            numbered(&value(1, node, op, &[0]), &words)
                .map(|(b, w, n)| (b.to_string(), w.to_string(), n))
        };
        let run = |b: &str, w: &str, n: usize| Some((b.to_string(), w.to_string(), n));
        assert_eq!(
            named("/roi_heads/Sub_1", "Sub"),
            run("/roi_heads/Sub", "Sub", 1)
        );
        assert_eq!(
            named("/roi_heads/Sub", "Sub"),
            run("/roi_heads/Sub", "Sub", 0)
        );
        assert_eq!(named("node_relu_26", "Relu"), run("node_relu", "relu", 26));
        assert_eq!(
            named("node_Conv_1379", "Conv"),
            run("node_Conv", "Conv", 1379)
        );
        // The two spellings are two counters.
        assert_eq!(named("node_add_4", "Add"), run("node_add", "add", 4));
        assert_eq!(named("node_Add_100", "Add"), run("node_Add", "Add", 100));
        assert_eq!(named("Relu_3", "Relu"), run("Relu", "Relu", 3));
        // Named after the TorchScript op the node comes from.
        let norm = named("node_layer_norm_8", "LayerNormalization");
        assert_eq!(norm, run("node_layer_norm", "layer_norm", 8));
        assert_eq!(
            named("node_linear_3", "Gemm"),
            run("node_linear", "linear", 3)
        );
        let skip = "com.microsoft::SkipLayerNormalization";
        assert_eq!(named("SkipLayerNorm_AddBias_1", skip), None);
        assert_eq!(named("Transpose_token_20", "Transpose"), None);
        assert_eq!(named("/head/MySub_2", "Sub"), None);
        assert_eq!(named("node_max_pool2d_2", "MaxPool"), None);
    }
}
