//! Scripted control flow exported as ONNX `Loop` and `If` (tests/fixtures/control_flow,
//! scripts/make_control_flow_fixtures.py): the Loop's trip count is a constant 2, so the
//! rewritten graph unrolls it and each iteration's values pair with the TorchScript side's
//! `name@iterK` values; the If's condition comes from the data, so it stays, and what its
//! branches compute is accounted for with that reason instead of counting against coverage.
//! A weight changed inside the loop body is found at the body's module, first iteration. The
//! same archive exported with a dynamic batch keeps its Loop (the trip count is computed from
//! the input's shape): what the body computes is accounted for by the Loop's result.

use crate::common::npz::constant_npz;
use crate::common::{check_dir, fixture};
use serde_json::Value;
use std::path::PathBuf;

fn pair(name: &str) -> PathBuf {
    fixture("control_flow").join(name)
}

fn expected(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(pair(name).join("expected.json")).unwrap())
        .unwrap()
}

fn layers_of<'a>(report: &'a Value, module: &str) -> Vec<&'a Value> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["module"] == module)
        .collect()
}

#[test]
fn the_clean_scripted_pair_is_compared_inside_the_loop_and_passes() {
    let (code, report) = check_dir(&pair("scripted_loop_if"), &[]);
    assert_eq!(code, 0, "{}", report["gate_failures"]);
    let coverage = &report["coverage"];
    let ratio = coverage["torch_ratio"].as_f64().unwrap();
    assert!(ratio >= 0.95, "coverage {ratio}: {}", coverage["unpaired"]);
    // Every iteration of the body is its own pair, each with the unrolled copy of its node.
    let trips = expected("scripted_loop_if")["loop_trips"].as_u64().unwrap() as usize;
    for module in ["block.conv", "block.act"] {
        let layers = layers_of(&report, module);
        assert_eq!(layers.len(), trips, "{module}: {layers:?}");
        for (k, l) in layers.iter().enumerate() {
            let node = l["onnx_node"].as_str().unwrap();
            assert!(
                node.ends_with(&format!("@iter{k}")),
                "{module} call {k}: {node}"
            );
            assert!(
                l["torch_value"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("@iter{k}")),
                "{l}"
            );
            assert_eq!(l["pass"], true, "{l}");
        }
    }
    // Nothing of the loop is left uncapturable; the If on data stays, and says why.
    let uncapturable = coverage["uncapturable"].as_array().unwrap();
    assert!(
        uncapturable
            .iter()
            .all(|u| !u["reason"].as_str().unwrap().contains("Loop")),
        "{uncapturable:?}"
    );
    // The If on data is inlined for these inputs (its condition measured by a first run):
    // the branch that ran is compared like any layer, and no value is left inside an If.
    let taken = expected("scripted_loop_if")["branch_taken"].clone();
    assert_eq!(coverage["steered_control_flow"]["if_conditions"], 1);
    let branch = layers_of(&report, taken.as_str().unwrap());
    assert!(!branch.is_empty(), "no layer of {taken}");
    for l in &branch {
        assert_eq!(l["pass"], true, "{l}");
    }
    assert!(
        uncapturable
            .iter()
            .all(|u| !u["reason"].as_str().unwrap().contains("is not inlined")),
        "{uncapturable:?}"
    );
    let unpaired = coverage["unpaired"].as_array().unwrap();
    assert!(
        unpaired
            .iter()
            .all(|u| !u["reason"].as_str().unwrap().contains("keeps its subgraph")),
        "{unpaired:?}"
    );
}

