//! The order in which the exporter wrote the ONNX nodes, where a graph tool sorted them again.
//!
//! The order-keeping alignment of `op_order` relies on both sides listing a scope's ops in
//! the order the model ran them. A graph that ONNX Runtime optimised and saved is sorted
//! again (depth first from the consumers), so a detector's box decoder computes its height
//! chain before its width chain: the chains have the same ops and shapes, the alignment pairs
//! the `x` arithmetic with the `y` nodes, and a clean pair fails at about 1.0 of range. The
//! names keep the export order: the legacy exporter names a node after its scope and op type
//! and numbers the repeats of that op type in that scope as it writes them
//! (`/roi_heads/Sub`, `/roi_heads/Sub_1`, ...), the dynamo exporter numbers its nodes too,
//! after the ONNX op or the TorchScript op they come from (`node_Conv_1379`,
//! `node_layer_norm_8`), and graph tools keep names. A simplifier that sorts a dynamo graph by
//! depth interleaves an Inception block's branches the same way.
//!
//! The order is rebuilt as a topological order of the wiring in which each numbered run
//! (one name without its number, one op type) comes in its numbering, taking next, among the
//! nodes ready, one whose name records its order (a node whose name does not, a fused node or
//! one a tool named, waits until it is needed or nothing else is ready), then one that reads
//! what was computed last (a program computes a value and then uses it: `dx = codes[:, 0] /
//! wx` is a Slice then its Div), the earliest saved first among equals. A run numbered against the wiring is no record of the export order and is left
//! out: ONNX Runtime kept `Unsqueeze_11` for an earlier twin it merged, and the dynamo
//! exporter numbers the nodes of each function it inlines apart. Should the runs still
//! deadlock together, one waits for nothing when nothing else is ready. Where every run is
//! already numbered in the saved order (a graph as exported, or one no tool sorted again),
//! the saved order is kept and nothing is computed.
//!
//! Many orders keep the wiring and the numbering, and the alignment skips what one side
//! computes in another order: a node that must wait for a value computed in another branch
//! (RoFormer's `reshape_as` of the query waits for the value's `Reshape_2`) would come after
//! the other branch's whole chain if the order went depth first, and the alignment would then
//! give the query's nodes to the key's ops. So the order follows TorchScript where the names
//! say where a node belongs: where a scope has as many nodes named after an op as its
//! TorchScript call has ops of that name (`Mul`, `Mul_1`, ... and four `aten::mul`), node
//! `Mul_k` is placed by the k-th `aten::mul` (a graph without scopes counts over the whole
//! graph); any other node goes right after the latest of
//! its inputs so placed. These places only choose among the nodes ready: wiring and
//! numbering still decide.

use super::node_names::numbered;
use crate::capture::CapturedValue;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// For each ONNX value id, its place in the rebuilt export order; `None` when every
/// numbered run already runs in the saved order. `places()[id]`: the TorchScript position
/// the names give ONNX value `id` (`torch_places`), if any; asked for only when the order is
/// rebuilt, so a graph as exported pays for its names alone.
pub(super) fn export_ranks(
    values: &[CapturedValue],
    places: impl FnOnce() -> Vec<Option<usize>>,
    words: &[String],
) -> Option<Vec<usize>> {
    let nodes = nodes_of(values);
    let in_saved_order = |run: &Vec<(usize, usize)>| run.windows(2).all(|w| w[0].1 < w[1].1);
    let runs = numbered_runs(values, &nodes, words);
    if runs.iter().all(in_saved_order) {
        return None;
    }
    let (producers, consumers) = wiring(values, &nodes);
    // A run numbered against the wiring (a node computed from a later-numbered one) is no
    // record of the export order: the dynamo exporter numbers the nodes of each function it
    // inlines apart (`node_Reshape_269` before `node_Reshape_178` as exported).
    let runs: Vec<Vec<(usize, usize)>> = runs
        .into_iter()
        .filter(|run| in_saved_order(run) || follows_wiring(run, &producers))
        .collect();
    if runs.iter().all(in_saved_order) {
        return None;
    }
    let mut ranks = vec![usize::MAX; values.len()];
    let mut next = 0;
    for node in rebuilt_order(&nodes, &producers, &consumers, &runs, &places()) {
        for &id in &nodes[node] {
            ranks[id] = next;
            next += 1;
        }
    }
    // Values of no node (graph inputs) after the rest: they belong to no scope.
    for rank in ranks.iter_mut().filter(|r| **r == usize::MAX) {
        *rank = next;
        next += 1;
    }
    Some(ranks)
}

