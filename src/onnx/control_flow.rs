//! Scripted control flow made observable: the rewrite that replaces, in the graph align-check
//! runs for capture and isolation, every `Loop` with a constant trip count and a condition
//! that stays true by its unrolled body (`unroll`) and every `If` whose condition is fixed
//! before the run by the branch it takes (`inline_if`). Values inside a subgraph can never be
//! graph outputs; after this rewrite they are main-graph values like any other. What cannot
//! be rewritten (a trip count or condition computed from the data) stays, with the reason,
//! which `expose` gives to the values left inside.
//!
//! The rewritten graph computes exactly what the original does (the same nodes on the same
//! values, in the order the loop would run them); the user's file is never touched.

use super::constant_scalar::Scope;
use super::graph_edit::collect_used_names;
use super::steering::Steering;
use super::{inline_if, proto, unroll};
use std::collections::{HashMap, HashSet};

/// A Loop inside an unrolled body becomes a main-graph node only in the next round.
const MAX_ROUNDS: usize = 8;

/// Why each control-flow node that stays was not rewritten, by node name.
pub type Kept = HashMap<String, String>;

/// Rewrites `model`'s main graph in place; returns the control-flow nodes that stay, with
/// the reason. `steering` adds the conditions and trip counts measured on the check's inputs
/// to those constants fix.
pub fn make_observable(model: &mut proto::ModelProto, steering: &Steering) -> Kept {
    let mut kept = Kept::new();
    let opset = super::model::opset_of(model);
    let Some(graph) = model.graph.as_mut() else {
        return kept;
    };
    let mut created: HashSet<String> = HashSet::new();
    for _ in 0..MAX_ROUNDS {
        if !graph.node.iter().any(is_control_flow) {
            break;
        }
        kept.clear();
        let decisions: Vec<Result<Vec<proto::NodeProto>, Option<String>>> = {
            let scope = Scope {
                nodes: &graph.node,
                initializers: &graph.initializer,
                outer: None,
            };
            graph
                .node
                .iter()
                .map(|n| rewrite(&scope, n, (steering, opset)))
                .collect()
        };
        let mut changed = false;
        let old = std::mem::take(&mut graph.node);
        for (node, decision) in old.into_iter().zip(decisions) {
            match decision {
                Ok(replacement) => {
                    changed = true;
                    created.extend(replacement.iter().flat_map(|n| n.output.iter().cloned()));
                    graph.node.extend(replacement);
                }
                Err(why) => {
                    if let Some(why) = why {
                        kept.insert(node.name().to_string(), why);
                    }
                    graph.node.push(node);
                }
            }
        }
        if !changed {
            break;
        }
    }
    prune(graph, &created);
    kept
}

fn is_control_flow(node: &proto::NodeProto) -> bool {
    matches!(node.domain(), "" | "ai.onnx") && matches!(node.op_type(), "Loop" | "If")
}

/// The nodes that replace `node`; `Err(Some(why))` for control flow that stays,
/// `Err(None)` for any other node.
fn rewrite(
    scope: &Scope,
    node: &proto::NodeProto,
    (steering, opset): (&Steering, i64),
) -> Result<Vec<proto::NodeProto>, Option<String>> {
    if !is_control_flow(node) {
        return Err(None);
    }
    let cond = node.input.first().map(String::as_str).unwrap_or_default();
    let key = if node.op_type() == "Loop" {
        node.name()
    } else {
        cond
    };
    if steering.differing.contains(key) {
        return Err(Some(
            "the input samples steer it differently (one rewritten graph serves them all)".into(),
        ));
    }
    if node.op_type() == "Loop" {
        // Its copies' scan values are stacked again with sequence ops (opset 11).
        if opset < 11 && unroll::scan_outputs(node) > 0 {
            return Err(Some(format!(
                "it has scan outputs, which are stacked again with opset 11 ops, and the model's opset is {opset}"
            )));
        }
        let measured = steering.trips.get(node.name()).copied();
        let trips = unroll::static_trips(scope, node, measured).map_err(Some)?;
        return unroll::unroll(node, trips).ok_or_else(|| {
            Some("it has scan outputs and ran no iteration on these inputs".into())
        });
    }
    let measured = steering.conditions.get(cond).copied();
    let branch = inline_if::taken_branch(scope, node, measured).map_err(Some)?;
    inline_if::inline(node, branch).ok_or_else(|| {
        Some(format!(
            "its `{branch}` does not match its outputs or holds initializers of its own"
        ))
    })
}

