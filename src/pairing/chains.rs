//! Chains of modules one ONNX node computes, shared by the `fusion`, `fused_producer`,
//! `scopeless` and `folded_affine` passes.
//!
//! Exporters and optimisers fold a module into its neighbour. The legacy exporter folds a
//! BatchNorm into the Conv before it and keeps the conv's scope, and ONNX Runtime's saved
//! graphs fold the activation too (`FusedConv`), so the node that `module_output` paired
//! with the conv computes a later module's output (`fuse_consumers_into_node`). The dynamo
//! exporter keeps the BatchNorm's scope instead, so the conv has no node of its own
//! (`fuse_producer_into_node`). The values choose between the structurally possible
//! owners, so a pair made here is certain only where structure leaves one owner: the modules
//! folded into a node that alone held the first module's scope have no ONNX node of their
//! own anywhere (`folded_without_a_trace`).

use super::ops::{folds_into_conv, torch_kind, OpKind};
use super::reason::UnpairedReason;
use super::scopes::key_path;
use super::{same_shape, Pairer};

/// The most modules one ONNX node is taken to compute after the one it is named for
/// (Conv, BatchNorm, activation, and one more for a bias or clip).
const MAX_FUSED_CHAIN: usize = 3;

/// Beyond this distance a pair the values chose does not agree: not rounding, even float16's.
const DOUBTFUL: f64 = 1e-2;

/// Elementwise activations a node may compute after its own op (ONNX Runtime's FusedConv
/// takes Relu, Sigmoid, Tanh, LeakyRelu, Clip and HardSigmoid).
fn is_activation(torch_op: &str) -> bool {
    torch_kind(torch_op).is_some_and(OpKind::is_fusable_activation)
}

