//! The `fx_nodes` pass: a `.pt2` value and the ONNX value the dynamo exporter marked as the
//! output of the same torch.export node.
//!
//! The dynamo exporter writes into every ONNX node the FX node it came from
//! (`capture::fx_node`). Where that node has the `.pt2` value's name, target and reads, both
//! are one node of one program: the ONNX value that completes the node's ONNX nodes (of the
//! value's shape and dtype, read by none of them) is its output, whatever order or scope says.
//! The structure passes before this one placed most values already; this pass
//!
//! - marks a pair they made on exactly that ONNX value as certain: a failure on it is a
//!   failure of that node, not of a guess among several candidates;
//! - pairs a value they left open with it, when it is free, before `left_open` guesses by
//!   dataflow and place;
//! - leaves alone a pair they made elsewhere (a fused or moved node can carry a node's mark
//!   while another value holds its result); the pairing trace lists each.
//!
//! The names match only where the exporter's run of torch.export kept the program's node
//! names: nodes after a decomposition are renamed (`_native_batch_norm_legit_no_training` for
//! `batch_norm`, and what reads them), and a legacy-exported ONNX names none. Then nothing
//! here applies and the structure passes stand alone.

use super::super::{is_layer_candidate, trace, Pairer};
use super::super::{PairCx, PairState};
use super::Pass;
use crate::capture::fx_node::FxNode;
use crate::capture::CapturedValue;
use std::collections::HashMap;

/// What the pairing trace reports of the pass: pairs it confirmed, pairs it made, and pairs
/// the structure passes made on another value than the mark's.
#[derive(Default)]
struct Tally {
    confirmed: usize,
    made: usize,
    elsewhere: usize,
}

impl Pairer<'_> {
    fn pair_by_fx_nodes(&mut self) {
        let (torch, onnx) = (self.cx.torch, self.cx.onnx);
        if torch.fx_nodes.is_empty() || onnx.fx_nodes.is_empty() {
            return;
        }
        let mut marked: HashMap<&FxNode, Vec<usize>> = HashMap::new();
        for (&o, node) in &onnx.fx_nodes {
            marked.entry(node).or_default().push(o);
        }
        let mut tally = Tally::default();
        for (&t, node) in &torch.fx_nodes {
            let value = &torch.values[t];
            let Some(o) = marked
                .get(node)
                .and_then(|group| node_output(&onnx.values, group, value))
            else {
                continue;
            };
            match self.state.twin(t) {
                Some(twin) if twin == o => {
                    self.state.confirm(t);
                    tally.confirmed += 1;
                }
                Some(twin) => {
                    tally.elsewhere += 1;
                    if trace::enabled() {
                        eprintln!(
                            "  fx_nodes: {} is paired with {}, its node's mark is on {}: left",
                            value.name, onnx.values[twin].name, onnx.values[o].name
                        );
                    }
                }
                None => {
                    let open = is_layer_candidate(value)
                        && !self.state.is_identity(t)
                        && !self.state.accounted(t);
                    if open && !self.state.is_taken(o) {
                        self.state.assign(t, o, true);
                        tally.made += 1;
                    }
                }
            }
        }
        if trace::enabled() {
            eprintln!(
                "  fx_nodes: of {} .pt2 values, {} pairs confirmed, {} made, {} left on another value",
                torch.fx_nodes.len(),
                tally.confirmed,
                tally.made,
                tally.elsewhere
            );
        }
    }
}

/// The one value of `group` (the ONNX values marked with one FX node) that is `value`'s
/// shape and dtype and that no other value of the group reads: the node's result. `None`
/// when there is no such value or more than one.
fn node_output(onnx: &[CapturedValue], group: &[usize], value: &CapturedValue) -> Option<usize> {
    let mut results = group.iter().copied().filter(|&o| {
        let v = &onnx[o];
        v.shape == value.shape
            && v.dtype == value.dtype
            && !group.iter().any(|&g| g != o && onnx[g].inputs.contains(&o))
    });
    let first = results.next()?;
    results.next().is_none().then_some(first)
}

