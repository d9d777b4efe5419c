//! Two files whose module paths differ by one leading level: a common root found, not a
//! refusal.
//!
//! A TorchScript file traced through a wrapper module (`Wrapper(model)`, a tool's export
//! harness) names every module one level deeper (`model.layer1.0.conv1`) than an ONNX file
//! exported from the bare model (`layer1.0.conv1`), and the other way round when only the ONNX
//! side was exported through the wrapper. No path then agrees and the pair was refused as two
//! different networks. When every scoped value on one side sits under one root module the
//! other side never names, and the other side's paths agree with the first side's once that
//! root is put in front of them (more of them than agree as they are), the ONNX side's scopes
//! are read with the root put in front or taken off. Only the view used for call keys changes:
//! node names, reports and the TorchScript paths stay as the files have them.

use crate::capture::{CapturedValue, ScopeLevel};
use std::collections::HashSet;

/// The one path every scoped value's outermost level has, if there is one.
fn single_root(values: &[CapturedValue]) -> Option<&ScopeLevel> {
    let mut outer = values.iter().filter_map(|v| v.scope.first());
    let first = outer.next()?;
    outer.all(|l| l.path == first.path).then_some(first)
}

fn names_root(values: &[CapturedValue], root: &str) -> bool {
    let nested = format!("{root}.");
    values
        .iter()
        .flat_map(|v| &v.scope)
        .any(|l| l.path == root || l.path.starts_with(&nested))
}

/// How many distinct ONNX scope paths name a TorchScript module once `rewrite` is applied.
fn agreeing(
    onnx: &[CapturedValue],
    torch_paths: &HashSet<String>,
    rewrite: &dyn Fn(&str) -> String,
) -> usize {
    onnx.iter()
        .flat_map(|v| &v.scope)
        .map(|l| l.path.as_str())
        .collect::<HashSet<_>>()
        .into_iter()
        .filter(|p| torch_paths.contains(&rewrite(p)))
        .count()
}

/// The ONNX values with their scopes re-rooted onto TorchScript's, when the two sides differ
/// by one leading level; `None` when they do not. The copies carry no tensor: they are read
/// for their scopes only.
pub(super) fn rerooted_onnx(
    torch: &[CapturedValue],
    onnx: &[CapturedValue],
    torch_paths: &HashSet<String>,
) -> Option<Vec<CapturedValue>> {
    let as_is = agreeing(onnx, torch_paths, &|p| p.to_string());
    if let Some(root) = single_root(torch).filter(|r| !names_root(onnx, &r.path)) {
        let prefix = format!("{}.", root.path);
        let with_root = agreeing(onnx, torch_paths, &|p| format!("{prefix}{p}"));
        if with_root > as_is {
            return Some(rewritten(onnx, |scope| {
                std::iter::once(root.clone())
                    .chain(scope.iter().map(|l| ScopeLevel {
                        path: format!("{prefix}{}", l.path),
                        class: l.class.clone(),
                    }))
                    .collect()
            }));
        }
    }
    let root = single_root(onnx).filter(|r| !names_root(torch, &r.path))?;
    let prefix = format!("{}.", root.path);
    let without_root = agreeing(onnx, torch_paths, &|p| {
        p.strip_prefix(&prefix).unwrap_or(p).to_string()
    });
    (without_root > as_is).then(|| {
        rewritten(onnx, |scope| {
            scope
                .iter()
                .skip(1)
                .map(|l| ScopeLevel {
                    path: l.path.strip_prefix(&prefix).unwrap_or(&l.path).to_string(),
                    class: l.class.clone(),
                })
                .collect()
        })
    })
}

/// Copies of `values` without tensors, each scoped value's scope replaced by `scope(old)`.
pub(super) fn rewritten(
    values: &[CapturedValue],
    scope: impl Fn(&[ScopeLevel]) -> Vec<ScopeLevel>,
) -> Vec<CapturedValue> {
    values
        .iter()
        .map(|v| CapturedValue {
            id: v.id,
            name: v.name.clone(),
            op: v.op.clone(),
            node: v.node.clone(),
            scope: if v.scope_recorded {
                scope(&v.scope)
            } else {
                Vec::new()
            },
            scope_recorded: v.scope_recorded,
            source: None,
            source_stack: Vec::new(),
            role: v.role,
            dtype: v.dtype,
            shape: v.shape.clone(),
            inputs: v.inputs.clone(),
            tensor: None,
        })
        .collect()
}
