//! The `scopeless` pass: values left open meet scope-less fused nodes
//! (`SkipLayerNormalization`) by dataflow, and a fused node that also applies the
//! activation after its module (`FusedGemm`) holds it; see `fused_nodes`.

use super::super::fused_nodes::computes_whole_module;
use super::super::fused_nodes::lacks_bias;
use super::super::fused_nodes::nearest_consumer_twins;
use super::super::fused_nodes::placement;
use super::super::fused_nodes::Open;
use super::super::ops::compatible;
use super::super::wiring::{computed_from_all, nearest_producer_twins};
use super::super::{consumers_of, is_layer_candidate, same_shape, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;

impl Pairer<'_> {
    /// The same rule for the pairs `pair_scopeless` made: ONNX Runtime's `FusedGemm` and
    /// `FusedConv` (a Gemm or Conv with its activation, under a node name that records no
    /// scope) meet the Linear or Conv only there, after `fuse_consumers_into_node` has run,
    /// and they compute the activation after it (torchvision's `F.relu(self.fc6(x))`), not
    /// the module's own output.
    fn fuse_consumers_into_scopeless(&mut self) {
        let outputs = self.module_outputs();
        // The pairs `pair_scopeless` made, right before in the same pass.
        let made = self.state.made_by("scopeless");
        self.prefetch_chains(&made, &outputs);
        for u in made {
            self.fuse_chain_after(u, &outputs);
        }
    }

    /// Pairs each TorchScript layer value left without a twin (`open`: module outputs and
    /// functional ops) with the unpaired scope-less ONNX value that sits where it does in
    /// the dataflow: computed from all its producers' twins, and computing its consumers'
    /// twins (`placement`); of a compatible kind, or for a module's output any node of ONNX
    /// Runtime's own fused ops (a GELU module ends in a Mul, its fused node is a Gelu);
    /// never a bias-less partial product. Pairs are made best first, then checked again against the pairs
    /// made after them; one that no longer fits is undone.
    fn pair_scopeless(&mut self) {
        let open = self.open_representatives();
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let consumers = consumers_of(tv);
        let scopeless: Vec<usize> = ov
            .iter()
            .filter(|c| !c.scope_recorded && is_layer_candidate(c))
            .map(|c| c.id)
            .collect();
        if scopeless.is_empty() {
            return;
        }
        // Every fitting (TorchScript value, ONNX value), then assigned best first: by
        // `placement` (a LayerNorm takes the SkipLayerNormalization before the Linear whose
        // bias it adds), then closer values first.
        let mut fitting: Vec<(u8, f64, usize, usize)> = Vec::new();
        for &Open {
            id: t,
            module_output,
            kind_of,
        } in &open
        {
            if self.state.is_paired(t) || self.state.accounted(t) {
                continue;
            }
            let producers = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            let consumers = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            for &c in &scopeless {
                let kind =
                    compatible(&tv[t].op, &ov[c].op) || compatible(&tv[kind_of].op, &ov[c].op);
                let fused = module_output && computes_whole_module(tv, ov, t, kind_of, c);
                let candidate = !self.state.is_taken(c)
                    && same_shape(&tv[t], &ov[c])
                    && (kind || fused)
                    && !lacks_bias(&tv[t], &ov[c])
                    && computed_from_all(ov, c, &producers);
                if let Some(tier) = candidate
                    .then(|| placement(ov, c, &consumers, kind))
                    .flatten()
                {
                    fitting.push((tier, self.cx.distance(t, c), t, c));
                }
            }
        }
        fitting.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut made = Vec::new();
        for (tier, distance, t, c) in fitting {
            if !self.state.is_paired(t) && !self.state.is_taken(c) {
                self.state.assign(t, c, false);
                made.push((distance, t, tier != 1));
            }
        }
        // Each was judged against the pairs made before this step; the ones made after it
        // may place its neighbours elsewhere (a Linear's output first met the reshape after
        // the LayerNorm that its consumer has since taken). The farthest in value are checked
        // first, so that the others are judged against neighbours that held: a GELU's output
        // whose nearest consumer, the Linear after it, had met the wrong fused node was
        // undone for that Linear's pair, which was then undone as well.
        made.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, t, kind) in made {
            let c = self.state.twin(t).expect("paired");
            let producers = nearest_producer_twins(self.cx.torch, |u| self.twin(u), t);
            let consumers = nearest_consumer_twins(&consumers, |v| self.twin(v), t);
            let still_fits = computed_from_all(ov, c, &producers)
                && placement(ov, c, &consumers, kind).is_some();
            if !still_fits {
                self.state.unassign(t);
            }
        }
    }
}

pub(super) struct Scopeless;

impl Pass for Scopeless {
    fn name(&self) -> &'static str {
        "scopeless"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        let mut p = Pairer { cx, state };
        p.pair_scopeless();
        p.fuse_consumers_into_scopeless();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{graphs, run_alone, Builder};
    use super::*;
    use crate::capture::Side;

    #[test]
    fn a_layer_norm_without_a_node_meets_the_scopeless_skip_layer_norm() {
        // What the passes before left: the Linear's bias-less MatMul undone, the ffn paired.
        let (t, o, [lin, _, ln, ffn, _, fused, offn]) = graphs::skip_layer_norm();
        let state = run_alone(&Scopeless, &t, &o, &[(ffn, offn)]);
        let made = state.get(ln).expect("the LayerNorm is paired");
        assert_eq!((made.onnx, made.by), (fused, "scopeless"));
        assert!(!made.certain);
        assert!(
            !state.is_paired(lin),
            "the fused node is taken by its best fit"
        );
    }

    #[test]
    fn a_scopeless_fused_gemm_holds_the_activation_after_its_linear() {
        let (t, o, [fc6, act, fc7, fused, ofc7]) = graphs::fused_gemm_with_activation();
        let state = run_alone(&Scopeless, &t, &o, &[(fc7, ofc7)]);
        let made = state.get(act).expect("the ReLU is paired");
        assert_eq!((made.onnx, made.by), (fused, "scopeless"));
        assert_eq!(state.fused(act), [fc6]);
        assert!(!state.is_paired(fc6) && state.accounted(fc6));
    }

    #[test]
    fn a_scopeless_node_not_computed_from_the_producers_twins_is_no_twin() {
        // The norm reads `a`; the only scope-less LayerNorm reads `b`.
        let x = [1.0, 2.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let a = t.op("aten::linear", "a", &[ti], &[3.0, 4.0]);
        let b = t.op("aten::linear", "b", &[ti], &[5.0, 6.0]);
        let n = t.op("aten::layer_norm", "n", &[a], &[-1.0, 1.0]);
        let s = t.op("aten::add", "", &[n, b], &[4.0, 7.0]);
        t.output(0, s);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let oa = o.op("Gemm", "a", &[oi], &[3.0, 4.0]);
        let ob = o.op("Gemm", "b", &[oi], &[5.0, 6.0]);
        let on = o.op("LayerNormalization", "", &[ob], &[-1.0, 1.0]);
        let os = o.op("Add", "", &[on, oa], &[4.0, 7.0]);
        o.output(0, os);
        let mut oc = o.build();
        oc.values[on].scope_recorded = false;
        let state = run_alone(&Scopeless, &t.build(), &oc, &[(a, oa), (b, ob), (s, os)]);
        assert!(!state.is_paired(n));
    }
}
