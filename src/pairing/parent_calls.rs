//! ONNX call keys whose outer calls the legacy exporter did not number, re-keyed onto
//! TorchScript's.
//!
//! A container applied to several inputs in turn (a detection head's `conv` Sequential run
//! once per feature level) is called five times, and TorchScript's runs say so:
//! `head.conv#3/head.conv.0#3`. The legacy exporter numbers only the innermost module
//! (`/head/conv/conv.0_3/Conv` under one unnumbered `/head/conv`), so the ONNX key reads
//! `head.conv#0/head.conv.0#3` and no TorchScript call has it: every call after the first
//! went unpaired. The innermost module and its call number (counted over the whole graph on
//! both sides) still name the call; an ONNX key that no TorchScript call has takes the one
//! TorchScript key that agrees with it in every module path and in that innermost number,
//! when neither side has another key of that description.

use super::scopes::GroupKey;
use std::collections::{HashMap, HashSet};

/// The key with every call number but the innermost taken out: `a/a.b#3` for `a#0/a.b#3`.
fn outer_calls_dropped(key: &str) -> String {
    let levels: Vec<&str> = key.split('/').collect();
    let last = levels.len().saturating_sub(1);
    levels
        .iter()
        .enumerate()
        .map(|(depth, level)| match level.rsplit_once('#') {
            Some((path, _)) if depth < last => path,
            _ => level,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Each (description, key) that is the only key of its description among `keys`.
fn unique_by_description<'k>(keys: impl Iterator<Item = &'k GroupKey>) -> HashMap<String, &'k str> {
    let mut seen: HashMap<String, Option<&str>> = HashMap::new();
    for key in keys {
        seen.entry(outer_calls_dropped(key))
            .and_modify(|k| *k = None)
            .or_insert(Some(key.as_str()));
    }
    seen.into_iter()
        .filter_map(|(d, k)| k.map(|k| (d, k)))
        .collect()
}

/// `onnx_keys` with each key no TorchScript value has re-keyed onto the one TorchScript key of
/// the same description that no ONNX value has.
pub(super) fn rekey_unnumbered_parents(
    onnx_keys: Vec<Option<GroupKey>>,
    torch_keys: &[Option<GroupKey>],
) -> Vec<Option<GroupKey>> {
    let torch: HashSet<&GroupKey> = torch_keys.iter().flatten().collect();
    let onnx: HashSet<&GroupKey> = onnx_keys.iter().flatten().collect();
    let torch_only = unique_by_description(torch.iter().copied().filter(|k| !onnx.contains(k)));
    let onnx_only = unique_by_description(onnx.iter().copied().filter(|k| !torch.contains(k)));
    let renamed: HashMap<String, String> = onnx_only
        .iter()
        .filter_map(|(d, o)| torch_only.get(d).map(|t| (o.to_string(), t.to_string())))
        .collect();
    if renamed.is_empty() {
        return onnx_keys;
    }
    onnx_keys
        .into_iter()
        .map(|k| k.map(|k| renamed.get(&k).cloned().unwrap_or(k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[&str]) -> Vec<Option<GroupKey>> {
        ks.iter().map(|k| Some(k.to_string())).collect()
    }

    #[test]
    fn later_calls_of_an_unnumbered_container_meet_torchscript_calls() {
        let torch = keys(&[
            "h#0/h.c#0/h.c.0#0",
            "h#0/h.c#1/h.c.0#1",
            "h#0/h.c#2/h.c.0#2",
        ]);
        let onnx = keys(&[
            "h#0/h.c#0/h.c.0#0",
            "h#0/h.c#0/h.c.0#1",
            "h#0/h.c#0/h.c.0#2",
        ]);
        assert_eq!(rekey_unnumbered_parents(onnx, &torch), torch);
    }

    #[test]
    fn a_child_called_twice_inside_one_call_keeps_its_key() {
        // A block calling its relu twice: both sides agree, nothing moves.
        let torch = keys(&["b#0/b.relu#0", "b#0/b.relu#1"]);
        let onnx = torch.clone();
        assert_eq!(rekey_unnumbered_parents(onnx.clone(), &torch), onnx);
    }

    #[test]
    fn an_ambiguous_description_is_left_alone() {
        // Two TorchScript keys fit the one ONNX key: no guess.
        let torch = keys(&["a#1/a.m#1", "a#2/a.m#1"]);
        let onnx = keys(&["a#0/a.m#1"]);
        assert_eq!(rekey_unnumbered_parents(onnx.clone(), &torch), onnx);
    }

    #[test]
    fn another_innermost_call_is_not_matched() {
        let torch = keys(&["a#1/a.m#1"]);
        let onnx = keys(&["a#0/a.m#2"]);
        assert_eq!(rekey_unnumbered_parents(onnx.clone(), &torch), onnx);
    }
}
