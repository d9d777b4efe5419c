//! What the check's own inputs fix of a model's control flow: the condition each `If` tests
//! and the number of iterations each `Loop` runs, measured on every input sample by a first
//! run of the unmodified graph (`probe`). With them known, `control_flow` inlines the branch
//! and unrolls the iterations that ran, as it does for control flow that constants steer, so
//! the values inside become graph values that are captured, paired and isolated like any
//! other. A value that differs between the samples is not known: its control flow stays.
//!
//! Keyed by the names the rewrite sees: an `If` by its condition's value name, a `Loop` by
//! its node name, both with the `@iterK` suffix a value inside an unrolled loop gets.

use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steering {
    /// The condition of an `If` (0 or 1) by its input's value name, the same on every sample.
    pub conditions: HashMap<String, i64>,
    /// The iterations a `Loop` ran, by node name, the same on every sample.
    pub trips: HashMap<String, usize>,
    /// Conditions and loops (by the keys above) that the samples steer differently: one
    /// rewritten graph cannot serve them all, so they stay.
    pub differing: HashSet<String>,
}

impl Steering {
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty() && self.trips.is_empty() && self.differing.is_empty()
    }
}
