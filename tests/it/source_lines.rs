//! Where in the user's code each layer comes from: `source` is the innermost frame of the
//! op's recorded Python stack outside PyTorch (the model's line that called the module or
//! op, not `torch/nn/functional.py`), `source_stack` keeps the whole stack outermost first,
//! and paths under the working directory are written relative to it, so reports made in a
//! checkout do not carry the machine's paths.

use crate::common::{binary, fixture};

#[test]
fn traced_layers_point_at_the_models_own_line_with_the_whole_stack() {
    let dir = fixture("resnet_tiny_legacy");
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    // Run from the repository root: the fixture's model code is scripts/fixtures_lib/.
    let status = binary()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--json")
        .arg(&json)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let layers = report["layers"].as_array().unwrap();
    let bn1 = layers.iter().find(|l| l["module"] == "bn1").unwrap();
    // bn1 is called at `x = self.relu(self.bn1(self.conv1(x)))` in ResNetTiny.forward.
    let source = bn1["source"].as_str().unwrap();
    assert!(
        source.starts_with("scripts/fixtures_lib/models.py:"),
        "{source}"
    );
    let stack: Vec<&str> = bn1["source_stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(stack.contains(&source), "{stack:?}");
    // Outermost first: the export script, then the model, then PyTorch's BatchNorm.
    assert!(stack[0].starts_with("scripts/"), "{stack:?}");
    assert!(
        stack.last().unwrap().contains("torch/nn/functional.py"),
        "{stack:?}"
    );
    for layer in layers {
        let source = layer["source"].as_str().unwrap_or_default();
        assert!(!source.contains("/torch/"), "{}: {source}", layer["module"]);
        assert!(!source.starts_with('/'), "{}: {source}", layer["module"]);
    }
}
