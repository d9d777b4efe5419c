//! Reference values no compared output is computed from, set apart before the passes.
//!
//! A torch.export program keeps what its graph computes and nobody reads (RAFT's flow
//! upsampled at every refinement step when only the last is returned), where a trace drops
//! it, and ONNX exporters drop it too. Such a value can equal a live one bit for bit (the
//! flow upsampled after step k is the flow that step k + 1 starts from), so, left among the
//! candidates, it took the live value's ONNX twin and shifted every later pair by one step.
//! It has nothing on the ONNX side to meet: it is taken out of its call group here, listed
//! with the reason `ReachesNoOutput` and counted as covered, as the signature's accounting
//! has always counted such values (`signature::accounting`).

use super::scopes::GroupKey;
use crate::capture::Capture;
use std::collections::BTreeMap;

/// Moves the values of `groups` that reach no graph output of `torch` into the returned
/// groups (same keys); a group left empty is removed. Without outputs (a capture that
/// returns nothing comparable) nothing is moved.
pub(super) fn set_apart(
    torch: &Capture,
    groups: &mut BTreeMap<GroupKey, Vec<usize>>,
) -> BTreeMap<GroupKey, Vec<usize>> {
    let mut unused = BTreeMap::new();
    if torch.outputs().is_empty() {
        return unused;
    }
    let used = torch.reaching_outputs();
    groups.retain(|key, ids| {
        let (live, dead): (Vec<usize>, Vec<usize>) = ids.iter().partition(|id| used.contains(id));
        if !dead.is_empty() {
            unused.insert(key.clone(), dead);
        }
        *ids = live;
        !ids.is_empty()
    });
    unused
}
