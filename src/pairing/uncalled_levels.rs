//! ONNX call keys of a legacy export whose module paths lack a level that was never called,
//! re-keyed onto TorchScript's calls by the exporter's own naming rule.
//!
//! The legacy exporter names a node by the modules whose calls enclose it, each by its
//! *unqualified* name (`torch.onnx.utils._unqualified_variable_name`: the last name of its
//! `named_modules()` path that is not a number, with the numbers after it, so
//! `encoder.layer.0` is `layer.0` and `encoder.layers.0.attention` is `attention`), joined
//! from the root; a joined name seen before gets `_N` at its end (the `N`-th repeat). A module
//! whose call is not recorded (a block run as `layer.forward(x)`, which skips
//! `Module.__call__`, as SqueezeBERT's encoder does) therefore leaves no level, and its
//! children come out under the nearest called module: `/encoder/attention/query/Conv` for the
//! first layer's query, `/encoder/attention/query_1/Conv` for the second's. Those paths name
//! no TorchScript module, so every layer went unpaired ("no ONNX node carries the scope").
//!
//! libtorch records the same calls (the skipped block has no frame there either), so the
//! TorchScript side's call keys give the exporter's names back: each call's unqualified names
//! joined, numbered by repeats in execution order. An ONNX key whose module TorchScript does
//! not know, on a node named the legacy way, takes the TorchScript call key its raw path
//! names, when exactly one call has that name. Only keys change, as in `parent_calls`; the
//! passes then pair by kind, shape and order inside each call.

use super::scopes::{key_path, GroupKey};
use crate::capture::CapturedValue;
use std::collections::{HashMap, HashSet};

/// The exporter's name for a module path: its last name that is not a number, and the
/// numbers after it (`layer.0` for `encoder.layer.0`; the whole path when all are numbers).
fn unqualified(path: &str) -> &str {
    let atoms: Vec<&str> = path.split('.').collect();
    match atoms
        .iter()
        .rposition(|a| !a.chars().all(|c| c.is_ascii_digit()))
    {
        Some(i) => {
            let start: usize = atoms[..i].iter().map(|a| a.len() + 1).sum();
            &path[start..]
        }
        None => path,
    }
}

/// Each call key prefix of TorchScript (`a#0/a.b#1`) under the name the legacy exporter gives
/// that call (`a.b_1`), for the names exactly one call has.
fn legacy_names(torch_keys: &[Option<GroupKey>]) -> HashMap<String, GroupKey> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut repeats: HashMap<String, usize> = HashMap::new();
    let mut names: HashMap<String, Option<GroupKey>> = HashMap::new();
    for key in torch_keys.iter().flatten() {
        let mut joined = String::new();
        for (end, _) in key
            .match_indices('/')
            .chain(std::iter::once((key.len(), "")))
        {
            let prefix = &key[..end];
            let level = prefix.rsplit('/').next().unwrap_or(prefix);
            let path = level.rsplit_once('#').map_or(level, |(p, _)| p);
            if !joined.is_empty() {
                joined.push('.');
            }
            joined.push_str(unqualified(path));
            if !seen.insert(prefix) {
                continue;
            }
            let n = repeats.entry(joined.clone()).or_insert(0);
            let name = match *n {
                0 => joined.clone(),
                n => format!("{joined}_{n}"),
            };
            *n += 1;
            // A name two calls would have (an exporter numbering this side cannot follow)
            // names neither.
            names
                .entry(name)
                .and_modify(|k| *k = None)
                .or_insert_with(|| Some(prefix.to_string()));
        }
    }
    names
        .into_iter()
        .filter_map(|(name, key)| key.map(|k| (name, k)))
        .collect()
}

/// `onnx_keys` with each key of a legacy-named node whose module TorchScript does not know
/// replaced by the TorchScript call its raw path names. `onnx` is the view the keys were
/// assigned from.
pub(super) fn rekey_uncalled_levels(
    onnx: &[CapturedValue],
    onnx_keys: Vec<Option<GroupKey>>,
    torch_keys: &[Option<GroupKey>],
    torch_paths: &HashSet<String>,
) -> Vec<Option<GroupKey>> {
    let unknown = |k: &GroupKey| !torch_paths.contains(key_path(k));
    if !onnx_keys.iter().flatten().any(unknown) {
        return onnx_keys;
    }
    let names = legacy_names(torch_keys);
    let mut renamed: HashMap<GroupKey, Option<GroupKey>> = HashMap::new();
    for (v, key) in onnx.iter().zip(&onnx_keys) {
        let Some(key) = key.as_ref().filter(|k| unknown(k)) else {
            continue;
        };
        if !v.scope_recorded || !v.node.starts_with('/') {
            continue;
        }
        let Some(raw) = v.scope.last() else { continue };
        let target = names.get(&raw.path).cloned();
        // One ONNX key read two ways would be a guess: it keeps its own.
        renamed
            .entry(key.clone())
            .and_modify(|t| {
                if *t != target {
                    *t = None
                }
            })
            .or_insert(target);
    }
    onnx_keys
        .into_iter()
        .map(|k| {
            k.map(|k| match renamed.get(&k) {
                Some(Some(torch)) => torch.clone(),
                _ => k,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unqualified_names_keep_the_numbers_after_the_last_name() {
        assert_eq!(unqualified("encoder.layers.0.attention"), "attention");
        assert_eq!(unqualified("encoder.layer.0"), "layer.0");
        assert_eq!(unqualified("model.22.cv3.0.1"), "cv3.0.1");
        assert_eq!(unqualified("0"), "0");
    }

    #[test]
    fn repeated_names_are_numbered_in_call_order() {
        let torch: Vec<Option<GroupKey>> = [
            "e#0/e.l.0.a#0/e.l.0.a.q#0",
            "e#0/e.l.0.a#0",
            "e#0/e.l.1.a#0/e.l.1.a.q#0",
            "e#0/e.l.1.a#0",
        ]
        .iter()
        .map(|k| Some(k.to_string()))
        .collect();
        let names = legacy_names(&torch);
        assert_eq!(names["e.a.q"], "e#0/e.l.0.a#0/e.l.0.a.q#0");
        assert_eq!(names["e.a.q_1"], "e#0/e.l.1.a#0/e.l.1.a.q#0");
        assert_eq!(names["e.a_1"], "e#0/e.l.1.a#0");
        assert_eq!(names["e"], "e#0");
    }
}
