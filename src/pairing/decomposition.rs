//! Decompositions paired at their last value. An exporter writes `silu(x)` as
//! `Mul(x, Sigmoid(x))`; when the order meets the Sigmoid first (a graph without scopes, where
//! nothing says the two nodes are one call), the pair holds a partial value and fails at every
//! element. The node that completes the op reads the partial value and the partial value's own
//! input; when such a node of the same kind and shape is closer to the TorchScript value, the
//! pair moves to it (taking it from a value it matches worse, which the order had shifted
//! onto it).

use super::{compatible, consumers_of, is_layer_candidate, same_shape, PairedBy, Pairer};

impl Pairer<'_> {
    pub(super) fn complete_decompositions(&mut self) {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let consumers = consumers_of(ov);
        for t in self.state.paired() {
            let Some(o) = self.state.twin(t) else {
                continue; // it lost its value to an earlier one in this loop
            };
            let completing = consumers[o].iter().copied().find(|&c| {
                is_layer_candidate(&ov[c])
                    && same_shape(&tv[t], &ov[c])
                    && compatible(&tv[t].op, &ov[c].op)
                    && ov[o].inputs.iter().any(|u| ov[c].inputs.contains(u))
            });
            let Some(c) = completing else {
                continue;
            };
            let here = self.distance(t, c);
            if here >= self.distance(t, o) {
                continue;
            }
            // The completing node may hold a later value that the order shifted onto it;
            // the closer value takes it, and the other is left for the steps after this.
            if let Some(h) = self.state.holder(c) {
                if self.distance(h, c) <= here {
                    continue;
                }
                self.state.unassign(h);
            }
            self.state.rebind(t, c, PairedBy::DecomposedOp, false);
        }
    }
}
