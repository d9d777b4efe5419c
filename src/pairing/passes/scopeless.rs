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
