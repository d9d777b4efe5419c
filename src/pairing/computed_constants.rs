//! Modules that compute only from weights and constants, but that the ONNX graph still
//! computes.
//!
//! What no model input reaches is usually folded into initializers by the exporters, so
//! TorchScript's side leaves it out as bookkeeping (`constant_values`). Not always: a Swin-V2
//! attention's relative-position MLP (`cpb_mlp`, `meta_mlp`) runs its Linears on a buffer
//! of coordinates, and the legacy exporter keeps those MatMuls as nodes. Left out, they meet
//! no TorchScript value, and a fault in their weights shows only where their result is
//! added to the attention logits. So a module whose TorchScript values are all constant is
//! compared after all when its ONNX scope holds values that are constant too (the exporter
//! kept the computation, and no model input reaches it there either). Constant against
//! constant in one module scope is as much structure as any module call has; a module the
//! exporter folded has no such ONNX values and stays bookkeeping.
//! One the exporter folded only in part keeps what met no twin as covered, not missing
//! (`Pairer::account_folded_constants`).

use super::scopes::{key_path, GroupKey};
use crate::capture::CapturedValue;
use std::collections::{HashMap, HashSet};

/// `constant` (per TorchScript value, whether no model input reaches it) with the values of
/// the modules ONNX computes too set to false: those are compared like any other value.
/// `torch_candidate` says which TorchScript values are layers at all; `onnx_keys` and
/// `onnx_constant` are the ONNX values' module call keys and their own constant flags.
pub(super) fn fold_only_folded(
    torch: &[CapturedValue],
    torch_candidate: &dyn Fn(&CapturedValue) -> bool,
    constant: &[bool],
    onnx_keys: &[Option<GroupKey>],
    onnx_constant: &[bool],
) -> Vec<bool> {
    let computed_in_onnx: HashSet<&str> = onnx_keys
        .iter()
        .enumerate()
        .filter(|&(id, _)| onnx_constant.get(id).copied().unwrap_or(false))
        .filter_map(|(_, k)| k.as_deref().map(key_path))
        .filter(|path| !path.is_empty())
        .collect();
    // Per module path, whether every one of its TorchScript layers is constant.
    let mut all_constant: HashMap<&str, bool> = HashMap::new();
    for v in torch.iter().filter(|v| torch_candidate(v)) {
        let path = v.module_path();
        if !path.is_empty() {
            *all_constant.entry(path).or_insert(true) &= constant[v.id];
        }
    }
    torch
        .iter()
        .map(|v| {
            let path = v.module_path();
            constant[v.id]
                && !(torch_candidate(v)
                    && all_constant.get(path).copied().unwrap_or(false)
                    && computed_in_onnx.contains(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::{ScopeLevel, ValueRole};

    fn value(id: usize, path: &str) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: "aten::linear".into(),
            node: String::new(),
            scope: vec![ScopeLevel {
                path: path.to_string(),
                class: String::new(),
            }],
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role: ValueRole::Intermediate,
            dtype: DType::F32,
            shape: vec![4],
            inputs: Vec::new(),
            tensor: None,
        }
    }

    #[test]
    fn a_constant_module_onnx_computes_is_compared() {
        // attn.mlp runs on a buffer only; ONNX kept its node (constant there too).
        let torch = [value(0, "attn.mlp"), value(1, "attn.proj")];
        let constant = [true, false];
        let onnx_keys = [
            Some("attn.mlp#0".to_string()),
            Some("attn.proj#0".to_string()),
        ];
        let out = fold_only_folded(&torch, &|_| true, &constant, &onnx_keys, &[true, false]);
        assert_eq!(out, vec![false, false]);
    }

    #[test]
    fn a_folded_module_stays_bookkeeping() {
        // No constant ONNX value in the module's scope: the exporter folded it.
        let torch = [value(0, "attn.mlp"), value(1, "attn.proj")];
        let constant = [true, false];
        let onnx_keys = [None, Some("attn.proj#0".to_string())];
        let out = fold_only_folded(&torch, &|_| true, &constant, &onnx_keys, &[true, false]);
        assert_eq!(out, vec![true, false]);
    }

    #[test]
    fn a_module_with_computed_values_keeps_its_constants_out() {
        // A module with one constant call among computed ones (RAFT's motion encoder on a
        // zero flow): its constant values stay bookkeeping (constant_calls handles them).
        let torch = [value(0, "enc.conv"), value(1, "enc.conv")];
        let constant = [true, false];
        let onnx_keys = [
            Some("enc.conv#0".to_string()),
            Some("enc.conv#1".to_string()),
        ];
        let out = fold_only_folded(&torch, &|_| true, &constant, &onnx_keys, &[true, false]);
        assert_eq!(out, vec![true, false]);
    }
}
