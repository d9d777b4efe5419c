//! The order in which the exporter wrote the ONNX nodes, where a graph tool sorted them again.
//!
//! The order-keeping alignment of `op_order` relies on both sides listing a scope's ops in
//! the order the model ran them. A graph that ONNX Runtime optimised and saved is sorted
//! again (depth first from the consumers), so a detector's box decoder computes its height
//! chain before its width chain: the chains have the same ops and shapes, the alignment pairs
//! the `x` arithmetic with the `y` nodes, and a clean pair fails at about 1.0 of range. The
//! names keep the export order: the legacy exporter names a node after its scope and op type
//! and numbers the repeats of that op type in that scope as it writes them
//! (`/roi_heads/Sub`, `/roi_heads/Sub_1`, ...), and graph tools keep names.
//!
//! The order is rebuilt as a topological order of the wiring in which each numbered run
//! (one name prefix, one op type) comes in its numbering, taking next, among the nodes
//! ready, one that reads what was computed last (a program computes a value and then uses
//! it: `dx = codes[:, 0] / wx` is a Slice then its Div), the earliest saved first among
//! equals. Graph tools that merge equal nodes keep one name for both (ONNX Runtime kept
//! `Unsqueeze_11` for an earlier twin), so the numbering can contradict the wiring: a run
//! then waits for nothing when nothing else is ready. Where every run is already numbered in
//! the saved order (a graph as exported, or one no tool sorted again), the saved order is
//! kept and nothing is computed.
//!
//! Many orders keep the wiring and the numbering, and the alignment skips what one side
//! computes in another order: a node that must wait for a value computed in another branch
//! (RoFormer's `reshape_as` of the query waits for the value's `Reshape_2`) would come after
//! the other branch's whole chain if the order went depth first, and the alignment would then
//! give the query's nodes to the key's ops. So the order follows TorchScript where the names
//! say where a node belongs: where a scope has as many nodes of an op type as its
//! TorchScript call has ops of that name (`Mul`, `Mul_1`, ... and four `aten::mul`), node
//! `Mul_k` is placed by the k-th `aten::mul`; any other node goes right after the latest of
//! its inputs so placed. These places only choose among the nodes ready: wiring and
//! numbering still decide.

use super::ops::same_op_name;
use super::scopes::GroupKey;
use crate::capture::CapturedValue;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

