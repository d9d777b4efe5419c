//! Models run through graph tools after export (`scripts/make_optimized_fixtures.py`): BERT,
//! GPT-2 and ViT through ONNX Runtime's transformer optimiser (one also converted to float16),
//! which fuses across modules under scope-less node names (SkipLayerNormalization, Gelu,
//! FastGelu), moves Linear biases into them, and sorts the graph again; and YOLO, ViT and
//! MobileViT dynamo exports simplified by onnxslim, which leaves no scopes at all. Judged
//! from the JSON report as CI reads it: every clean model passes, the optimiser's
//! LayerNorms are compared with the
//! SkipLayerNormalization nodes that compute them (placed by the dataflow where the graph has
//! scopes, by order where it has none), the residual Adds with the sums those nodes output,
//! a GELU module with the fused GELU node, and every
//! planted fault is still named at the module
//! that carries it.

use crate::common::{check_fixture, expected_fault_modules, fixtures_dir, selected, summary};
use serde_json::Value;

fn manifest() -> Vec<Value> {
    let path = fixtures_dir().join("optimized/manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{} cannot be read ({e}): run .venv/bin/python scripts/make_optimized_fixtures.py",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("manifest is JSON")
}

#[test]
fn optimised_clean_models_pass_with_their_fused_nodes_compared() {
    let clean: Vec<Value> = manifest()
        .into_iter()
        .filter(|e| e["fault"].is_null())
        .collect();
    let mut failures = Vec::new();
    for entry in selected(clean, "clean optimised fixtures", 8) {
        let name = format!("optimized/{}", entry["name"].as_str().unwrap());
        let (code, report, output) = check_fixture(&name, &[]);
        let fused_layer_norms = report["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| {
                l["onnx_op"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("SkipLayerNormalization")
            })
            .filter(|l| l["torch_op"] == "aten::layer_norm")
            .count();
        // A GELU module's output with the fused GELU node that computes it (GPT-2's
        // hand-written tanh GELU ends in a Mul, its node is a FastGelu).
        let fused_gelus = report["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["onnx_op"].as_str().unwrap_or("").ends_with("Gelu"))
            .count();
        let gelus_in_graph = entry["fused"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(op, _)| op.ends_with("Gelu"))
            .count();
        // A residual Add with the sum its SkipLayerNormalization outputs.
        let residual_sums = report["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| {
                l["onnx_op"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("SkipLayerNormalization.sum")
            })
            .filter(|l| l["torch_op"] == "aten::add")
            .count();
        let transformer_optimiser = entry["tool"] != "onnxslim";
        let too_few = transformer_optimiser
            && (fused_layer_norms < 3
                || residual_sums < 3
                || (gelus_in_graph > 0 && fused_gelus == 0));
        if code != 0 || too_few {
            failures.push(format!(
                "{name}: exit {code}, {}, {fused_layer_norms} LayerNorm(s) compared with a SkipLayerNormalization, {residual_sums} residual Add(s) with its sum, {fused_gelus} GELU(s) with a fused GELU node; stderr: {}",
                summary(&report),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn planted_faults_survive_the_optimiser() {
    let faults: Vec<Value> = manifest()
        .into_iter()
        .filter(|e| !e["fault"].is_null())
        .collect();
    let mut failures = Vec::new();
    for entry in selected(faults, "optimised faults", 5) {
        let name = format!("optimized/{}", entry["name"].as_str().unwrap());
        let expected = expected_fault_modules(&entry["fault"]);
        let (code, report, _) = check_fixture(&name, &[]);
        let got = report["first_divergence"]["module"].as_str().unwrap_or("");
        if code != 1 || !expected.contains(&got) {
            failures.push(format!(
                "{name}: exit {code}, first divergence '{got}', want one of {expected:?}; {}",
                summary(&report)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
