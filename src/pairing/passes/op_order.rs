//! The `op_order` pass: the functional ops of a scope with child modules, aligned by
//! compatible kind, shape and order.

use super::super::Pairer;
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// The functional ops of a scope with child modules (or the top level) pair with the
    /// ONNX values of the same scope by compatible kind, shape and order.
    fn pair_ops_in_scope(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        let groups = self.op_groups();
        for (key, t_ids) in groups {
            let o_ids = self.cx.onnx_groups.get(&key).cloned().unwrap_or_default();
            if o_ids.is_empty() {
                self.leave_group(&key, &t_ids);
                continue;
            }
            // A value an earlier pass paired (a split's piece) is no place in the order, on
            // either side.
            let mut o_ids: Vec<usize> = o_ids
                .into_iter()
                .filter(|&o| !self.state.is_taken(o))
                .collect();
            // The order the exporter wrote them in, where a graph tool sorted them again.
            // Rebuilt from names, that order can still interleave two chains of one family
            // (`x - w`, `x + w`) differently from TorchScript: there an op meets a node of
            // another type of its family only where the scope has none of its own type.
            let resorted = if let Some(ranks) = &self.cx.onnx_export_ranks {
                o_ids.sort_by_key(|&o| ranks[o]);
                true
            } else {
                false
            };
            let reps: Vec<usize> = (self.representatives(&key, &t_ids).into_iter())
                .filter(|&t| !self.state.is_paired(t))
                .collect();
            for (t, o, certain) in self.align_by_order(&reps, &o_ids, resorted) {
                self.state.assign(t, o, certain);
            }
            self.explain_in_scope(&key, &t_ids);
        }
    }
}

pub(super) struct OpOrder;

impl Pass for OpOrder {
    fn name(&self) -> &'static str {
        "op_order"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_ops_in_scope();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn values_an_earlier_pass_paired_keep_their_twins_and_take_no_place() {
        // A .pt2's `unbind` pieces are ops of the scope; ONNX cuts them with a Split and
        // drops the dim with a Reshape, and `split_outputs` paired each with its Reshape.
        let x = [1.0, 2.0, 3.0, 4.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let tl = t.op("aten::linear", "m.fc", &[ti], &x);
        let ta = t.op("aten::unbind", "m", &[tl], &x[..2]);
        let tb = t.op("aten::unbind", "m", &[tl], &x[2..]);
        let tr = t.op("aten::add", "m", &[ta, tb], &[4.0, 6.0]);
        t.output(0, tr);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let ol = o.op("MatMul", "m.fc", &[oi], &x);
        let sa = o.op("Split", "m", &[ol], &x[..2]);
        let sb = o.op("Split", "m", &[ol], &x[2..]);
        let ra = o.op("Reshape", "m", &[sa], &x[..2]);
        let rb = o.op("Reshape", "m", &[sb], &x[2..]);
        let or = o.op("Add", "m", &[ra, rb], &[4.0, 6.0]);
        o.output(0, or);
        let earlier = [(tl, ol), (ta, ra), (tb, rb)];
        let state = run_alone(&OpOrder, &t.build(), &o.build(), &earlier);
        assert_eq!((state.twin(ta), state.twin(tb)), (Some(ra), Some(rb)));
        assert_eq!(state.twin(tr), Some(or), "the rest is aligned");
    }

    #[test]
    fn functional_ops_of_the_top_level_pair_by_kind_and_order() {
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &[1.0, 2.0]);
        let up = t.op(
            "aten::upsample_bilinear2d",
            "",
            &[ti],
            &[1.0, 1.5, 2.0, 2.0],
        );
        let cat = t.op("aten::cat", "", &[up, up], &[0.0; 8]);
        let head = t.op("aten::_convolution", "head", &[cat], &[1.0; 8]);
        t.output(0, head);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &[1.0, 2.0]);
        let shape = o.op("Shape", "", &[oi], &[2.0]);
        let oup = o.op("Resize", "", &[oi, shape], &[1.0, 1.5, 2.0, 2.0]);
        let ocat = o.op("Concat", "", &[oup, oup], &[0.0; 8]);
        let ohead = o.op("Conv", "head", &[ocat], &[1.0; 8]);
        o.output(0, ohead);
        // What `module_output` left: the head's call.
        let state = run_alone(&OpOrder, &t.build(), &o.build(), &[(head, ohead)]);
        assert_eq!((state.twin(up), state.twin(cat)), (Some(oup), Some(ocat)));
        assert_eq!(state.made_by("op_order"), [up, cat]);
        assert_eq!(
            state.get(head).map(|m| m.by),
            Some("earlier"),
            "left as it was"
        );
    }
}