/// Removes the nodes this rewrite made whose outputs nothing reads (the copies of a body's
/// condition, iteration numbers no copy uses), until none is left.
fn prune(graph: &mut proto::GraphProto, created: &HashSet<String>) {
    loop {
        let mut used: Vec<&str> = graph.output.iter().map(|o| o.name()).collect();
        collect_used_names(graph, &mut used);
        let used: HashSet<String> = used.into_iter().map(str::to_string).collect();
        let dead = |n: &proto::NodeProto| {
            n.output.iter().any(|o| !o.is_empty())
                && n.output
                    .iter()
                    .all(|o| o.is_empty() || (created.contains(o) && !used.contains(o)))
        };
        let before = graph.node.len();
        graph.node.retain(|n| !dead(n));
        if graph.node.len() == before {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_edit::constant_node;
    use crate::onnx::test_graph::{node, vi};
    use proto::tensor_proto::DataType;

    fn with_graph(mut n: proto::NodeProto, attr: &str, g: proto::GraphProto) -> proto::NodeProto {
        n.attribute.push(proto::AttributeProto {
            name: Some(attr.into()),
            g: Some(g),
            ..Default::default()
        });
        n
    }

    /// What the legacy exporter writes for `for _ in range(x.size(0) + 1): x = x + relu(conv(x))`
    /// with a static batch of 1: trip count and condition are Constants.
    fn loop_model(trips_from: &str) -> proto::ModelProto {
        let body = proto::GraphProto {
            input: vec![vi("i"), vi("cond"), vi("x.1")],
            output: vec![vi("/Identity_output_0"), vi("/Add_output_0")],
            node: vec![
                node("/block/conv/Conv", "Conv", &["x.1", "w"], &["c"]),
                node("/block/act/Relu", "Relu", &["c"], &["r"]),
                node("/Add", "Add", &["x.1", "r"], &["/Add_output_0"]),
                node("/Identity", "Identity", &["true"], &["/Identity_output_0"]),
            ],
            ..Default::default()
        };
        let lp = node(
            "/Loop",
            "Loop",
            &[trips_from, "true", "x"],
            &["/Loop_output_0"],
        );
        proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: vec![vi("x")],
                output: vec![vi("y")],
                node: vec![
                    constant_node("/Constant", "true", DataType::Bool, 1),
                    constant_node("/Constant_1", "two", DataType::Int64, 2),
                    node("/Shape", "Shape", &["x"], &["dynamic"]),
                    with_graph(lp, "body", body),
                    node("/head/Conv", "Conv", &["/Loop_output_0", "w"], &["y"]),
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn names(m: &proto::ModelProto) -> Vec<&str> {
        m.graph
            .as_ref()
            .unwrap()
            .node
            .iter()
            .map(|n| n.name())
            .collect()
    }

    #[test]
    fn a_static_loop_is_unrolled_with_carried_values_wired() {
        let mut m = loop_model("two");
        let kept = make_observable(&mut m, &Steering::default());
        assert!(kept.is_empty(), "{kept:?}");
        assert_eq!(
            names(&m),
            [
                "/Constant",
                "/Constant_1",
                "/Shape",
                "/block/conv/Conv@iter0",
                "/block/act/Relu@iter0",
                "/Add@iter0",
                "/block/conv/Conv@iter1",
                "/block/act/Relu@iter1",
                "/Add@iter1",
                "/head/Conv",
            ],
            "the condition's copies and unused iteration numbers are pruned"
        );
        let g = m.graph.as_ref().unwrap();
        let by_name = |n: &str| g.node.iter().find(|x| x.name() == n).unwrap();
        assert_eq!(by_name("/block/conv/Conv@iter0").input, ["x", "w"]);
        assert_eq!(by_name("/Add@iter0").output, ["/Add_output_0@iter0"]);
        assert_eq!(
            by_name("/block/conv/Conv@iter1").input,
            ["/Add_output_0@iter0", "w"]
        );
        assert_eq!(by_name("/block/act/Relu@iter1").output, ["r@iter1"]);
        // The last copy's result takes the loop's output name: the head is unchanged.
        assert_eq!(by_name("/Add@iter1").output, ["/Loop_output_0"]);
        assert!(!g.node.iter().any(is_control_flow));
    }

    #[test]
    fn a_loop_whose_trip_count_is_computed_stays_with_its_reason() {
        let mut m = loop_model("dynamic");
        let before = m.clone();
        let kept = make_observable(&mut m, &Steering::default());
        assert_eq!(m, before);
        assert!(kept["/Loop"].contains("trip count"), "{kept:?}");
    }

    #[test]
    fn zero_trips_pass_the_initial_values_through() {
        let mut m = loop_model("zero");
        m.graph
            .as_mut()
            .unwrap()
            .node
            .insert(0, constant_node("/Z", "zero", DataType::Int64, 0));
        make_observable(&mut m, &Steering::default());
        let g = m.graph.as_ref().unwrap();
        let id = g.node.iter().find(|n| n.op_type() == "Identity").unwrap();
        assert_eq!(
            (id.input[0].as_str(), id.output[0].as_str()),
            ("x", "/Loop_output_0")
        );
        assert!(!g.node.iter().any(|n| n.name().contains("@iter")));
    }

    fn if_model(cond: proto::NodeProto) -> proto::ModelProto {
        let branch = |name: &str| proto::GraphProto {
            output: vec![vi(&format!("{name}_out"))],
            node: vec![node(
                &format!("/{name}/Conv"),
                "Conv",
                &["x", "w"],
                &[&format!("{name}_out")],
            )],
            ..Default::default()
        };
        let iff = with_graph(
            with_graph(
                node("/If", "If", &["c"], &["/If_output_0"]),
                "then_branch",
                branch("pos"),
            ),
            "else_branch",
            branch("neg"),
        );
        proto::ModelProto {
            graph: Some(proto::GraphProto {
                input: vec![vi("x")],
                output: vec![vi("/If_output_0")],
                node: vec![cond, iff],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_if_on_a_constant_is_inlined_and_one_on_data_stays() {
        let mut m = if_model(constant_node("/c", "c", DataType::Bool, 0));
        assert!(make_observable(&mut m, &Steering::default()).is_empty());
        assert_eq!(names(&m), ["/c", "/neg/Conv"]);
        assert_eq!(m.graph.as_ref().unwrap().node[1].output, ["/If_output_0"]);

        let mut m = if_model(node("/ReduceMean", "ReduceMean", &["x"], &["c"]));
        let kept = make_observable(&mut m, &Steering::default());
        assert!(kept["/If"].contains("computed from the data"), "{kept:?}");
        assert_eq!(names(&m), ["/ReduceMean", "/If"]);
    }

    #[test]
    fn a_kept_loop_gives_its_reason_to_the_values_inside() {
        let e = crate::onnx::expose_all(&loop_model("dynamic")).unwrap();
        let u = e.uncapturable.iter().find(|u| u.name == "c").unwrap();
        assert!(
            u.reason.contains("`/Loop`") && u.reason.contains("not unrolled: its trip count"),
            "{}",
            u.reason
        );
        let e = crate::onnx::expose_all(&loop_model("two")).unwrap();
        assert!(e.uncapturable.is_empty());
        assert!(e
            .values
            .iter()
            .any(|v| v.name == "c@iter1" && v.scope[1].path == "block.conv"));
    }

    /// Steering measured on the inputs: an If on data is inlined to the branch its measured
    /// condition takes, and a loop whose trip count is computed is unrolled for the
    /// iterations it ran.
    #[test]
    fn measured_conditions_and_trip_counts_rewrite_what_data_steers() {
        let mut m = if_model(node("/ReduceMean", "ReduceMean", &["x"], &["c"]));
        let steering = Steering {
            conditions: [("c".to_string(), 1)].into(),
            ..Default::default()
        };
        assert!(make_observable(&mut m, &steering).is_empty());
        assert_eq!(names(&m), ["/ReduceMean", "/pos/Conv"]);

        let mut m = loop_model("dynamic");
        let steering = Steering {
            trips: [("/Loop".to_string(), 3)].into(),
            ..Default::default()
        };
        assert!(make_observable(&mut m, &steering).is_empty());
        let copies = names(&m)
            .iter()
            .filter(|n| n.starts_with("/block/conv/Conv@iter"))
            .count();
        assert_eq!(copies, 3);
    }

    /// A scan output (a value stacked over the iterations) is each copy's value stacked again,
    /// under the loop's output name; with no iteration there is nothing to stack and the loop
    /// stays.
    #[test]
    fn scan_outputs_are_stacked_from_the_copies() {
        let mut m = loop_model("two");
        let g = m.graph.as_mut().unwrap();
        let lp = g.node.iter_mut().find(|n| n.op_type() == "Loop").unwrap();
        lp.output.push("/Loop_output_1".into());
        lp.attribute[0].g.as_mut().unwrap().output.push(vi("r"));
        g.output.push(vi("/Loop_output_1"));
        let mut old_opset = m.clone();
        let kept = make_observable(&mut old_opset, &Steering::default());
        assert!(kept["/Loop"].contains("opset 11"), "{kept:?}");
        m.opset_import.push(proto::OperatorSetIdProto {
            version: Some(17),
            ..Default::default()
        });
        let mut zero = m.clone();
        assert!(make_observable(&mut m, &Steering::default()).is_empty());
        let g = m.graph.as_ref().unwrap();
        let construct = g
            .node
            .iter()
            .find(|n| n.op_type() == "SequenceConstruct")
            .unwrap();
        assert_eq!(construct.input, ["r@iter0", "r@iter1"]);
        let stack = g
            .node
            .iter()
            .find(|n| n.op_type() == "ConcatFromSequence")
            .unwrap();
        assert_eq!(stack.output, ["/Loop_output_1"]);

        let steering = Steering {
            trips: [("/Loop".to_string(), 0)].into(),
            ..Default::default()
        };
        let kept = make_observable(&mut zero, &steering);
        assert!(kept["/Loop"].contains("scan outputs"), "{kept:?}");
    }
}
