//! TorchScript values that have no ONNX twin because of how the two signatures differ, not
//! because of the export: accounted for after pairing, so that they do not count against
//! coverage.
//!
//! Two kinds of TorchScript values have nothing to meet on the ONNX side: the input a
//! stateful module prepares itself (the context window it prepends, which the ONNX model is
//! given prepended), recognised by its data, equal element for element to an ONNX input
//! TorchScript was not given; and values no compared output is computed from (the module's
//! next state, which feeds only its own attributes, or an output only TorchScript returns,
//! such as BERT's pooler), recognised by the dataflow. Pairing sets most of the latter apart
//! before its passes (`pairing::unused_values`); this catches the ones it could not (values
//! in no call group, captures with control flow). Each accounted value counts as one
//! covered layer (never more than the total).

use crate::capture::{Capture, Side};
use crate::pairing::{Pairing, UnpairedReason};
use std::collections::HashSet;

/// Marks the qualifying unpaired TorchScript values accounted, with the reason, and counts
/// them as covered.
pub fn account_one_sided(pairing: &mut Pairing, torch: &Capture, onnx: &Capture) {
    // `None`: the dataflow to the outputs is not known, and nothing is taken for unused.
    let used = torch.reaching_outputs();
    let paired_onnx: HashSet<usize> = pairing.inputs.iter().map(|p| p.onnx).collect();
    let one_sided_inputs: Vec<_> = onnx
        .inputs()
        .into_iter()
        .filter(|v| !paired_onnx.contains(&v.id))
        .collect();
    for u in pairing.unpaired.iter_mut() {
        if u.side != Side::Torch || u.accounted {
            continue;
        }
        let v = &torch.values[u.id];
        let reason = if used.as_ref().is_some_and(|used| !used.contains(&v.id)) {
            Some(UnpairedReason::ReachesNoOutput)
        } else if !u.module.is_empty() {
            None
        } else {
            one_sided_inputs
                .iter()
                .find(|o| {
                    o.shape == v.shape
                        && match (o.data(), v.data()) {
                            (Ok(a), Ok(b)) => a.data == b.data,
                            _ => false,
                        }
                })
                .map(|o| UnpairedReason::PreparesOnnxInput {
                    input: o.name.clone(),
                })
        };
        if let Some(reason) = reason {
            u.accounted = reason.covered();
            u.reason = reason;
            let c = &mut pairing.coverage;
            c.torch_layers_paired = (c.torch_layers_paired + 1).min(c.torch_layers_total);
        }
    }
}
