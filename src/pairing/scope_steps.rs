//! The scope steps: what runs before the passes to make the two sides' module-call keys
//! meet, as a declared table. Each step reads and refines one `ScopeWork`; `PairCx::new`
//! runs them in this order and keeps the result, read-only, for the passes.
//! docs/pairing.md lists the same steps in the same order ("Scope steps"); a test keeps the
//! two lists equal. The most surprising part of pairing is here: an exporter that drops a
//! root module, shares an instance, keeps a constant call or numbers calls otherwise.

use super::scopes::{assign_keys, key_path, known_paths, parent_paths, GroupKey};
use super::{
    collapsed_children, common_root, computed_constants, constant_calls, constant_values,
    export_order, is_layer_candidate, node_names, parent_calls, repeated_calls, shared_instances,
    uncalled_levels, unused_values,
};
use crate::capture::{Capture, CapturedValue};
use std::collections::{BTreeMap, HashSet};

/// What the scope steps build up, step by step.
pub(super) struct ScopeWork<'a> {
    pub torch: &'a Capture,
    pub onnx: &'a Capture,
    /// Module paths TorchScript knows.
    pub torch_paths: HashSet<String>,
    /// Modules with child modules.
    pub torch_parents: HashSet<String>,
    /// The ONNX values with their scopes as rewritten so far (`None`: as captured).
    pub onnx_scopes: Option<Vec<CapturedValue>>,
    pub onnx_keys: Vec<Option<GroupKey>>,
    pub torch_keys: Vec<Option<GroupKey>>,
    /// Per TorchScript value: computed from weights and constants only, and folded away by
    /// the exporter (bookkeeping, never paired).
    pub constant: Vec<bool>,
    /// TorchScript values no input reaches that are compared all the same.
    pub kept_constants: Vec<usize>,
    pub torch_groups: BTreeMap<GroupKey, Vec<usize>>,
    /// TorchScript values of each call that no compared output is computed from.
    pub unused_groups: BTreeMap<GroupKey, Vec<usize>>,
    pub onnx_groups: BTreeMap<GroupKey, Vec<usize>>,
    pub onnx_has_scopes: bool,
    pub onnx_export_ranks: Option<Vec<usize>>,
}

pub(super) struct ScopeStep {
    /// The step's name: the file that holds its rule, and its entry in docs/pairing.md.
    pub name: &'static str,
    pub run: fn(&mut ScopeWork<'_>),
}

pub(super) const SCOPE_STEPS: &[ScopeStep] = &[
    // A root module only one side names (`model.` on every TorchScript path): read past it.
    ScopeStep {
        name: "common_root",
        run: reroot,
    },
    // One module instance reachable under several paths: the ONNX names read as TorchScript's.
    ScopeStep {
        name: "shared_instances",
        run: read_shared_instances,
    },
    // Each ONNX value's module call, from its scope and the legacy call suffixes.
    ScopeStep {
        name: "onnx_calls",
        run: |w| w.onnx_keys = assign_keys(w.onnx_values(), &skip, Some(&w.torch_paths)),
    },
    // What no input reaches is bookkeeping, unless the ONNX graph computes it in that module.
    ScopeStep {
        name: "computed_constants",
        run: constants_and_torch_calls,
    },
    // A constant call the ONNX side counted: the later calls' numbers read past it.
    ScopeStep {
        name: "constant_calls",
        run: rekey_past_constant_calls,
    },
    // A container the ONNX side did not number: its later calls meet TorchScript's.
    ScopeStep {
        name: "parent_calls",
        run: |w| {
            let keys = std::mem::take(&mut w.onnx_keys);
            w.onnx_keys = parent_calls::rekey_unnumbered_parents(keys, &w.torch_keys);
        },
    },
    // A level the ONNX side never called (a name reused by the exporter): numbered again.
    ScopeStep {
        name: "uncalled_levels",
        run: rekey_uncalled_levels,
    },
    // A container the ONNX side names only as a whole: TorchScript's child calls join it.
    ScopeStep {
        name: "collapsed_children",
        run: |w| {
            let onnx = w.onnx_scopes.as_deref().unwrap_or(&w.onnx.values);
            collapsed_children::fold_into_collapsed_parents(&mut w.torch_keys, onnx, &w.onnx_keys);
        },
    },
    // The calls of both sides as groups of values.
    ScopeStep {
        name: "call_groups",
        run: call_groups,
    },
    // A graph tool that sorted the nodes again: the order the exporter wrote them in.
    ScopeStep {
        name: "export_order",
        run: export_ranks,
    },
    // A module called several times in a row, one run on the TorchScript side: split.
    ScopeStep {
        name: "repeated_calls",
        run: split_repeated_calls,
    },
    // What no compared output is computed from has no ONNX twin: set apart, never paired.
    ScopeStep {
        name: "unused_values",
        run: |w| w.unused_groups = unused_values::set_apart(w.torch, &mut w.torch_groups),
    },
];

/// Values that are no layer (inputs, outputs, shape bookkeeping) take no call key.
fn skip(v: &CapturedValue) -> bool {
    !is_layer_candidate(v)
}

impl<'a> ScopeWork<'a> {
    /// Runs every scope step over the two captures.
    pub fn run(torch: &'a Capture, onnx: &'a Capture) -> Self {
        let mut work = ScopeWork {
            torch,
            onnx,
            torch_paths: known_paths(&torch.values),
            torch_parents: parent_paths(&torch.values),
            onnx_scopes: None,
            onnx_keys: vec![],
            torch_keys: vec![],
            constant: vec![],
            kept_constants: vec![],
            torch_groups: BTreeMap::new(),
            unused_groups: BTreeMap::new(),
            onnx_groups: BTreeMap::new(),
            onnx_has_scopes: false,
            onnx_export_ranks: None,
        };
        let tracing = super::trace::enabled();
        for step in SCOPE_STEPS {
            let before = tracing.then(|| work.onnx_keys.clone());
            (step.run)(&mut work);
            if let Some(before) = before {
                super::trace::print_rekeyed(step.name, &before, &work.onnx_keys);
            }
        }
        work
    }

