//! ONNX call numbers read past the module calls that compute only constants.
//!
//! A module called in a loop whose first call reads only constants (RAFT's motion encoder
//! convolves the flow `coords1 - coords0`, which is zero on the first of its refinement
//! iterations) makes that call constant: no model input reaches it. TorchScript's side leaves
//! such values out as bookkeeping, so its call numbers count the calls that read the inputs
//! only (the second iteration's call is `#0`). ONNX counts them differently: the legacy exporter
//! names every call (`convflow1.0`, `convflow1.0_1`, ...) whether or not a simplifier later
//! folded the constant one away, and the dynamo exporter keeps whatever constant folding left
//! (a Relu over a folded Conv). Read as they are, the numbers meet call `i + 1` with call
//! `i`, one iteration apart: a clean pair failed at every iteration.
//!
//! TorchScript's calls are numbered once more with the constant values counted; a call whose
//! values are all constant is a constant call. For each module with constant calls, when the
//! ONNX side numbers that module's calls past what TorchScript's inputs-only count reaches (so
//! it counts the constant calls too), each ONNX call number is read as the call it is among
//! those that are not constant, and a constant call gets a number that no TorchScript call has
//! (its values compute what TorchScript left out as bookkeeping). Where ONNX numbers only the
//! calls it kept, and those are the ones that read the inputs, the numbers already agree and are
//! left as they are.

use super::scopes::GroupKey;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Per module path, each call number (with constant values counted) and whether any of its
/// values is not constant.
fn calls_by_path(
    keys: &[Option<GroupKey>],
    constant: &[bool],
) -> HashMap<String, BTreeMap<usize, bool>> {
    let mut calls: HashMap<String, BTreeMap<usize, bool>> = HashMap::new();
    for (id, key) in keys.iter().enumerate() {
        for (path, call) in key.iter().flat_map(|k| levels(k)) {
            let computed = calls
                .entry(path.to_string())
                .or_default()
                .entry(call)
                .or_insert(false);
            *computed |= !constant[id];
        }
    }
    calls
}

/// A key's levels as (module path, call number): `a#0/a.b#3` gives `(a, 0), (a.b, 3)`.
fn levels(key: &str) -> impl Iterator<Item = (&str, usize)> {
    key.split('/').filter_map(|level| {
        let (path, call) = level.rsplit_once('#')?;
        Some((path, call.parse().ok()?))
    })
}

/// Per module path with constant calls, the number each call of the full count takes among
/// the calls that are not constant; a constant call takes one past every TorchScript call.
/// Only where the full count and the inputs-only count (`torch_keys`) describe the same calls.
fn renumbering(
    torch_full: &[Option<GroupKey>],
    torch_keys: &[Option<GroupKey>],
    constant: &[bool],
) -> HashMap<String, Vec<usize>> {
    let none = vec![false; torch_keys.len()];
    let counted: HashMap<String, BTreeSet<usize>> = calls_by_path(torch_keys, &none)
        .into_iter()
        .map(|(path, calls)| (path, calls.into_keys().collect()))
        .collect();
    let mut tables = HashMap::new();
    for (path, calls) in calls_by_path(torch_full, constant) {
        let total = calls.len();
        let computed = calls.values().filter(|&&c| c).count();
        let numbered_in_order = calls.keys().copied().eq(0..total);
        let same_calls = counted
            .get(&path)
            .is_some_and(|c| c.iter().copied().eq(0..computed));
        if computed == total || !numbered_in_order || !same_calls {
            continue;
        }
        let mut next = 0;
        let table = calls
            .values()
            .enumerate()
            .map(|(call, &c)| {
                if c {
                    next += 1;
                    next - 1
                } else {
                    total + call
                }
            })
            .collect();
        tables.insert(path, table);
    }
    tables
}

