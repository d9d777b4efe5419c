//! Element scans split over independent lanes.
//!
//! A scan that keeps one running sum or maximum waits on the previous step at every
//! element; four independent ones, merged at the end, keep the core busy. The pairing's
//! value checks scan whole activations (a ViT-B/16's MLP values hold 600k elements, a
//! ResNet-50's first blocks 800k), and lanes scan them in a quarter to a fifth of the time.
//! Float32 pairs, nearly all of them, go to `wide_scan`, which goes further; lanes serve
//! the other element types.
//! Maxima merge exactly; sums merge in another order than one running sum, which moves
//! them by rounding only.

pub(super) const LANES: usize = 4;

/// Calls `each(lane, i)` for every element `i` of `start..start + len`, consecutive
/// elements on consecutive lanes.
#[inline(always)]
pub(super) fn for_each_lane(start: usize, len: usize, mut each: impl FnMut(usize, usize)) {
    let whole = len / LANES * LANES;
    for i in (start..start + whole).step_by(LANES) {
        for lane in 0..LANES {
            each(lane, i + lane);
        }
    }
    for i in start + whole..start + len {
        each(0, i);
    }
}

/// The largest of the lanes' maxima (which start at zero).
pub(super) fn max_of(lanes: [f64; LANES]) -> f64 {
    lanes.iter().fold(0.0f64, |m, &x| m.max(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_is_visited_once_on_its_lane() {
        let mut seen = Vec::new();
        for_each_lane(3, 10, |lane, i| seen.push((lane, i)));
        let elements: Vec<usize> = seen.iter().map(|&(_, i)| i).collect();
        assert_eq!(elements, (3..13).collect::<Vec<_>>());
        // Two whole rounds of four lanes, then the remaining two on lane 0.
        assert_eq!(seen[5], (1, 8));
        assert_eq!(seen[8..], [(0, 11), (0, 12)]);
        assert_eq!(max_of([0.5, 2.0, 1.0, 0.0]), 2.0);
    }
}
