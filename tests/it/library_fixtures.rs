//! The second fixture family, from the libraries people deploy (Hugging Face transformers,
//! timm, Ultralytics; onnxslim'd and scope-less dynamo variants; a scripted loop+if), judged
//! from the JSON report the way a CI job reads it: every clean export passes with at least
//! 95% of TorchScript layers covered, and every planted fault fails with its first divergence
//! at the module that carries it. The fixtures and their manifest come from
//! `scripts/make_library_fixtures.py` (scripts/test.sh regenerates them when missing).

use crate::common::{
    check_fixture, coverage_ratio, expected_fault_modules, library_manifest, selected, stderr_of,
    summary,
};
use serde_json::Value;

#[test]
fn clean_library_exports_pass_with_high_coverage() {
    let mut failures = Vec::new();
    let clean: Vec<Value> = library_manifest()
        .into_iter()
        .filter(|e| e["fault"].is_null())
        .collect();
    for entry in selected(clean, "clean library fixtures", 18) {
        let name = entry["name"].as_str().unwrap();
        let (code, report, output) = check_fixture(name, &[]);
        let ratio = coverage_ratio(&report);
        if code != 0 || report["verdict"] != "pass" || ratio < 0.95 {
            failures.push(format!(
                "{name}: exit {code}, {}; stderr {}",
                summary(&report),
                stderr_of(&output).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_planted_library_fault_fails_at_the_module_that_carries_it() {
    let mut failures = Vec::new();
    let faults: Vec<Value> = library_manifest()
        .into_iter()
        .filter(|e| !e["fault"].is_null())
        .collect();
    for entry in selected(faults, "planted library faults", 9) {
        let name = entry["name"].as_str().unwrap();
        let fault = &entry["fault"];
        let expected = expected_fault_modules(fault);
        let (code, report, output) = check_fixture(name, &[]);
        let first = &report["first_divergence"];
        let module = first["module"].as_str().unwrap_or("<none>");
        if code != 1 || report["verdict"] != "fail" || !expected.contains(&module) {
            failures.push(format!(
                "{name}: exit {code}, first divergence at {module} (want one of {expected:?}); {}; stderr {}",
                summary(&report),
                stderr_of(&output).trim()
            ));
            continue;
        }
        // The divergence names the ONNX op that was changed, or the node that completes the
        // decomposition or module call it belongs to (a changed Erf shows at GELU's last Mul,
        // a changed Gemm at the view that ends GPT-2's Conv1D).
        let planted_op = fault["expected_onnx_op"].as_str().unwrap_or_default();
        let planted_node = fault["onnx_node"].as_str().unwrap_or_default();
        let got_node = first["onnx_node"].as_str().unwrap_or_default();
        let got_op = first["onnx_op"].as_str().unwrap_or_default();
        let same_place = got_node == planted_node
            || fault["completing_onnx_node"].as_str() == Some(got_node)
            || got_op == planted_op
            || fault["expected_onnx_ops_any"]
                .as_array()
                .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(got_op)));
        let index = first["layer_index"].as_u64().unwrap_or(u64::MAX) as usize;
        let origin = &report["layers"][index]["origin"];
        if origin != "introduced" {
            failures.push(format!(
                "{name}: first divergence {module} has origin {origin}, not introduced"
            ));
        }
        if !same_place {
            failures.push(format!(
                "{name}: first divergence at ONNX {got_node} ({got_op}), planted {planted_node} ({planted_op})"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
