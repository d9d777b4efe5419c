//! Fused layer ops (tests/fixtures/fused, scripts/make_fused_fixtures.py): an
//! nn.TransformerEncoder traced under `torch.no_grad()` holds one
//! `aten::_transformer_encoder_layer_fwd` per layer, while its ONNX writes the layer out under
//! the sub-modules' scopes. The shim's shadow decomposition (src/torch/shadow.cpp) gives the
//! TorchScript side values inside the fused op, under the sub-module owning the parameters
//! each reads, so a weight changed inside self-attention is reported at `self_attn`, not at
//! the enclosing layer; the clean pair passes with every value compared.

use crate::common::{check_dir, fixture};
use serde_json::Value;

fn expected() -> Value {
    let path = fixture("fused")
        .join("fault_self_attn")
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_clean_fused_encoder_is_compared_inside_each_layer_and_passes() {
    let (code, report) = check_dir(&fixture("fused").join("clean_encoder"), &[]);
    assert_eq!(code, 0, "{}", report["gate_failures"]);
    let coverage = &report["coverage"];
    assert_eq!(
        coverage["torch_layers_paired"], coverage["torch_layers_total"],
        "{}",
        coverage["unpaired"]
    );
    let layers = report["layers"].as_array().unwrap();
    assert!(
        layers.iter().all(|l| l["unconfirmed"] != true),
        "{layers:?}"
    );
    // Each sub-module of both layers has a compared value of its own.
    for layer in ["encoder.layers.0", "encoder.layers.1"] {
        for sub in ["self_attn", "norm1", "linear1", "linear2", "norm2"] {
            let module = format!("{layer}.{sub}");
            assert!(
                layers.iter().any(|l| l["module"] == module.as_str()),
                "no compared value in {module}"
            );
        }
    }
}

#[test]
fn a_weight_changed_inside_fused_self_attention_is_reported_at_self_attn() {
    let want = expected();
    let (code, report) = check_dir(&fixture("fused").join("fault_self_attn"), &[]);
    assert_eq!(code, 1, "{}", report["gate_failures"]);
    let first = &report["first_divergence"];
    assert_eq!(first["module"], want["fault_module"], "{first}");
    let culprit = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["module"] == want["fault_module"])
        .unwrap();
    assert_eq!(culprit["pass"], false, "{culprit}");
    assert_eq!(culprit["origin"], "introduced", "{culprit}");
}
