//! The `relaid_after_open` pass: the layout pairs judged again by `relaid`'s rule, now that
//! `left_open` has paired the values they look through to (a key's `cat` before its
//! transpose).

use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

pub(super) struct RelaidAfterOpen;

impl Pass for RelaidAfterOpen {
    fn name(&self) -> &'static str {
        "relaid_after_open"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.unpair_relaid_layout();
    }
}
