//! torch.export archives (`.pt2`) as the reference (issue 51), on the archives
//! `scripts/make_pt2_fixtures.py` writes to tests/fixtures/pt2/ from zoo networks: each pairs
//! with its zoo fixture's ONNX model and inputs. A clean pair passes, a planted fault is found
//! at the module the manifest names (as with the TorchScript reference), and every value the
//! interpreter captures equals what PyTorch's own `ep.module()` computed for that node when
//! the fixtures were made (values.npz, written without align-check).

use crate::common::{binary, fixture};
use align_check::capture::store::Keep;
use align_check::capture::tensor::HostTensor;
use align_check::capture::ValueRole;
use align_check::inputs::npy::read_npz;
use align_check::onnx;
use align_check::torch::TorchModel;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

fn entries() -> Vec<Value> {
    let path = fixture("pt2").join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: run .venv/bin/python scripts/make_pt2_fixtures.py",
            path.display()
        )
    });
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(entries.len() >= 5, "too few .pt2 fixtures");
    entries
}

fn archive(name: &str) -> PathBuf {
    fixture("pt2").join(name).join("model.pt2")
}

/// Runs `align-check model.pt2 model.onnx --inputs inputs.npz --json` on a zoo fixture.
fn check(name: &str) -> (i32, Value, String) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(archive(name))
        .arg(fixture(name).join("model.onnx"))
        .arg("--inputs")
        .arg(fixture(name).join("inputs.npz"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), report, text)
}

#[test]
fn clean_pairs_pass_and_faults_are_found_where_the_trace_finds_them() {
    for entry in entries().iter().filter(|e| e["onnx"] == true) {
        let name = entry["name"].as_str().unwrap();
        let (code, report, text) = check(name);
        match entry["expected_module"].as_str() {
            None => {
                assert_eq!(code, 0, "{name}: {text}");
                assert_eq!(report["coverage"]["torch_ratio"], 1.0, "{name}: {text}");
            }
            Some(module) => {
                assert_eq!(code, 1, "{name}: {text}");
                assert_eq!(
                    report["first_divergence"]["module"].as_str(),
                    Some(module),
                    "{name}: {text}"
                );
            }
        }
    }
}

/// The fixture's inputs, in the ONNX signature's order (an archive without an ONNX pair:
/// its own inputs.npz, in0, in1, ...).
fn inputs_of(name: &str) -> Vec<HostTensor> {
    let own = fixture("pt2").join(name).join("inputs.npz");
    if own.exists() {
        let mut arrays = read_npz(&own).unwrap();
        arrays.sort_by(|a, b| a.0.cmp(&b.0));
        return arrays.into_iter().map(|(_, t)| t).collect();
    }
    let model = onnx::model::load(&fixture(name).join("model.onnx")).unwrap();
    let arrays = read_npz(&fixture(name).join("inputs.npz")).unwrap();
    onnx::signature::inputs(&model)
        .unwrap()
        .iter()
        .map(|s| arrays.iter().find(|(n, _)| n == &s.name).unwrap().1.clone())
        .collect()
}

#[test]
fn captured_values_equal_what_the_program_computes_in_python() {
    let rt = align_check::cli::config::RuntimeConfig {
        threads: 2,
        ort_lib: None,
        ort_custom_ops: None,
        torch_ops: vec![],
        max_memory: None,
    };
    align_check::app::runtimes::init(&rt, false).unwrap();
    for entry in entries() {
        let name = entry["name"].as_str().unwrap();
        let expected: HashMap<String, HostTensor> =
            read_npz(&fixture("pt2").join(name).join("values.npz"))
                .unwrap()
                .into_iter()
                .collect();
        let model = TorchModel::load(&archive(name)).unwrap();
        let capture = model.capture(&inputs_of(name), &Keep::Memory).unwrap();
        let mut compared = 0;
        for value in &capture.values {
            let key = match value.role {
                ValueRole::Output(k) => format!("output.{k}"),
                ValueRole::Intermediate => value.name.clone(),
                _ => continue,
            };
            let Some(want) = expected.get(&key) else {
                continue;
            };
            let got = value.in_memory().unwrap();
            assert_eq!(got.shape, want.shape, "{name}: {key}");
            let worst = got
                .data
                .to_f64_vec()
                .iter()
                .zip(want.data.to_f64_vec())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert_eq!(worst, 0.0, "{name}: {key} differs from ep.module()'s");
            compared += 1;
        }
        let intermediates = capture
            .values
            .iter()
            .filter(|v| v.role == ValueRole::Intermediate)
            .count();
        // Every node's tensors and every output were compared.
        assert_eq!(
            compared,
            intermediates + capture.outputs().len(),
            "{name}: some captured values have no Python counterpart"
        );
        // Python records a multi-output op's tuple and its getitems: at least as many.
        assert!(intermediates > 0, "{name}: nothing captured");
        assert!(
            intermediates as u64 <= entry["captured_values"].as_u64().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn inspect_lists_module_paths_and_source_lines_of_an_archive() {
    let output = binary()
        .args(["inspect"])
        .arg(archive("conv_bn_dynamo"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("torch.export archive (.pt2)"), "{text}");
    for module in ["conv1", "bn1", "conv2", "bn2"] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(module)),
            "{module}: {text}"
        );
    }
    assert!(text.contains("models.py:"), "{text}");
}

#[test]
fn a_higher_order_op_is_refused_in_one_line_naming_it() {
    let output = binary()
        .args(["inspect"])
        .arg(fixture("pt2").join("cond").join("model.pt2"))
        .output()
        .unwrap();
    let stderr = crate::common::stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("higher-order op `cond`"), "{stderr}");
}
