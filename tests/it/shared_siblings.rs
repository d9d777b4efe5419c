//! One module held under three attributes of a block (timm's CoaT: `self.mlp2 = self.mlp3 =
//! self.mlp4 = Mlp(...)`), on tests/fixtures/pt2/shared_siblings/ (written by
//! scripts/make_pt2_fixtures.py): torch.export and the dynamo exporter name the calls `mlp2`,
//! `mlp3`, `mlp4`, the trace and the legacy exporter `mlp2` each time (`mlp2/fc1_1`). Every
//! reference against every export must pair every layer, and a fault planted in the call
//! through the last attribute (its module read from the mutated node's scope) must be found
//! in that module.

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

const REFERENCES: [&str; 2] = ["model.pt", "model.pt2"];

#[test]
fn calls_through_later_attributes_pair_as_the_trace_pairs_them() {
    let (_, legacy_trace, _) = check("model.pt", "model.onnx");
    for onnx in ["model.onnx", "dynamo.onnx"] {
        for reference in REFERENCES {
            let (code, report, text) = check(reference, onnx);
            assert_eq!(code, 0, "{reference} {onnx}: {text}");
            let coverage = &report["coverage"];
            assert_eq!(coverage["torch_ratio"], 1.0, "{reference} {onnx}: {text}");
            assert_eq!(coverage["onnx_ratio"], 1.0, "{reference} {onnx}: {text}");
            // Named as the trace names them against the legacy export: the same module for
            // every layer, in order.
            if onnx == "model.onnx" {
                assert_eq!(
                    modules(&report),
                    modules(&legacy_trace),
                    "{reference}: {text}"
                );
            }
            let names = modules(&report);
            assert!(names
                .iter()
                .all(|m| !m.contains("mlp3") && !m.contains("mlp4")));
            // Each of the three calls was compared in each block.
            let fc1_calls = names.iter().filter(|m| m.ends_with("mlp2.fc1")).count();
            assert_eq!(fc1_calls, 6, "{reference} {onnx}: {text}");
        }
    }
}

#[test]
fn a_fault_in_the_last_attributes_call_is_found_in_its_module() {
    let faults = manifest_entry()["faults"].as_array().unwrap().clone();
    assert_eq!(faults.len(), 2, "a legacy and a dynamo fault");
    for fault in &faults {
        let onnx = fault["onnx"].as_str().unwrap();
        let expected = fault["module"].as_str().unwrap();
        for reference in REFERENCES {
            let (code, report, text) = check(reference, onnx);
            assert_eq!(code, 1, "{reference} {onnx}: {text}");
            assert_eq!(
                report["first_divergence"]["module"].as_str(),
                Some(expected),
                "{reference} {onnx}: {text}"
            );
        }
    }
}
