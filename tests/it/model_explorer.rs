//! The Model Explorer report (`--model-explorer PATH`, `model_explorer` in `[reports]`) on
//! real fixtures: the file is the node data Google's Model Explorer loads over a graph (one
//! `GraphNodeData`: `results` by node id, each with a numeric `value`, and `thresholds`),
//! its node ids are ONNX node names of the model, it names every paired ONNX node of the
//! JSON report with that layer's error, and a planted fault's node is painted as failing.

use crate::common::{binary, check_fixture, fixture};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Runs a fixture with `--json` and `--model-explorer`; returns the exit code, the JSON
/// report and the node data.
fn run(name: &str) -> (i32, Value, Value) {
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("nodes.json");
    let (code, report, output) = check_fixture(name, &["--model-explorer", path.to_str().unwrap()]);
    assert!(
        report.is_object(),
        "no JSON report: {}",
        crate::common::stderr_of(&output)
    );
    (code, report, read(&path))
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
    serde_json::from_str(&text).expect("the node data is JSON")
}

fn is_colour(v: &Value) -> bool {
    v.as_str().is_some_and(|c| {
        c.len() == 7 && c.starts_with('#') && c[1..].chars().all(|h| h.is_ascii_hexdigit())
    })
}

/// Checks what Model Explorer requires of a `GraphNodeData` file (its `node_data_builder.py`
/// and the UI's loader) and returns the results.
fn graph_node_data(data: &Value) -> &Map<String, Value> {
    let top = data.as_object().expect("the node data is an object");
    // The loader applies a file to the graph it shows when `results` is at the top and not
    // itself keyed by graph (`results.results`).
    let results = top["results"].as_object().expect("`results` is an object");
    assert!(!results.contains_key("results"));
    assert!(top["name"].as_str().is_some_and(|n| !n.is_empty()));
    let thresholds = top["thresholds"]
        .as_array()
        .expect("`thresholds` is a list");
    assert!(!thresholds.is_empty());
    let bounds: Vec<f64> = thresholds
        .iter()
        .map(|t| {
            assert!(is_colour(&t["bgColor"]), "threshold colour {t}");
            t["value"]
                .as_f64()
                .expect("a threshold's value is a number")
        })
        .collect();
    assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
    for (node, r) in results {
        let r = r
            .as_object()
            .unwrap_or_else(|| panic!("{node}: result is an object"));
        let value = &r["value"];
        assert!(
            value.is_number() || value.is_string(),
            "{node}: value {value}"
        );
        if let Some(c) = r.get("bgColor") {
            assert!(is_colour(c), "{node}: bgColor {c}");
        }
        assert!(r["pass"].is_boolean(), "{node}: pass");
        assert!(r["max_abs"].is_number() || r["max_abs"].is_null());
        assert!(["ok", "origin", "inherited", "accumulated", "unconfirmed"]
            .contains(&r["status"].as_str().unwrap()));
        // Every value a threshold colours must fall under the last bound.
        if let Some(v) = value.as_f64() {
            assert!(v <= *bounds.last().unwrap(), "{node}: {v}");
        }
    }
    results
}

/// The JSON report's layers by ONNX node name.
fn layers_by_node(report: &Value) -> BTreeMap<&str, Vec<&Value>> {
    let mut by_node: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for l in report["layers"].as_array().unwrap() {
        let node = l["onnx_node"].as_str().unwrap();
        if !node.is_empty() {
            by_node.entry(node).or_default().push(l);
        }
    }
    by_node
}

#[test]
fn names_every_paired_onnx_node_with_its_error() {
    let (code, report, data) = run("srcnn_legacy");
    assert_eq!(code, 0);
    let results = graph_node_data(&data);
    let by_node = layers_by_node(&report);
    assert!(!by_node.is_empty());
    let keys: HashSet<&str> = results.keys().map(String::as_str).collect();
    let nodes: HashSet<&str> = by_node.keys().copied().collect();
    assert_eq!(
        keys, nodes,
        "the results name exactly the paired ONNX nodes"
    );

    // The ids are those Model Explorer's ONNX adapter gives the graph's nodes: their names.
    let model = align_check::onnx::load(&fixture("srcnn_legacy").join("model.onnx")).unwrap();
    let names: HashSet<&str> = model.graph().node.iter().map(|n| n.name()).collect();
    for node in &keys {
        assert!(
            names.contains(node),
            "{node} is not a node of the ONNX graph"
        );
    }

    for (node, layers) in &by_node {
        let r = &results[*node];
        // A node paired with several layers shows one of them (the worst); an error JSON
        // cannot hold (null in the report) is named ("nan").
        let candidates: Vec<&Value> = layers.iter().map(|l| &l["rel_to_range"]).collect();
        if r["value"].is_string() {
            assert!(candidates.contains(&&Value::Null), "{node}: {}", r["value"]);
        } else {
            assert!(
                candidates.contains(&&r["value"]),
                "{node}: {} not in {candidates:?}",
                r["value"]
            );
        }
        if let [layer] = layers.as_slice() {
            assert_eq!(r["value"], layer["rel_to_range"], "{node}");
            assert_eq!(r["max_abs"], layer["max_abs"], "{node}");
            assert_eq!(r["pass"], layer["pass"], "{node}");
            assert_eq!(r["layer"], layer["index"], "{node}");
        }
        assert_eq!(r["status"], "ok", "a clean export has no failing node");
        assert!(
            r.get("bgColor").is_none(),
            "{node}: a passing node is coloured by thresholds"
        );
    }
}

#[test]
fn a_planted_fault_paints_its_node_as_failing() {
    let (code, report, data) = run("fault_conv_weight");
    assert_eq!(code, 1);
    let results = graph_node_data(&data);
    let origin = report["first_divergence"]["onnx_node"].as_str().unwrap();
    let r = &results[origin];
    assert_eq!(r["status"], "origin");
    assert_eq!(r["pass"], false);
    assert_eq!(r["value"], report["first_divergence"]["rel_to_range"]);
    let threshold_colours: Vec<&Value> = data["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["bgColor"])
        .collect();
    let origin_colour = &r["bgColor"];
    assert!(is_colour(origin_colour));
    assert!(
        !threshold_colours.contains(&origin_colour),
        "the origin's colour is not one of the error scale's"
    );
    // Every failing node carries its own colour; every other node leaves it to thresholds.
    for (node, layers) in layers_by_node(&report) {
        let failing = layers
            .iter()
            .any(|l| l["pass"] == false && l["unconfirmed"] == false);
        assert_eq!(results[node].get("bgColor").is_some(), failing, "{node}");
        assert_eq!(results[node]["pass"] == false, failing, "{node}");
    }
}

#[test]
fn configuration_file_key_writes_the_node_data() {
    let dir = fixture("srcnn_legacy");
    let out = tempfile::tempdir().unwrap();
    let config = out.path().join("align-check.toml");
    std::fs::write(
        &config,
        format!(
            "torch_model = {:?}\nonnx_model = {:?}\n[inputs]\narchive = {:?}\n[reports]\nmodel_explorer = \"nodes.json\"\n",
            dir.join("model.pt"),
            dir.join("model.onnx"),
            dir.join("inputs.npz"),
        ),
    )
    .unwrap();
    let output = binary()
        .arg("--config")
        .arg(&config)
        .arg("--quiet")
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        crate::common::stderr_of(&output)
    );
    // Relative to the configuration file, like every path in it.
    let data = read(&out.path().join("nodes.json"));
    assert!(!graph_node_data(&data).is_empty());
}
