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
/// groups (same keys); a group left empty is removed. When the dataflow to the outputs is
/// not known (no outputs, an output whose producer the capture could not name, control
/// flow, or most values unreached) nothing is moved: a live value would look unused, and
/// would not be compared.
pub(super) fn set_apart(
    torch: &Capture,
    groups: &mut BTreeMap<GroupKey, Vec<usize>>,
) -> BTreeMap<GroupKey, Vec<usize>> {
    let mut unused = BTreeMap::new();
    // Inside control flow the outputs' ancestry runs through lists built across iterations
    // (a scripted decoder's per-step logits appended, then stacked), which value inputs do
    // not always record: a live value could look unused.
    if torch.control_flow {
        return unused;
    }
    let Some(used) = torch.reaching_outputs() else {
        return unused;
    };
    // Dead code is a small part of a real program; most values unused means the captured
    // dataflow is broken somewhere (a value whose producer was not recorded), and setting
    // them apart would leave nothing compared while counting everything covered.
    let candidates: Vec<usize> = groups.values().flatten().copied().collect();
    let dead = candidates.iter().filter(|id| !used.contains(id)).count();
    if dead * 2 > candidates.len() {
        return unused;
    }
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
