//! What each scope step and pairing pass changed, printed to standard error when the environment variable
//! `ALIGN_CHECK_TRACE_PAIRING` is set: for whoever debugs pairing on a new model family. A
//! line per pair a pass made, moved or undid, with both values' names and modules.

use super::{PairCx, PairState};
use std::collections::BTreeMap;

/// The environment variable that turns the trace on.
const VARIABLE: &str = "ALIGN_CHECK_TRACE_PAIRING";

pub(super) fn enabled() -> bool {
    std::env::var_os(VARIABLE).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The pairs as they stood before a pass.
pub(super) struct Snapshot(BTreeMap<usize, usize>);

impl Snapshot {
    pub fn of(state: &PairState) -> Self {
        Snapshot(
            (state.paired().into_iter())
                .filter_map(|t| state.twin(t).map(|o| (t, o)))
                .collect(),
        )
    }
}

/// Prints the pairs `pass` made, moved and undid, comparing `before` with `state`.
pub(super) fn print_changes(pass: &str, before: &Snapshot, state: &PairState, cx: &PairCx) {
    let after = Snapshot::of(state).0;
    let name = |t: usize, o: usize| {
        let (tv, ov) = (&cx.torch.values[t], &cx.onnx.values[o]);
        format!(
            "{} ({}, {}) ↔ {} ({})",
            tv.name,
            tv.op,
            tv.module_path(),
            ov.name,
            ov.node
        )
    };
    let mut lines = Vec::new();
    for (&t, &o) in &after {
        match before.0.get(&t) {
            None => lines.push(format!("  + {}", name(t, o))),
            Some(&was) if was != o => lines.push(format!(
                "  ~ {} (was {})",
                name(t, o),
                cx.onnx.values[was].name
            )),
            _ => {}
        }
    }
    for (&t, &o) in before.0.iter().filter(|(t, _)| !after.contains_key(t)) {
        lines.push(format!("  - {}", name(t, o)));
    }
    eprintln!("pairing pass {pass}: {} change(s)", lines.len());
    for line in lines {
        eprintln!("{line}");
    }
}

/// Prints how many ONNX call keys scope step `step` changed (a step that only reads the
/// keys, or the first that assigns them, says so too).
pub(super) fn print_rekeyed(step: &str, before: &[Option<String>], after: &[Option<String>]) {
    let changed = if before.len() == after.len() {
        before.iter().zip(after).filter(|(a, b)| a != b).count()
    } else {
        after.len()
    };
    eprintln!("pairing scope step {step}: {changed} ONNX call key(s) changed");
}