/// `onnx_keys` with the call numbers of modules that have constant calls read among the calls
/// that are not constant, where the ONNX side counts the constant calls too.
/// `torch_full` numbers TorchScript's calls with constant values counted, `torch_keys` without;
/// `constant` says which TorchScript values no model input reaches.
pub(super) fn rekey_past_constant_calls(
    onnx_keys: Vec<Option<GroupKey>>,
    torch_full: &[Option<GroupKey>],
    torch_keys: &[Option<GroupKey>],
    constant: &[bool],
) -> Vec<Option<GroupKey>> {
    let mut tables = renumbering(torch_full, torch_keys, constant);
    if tables.is_empty() {
        return onnx_keys;
    }
    let none = vec![false; onnx_keys.len()];
    let onnx_calls = calls_by_path(&onnx_keys, &none);
    // ONNX counts the constant calls when it numbers a call past the inputs-only count.
    tables.retain(|path, table| {
        let computed = table.iter().filter(|&&c| c < table.len()).count();
        onnx_calls
            .get(path)
            .and_then(|calls| calls.keys().next_back())
            .is_some_and(|&last| last >= computed && last < table.len())
    });
    if tables.is_empty() {
        return onnx_keys;
    }
    let rekey = |key: GroupKey| -> GroupKey {
        key.split('/')
            .map(|level| match level.rsplit_once('#') {
                Some((path, call)) => match (tables.get(path), call.parse::<usize>()) {
                    (Some(table), Ok(c)) => format!("{path}#{}", table[c]),
                    _ => level.to_string(),
                },
                None => level.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/")
    };
    onnx_keys.into_iter().map(|k| k.map(rekey)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[&str]) -> Vec<Option<GroupKey>> {
        ks.iter().map(|k| Some(k.to_string())).collect()
    }

    /// Three calls of `m.c`; the first reads only constants. TorchScript's inputs-only count
    /// numbers the other two `#0` and `#1`.
    fn torch() -> (Vec<Option<GroupKey>>, Vec<Option<GroupKey>>, Vec<bool>) {
        let full = keys(&["m#0/m.c#0", "m#0/m.c#1", "m#0/m.c#2"]);
        let counted = vec![None, Some("m#0/m.c#0".into()), Some("m#0/m.c#1".into())];
        (full, counted, vec![true, false, false])
    }

    #[test]
    fn onnx_calls_counting_the_constant_call_are_read_past_it() {
        let (full, counted, constant) = torch();
        // The legacy exporter named all three calls (`c`, `c_1`, `c_2`).
        let onnx = keys(&["m#0/m.c#0", "m#0/m.c#1", "m#0/m.c#2"]);
        let rekeyed = rekey_past_constant_calls(onnx, &full, &counted, &constant);
        assert_eq!(rekeyed[1].as_deref(), Some("m#0/m.c#0"));
        assert_eq!(rekeyed[2].as_deref(), Some("m#0/m.c#1"));
        // The constant call meets no TorchScript call.
        assert_eq!(rekeyed[0].as_deref(), Some("m#0/m.c#3"));
    }

    #[test]
    fn a_folded_constant_call_keeps_the_numbers_of_the_names() {
        let (full, counted, constant) = torch();
        // A simplifier folded `c`; `c_1` and `c_2` are still the second and third calls.
        let onnx = keys(&["m#0/m.c#1", "m#0/m.c#2"]);
        let rekeyed = rekey_past_constant_calls(onnx, &full, &counted, &constant);
        assert_eq!(rekeyed, keys(&["m#0/m.c#0", "m#0/m.c#1"]));
    }

    #[test]
    fn onnx_counting_only_the_calls_it_kept_is_left_alone() {
        let (full, counted, constant) = torch();
        // Runs counted over what the dynamo exporter kept: the two computed calls.
        let onnx = keys(&["m#0/m.c#0", "m#0/m.c#1"]);
        let rekeyed = rekey_past_constant_calls(onnx.clone(), &full, &counted, &constant);
        assert_eq!(rekeyed, onnx);
    }

    #[test]
    fn modules_without_constant_calls_are_left_alone() {
        let full = keys(&["m#0/m.c#0", "m#0/m.c#1"]);
        let onnx = keys(&["m#0/m.c#0", "m#0/m.c#1"]);
        let rekeyed = rekey_past_constant_calls(onnx.clone(), &full, &full, &[false, false]);
        assert_eq!(rekeyed, onnx);
    }
}