impl Pairer<'_> {
    /// Output value of every leaf module call, and every normalisation or activation that is
    /// a functional op of a module with children (timm's BatchNormAct2d calls F.batch_norm,
    /// then its own `act`; a ConvGRU applies `torch.sigmoid` to its gate's conv, which ONNX
    /// Runtime fuses into a FusedConv), with the module path, in execution order.
    pub(super) fn module_outputs(&self) -> Vec<(usize, String)> {
        let tv = &self.cx.torch.values;
        let mut outputs: Vec<(usize, String)> = self
            .cx
            .torch_groups
            .iter()
            .filter(|(k, _)| self.cx.is_leaf_group(k))
            .filter_map(|(k, ids)| {
                self.representatives(k, ids)
                    .first()
                    .map(|&id| (id, key_path(k).to_string()))
            })
            .collect();
        outputs.extend(
            self.cx
                .torch_groups
                .iter()
                .filter(|(k, _)| !self.cx.is_leaf_group(k))
                .flat_map(|(k, ids)| ids.iter().map(move |&id| (id, key_path(k).to_string())))
                .filter(|&(id, _)| folds_into_conv(&tv[id].op) || is_activation(&tv[id].op)),
        );
        outputs.sort();
        outputs
    }

    /// Weighs the chains after `starts` as they stand, several at once (a chain that a move
    /// before it changes is weighed again where it is met).
    pub(super) fn prefetch_chains(&self, starts: &[usize], outputs: &[(usize, String)]) {
        let pairs: Vec<(usize, usize)> = starts
            .iter()
            .filter_map(|&u| self.chain_after(u, outputs))
            .flat_map(|(o, chain)| chain.into_iter().map(move |t| (t, o)))
            .collect();
        self.cx.prefetch_distances(pairs);
    }

    /// The chain of open (or doubtful) module outputs after paired value `u`, each read
    /// from the one before and of the shape of `u`'s twin, with that twin; `None` when
    /// no module follows.
    fn chain_after(&self, u: usize, outputs: &[(usize, String)]) -> Option<(usize, Vec<usize>)> {
        let (tv, ov) = (&self.cx.torch.values, &self.cx.onnx.values);
        let o = self.state.twin(u)?;
        let mut chain = vec![u];
        while chain.len() <= MAX_FUSED_CHAIN {
            let last = *chain.last().expect("non-empty");
            let next = outputs.iter().map(|&(v, _)| v).find(|&v| {
                v > last
                    && tv[v].inputs.contains(&last)
                    && self.open_or_doubtful(v)
                    && same_shape(&tv[v], &ov[o])
            });
            match next {
                Some(v) => chain.push(v),
                None => break,
            }
        }
        (chain.len() > 1).then_some((o, chain))
    }

    /// Weighs the chain of open (or doubtful) module outputs after paired value `u`, all
    /// read from the one before and of its twin's shape, and moves `u`'s pair to the one
    /// the twin's value computes.
    pub(super) fn fuse_chain_after(&mut self, u: usize, outputs: &[(usize, String)]) {
        let Some((o, chain)) = self.chain_after(u, outputs) else {
            return;
        };
        let distances: Vec<f64> = chain.iter().map(|&t| self.cx.distance(t, o)).collect();
        let best = (0..chain.len())
            .min_by(|&a, &b| distances[a].total_cmp(&distances[b]).then(b.cmp(&a)))
            .expect("non-empty");
        if best == 0 || !distances[best].is_finite() {
            return;
        }
        let v = chain[best];
        let certain = best == chain.len() - 1
            && self.state.get(u).is_some_and(|m| m.certain)
            && chain[1..].iter().all(|&w| self.folded_without_a_trace(w));
        // A doubtful pair the order gave the fused value (a `tanh` fused into a FusedConv
        // met a Mul of its shape) is left for the passes after to place again.
        for &w in &chain[1..=best] {
            self.state.unassign(w);
        }
        let path = outputs
            .iter()
            .find(|(id, _)| *id == v)
            .map_or("", |(_, p)| p.as_str());
        let reason = UnpairedReason::FusedIntoNode {
            node: self.cx.onnx.values[o].node.clone(),
            compared_after: path.to_string(),
        };
        self.move_down_chain(&chain[..=best], o, &reason, certain);
    }

    /// Whether TorchScript value `t`'s module left no ONNX value in its scope: the exporter
    /// folded it into a neighbour. A folded chain (Conv then BatchNorm) whose first module's
    /// node is certain then has that node as its only possible owner, so the pair is certain:
    /// a channel swap that the ReLU after it happens to hide (both channels negative) is a
    /// real fault at the BatchNorm, not a doubtful pair (`compare::evaluate`).
    fn folded_without_a_trace(&self, t: usize) -> bool {
        self.cx
            .torch_groups
            .iter()
            .find(|(_, ids)| ids.contains(&t))
            .is_some_and(|(key, _)| super::subtree(&self.cx.onnx_groups, key).is_empty())
    }

    /// Whether TorchScript value `t` is still open, or holds a pair that the values chose
    /// among several (not certain) and that does not agree: a node may have computed it.
    fn open_or_doubtful(&self, t: usize) -> bool {
        match self.state.get(t) {
            None => !self.state.accounted(t),
            Some(made) => !made.certain && self.cx.distance(t, made.onnx) > DOUBTFUL,
        }
    }

    /// Moves the pair of `chain[0]` with ONNX value `o` to the chain's last value, the one
    /// the node computes: the values before it are fused into the node, covered with
    /// `reason`. Shared by `fusion` (a node that also computes the modules after its own) and
    /// `folded_affine` (a node that absorbed the constant op after it). `certain` when
    /// structure alone left the node as the owner.
    pub(super) fn move_down_chain(
        &mut self,
        chain: &[usize],
        o: usize,
        reason: &UnpairedReason,
        certain: bool,
    ) {
        let (u, v) = (chain[0], chain[chain.len() - 1]);
        self.state.unassign(u);
        self.state.assign(v, o, certain);
        for absorbed in self.state.take_fused(u) {
            self.state.fuse(absorbed, v);
        }
        for &absorbed in &chain[..chain.len() - 1] {
            self.state.fuse(absorbed, v);
            self.state.leave(absorbed, reason.clone());
        }
    }

    /// Records unpaired TorchScript value `u` as fused into the ONNX node its consumer `v`
    /// (of module `v_path`) is paired with: covered, compared after `v`. Shared by
    /// `fuse_producer_into_node` and `fused_into_holder`.
    pub(super) fn fuse_into_consumer_node(&mut self, u: usize, v: usize, v_path: &str) {
        let Some(o) = self.state.twin(v) else {
            return;
        };
        self.state.fuse(u, v);
        let reason = UnpairedReason::FusedIntoNode {
            node: self.cx.onnx.values[o].node.clone(),
            compared_after: v_path.to_string(),
        };
        self.state.leave(u, reason);
    }
}
