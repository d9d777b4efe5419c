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

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    #[test]
    fn a_transpose_merged_into_the_next_one_is_unpaired_and_covered() {
        let (t, o, [lin, tr, mm, omm0, otr, omm]) = graphs::transpose_merged_into_another();
        let state = run_alone(
            &RelaidAfterOpen,
            &t,
            &o,
            &[(lin, omm0), (tr, otr), (mm, omm)],
        );
        assert!(
            !state.is_paired(tr),
            "its twin holds the key in another arrangement"
        );
        assert!(
            state.accounted(tr),
            "what it passes on agrees where it is used"
        );
        assert_eq!(state.twin(mm), Some(omm));
    }

    #[test]
    fn a_layout_twin_with_other_values_stays_paired() {
        // The reader nearly agrees only because a residual add dilutes the fault.
        let (t, o, [_, tt, tn, ta, _, ot, on, oa]) =
            graphs::faulted_transpose_nearly_agreeing_reader();
        let state = run_alone(&RelaidAfterOpen, &t, &o, &[(tt, ot), (tn, on), (ta, oa)]);
        assert_eq!(state.twin(tt), Some(ot));
    }
}
