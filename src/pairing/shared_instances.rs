//! One module instance held under several attributes: the legacy exporter's name for it read
//! as the attribute TorchScript called it through.
//!
//! A network may hand one module to several parents (timm's CoaT builds `self.cpe1` and gives
//! it to every serial block of the stage as `block.cpe`). libtorch's call stack names the call
//! by the attribute the parent read (`serial_blocks1.0.cpe`), and so does the dynamo exporter;
//! the legacy exporter names every module by the last part of its deduplicated
//! `named_modules()` name, which for a shared instance is the first attribute it was
//! registered under, placed under the caller's scope (`/serial_blocks1.0/cpe1/Slice`). That
//! path names no TorchScript module, so the whole call went unpaired ("no ONNX node carries
//! the scope"). An ONNX path that names no TorchScript module although its parent does is such
//! an alias; it is read as the parent's child that no ONNX path names, when the parent has
//! exactly one unknown child on the ONNX side and one unnamed child on the TorchScript side
//! (two of either would be a guess, and both stay as they are). Only the view used for call
//! keys changes, as in `common_root`; the pairs are then made by the passes, by kind, shape
//! and order inside the call, so a wrong reading still meets no value of another kind.

use super::common_root::rewritten;
use crate::capture::{CapturedValue, ScopeLevel};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A path segment without the legacy exporter's call suffix (`cpe1_1` is the second call of
/// `cpe1`), and the suffix.
fn without_call_suffix(segment: &str) -> (&str, &str) {
    match segment.rsplit_once('_') {
        Some((stem, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            (stem, &segment[stem.len()..])
        }
        _ => (segment, ""),
    }
}

/// For each ONNX path prefix that is an alias, the TorchScript path it stands for.
fn aliases(onnx: &[CapturedValue], torch_paths: &HashSet<String>) -> HashMap<String, String> {
    let onnx_paths: BTreeSet<&str> = onnx
        .iter()
        .filter(|v| v.scope_recorded)
        .flat_map(|v| &v.scope)
        .map(|l| l.path.as_str())
        .collect();
    // Per known parent: the child names ONNX uses that TorchScript has no module for.
    let mut unknown: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut named: HashSet<String> = HashSet::new();
    for path in &onnx_paths {
        let Some((parent, segment)) = path.rsplit_once('.') else {
            continue;
        };
        if !torch_paths.contains(parent) {
            continue;
        }
        let stem = without_call_suffix(segment).0;
        let direct = format!("{parent}.{segment}");
        let stemmed = format!("{parent}.{stem}");
        if torch_paths.contains(&direct) {
            named.insert(direct);
        } else if torch_paths.contains(&stemmed) {
            named.insert(stemmed);
        } else {
            unknown.entry(parent).or_default().insert(stem);
        }
    }
    unknown
        .into_iter()
        .filter_map(|(parent, stems)| {
            let prefix = format!("{parent}.");
            let mut unnamed = torch_paths.iter().filter(|p| {
                p.strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.contains('.'))
                    && !named.contains(*p)
            });
            let only = match (unnamed.next(), unnamed.next()) {
                (Some(only), None) => only,
                _ => return None,
            };
            let mut stems = stems.into_iter();
            match (stems.next(), stems.next()) {
                (Some(stem), None) => Some((format!("{parent}.{stem}"), only.clone())),
                _ => None,
            }
        })
        .collect()
}

/// `path` with an alias at its front replaced (`p.cpe1_1.proj` -> `p.cpe_1.proj`: the call
/// suffix stays for the key's call numbering).
fn read_through(path: &str, aliases: &HashMap<String, String>) -> Option<String> {
    aliases.iter().find_map(|(alias, torch)| {
        let rest = path.strip_prefix(alias.as_str())?;
        let (suffix, tail) = match rest.split_once('.') {
            Some((s, t)) => (s, format!(".{t}")),
            None => (rest, String::new()),
        };
        let is_call_suffix = suffix.is_empty()
            || suffix
                .strip_prefix('_')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        is_call_suffix.then(|| format!("{torch}{suffix}{tail}"))
    })
}

/// The ONNX values with alias paths read as the TorchScript paths they stand for; `None`
/// when there is none. The copies carry no tensor: they are read for their scopes only.
pub(super) fn read_shared_instances(
    onnx: &[CapturedValue],
    torch_paths: &HashSet<String>,
) -> Option<Vec<CapturedValue>> {
    let aliases = aliases(onnx, torch_paths);
    if aliases.is_empty() {
        return None;
    }
    Some(rewritten(onnx, |scope| {
        scope
            .iter()
            .map(|l| ScopeLevel {
                path: read_through(&l.path, &aliases).unwrap_or_else(|| l.path.clone()),
                class: l.class.clone(),
            })
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_suffixes_and_children_are_read_through_an_alias() {
        let a: HashMap<String, String> = [("b.0.cpe1".to_string(), "b.0.cpe".to_string())].into();
        assert_eq!(read_through("b.0.cpe1", &a).as_deref(), Some("b.0.cpe"));
        assert_eq!(read_through("b.0.cpe1_1", &a).as_deref(), Some("b.0.cpe_1"));
        assert_eq!(
            read_through("b.0.cpe1.proj", &a).as_deref(),
            Some("b.0.cpe.proj")
        );
        // Another module whose name starts like the alias is not it.
        assert_eq!(read_through("b.0.cpe10", &a), None);
        assert_eq!(read_through("b.0.cpe1x.proj", &a), None);
    }

    #[test]
    fn without_call_suffix_splits_only_a_number() {
        assert_eq!(without_call_suffix("cpe1_2"), ("cpe1", "_2"));
        assert_eq!(without_call_suffix("cpe1"), ("cpe1", ""));
        assert_eq!(without_call_suffix("act_fn"), ("act_fn", ""));
    }
}
