//! The value a leaf module call is compared at when its output has no ONNX counterpart of its
//! shape: the call's last op that computes something.
//!
//! A module that ends in a layout op (a radix softmax's closing `reshape(b, -1)`) stands for
//! its computation; the layout op only arranges the result. A simplifier may merge that
//! closing reshape with the reshapes after the module into one ONNX Reshape of another shape,
//! so nothing in the call has the output's shape and the call is left uncompared: a fault in
//! its Softmax is then first seen at the parent's next op. The call's last computing op
//! (the softmax) still has its ONNX twin, of the same kind and shape, in the call's scope;
//! comparing it compares the module's computation.

use super::ops::{compatible, torch_families, vanishes_in_onnx, Family};
use super::{same_shape, Pairer};

impl Pairer<'_> {
    /// For leaf call `t_ids` with output `t` and ONNX values `o_ids`: `t` itself when some
    /// ONNX value of the call has its shape or `t` computes something; else the call's last
    /// computing value when an ONNX value of the call has its kind and shape.
    pub(super) fn computing_stand_in(&self, t: usize, t_ids: &[usize], o_ids: &[usize]) -> usize {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let layout = |id: usize| torch_families(&tv[id].op).contains(Family::Layout);
        if !layout(t) || o_ids.iter().any(|&o| same_shape(&tv[t], &ov[o])) {
            return t;
        }
        let last_computing = t_ids.iter().rev().copied().find(|&id| {
            id < t && !layout(id) && !vanishes_in_onnx(&tv[id].op) && !self.state.is_identity(id)
        });
        match last_computing {
            Some(c)
                if o_ids
                    .iter()
                    .any(|&o| same_shape(&tv[c], &ov[o]) && compatible(&tv[c].op, &ov[o].op)) =>
            {
                c
            }
            _ => t,
        }
    }
}