/// Each node's output value ids, nodes in saved order (a node is where its first value is).
fn nodes_of(values: &[CapturedValue]) -> Vec<Vec<usize>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut nodes: Vec<Vec<usize>> = Vec::new();
    for v in values.iter().filter(|v| !v.node.is_empty()) {
        let at = *index.entry(v.node.as_str()).or_insert_with(|| {
            nodes.push(Vec::new());
            nodes.len() - 1
        });
        nodes[at].push(v.id);
    }
    nodes
}

/// The numbered runs: per (name prefix, op type), the (node, number) of each member in saved
/// order (`numbered`).
fn numbered_runs(
    values: &[CapturedValue],
    nodes: &[Vec<usize>],
    words: &[String],
) -> Vec<Vec<(usize, usize)>> {
    let mut runs: HashMap<(&str, &str), Vec<(usize, usize)>> = HashMap::new();
    for (at, ids) in nodes.iter().enumerate() {
        let v = &values[ids[0]];
        if let Some((base, _, number)) = numbered(v, words) {
            runs.entry((base, v.op.as_str()))
                .or_default()
                .push((at, number));
        }
    }
    runs.into_values().collect()
}

/// The nodes in the rebuilt order (see the module comment).
fn rebuilt_order(
    nodes: &[Vec<usize>],
    producers: &[Vec<usize>],
    consumers: &[Vec<usize>],
    runs: &[Vec<(usize, usize)>],
    places: &[Option<usize>],
) -> Vec<usize> {
    let (next_in_run, mut run_waits) = run_links(nodes.len(), runs);
    let mut wiring_waits: Vec<usize> = producers.iter().map(Vec::len).collect();
    let mut emitted_at = vec![usize::MAX; nodes.len()];
    let place = node_places(nodes, producers, places);
    let mut named = vec![false; nodes.len()];
    for &(at, _) in runs.iter().flatten() {
        named[at] = true;
    }
    // Priority: the earliest TorchScript place; then a node whose name records its order
    // (one without waits until it is needed or nothing else is ready: a classifier's heads
    // come after the features they read, not as each feature is done); then the latest
    // emitted producer (most recent first); then the saved position.
    let key = |at: usize, emitted_at: &[usize]| {
        let latest = producers[at].iter().map(|&p| emitted_at[p] as i64).max();
        (
            Reverse(place[at]),
            named[at],
            latest.unwrap_or(-1),
            Reverse(at),
        )
    };
    let mut ready = BinaryHeap::new();
    let mut held = BinaryHeap::new();
    for at in (0..nodes.len()).filter(|&at| wiring_waits[at] == 0) {
        let k = key(at, &emitted_at);
        if run_waits[at] {
            held.push(k);
        } else {
            ready.push(k);
        }
    }
    let mut order = Vec::with_capacity(nodes.len());
    while order.len() < nodes.len() {
        // A run whose numbering contradicts the wiring waits for nothing once nothing else
        // can go.
        let Some((_, _, _, Reverse(at))) = ready.pop().or_else(|| held.pop()) else {
            break;
        };
        if emitted_at[at] != usize::MAX {
            continue;
        }
        emitted_at[at] = order.len();
        order.push(at);
        for &c in &consumers[at] {
            wiring_waits[c] -= 1;
            if wiring_waits[c] == 0 {
                let k = key(c, &emitted_at);
                if run_waits[c] {
                    held.push(k);
                } else {
                    ready.push(k);
                }
            }
        }
        if let Some(n) = next_in_run[at] {
            run_waits[n] = false;
            if wiring_waits[n] == 0 && emitted_at[n] == usize::MAX {
                ready.push(key(n, &emitted_at));
            }
        }
    }
    order
}

/// Whether no member of `run` is computed from a member numbered after it. The saved order
/// is a topological order, so one pass carries the highest number upstream of each node.
fn follows_wiring(run: &[(usize, usize)], producers: &[Vec<usize>]) -> bool {
    let number: HashMap<usize, usize> = run.iter().copied().collect();
    let mut upstream: Vec<Option<usize>> = vec![None; producers.len()];
    for at in 0..producers.len() {
        let above = producers[at].iter().filter_map(|&p| upstream[p]).max();
        upstream[at] = match number.get(&at) {
            Some(&n) if above.is_some_and(|a| a > n) => return false,
            Some(&n) => Some(above.map_or(n, |a| a.max(n))),
            None => above,
        };
    }
    true
}