pub(super) struct FxNodes;

impl Pass for FxNodes {
    fn name(&self) -> &'static str {
        "fx_nodes"
    }

    fn run(&self, cx: &PairCx, state: &mut PairState) {
        Pairer { cx, state }.pair_by_fx_nodes();
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::{run_alone, Builder};
    use super::*;
    use crate::capture::{Capture, Side};

    fn node(name: &str, reads: &[&str]) -> FxNode {
        let reads = reads.iter().map(|r| r.to_string()).collect();
        FxNode::new(
            name.into(),
            "torch.ops.aten.layer_norm.default".into(),
            reads,
        )
    }

    /// A `.pt2` whose `layer_norm` (read by a `relu`) the exporter decomposed into two ONNX
    /// nodes marked with it, beside an ONNX value of the same shape in the same scope.
    fn decomposed(onnx_mark: FxNode) -> (Capture, Capture, [usize; 3], [usize; 4]) {
        let x = [1.0, -2.0, 3.0];
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let norm = t.op("aten::layer_norm", "ln", &[ti], &[0.5, -1.0, 1.5]);
        let relu = t.op("aten::relu", "ln", &[norm], &[0.5, 0.0, 1.5]);
        t.output(0, relu);
        let mut torch = t.build();
        torch
            .fx_nodes
            .insert(norm, node("layer_norm", &["x", "p_ln_weight"]));
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let centred = o.op("Sub", "ln", &[oi], &[1.0, -2.0, 3.0]);
        let scaled = o.op("Mul", "ln", &[centred], &[0.5, -1.0, 1.5]);
        let other = o.op("Relu", "ln", &[scaled], &[0.5, 0.0, 1.5]);
        o.output(0, other);
        let mut onnx = o.build();
        onnx.fx_nodes.insert(centred, onnx_mark.clone());
        onnx.fx_nodes.insert(scaled, onnx_mark);
        (torch, onnx, [ti, norm, relu], [oi, centred, scaled, other])
    }

    #[test]
    fn an_open_value_meets_the_result_of_its_nodes_onnx_nodes() {
        let (torch, onnx, [_, norm, _], [_, _, scaled, _]) =
            decomposed(node("layer_norm", &["p_ln_weight", "x"]));
        let state = run_alone(&FxNodes, &torch, &onnx, &[]);
        let made = state.get(norm).expect("paired by its node");
        assert_eq!(
            (made.onnx, made.by, made.certain),
            (scaled, "fx_nodes", true)
        );
    }

    #[test]
    fn a_pair_structure_made_on_the_same_value_becomes_certain() {
        let (torch, onnx, [_, norm, _], [_, _, scaled, _]) =
            decomposed(node("layer_norm", &["x", "p_ln_weight"]));
        let state = run_alone(&FxNodes, &torch, &onnx, &[(norm, scaled)]);
        let made = state.get(norm).unwrap();
        assert_eq!(
            (made.onnx, made.by, made.certain),
            (scaled, "earlier", true)
        );
    }

    #[test]
    fn a_pair_structure_made_elsewhere_is_left() {
        let (torch, onnx, [_, norm, _], [_, centred, _, _]) =
            decomposed(node("layer_norm", &["x", "p_ln_weight"]));
        let state = run_alone(&FxNodes, &torch, &onnx, &[(norm, centred)]);
        let made = state.get(norm).unwrap();
        assert_eq!((made.onnx, made.certain), (centred, false));
    }

    #[test]
    fn a_node_of_the_same_name_that_reads_other_values_is_another_node() {
        // The exporter's decompositions renamed what the node reads: not the same node.
        let (torch, onnx, [_, norm, _], _) =
            decomposed(node("layer_norm", &["getitem", "p_ln_weight"]));
        let state = run_alone(&FxNodes, &torch, &onnx, &[]);
        assert_eq!(state.twin(norm), None);
    }
}