    /// The ONNX values with their scopes as the steps so far have read them.
    pub fn onnx_values(&self) -> &[CapturedValue] {
        self.onnx_scopes.as_deref().unwrap_or(&self.onnx.values)
    }
}

fn reroot(w: &mut ScopeWork<'_>) {
    if let Some(rerooted) =
        common_root::rerooted_onnx(&w.torch.values, w.onnx_values(), &w.torch_paths)
    {
        w.onnx_scopes = Some(rerooted);
    }
}

fn read_shared_instances(w: &mut ScopeWork<'_>) {
    let torch = &w.torch.values;
    if let Some(aliased) =
        shared_instances::read_shared_instances(w.onnx_values(), torch, &w.torch_paths)
    {
        w.onnx_scopes = Some(aliased);
    }
}

/// What no model input reaches (position ids from an `arange`, an all-ones mask, a
/// detector's anchor grid) is folded into initializers by the exporters: it is bookkeeping
/// like shape arithmetic, and pairing it by order and shape could only meet some unrelated
/// ONNX value, unless the ONNX graph kept that computation in the same module. Then the
/// TorchScript calls are keyed without the bookkeeping.
fn constants_and_torch_calls(w: &mut ScopeWork<'_>) {
    let torch_constant = constant_values(w.torch);
    w.constant = computed_constants::fold_only_folded(
        &w.torch.values,
        &|v| !skip(v),
        &torch_constant,
        &w.onnx_keys,
        &constant_values(w.onnx),
    );
    w.kept_constants = (0..w.constant.len())
        .filter(|&id| torch_constant[id] && !w.constant[id])
        .collect();
    let constant = &w.constant;
    w.torch_keys = assign_keys(&w.torch.values, &|v| skip(v) || constant[v.id], None);
}

fn rekey_past_constant_calls(w: &mut ScopeWork<'_>) {
    let constant = &w.constant;
    // The same calls numbered with the constant ones counted, for the ONNX sides that count
    // them.
    let torch_full_keys = if w.torch.values.iter().any(|v| constant[v.id] && !skip(v)) {
        assign_keys(&w.torch.values, &skip, None)
    } else {
        // No value was left out for being constant: the same keys.
        w.torch_keys.clone()
    };
    let keys = std::mem::take(&mut w.onnx_keys);
    w.onnx_keys =
        constant_calls::rekey_past_constant_calls(keys, &torch_full_keys, &w.torch_keys, constant);
}

fn rekey_uncalled_levels(w: &mut ScopeWork<'_>) {
    let keys = std::mem::take(&mut w.onnx_keys);
    w.onnx_keys = uncalled_levels::rekey_uncalled_levels(
        w.onnx_values(),
        keys,
        &w.torch_keys,
        &w.torch_paths,
    );
}

/// Groups both sides' values by call. Scopes that name no TorchScript module (a converter's
/// placeholder such as `_empty_nn_module_stack_from_metadata_hook`) are no scopes at all.
fn call_groups(w: &mut ScopeWork<'_>) {
    w.onnx_has_scopes = (w.onnx_keys.iter().flatten()).any(|k| w.torch_paths.contains(key_path(k)));
    w.torch_groups = groups(&w.torch_keys);
    w.onnx_groups = groups(&w.onnx_keys);
}

fn groups(keys: &[Option<GroupKey>]) -> BTreeMap<GroupKey, Vec<usize>> {
    let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
    for (id, key) in keys.iter().enumerate() {
        if let Some(k) = key {
            groups.entry(k.clone()).or_default().push(id);
        }
    }
    groups
}

fn export_ranks(w: &mut ScopeWork<'_>) {
    let words = node_names::torch_words(&w.torch.values);
    let places = || {
        node_names::places_by_names(
            &w.torch.values,
            &w.torch_groups,
            &w.onnx.values,
            &w.onnx_groups,
            w.onnx_has_scopes,
            &words,
        )
    };
    w.onnx_export_ranks = export_order::export_ranks(&w.onnx.values, places, &words);
}

fn split_repeated_calls(w: &mut ScopeWork<'_>) {
    // Only the ONNX side's call names can say how many calls a run holds.
    if w.onnx_has_scopes {
        let parents = &w.torch_parents;
        let is_leaf = |key: &str| !key.is_empty() && !parents.contains(key_path(key));
        repeated_calls::split_repeated_calls(
            &w.torch.values,
            &mut w.torch_groups,
            &w.onnx_groups,
            is_leaf,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_scope_steps_are_the_table() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/pairing.md"))
            .expect("docs/pairing.md");
        // The steps are a numbered list under "## Scope steps": "1. `name`: ...".
        let section = doc
            .split("## Scope steps")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("a Scope steps section");
        let documented: Vec<&str> = section
            .lines()
            .filter_map(|l| l.split_once(". `"))
            .filter(|(n, _)| n.parse::<usize>().is_ok())
            .filter_map(|(_, rest)| rest.split('`').next())
            .collect();
        let table: Vec<&str> = SCOPE_STEPS.iter().map(|s| s.name).collect();
        assert_eq!(documented, table);
    }
}
