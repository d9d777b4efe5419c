//! The clear choice among candidates that structure leaves several of: the closest in
//! value, and only when it is nearer than half the distance of the next (`clearly_closest`).
//! Shared by the `left_open`, `split_outputs` and `agreeing_twins` passes.

use super::Pairer;

/// An op the table does not list has no kind to check, so shape and wiring alone could meet
/// an unrelated value of the same shape (a vector norm met a Transpose of the other
/// operand): its twin must also agree in value, closer than this relative distance. A fault
/// in such an op leaves it open and shows at the next compared layer.
pub(super) const UNLISTED_AGREE: f64 = 1e-2;

/// How much nearer in value the chosen candidate must be than the next one.
const CLEAR_MARGIN: f64 = 0.5;

impl Pairer<'_> {
    /// The one candidate, or among several the one whose value is clearly the closest to
    /// TorchScript value `t`'s. A fault in `t`'s own op moves its twin away too, but
    /// usually less than another computation's value lies: past the margin, `t` stays open
    /// and its consumers' pairs still show the fault.
    pub(super) fn clearly_closest(&self, t: usize, candidates: &[usize]) -> Option<usize> {
        match candidates {
            [] => None,
            [only] => Some(*only),
            _ => {
                let mut by_distance: Vec<(usize, f64)> = candidates
                    .iter()
                    .map(|&c| (c, self.cx.distance(t, c)))
                    .collect();
                by_distance.sort_by(|a, b| a.1.total_cmp(&b.1));
                let (best, nearest) = by_distance[0];
                let next = by_distance[1].1;
                (nearest.is_finite() && nearest < CLEAR_MARGIN * next).then_some(best)
            }
        }
    }
}
