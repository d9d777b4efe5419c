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
//! (two of either would be a guess, and both stay as they are, unless the modules inside the
//! unknown name, or the attribute it was read as under another parent, single one out).
//! Children whose values all vanish in export (a Dropout) are no candidates. A call made from
//! outside the instance's parents (CoaT's top-level `self.cpe2(x2)`) is recorded by
//! `torch.jit.trace` under the instance's last attribute path, by the exporters under the
//! caller (`/cpe2_1/...`, dynamo's `cpe2`); see `called_out_of_parent`. Only the view used for call
//! keys changes, as in `common_root`; the pairs are then made by the passes, by kind, shape
//! and order inside the call, so a wrong reading still meets no value of another kind.

use super::common_root::rewritten;
use super::ops::vanishes_in_onnx;
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

/// Paths of TorchScript modules that compute something ONNX can carry: a module whose every
/// value vanishes in export (a Dropout in eval mode) leaves no node, so it cannot be the
/// module an unknown ONNX name stands for.
fn computing_paths(torch: &[CapturedValue]) -> HashSet<&str> {
    torch
        .iter()
        .filter(|v| !vanishes_in_onnx(&v.op))
        .flat_map(|v| &v.scope)
        .map(|l| l.path.as_str())
        .collect()
}

/// The parent a path would have: `""` for a top-level module.
fn parent_of(path: &str) -> &str {
    path.rsplit_once('.').map(|(p, _)| p).unwrap_or("")
}

/// Whether `ancestor` is a proper path prefix of `path` (`""` is everyone's).
fn is_ancestor(ancestor: &str, path: &str) -> bool {
    ancestor.is_empty() || path.starts_with(&format!("{ancestor}."))
}

/// Per calling module (`""` for the top level), the modules TorchScript records as called
/// from it although their path lies under another parent that calls them too: one instance
/// held under several attributes and also called through one that is not the caller's
/// child. `torch.jit.trace` names every call of such an instance by the last attribute it
/// was registered under (its module map keeps the last name), so CoaT's top-level
/// `self.cpe2(x2)` comes out as a call of `serial_blocks2.1.cpe` straight from the root.
fn called_out_of_parent(torch: &[CapturedValue]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut inside: HashSet<&str> = HashSet::new();
    let mut outside: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for v in torch {
        for (i, level) in v.scope.iter().enumerate() {
            let path = level.path.as_str();
            if parent_of(path).is_empty() {
                continue;
            }
            let caller = if i == 0 {
                ""
            } else {
                v.scope[i - 1].path.as_str()
            };
            if i > 0 && is_ancestor(caller, path) {
                inside.insert(path);
            } else {
                outside.entry(caller).or_default().insert(path);
            }
        }
    }
    for callees in outside.values_mut() {
        callees.retain(|p| inside.contains(p));
    }
    outside.retain(|_, callees| !callees.is_empty());
    outside
}

/// For each ONNX path prefix that is an alias, the TorchScript path it stands for.
fn aliases(
    onnx: &[CapturedValue],
    torch: &[CapturedValue],
    torch_paths: &HashSet<String>,
) -> HashMap<String, String> {
    let onnx_paths: BTreeSet<&str> = onnx
        .iter()
        .filter(|v| v.scope_recorded)
        .flat_map(|v| &v.scope)
        .map(|l| l.path.as_str())
        .collect();
    let (unknown, named) = unknown_children(&onnx_paths, torch_paths);
    let computing = computing_paths(torch);
    let mut found: HashMap<String, String> = HashMap::new();
    let mut undecided: Vec<(&str, &str, Vec<&String>)> = Vec::new();
    for (parent, stems) in &unknown {
        if parent.is_empty() {
            continue;
        }
        let prefix = format!("{parent}.");
        let unnamed: Vec<&String> = torch_paths
            .iter()
            .filter(|p| {
                p.strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.contains('.'))
                    && !named.contains(*p)
                    && computing.contains(p.as_str())
            })
            .collect();
        let mut stems = stems.iter();
        let (Some(stem), None) = (stems.next(), stems.next()) else {
            continue;
        };
        match unnamed.as_slice() {
            [only] => {
                found.insert(join(parent, stem), (*only).clone());
            }
            [] => {}
            _ => undecided.push((parent, stem, unnamed)),
        }
    }
    let left = read_by_inner_modules(undecided, &onnx_paths, torch_paths, &mut found);
    read_by_attribute_elsewhere(left, &mut found);
    read_out_of_parent_calls(&unknown, onnx, torch, &mut found);
    found
}

