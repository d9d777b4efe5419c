//! TorchScript calls that the ONNX side knows only as their parent's: the children re-keyed
//! onto the parent's call.
//!
//! The legacy exporter names a scripted container's ops by the container alone: a scripted
//! `nn.Sequential` called from a traced or scripted `forward` leaves `/encoder/MatMul`,
//! `/encoder/Tanh`, `/encoder/MatMul_1`, with no `encoder.0` .. `encoder.2` level, while a
//! reference that records every call (a `.pt2`'s `nn_module_stack`) keys its Linears
//! `encoder#0/encoder.0#0` and so on. Without this step no ONNX node carried the children's
//! scopes and no TorchScript call matched the parent's: the whole container went unpaired, and
//! a fault inside it first showed at the next op outside (blamed on the wrong layer).
//!
//! An ONNX call with nothing under it, all of whose values the exporter itself scoped to it,
//! and whose TorchScript counterpart is split into child calls that no ONNX key names, is one
//! call on both sides: the children's values take the parent's key, and the passes pair them
//! by kind, shape and order inside it as in any call. Each value keeps its own module path for
//! the reports. Only TorchScript keys change, and only under an ONNX key with no key of its
//! own below it, so a graph whose ONNX side names the children (every other export) is
//! untouched. A call that holds values of no recorded scope (an optimiser's merged projection
//! split into pieces, which join the call they feed) is not a collapsed container: the
//! children's nodes are there, merged, and the passes that follow such merges place them.

use super::scopes::GroupKey;
use crate::capture::CapturedValue;
use std::collections::HashSet;

/// Re-keys each TorchScript value whose call lies under a collapsed ONNX call (no ONNX call
/// below it, every value of it scoped by the exporter) onto that call; returns how many
/// values changed.
pub fn fold_into_collapsed_parents(
    torch_keys: &mut [Option<GroupKey>],
    onnx_values: &[CapturedValue],
    onnx_keys: &[Option<GroupKey>],
) -> usize {
    let onnx: HashSet<&str> = onnx_keys.iter().flatten().map(String::as_str).collect();
    // Every ONNX key that has an ONNX key below it: the outer levels of each key.
    let with_onnx_below: HashSet<&str> = (onnx.iter())
        .flat_map(|k| k.match_indices('/').map(move |(at, _)| &k[..at]))
        .collect();
    let unrecorded: HashSet<&str> = (onnx_values.iter().zip(onnx_keys))
        .filter(|(v, _)| !v.scope_recorded)
        .filter_map(|(_, k)| k.as_deref())
        .collect();
    let collapsed =
        |k: &str| onnx.contains(k) && !with_onnx_below.contains(k) && !unrecorded.contains(k);
    let mut changed = 0;
    for key in torch_keys.iter_mut().flatten() {
        if onnx.contains(key.as_str()) {
            continue;
        }
        // The innermost collapsed call that encloses it: a collapsed parent inside another
        // takes its own children.
        let parent = (key.rmatch_indices('/').map(|(at, _)| &key[..at])).find(|p| collapsed(p));
        if let Some(parent) = parent {
            *key = parent.to_string();
            changed += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ONNX values scoped by the exporter, one per key.
    fn scoped(keys: &[Option<GroupKey>]) -> Vec<CapturedValue> {
        (0..keys.len())
            .map(|id| crate::pairing::export_order::tests::value(id, "/n", "Add", &[]))
            .collect()
    }

    fn keys(ks: &[&str]) -> Vec<Option<GroupKey>> {
        ks.iter()
            .map(|k| (!k.is_empty()).then(|| k.to_string()))
            .collect()
    }

    #[test]
    fn children_of_a_collapsed_container_join_its_call() {
        let mut torch = keys(&[
            "encoder#0/encoder.0#0",
            "encoder#0/encoder.1#0",
            "encoder#0/encoder.2#0",
            "cell#0",
            "",
        ]);
        let onnx = keys(&["encoder#0", "encoder#0", "encoder#0", "cell#0"]);
        let folded = torch.clone();
        let mut values = scoped(&onnx);
        assert_eq!(fold_into_collapsed_parents(&mut torch, &values, &onnx), 3);
        assert_eq!(
            torch,
            keys(&["encoder#0", "encoder#0", "encoder#0", "cell#0", ""])
        );
        // A value of no recorded scope in the call (an optimiser's piece of a merged
        // projection, keyed by the call it feeds): the children's nodes are merged, not
        // collapsed.
        let mut torch = folded;
        values[1].scope_recorded = false;
        assert_eq!(fold_into_collapsed_parents(&mut torch, &values, &onnx), 0);
    }

    #[test]
    fn children_the_onnx_side_names_stay_their_own() {
        // `block` has values of its own on the ONNX side and a child it names (`block.conv`):
        // a TorchScript child it does not name (`block.act`, whose op the exporter dropped)
        // is no sign of a collapsed container.
        let mut torch = keys(&["block#0/block.conv#0", "block#0/block.act#0", "block#0"]);
        let onnx = keys(&["block#0/block.conv#0", "block#0"]);
        assert_eq!(
            fold_into_collapsed_parents(&mut torch, &scoped(&onnx), &onnx),
            0
        );
        // A key that only shares its first characters is no child: `encoder#10/..` is not
        // under `encoder#1`.
        let mut torch = keys(&["encoder#10/encoder.0#0"]);
        let onnx = keys(&["encoder#1"]);
        assert_eq!(
            fold_into_collapsed_parents(&mut torch, &scoped(&onnx), &onnx),
            0
        );
    }
}
