//! The pieces of a split (`chunk`, `split`, `unbind`) paired with the ONNX slices that cut
//! them, before the order-keeping alignment runs.
//!
//! TorchScript returns a split as a list and reads its pieces with `prim::ListUnpack`; ONNX
//! cuts them with one Slice (or Split output, or Gather) each. Left unpaired, as an unpack
//! usually is (it moves no data), the pieces give the chains that start from them nothing
//! to tell them apart: a fused query/key/value projection chunked into `q, k, v` feeds two
//! rotary chains of the same ops and shapes whose nearest paired producer is the same
//! tensor, and an optimiser that runs the key's chain before the query's (ONNX Runtime's
//! basic level sorts the graph again) leaves every link paired crosswise while the wiring
//! check still passes; the clean model fails at 1.8 of range. Paired here, each piece is
//! the producer its chain's links are checked against, and the dataflow pass repairs a
//! crossed link by wiring.
//!
//! A `.pt2` has no lists: each piece is an output of the split node (`split_with_sizes`), and
//! the order-keeping alignment would otherwise meet the pieces with whichever Slices of
//! their shapes come first, crossing the ops between (RT-DETR's deformable attention splits
//! its value tensor after the sampling arithmetic, and the legacy ONNX cuts it before).
//!
//! A piece is an unpack value (or a split's output) with one producer that holds more
//! elements than it. Its twin
//! is a free ONNX layout value of the same scope and shape computed from that producer's
//! twin; the pieces have one shape, so the values choose, only clearly, and the one chosen
//! must agree with the piece (it is a copy of a part of one tensor). A choice is never
//! certain.

use super::super::ops::{onnx_families, torch_kind, Family, OpKind};
use super::super::wiring::{computed_from_all, nearest_producer_twins};
use super::super::{is_layer_candidate, same_shape, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

/// A piece is a copy of part of its producer, so its twin agrees with it to rounding: a
/// lone candidate further off than this relative distance is another value of that shape
/// (an optimiser fused the Slices away and left a later Reshape), and the piece stays open.
const COPY_AGREES: f64 = 1e-2;

impl Pairer<'_> {
    fn pair_split_outputs(&mut self) {
        if !self.cx.onnx_has_scopes {
            return;
        }
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let pieces: Vec<(usize, String)> = self
            .cx
            .torch_groups
            .iter()
            .filter(|(k, _)| !self.cx.is_leaf_group(k))
            .flat_map(|(k, ids)| ids.iter().map(move |&id| (id, k.clone())))
            .filter(|&(id, _)| self.is_split_piece(id))
            .collect();
        for (t, key) in pieces {
            if self.state.is_paired(t) {
                continue;
            }
            let producers = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            if producers.is_empty() {
                continue;
            }
            let candidates: Vec<usize> = self
                .cx
                .onnx_groups
                .get(&key)
                .into_iter()
                .flatten()
                .copied()
                .filter(|&c| {
                    is_layer_candidate(&ov[c])
                        && !self.state.is_taken(c)
                        && onnx_families(&ov[c].op).contains(Family::Layout)
                        && same_shape(&tv[t], &ov[c])
                        && computed_from_all(ov, c, &producers)
                })
                .collect();
            // ONNX may cut a piece in two steps (a Split, then the Squeeze that drops
            // `unbind`'s dim): both hold the piece, and the later completes it.
            let candidates: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&c| !candidates.iter().any(|&d| ov[d].inputs.contains(&c)))
                .collect();
            let chosen = self
                .clearly_closest(t, &candidates)
                .filter(|&c| self.cx.distance(t, c) < COPY_AGREES);
            if let Some(c) = chosen {
                self.state.assign(t, c, false);
            }
        }
    }

    /// Whether TorchScript value `t` is one piece of a tensor split into several: one
    /// producer, holding more elements than the piece (a list of a module's own results
    /// unpacks whole tensors).
    fn is_split_piece(&self, t: usize) -> bool {
        let tv = &self.cx.torch.values;
        let v = &tv[t];
        let numel = |s: &[usize]| s.iter().product::<usize>();
        // TorchScript reads a piece out of the split's list with an unpack; a `.pt2` has
        // no list: each piece is an output of the split node itself.
        matches!(torch_kind(&v.op), Some(OpKind::ListUnpack | OpKind::Split))
            && is_layer_candidate(v)
            && match v.inputs[..] {
                [p] => p < tv.len() && numel(&tv[p].shape) > numel(&v.shape),
                _ => false,
            }
    }
}

pub(super) struct SplitOutputs;

impl Pass for SplitOutputs {
    fn name(&self) -> &'static str {
        "split_outputs"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_split_outputs();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone};
    use super::*;

    #[test]
    fn the_pieces_of_a_chunk_pair_with_the_slices_that_cut_them() {
        // Before the order runs only the projection's module call is paired; the key's
        // Slice comes first in ONNX, and each piece takes the one holding its values.
        let (t, o, ids) = graphs::chunked_projection();
        let [tl, _, tq, tk, tqr, _, _, _, ol, _, ok, _, _, oq, ..] = ids;
        let state = run_alone(&SplitOutputs, &t, &o, &[(tl, ol)]);
        for (piece, slice) in [(tq, oq), (tk, ok)] {
            let made = state.get(piece).expect("the piece is paired");
            assert_eq!((made.onnx, made.by), (slice, "split_outputs"));
            assert!(!made.certain, "the values chose among the pieces' Slices");
        }
        assert!(
            !state.is_paired(tqr),
            "a slice of a piece is no piece of a split"
        );
    }

    #[test]
    fn the_outputs_of_an_exported_programs_split_are_pieces_too() {
        let (t, o, ids) = graphs::chunked_projection_with("aten::split_with_sizes");
        let [tl, _, tq, tk, _, _, _, _, ol, _, ok, _, _, oq, ..] = ids;
        let state = run_alone(&SplitOutputs, &t, &o, &[(tl, ol)]);
        assert_eq!(state.twin(tq), Some(oq));
        assert_eq!(state.twin(tk), Some(ok));
    }

    #[test]
    fn an_unpack_of_whole_tensors_takes_no_layout_node() {
        let (t, o, [tl, tu, _, ol, ..]) = graphs::unpacked_whole_tensor();
        let state = run_alone(&SplitOutputs, &t, &o, &[(tl, ol)]);
        assert!(
            !state.is_paired(tu),
            "a module's list of results is not cut from one tensor"
        );
    }
}