#[test]
fn a_weight_changed_inside_the_loop_body_is_found_there_in_the_first_iteration() {
    let want = expected("fault_loop_body");
    let (code, report) = check_dir(&pair("fault_loop_body"), &[]);
    assert_eq!(code, 1);
    let first = &report["first_divergence"];
    assert_eq!(first["module"], want["fault_module"], "{first}");
    let node = format!("{}@iter0", want["fault_node"].as_str().unwrap());
    let culprit = layers_of(&report, want["fault_module"].as_str().unwrap())[0];
    assert_eq!(culprit["onnx_node"], node.as_str(), "{culprit}");
    assert_eq!(culprit["pass"], false);
    assert_eq!(culprit["origin"], "introduced", "{culprit}");
    // The changed weight is read by every iteration: each copy introduces the error on its
    // own (fed PyTorch's values), so each is an origin, in iteration order, and none other.
    let origins: Vec<&str> = report["divergence_origins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert_eq!(o["module"], want["fault_module"], "{o}");
            o["onnx_node"].as_str().unwrap()
        })
        .collect();
    let trips = want["loop_trips"].as_u64().unwrap();
    let nodes: Vec<String> = (0..trips)
        .map(|k| format!("{}@iter{k}", want["fault_node"].as_str().unwrap()))
        .collect();
    assert_eq!(origins, nodes);
    // The stem before the loop is untouched.
    assert_eq!(layers_of(&report, "stem")[0]["pass"], true);
}

#[test]
fn a_loop_whose_trip_count_is_computed_is_unrolled_for_the_inputs() {
    let want = expected("dynamic_loop");
    let shape = want["shape"].as_str().unwrap();
    let (code, report) = check_dir(&pair("dynamic_loop"), &["--shape", shape]);
    assert_eq!(code, 0, "{}", report["gate_failures"]);
    let coverage = &report["coverage"];
    let ratio = coverage["torch_ratio"].as_f64().unwrap();
    assert!(ratio >= 0.95, "coverage {ratio}: {}", coverage["unpaired"]);
    // A first run measured the iterations: each one's body is its own pair, with the
    // unrolled copy of its node; no Loop is left.
    let trips = want["loop_trips"].as_u64().unwrap() as usize;
    let body = layers_of(&report, "block.conv");
    assert_eq!(body.len(), trips, "{body:?}");
    for (k, l) in body.iter().enumerate() {
        let node = l["onnx_node"].as_str().unwrap();
        assert!(node.ends_with(&format!("@iter{k}")), "call {k}: {node}");
        assert_eq!(l["pass"], true, "{l}");
    }
    assert!(layers_of(&report, "")
        .iter()
        .all(|l| l["onnx_op"] != "Loop"));
    assert_eq!(coverage["steered_control_flow"]["loop_trips"], 1);
    let uncapturable = coverage["uncapturable"].as_array().unwrap();
    assert!(
        uncapturable
            .iter()
            .all(|u| !u["reason"].as_str().unwrap().contains("Loop")),
        "{uncapturable:?}"
    );
}

/// Two samples that take different branches of the If on data (a constant input of -1 takes
/// `then`, of +1 `else`, by the fixture's weights): one rewritten graph cannot serve both, so
/// the If stays, says why, and the branch values TorchScript computed count as not compared.
/// Each sample alone gets its branch inlined.
#[test]
fn samples_that_take_different_branches_keep_the_if_and_count_it_as_not_compared() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [1, 3, 16, 16];
    constant_npz(&dir.path().join("a.npz"), "input", &shape, -1.0);
    constant_npz(&dir.path().join("b.npz"), "input", &shape, 1.0);
    let inputs = dir.path().to_str().unwrap();
    let (_, report) = check_dir(&pair("scripted_loop_if"), &["--inputs", inputs]);
    let coverage = &report["coverage"];
    assert_eq!(coverage["steered_control_flow"]["if_conditions"], 0);
    let uncapturable = coverage["uncapturable"].as_array().unwrap();
    assert!(
        uncapturable.iter().any(|u| u["reason"]
            .as_str()
            .unwrap()
            .contains("the input samples steer it differently")),
        "{uncapturable:?}"
    );
    let not_compared: Vec<&Value> = coverage["unpaired"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["side"] == "torch" && u["accounted"] == false)
        .collect();
    assert!(!not_compared.is_empty(), "{}", coverage["unpaired"]);
    assert!(coverage["torch_ratio"].as_f64().unwrap() < 1.0);

    for (file, branch) in [("a.npz", "pos"), ("b.npz", "neg")] {
        let one = dir.path().join(file);
        let (code, report) = check_dir(
            &pair("scripted_loop_if"),
            &["--inputs", one.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{}", report["gate_failures"]);
        assert_eq!(
            report["coverage"]["steered_control_flow"]["if_conditions"],
            1
        );
        assert!(!layers_of(&report, branch).is_empty(), "{branch}");
    }
}