/// Each node's TorchScript place: its own where the names give one, else the latest of its
/// producers' (a node goes right after what it reads); 0 when nothing upstream has one.
fn node_places(
    nodes: &[Vec<usize>],
    producers: &[Vec<usize>],
    places: &[Option<usize>],
) -> Vec<usize> {
    let mut place = vec![0; nodes.len()];
    // Saved order is a topological order: producers come first.
    for at in 0..nodes.len() {
        let own = nodes[at]
            .iter()
            .find_map(|&id| places.get(id).copied().flatten());
        place[at] = own.unwrap_or_else(|| {
            producers[at]
                .iter()
                .filter(|&&p| p < at)
                .map(|&p| place[p])
                .max()
                .unwrap_or(0)
        });
    }
    place
}

/// Each node's producer nodes and consumer nodes, read from the values' inputs.
fn wiring(values: &[CapturedValue], nodes: &[Vec<usize>]) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut node_of = vec![usize::MAX; values.len()];
    for (at, ids) in nodes.iter().enumerate() {
        for &id in ids {
            node_of[id] = at;
        }
    }
    let producers: Vec<Vec<usize>> = (0..nodes.len())
        .map(|at| {
            let mut p: Vec<usize> = nodes[at]
                .iter()
                .flat_map(|&id| values[id].inputs.iter().map(|&i| node_of[i]))
                .filter(|&p| p != usize::MAX && p != at)
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect();
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (at, ps) in producers.iter().enumerate() {
        for &p in ps {
            consumers[p].push(at);
        }
    }
    (producers, consumers)
}

/// The next member of each node's run, and whether a node waits for its previous member.
fn run_links(count: usize, runs: &[Vec<(usize, usize)>]) -> (Vec<Option<usize>>, Vec<bool>) {
    let mut next_in_run = vec![None; count];
    let mut run_waits = vec![false; count];
    for run in runs {
        let mut numbered = run.clone();
        numbered.sort_unstable_by_key(|&(at, number)| (number, at));
        for w in numbered.windows(2) {
            next_in_run[w[0].0] = Some(w[1].0);
            run_waits[w[1].0] = true;
        }
    }
    (next_in_run, run_waits)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::node_names::torch_places;
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::ValueRole;
    use std::collections::BTreeMap;

    pub(in crate::pairing) fn value(
        id: usize,
        node: &str,
        op: &str,
        inputs: &[usize],
    ) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: op.into(),
            node: node.into(),
            scope: Vec::new(),
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role: if node.is_empty() {
                ValueRole::Input(0)
            } else {
                ValueRole::Intermediate
            },
            dtype: DType::F32,
            shape: vec![4],
            inputs: inputs.to_vec(),
            tensor: None,
        }
    }

    fn in_rank_order(values: &[CapturedValue], ranks: &[usize]) -> Vec<String> {
        let mut ids: Vec<usize> = (0..values.len())
            .filter(|&i| !values[i].node.is_empty())
            .collect();
        ids.sort_by_key(|&id| ranks[id]);
        ids.iter().map(|&id| values[id].node.clone()).collect()
    }

    #[test]
    fn a_graph_in_export_order_keeps_its_order() {
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/head/Sub", "Sub", &[0]),
            value(2, "/head/Sub_1", "Sub", &[0]),
            value(3, "/head/Mul", "Mul", &[1]),
            value(4, "/head/Mul_1", "Mul", &[2]),
        ];
        assert_eq!(export_ranks(&values, Vec::new, &[]), None);
    }

    #[test]
    fn two_chains_sorted_again_come_back_in_the_order_they_were_written() {
        // Exported: x = Slice, Div; y = Slice_1, Div_1; Add of both. Saved by a tool that
        // computes the y chain first.
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/head/Slice_1", "Slice", &[0]),
            value(2, "/head/Div_1", "Div", &[1]),
            value(3, "/head/Slice", "Slice", &[0]),
            value(4, "/head/Div", "Div", &[3]),
            value(5, "/head/Add", "Add", &[2, 4]),
        ];
        let ranks = export_ranks(&values, Vec::new, &[])
            .expect("the numbering runs against the saved order");
        // A value is used right after it is computed: Slice, then its Div, not both Slices.
        assert_eq!(
            in_rank_order(&values, &ranks),
            [
                "/head/Slice",
                "/head/Div",
                "/head/Slice_1",
                "/head/Div_1",
                "/head/Add"
            ]
        );
        assert!(ranks[0] > ranks[5], "the graph input comes after the nodes");
    }

    #[test]
    fn a_numbering_that_contradicts_the_wiring_is_left_out() {
        // A tool merged two equal Unsqueezes and kept the later one's name for the first use:
        // `Unsqueeze_1` feeds `Concat`, which `Unsqueeze` reads. Every node still comes out,
        // in an order that follows the wiring.
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/head/Unsqueeze_1", "Unsqueeze", &[0]),
            value(2, "/head/Concat", "Concat", &[1]),
            value(3, "/head/Unsqueeze", "Unsqueeze", &[2]),
            value(4, "/head/Relu_1", "Relu", &[3]),
            value(5, "/head/Relu", "Relu", &[3]),
        ];
        let ranks = export_ranks(&values, Vec::new, &[]).expect("runs out of the saved order");
        assert_eq!(
            in_rank_order(&values, &ranks),
            [
                "/head/Unsqueeze_1",
                "/head/Concat",
                "/head/Unsqueeze",
                "/head/Relu",
                "/head/Relu_1"
            ]
        );
    }

    #[test]
    fn outputs_of_one_node_and_unnumbered_nodes_keep_their_wiring_order() {
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/head/TopK_1", "TopK", &[0]),
            value(2, "/head/TopK_1", "TopK", &[0]),
            value(3, "/head/TopK", "TopK", &[0]),
            value(4, "/head/TopK", "TopK", &[0]),
            value(
                5,
                "/head/conv/Conv/FusedTag",
                "com.microsoft::FusedConv",
                &[3],
            ),
        ];
        let ranks = export_ranks(&values, Vec::new, &[]).expect("runs out of the saved order");
        let mut ids: Vec<usize> = (1..6).collect();
        ids.sort_by_key(|&id| ranks[id]);
        // A node's outputs stay together; the fused node, whose name records no order,
        // waits until nothing named is ready.
        assert_eq!(ids, vec![3, 4, 1, 2, 5]);
    }

    #[test]
    fn the_names_place_a_node_at_the_torchscript_op_of_its_number() {
        // TorchScript: q = reshape(x); v = reshape(x); nq = neg(q); rq = reshape(nq);
        // mq = mul(rq); nk = neg(x); mk = mul(nk). Saved by a tool that computes the key's
        // `Neg_1` first. `Reshape_2` waits for `Reshape_1` by its number; depth first, the
        // key's chain would come before the query's `Reshape_2`.
        let torch_ops = [
            "aten::reshape",
            "aten::reshape",
            "aten::neg",
            "aten::reshape",
            "aten::mul",
            "aten::neg",
            "aten::mul",
        ];
        let torch: Vec<CapturedValue> = torch_ops
            .iter()
            .enumerate()
            .map(|(id, op)| value(id, "", op, &[]))
            .collect();
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/s/Reshape", "Reshape", &[0]),
            value(2, "/s/Neg_1", "Neg", &[0]),
            value(3, "/s/Neg", "Neg", &[1]),
            value(4, "/s/Reshape_1", "Reshape", &[0]),
            value(5, "/s/Reshape_2", "Reshape", &[3]),
            value(6, "/s/Mul", "Mul", &[5]),
            value(7, "/s/Mul_1", "Mul", &[2]),
        ];
        let torch_groups = BTreeMap::from([("s".to_string(), (0..7).collect())]);
        let onnx_groups = BTreeMap::from([("s".to_string(), (1..8).collect())]);
        let places = torch_places(&torch, &torch_groups, &values, &onnx_groups, &[]);
        assert_eq!(
            places,
            [
                None,
                Some(0),
                Some(5),
                Some(2),
                Some(1),
                Some(3),
                Some(4),
                Some(6)
            ]
        );
        let placed =
            export_ranks(&values, || places.clone(), &[]).expect("runs out of the saved order");
        assert_eq!(
            in_rank_order(&values, &placed),
            [
                "/s/Reshape",
                "/s/Reshape_1",
                "/s/Neg",
                "/s/Reshape_2",
                "/s/Mul",
                "/s/Neg_1",
                "/s/Mul_1"
            ]
        );
        // Without places, depth first: the key's Neg_1 before the query's Reshape_2.
        let unplaced = export_ranks(&values, Vec::new, &[]).expect("runs out of the saved order");
        let order = in_rank_order(&values, &unplaced);
        let at = |name: &str| order.iter().position(|n| n == name);
        assert!(at("/s/Neg_1") < at("/s/Reshape_2"), "{order:?}");
    }

    #[test]
    fn a_run_numbered_against_the_wiring_is_found() {
        // Node 0 (number 5) feeds node 1 (number 2): against the wiring. Nodes 2 and 3 read
        // node 0 apart, numbered 1 and 7: only the wiring order between 0 and 3 holds.
        let producers = vec![vec![], vec![0], vec![], vec![0]];
        assert!(!follows_wiring(&[(0, 5), (1, 2)], &producers));
        assert!(follows_wiring(&[(2, 9), (0, 5), (3, 7)], &producers));
        assert!(!follows_wiring(&[(0, 5), (3, 4)], &producers));
    }
}