/// Per known parent, the child names ONNX uses that TorchScript has no module for; and the
/// TorchScript paths ONNX does name.
fn unknown_children<'a>(
    onnx_paths: &BTreeSet<&'a str>,
    torch_paths: &HashSet<String>,
) -> (BTreeMap<&'a str, BTreeSet<&'a str>>, HashSet<String>) {
    let mut unknown: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut named: HashSet<String> = HashSet::new();
    for path in onnx_paths {
        let (parent, segment) = path.rsplit_once('.').unwrap_or(("", path));
        if !parent.is_empty() && !torch_paths.contains(parent) {
            continue;
        }
        let stem = without_call_suffix(segment).0;
        let direct = join(parent, segment);
        let stemmed = join(parent, stem);
        if torch_paths.contains(&direct) {
            named.insert(direct);
        } else if torch_paths.contains(&stemmed) {
            named.insert(stemmed);
        } else {
            unknown.entry(parent).or_default().insert(stem);
        }
    }
    (unknown, named)
}

/// A simplifier renamed some of a parent's nodes (its Linears' MatMuls lost their scope),
/// so several children go unnamed. The modules the name's own nodes sit in say which one
/// the name is (`crpe1.conv_list.0`: only the child that has a `conv_list.0` can be it).
/// Returns the names this leaves undecided.
fn read_by_inner_modules<'a, 'p>(
    undecided: Vec<(&'a str, &'a str, Vec<&'p String>)>,
    onnx_paths: &BTreeSet<&str>,
    torch_paths: &HashSet<String>,
    found: &mut HashMap<String, String>,
) -> Vec<(&'a str, &'a str, Vec<&'p String>)> {
    let mut left = Vec::new();
    for (parent, stem, unnamed) in undecided {
        let alias = join(parent, stem);
        let inner: BTreeSet<&str> = onnx_paths
            .iter()
            .filter_map(|p| p.strip_prefix(alias.as_str())?.strip_prefix('.'))
            .collect();
        let holds_all = |candidate: &&&String| {
            !inner.is_empty()
                && inner.iter().all(|rest| {
                    // `proj_1` is the second call of `proj`.
                    let stems: Vec<&str> =
                        rest.split('.').map(|s| without_call_suffix(s).0).collect();
                    torch_paths.contains(&format!("{candidate}.{rest}"))
                        || torch_paths.contains(&format!("{candidate}.{}", stems.join(".")))
                })
        };
        let mut fitting = unnamed.iter().filter(holds_all);
        match (fitting.next(), fitting.next()) {
            (Some(only), None) => {
                found.insert(alias, (*only).clone());
            }
            _ => left.push((parent, stem, unnamed)),
        }
    }
    left
}

/// The name read elsewhere settles the rest: one instance held by parents of one kind sits
/// under the same attribute in each (`crpe` in every CoaT attention).
fn read_by_attribute_elsewhere(
    left: Vec<(&str, &str, Vec<&String>)>,
    found: &mut HashMap<String, String>,
) {
    for (parent, stem, unnamed) in left {
        let attributes: BTreeSet<&str> = found
            .iter()
            .filter(|(alias, _)| alias.rsplit('.').next() == Some(stem))
            .filter_map(|(_, t)| t.rsplit('.').next())
            .collect();
        let mut fitting = unnamed
            .iter()
            .filter(|p| p.rsplit('.').next().is_some_and(|a| attributes.contains(a)));
        if let (Some(only), None) = (fitting.next(), fitting.next()) {
            let torch_path = (*only).clone();
            found.insert(join(parent, stem), torch_path);
        }
    }
}

/// Calls made from outside the instance's parents: TorchScript records them under the
/// instance's last attribute path, the legacy exporter under its first name below the
/// caller (`/cpe2_1/...` at the top level), the dynamo exporter under the attribute read.
fn read_out_of_parent_calls(
    unknown: &BTreeMap<&str, BTreeSet<&str>>,
    onnx: &[CapturedValue],
    torch: &[CapturedValue],
    found: &mut HashMap<String, String>,
) {
    let out_of_parent = called_out_of_parent(torch);
    for (parent, stems) in unknown {
        let Some(callees) = out_of_parent.get(parent) else {
            continue;
        };
        let open: Vec<&str> = stems
            .iter()
            .copied()
            .filter(|s| !found.contains_key(&join(parent, s)))
            .collect();
        for (stem, torch_path) in read_callees(&open, callees, found, onnx, torch, parent) {
            found.insert(join(parent, stem), torch_path.to_string());
        }
    }
}

/// Which of the `callees` TorchScript records as called from `parent` each unknown ONNX
/// name `stems` below `parent` stands for. The name the legacy exporter gave the instance
/// under its own parents (already read, in `found`) says it where one callee is among its
/// readings; otherwise the rest go together by order (`read_callees_in_order`).
fn read_callees<'s>(
    stems: &[&'s str],
    callees: &BTreeSet<&str>,
    found: &HashMap<String, String>,
    onnx: &[CapturedValue],
    torch: &[CapturedValue],
    parent: &str,
) -> Vec<(&'s str, String)> {
    let mut out = Vec::new();
    let mut open: Vec<&'s str> = Vec::new();
    let mut taken: HashSet<&str> = HashSet::new();
    for &stem in stems {
        let readings: Vec<&str> = callees
            .iter()
            .copied()
            .filter(|c| {
                found
                    .iter()
                    .any(|(alias, t)| t == c && alias.rsplit('.').next() == Some(stem))
            })
            .collect();
        match readings.as_slice() {
            [only] => {
                taken.insert(only);
                out.push((stem, only.to_string()));
            }
            _ => open.push(stem),
        }
    }
    let left: Vec<&str> = callees
        .iter()
        .copied()
        .filter(|c| !taken.contains(c))
        .collect();
    if !open.is_empty() && open.len() == left.len() {
        out.extend(read_callees_in_order(&open, &left, onnx, torch, parent));
    }
    out
}

/// One name and one callee go together; with as many names as callees, of the same classes
/// where ONNX records classes, they go together in the order of their first calls (both
/// files run one program). Anything else stays as it is (nothing returned).
fn read_callees_in_order<'s>(
    open: &[&'s str],
    left: &[&str],
    onnx: &[CapturedValue],
    torch: &[CapturedValue],
    parent: &str,
) -> Vec<(&'s str, String)> {
    // First call of each, and its class, in execution order.
    let first_onnx = |stem: &str| {
        let path = join(parent, stem);
        onnx.iter().enumerate().find_map(|(i, v)| {
            v.scope
                .iter()
                .find(|l| is_call_of(&l.path, &path))
                .map(|l| (i, l.class.as_str()))
        })
    };
    let first_torch = |callee: &str| {
        torch.iter().enumerate().find_map(|(i, v)| {
            v.scope
                .iter()
                .position(|l| l.path == callee)
                .filter(|&k| {
                    let caller = if k == 0 {
                        ""
                    } else {
                        v.scope[k - 1].path.as_str()
                    };
                    caller == parent
                })
                .map(|k| (i, v.scope[k].class.as_str()))
        })
    };
    let names: Option<Vec<(usize, &str, &'s str)>> = open
        .iter()
        .map(|&stem| first_onnx(stem).map(|(i, class)| (i, class, stem)))
        .collect();
    let modules: Option<Vec<(usize, &str, &str)>> = left
        .iter()
        .map(|&callee| first_torch(callee).map(|(i, class)| (i, class, callee)))
        .collect();
    let (Some(mut names), Some(mut modules)) = (names, modules) else {
        return Vec::new();
    };
    names.sort_unstable();
    modules.sort_unstable();
    // Dynamo records qualified class names (`timm.models.coat.ConvPosEnc`).
    let short = |c: &str| c.rsplit('.').next().unwrap_or(c).to_string();
    let agree = names
        .iter()
        .zip(&modules)
        .all(|((_, oc, _), (_, tc, _))| oc.is_empty() || tc.is_empty() || short(oc) == short(tc));
    if !agree {
        return Vec::new();
    }
    names
        .iter()
        .zip(&modules)
        .map(|((_, _, stem), (_, _, callee))| (*stem, callee.to_string()))
        .collect()
}

/// Whether ONNX scope path `path` is a call of the module at `base` (`cpe2`, `cpe2_1`).
fn is_call_of(path: &str, base: &str) -> bool {
    path.strip_prefix(base).is_some_and(|rest| {
        rest.is_empty()
            || rest
                .strip_prefix('_')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
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
    torch: &[CapturedValue],
    torch_paths: &HashSet<String>,
) -> Option<Vec<CapturedValue>> {
    let aliases = aliases(onnx, torch, torch_paths);
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
