//! One module called several times in a row (the pooling module an SPPF block applies three
//! times): TorchScript records no call boundary, so the calls form one run of values in that
//! module and get one call key, while the legacy ONNX exporter names each call (`m`, `m_1`,
//! `m_2`). Paired as one call, the module's output would meet the first call's node.
//!
//! A run is split into `k` calls when its ops are one sequence repeated `k` times and the
//! ONNX side has exactly `k - 1` more calls of that module than the TorchScript side: both
//! sides must say so, so a module whose own forward repeats an op (`x * a * b`) is not split.

use super::scopes::{key_path, GroupKey};
use crate::capture::CapturedValue;
use std::collections::BTreeMap;

/// How many times `ops` repeats its shortest period, when that is at least twice.
fn repetitions(ops: &[&str]) -> Option<usize> {
    let n = ops.len();
    (1..n)
        .filter(|&p| n.is_multiple_of(p))
        .find(|&p| (p..n).all(|i| ops[i] == ops[i % p]))
        .map(|p| n / p)
}

/// The call index of a key's innermost level (`1` for `a#0/a.m#1`).
fn call_of(key: &str) -> usize {
    key.rsplit_once('#')
        .and_then(|(_, c)| c.parse().ok())
        .unwrap_or(0)
}

/// `key` with its innermost call index replaced by `call`.
fn with_call(key: &str, call: usize) -> GroupKey {
    let stem = key.rsplit_once('#').map_or(key, |(stem, _)| stem);
    format!("{stem}#{call}")
}

/// Splits each run of a leaf module (`is_leaf`) in `torch_groups` that is `k` calls by both
/// sides' count (the step `repeated_calls` of `scope_steps`).
pub(super) fn split_repeated_calls(
    torch: &[CapturedValue],
    torch_groups: &mut BTreeMap<GroupKey, Vec<usize>>,
    onnx_groups: &BTreeMap<GroupKey, Vec<usize>>,
    is_leaf: impl Fn(&str) -> bool,
) {
    let leaf_keys: Vec<GroupKey> = torch_groups
        .keys()
        .filter(|k| is_leaf(k))
        .cloned()
        .collect();
    for key in leaf_keys {
        let Some(ids) = torch_groups.get(&key).cloned() else {
            continue;
        };
        let ops: Vec<&str> = ids.iter().map(|&i| torch[i].op.as_str()).collect();
        let Some(k) = repetitions(&ops) else {
            continue;
        };
        let path = key_path(&key).to_string();
        let calls = |keys: &mut dyn Iterator<Item = &GroupKey>| {
            keys.filter(|g| key_path(g) == path).count()
        };
        let onnx_calls = calls(&mut onnx_groups.keys());
        let torch_calls = calls(&mut torch_groups.keys());
        if onnx_calls != torch_calls + k - 1 {
            continue;
        }
        let call = call_of(&key);
        // Later calls of the module move up by the calls the run turns out to hold.
        let later: Vec<GroupKey> = torch_groups
            .keys()
            .filter(|g| key_path(g) == path && call_of(g) > call)
            .cloned()
            .collect();
        for old in later.into_iter().rev() {
            let moved = torch_groups.remove(&old).unwrap_or_default();
            torch_groups.insert(with_call(&old, call_of(&old) + k - 1), moved);
        }
        let period = ids.len() / k;
        torch_groups.remove(&key);
        for (n, chunk) in ids.chunks(period).enumerate() {
            torch_groups.insert(with_call(&key, call + n), chunk.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_sequence_is_counted_once_per_repetition() {
        assert_eq!(repetitions(&["pool", "pool", "pool"]), Some(3));
        assert_eq!(repetitions(&["conv", "relu", "conv", "relu"]), Some(2));
        assert_eq!(
            repetitions(&["pow", "mean", "add", "rsqrt", "mul", "mul"]),
            None
        );
        assert_eq!(repetitions(&["conv"]), None);
    }

    #[test]
    fn keys_keep_their_parents_when_renumbered() {
        assert_eq!(call_of("a#0/a.m#2"), 2);
        assert_eq!(with_call("a#0/a.m#2", 4), "a#0/a.m#4");
    }
}