/// For each ONNX value id, its place in the rebuilt export order; `None` when every
/// numbered run already runs in the saved order. `places[id]`: the TorchScript position
/// the names give ONNX value `id` (`torch_places`), if any.
pub(super) fn export_ranks(
    values: &[CapturedValue],
    places: &[Option<usize>],
) -> Option<Vec<usize>> {
    let nodes = nodes_of(values);
    let runs = numbered_runs(values, &nodes);
    if runs
        .iter()
        .all(|run| run.windows(2).all(|w| w[0].1 < w[1].1))
    {
        return None;
    }
    let mut ranks = vec![usize::MAX; values.len()];
    let mut next = 0;
    for node in rebuilt_order(values, &nodes, &runs, places) {
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

/// The numbered runs: per (name prefix, op type), the (number, node) of each member in saved
/// order. `/roi_heads/Sub_1` of a `Sub` is number 1 of ("/roi_heads", "Sub"), `/roi_heads/Sub`
/// number 0; a node whose name does not end in its own op type (a fused node, a name a tool
/// made up) is in no run.
fn numbered_runs(values: &[CapturedValue], nodes: &[Vec<usize>]) -> Vec<Vec<(usize, usize)>> {
    let mut runs: HashMap<(&str, &str), Vec<(usize, usize)>> = HashMap::new();
    for (at, ids) in nodes.iter().enumerate() {
        if let Some((prefix, op, number)) = numbered(&values[ids[0]]) {
            runs.entry((prefix, op)).or_default().push((at, number));
        }
    }
    runs.into_values().collect()
}

/// A node's name prefix, op type and number in its run: `/roi_heads/Sub_1` of a `Sub` is
/// ("/roi_heads", "Sub", 1); `None` for a name that does not end in its own op type.
fn numbered(v: &CapturedValue) -> Option<(&str, &str, usize)> {
    let op = v.op.rsplit("::").next().unwrap_or(&v.op);
    let (prefix, last) = v.node.rsplit_once('/')?;
    let number = match last.strip_prefix(op)? {
        "" => 0,
        rest => rest.strip_prefix('_')?.parse().ok()?,
    };
    Some((prefix, op, number))
}

/// The TorchScript position (value id) the names give an ONNX value: in a call whose ONNX
/// nodes of one op type are as many as its TorchScript ops of that name, the k-th node by
/// number is placed at the k-th op. Other values get none.
pub(super) fn torch_places(
    torch: &[CapturedValue],
    torch_groups: &BTreeMap<GroupKey, Vec<usize>>,
    onnx: &[CapturedValue],
    onnx_groups: &BTreeMap<GroupKey, Vec<usize>>,
) -> Vec<Option<usize>> {
    let mut places = vec![None; onnx.len()];
    for (key, o_ids) in onnx_groups {
        let Some(t_ids) = torch_groups.get(key) else {
            continue;
        };
        // Per op type, the group's numbered nodes: (number, first value id).
        let mut by_type: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
        let mut seen_nodes = HashSet::new();
        for &o in o_ids {
            if !seen_nodes.insert(onnx[o].node.as_str()) {
                continue;
            }
            if let Some((_, op, number)) = numbered(&onnx[o]) {
                by_type.entry(op).or_default().push((number, o));
            }
        }
        for (op, mut members) in by_type {
            let ops: Vec<usize> = t_ids
                .iter()
                .copied()
                .filter(|&t| same_op_name(&torch[t].op, op))
                .collect();
            if ops.len() != members.len() {
                continue;
            }
            members.sort_unstable();
            for ((_, o), t) in members.into_iter().zip(ops) {
                places[o] = Some(t);
            }
        }
    }
    places
}

/// The nodes in the rebuilt order (see the module comment).
fn rebuilt_order(
    values: &[CapturedValue],
    nodes: &[Vec<usize>],
    runs: &[Vec<(usize, usize)>],
    places: &[Option<usize>],
) -> Vec<usize> {
    let (producers, consumers) = wiring(values, nodes);
    let (next_in_run, mut run_waits) = run_links(nodes.len(), runs);
    let mut wiring_waits: Vec<usize> = producers.iter().map(Vec::len).collect();
    let mut emitted_at = vec![usize::MAX; nodes.len()];
    let place = node_places(nodes, &producers, places);
    // Priority: the earliest TorchScript place, then the latest emitted producer (most
    // recent first), then the saved position.
    let key = |at: usize, emitted_at: &[usize]| {
        let latest = producers[at].iter().map(|&p| emitted_at[p] as i64).max();
        (Reverse(place[at]), latest.unwrap_or(-1), Reverse(at))
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
        let Some((_, _, Reverse(at))) = ready.pop().or_else(|| held.pop()) else {
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
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::ValueRole;

    fn value(id: usize, node: &str, op: &str, inputs: &[usize]) -> CapturedValue {
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
        assert_eq!(export_ranks(&values, &[]), None);
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
        let ranks = export_ranks(&values, &[]).expect("the numbering runs against the saved order");
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
    fn a_numbering_that_contradicts_the_wiring_gives_way() {
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
        let ranks = export_ranks(&values, &[]).expect("runs out of the saved order");
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
        let ranks = export_ranks(&values, &[]).expect("runs out of the saved order");
        let mut ids: Vec<usize> = (1..6).collect();
        ids.sort_by_key(|&id| ranks[id]);
        assert_eq!(ids, vec![3, 4, 5, 1, 2]);
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
        let places = torch_places(&torch, &torch_groups, &values, &onnx_groups);
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
        let placed = export_ranks(&values, &places).expect("runs out of the saved order");
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
        let unplaced = export_ranks(&values, &[]).expect("runs out of the saved order");
        let order = in_rank_order(&values, &unplaced);
        let at = |name: &str| order.iter().position(|n| n == name);
        assert!(at("/s/Neg_1") < at("/s/Reshape_2"), "{order:?}");
    }

    #[test]
    fn a_type_whose_count_differs_between_the_sides_is_not_placed() {
        // Two ONNX Muls, three aten::mul (one fused away): no node of the type is placed.
        let torch: Vec<CapturedValue> = (0..3).map(|id| value(id, "", "aten::mul", &[])).collect();
        let values = vec![
            value(0, "", "input", &[]),
            value(1, "/s/Mul_1", "Mul", &[0]),
            value(2, "/s/Mul", "Mul", &[0]),
        ];
        let torch_groups = BTreeMap::from([("s".to_string(), vec![0, 1, 2])]);
        let onnx_groups = BTreeMap::from([("s".to_string(), vec![1, 2])]);
        let places = torch_places(&torch, &torch_groups, &values, &onnx_groups);
        assert_eq!(places, [None, None, None]);
    }
}
