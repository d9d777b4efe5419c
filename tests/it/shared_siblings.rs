//! One module held under three attributes of a block (timm's CoaT: `self.mlp2 = self.mlp3 =
//! self.mlp4 = Mlp(...)`), on tests/fixtures/pt2/shared_siblings/ (written by
//! scripts/make_pt2_fixtures.py): torch.export names the calls `mlp2`, `mlp3`, `mlp4`, the
//! trace and the legacy exporter `mlp2` each time (`mlp2/fc1_1`). The `.pt2` must pair as
//! the trace does, and a fault planted in the call through the last attribute (its module
//! read from the mutated node's scope) must be found in that module with either reference.

use crate::common::{binary, fixture};
use serde_json::Value;
use std::path::PathBuf;

fn folder() -> PathBuf {
    fixture("pt2").join("shared_siblings")
}

fn manifest_entry() -> Value {
    let text = std::fs::read_to_string(fixture("pt2").join("manifest.json")).unwrap();
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    entries
        .into_iter()
        .find(|e| e["name"] == "shared_siblings")
        .expect("run .venv/bin/python scripts/make_pt2_fixtures.py")
}

/// `align-check REFERENCE ONNX --inputs inputs.npz --json`: exit code and report.
fn check(reference: &str, onnx: &str) -> (i32, Value, String) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(folder().join(reference))
        .arg(folder().join(onnx))
        .arg("--inputs")
        .arg(folder().join("inputs.npz"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), report, text)
}

fn modules(report: &Value) -> Vec<String> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["module"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn calls_through_later_attributes_pair_as_the_trace_pairs_them() {
    let (ts_code, ts, ts_text) = check("model.pt", "model.onnx");
    let (code, pt2, text) = check("model.pt2", "model.onnx");
    assert_eq!(ts_code, 0, "{ts_text}");
    assert_eq!(code, 0, "{text}");
    assert_eq!(pt2["coverage"]["torch_ratio"], 1.0, "{text}");
    assert_eq!(
        pt2["coverage"]["torch_layers_paired"],
        ts["coverage"]["torch_layers_paired"]
    );
    // Named as the trace names them: the same module for every layer, in order.
    assert_eq!(modules(&pt2), modules(&ts), "{text}");
    assert!(modules(&pt2)
        .iter()
        .all(|m| !m.contains("mlp3") && !m.contains("mlp4")));
    // Each of the three calls was compared in each block.
    let fc1_calls = modules(&pt2)
        .iter()
        .filter(|m| m.ends_with("mlp2.fc1"))
        .count();
    assert_eq!(fc1_calls, 6, "{text}");
}

#[test]
fn a_fault_in_the_last_attributes_call_is_found_in_its_module() {
    let expected = manifest_entry()["fault_module"]
        .as_str()
        .unwrap()
        .to_string();
    for reference in ["model.pt", "model.pt2"] {
        let (code, report, text) = check(reference, "fault.onnx");
        assert_eq!(code, 1, "{reference}: {text}");
        assert_eq!(
            report["first_divergence"]["module"].as_str(),
            Some(expected.as_str()),
            "{reference}: {text}"
        );
    }
}
