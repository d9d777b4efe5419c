//! The dynamo exporter's `pkg.torch.onnx.fx_node` marks, read against a `.pt2`'s own nodes
//! (pairing pass `fx_nodes`), on the zoo's attention block exported both ways from one
//! network: the `.pt2` names its nodes, the ONNX file marks each node with the one it came
//! from, and where the two name one node (name, target and reads) the check pairs the `.pt2`
//! value with a value of that node.

use crate::common::{binary, fixture};
use align_check::capture::store::Keep;
use align_check::inputs::npy::read_npz;
use align_check::onnx;
use align_check::torch::TorchModel;
use serde_json::Value;
use std::collections::HashSet;

#[test]
fn values_the_exporter_marks_as_the_programs_own_nodes_pair_by_the_mark() {
    let name = "attention_dynamo";
    let rt = align_check::cli::config::RuntimeConfig {
        threads: 1,
        ort_lib: None,
        ort_custom_ops: None,
        torch_ops: vec![],
        max_memory: None,
    };
    align_check::app::runtimes::init(&rt, false).unwrap();
    let onnx_file = fixture(name).join("model.onnx");
    let inputs_file = fixture(name).join("inputs.npz");
    let model = onnx::model::load(&onnx_file).unwrap();
    let arrays = read_npz(&inputs_file).unwrap();
    let named: Vec<_> = onnx::signature::inputs(&model)
        .unwrap()
        .iter()
        .map(|s| arrays.iter().find(|(n, _)| n == &s.name).unwrap().clone())
        .collect();
    let onnx_capture = onnx::capture(&model, &named, 1, None).unwrap();
    let pt2 = fixture("pt2").join(name).join("model.pt2");
    let tensors: Vec<_> = named.iter().map(|(_, t)| t.clone()).collect();
    let torch = TorchModel::load(&pt2)
        .unwrap()
        .capture(&tensors, &Keep::Memory)
        .unwrap();

    // Per .pt2 value the ONNX file marks as its node's: the ONNX values carrying the mark.
    let marked: Vec<(String, HashSet<String>)> = torch
        .fx_nodes
        .iter()
        .filter_map(|(&t, node)| {
            let carrying: HashSet<String> = (onnx_capture.fx_nodes.iter())
                .filter(|(_, n)| *n == node)
                .map(|(&o, _)| onnx_capture.values[o].name.clone())
                .collect();
            (!carrying.is_empty()).then(|| (torch.values[t].name.clone(), carrying))
        })
        .collect();
    // The block's projections, matmuls, softmax and GELU keep their names through the
    // exporter's decompositions; its layer norms do not.
    assert!(
        marked.len() >= 8,
        "only {} of {} .pt2 values are marked in the ONNX file: {marked:?}",
        marked.len(),
        torch.fx_nodes.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = binary()
        .arg(&pt2)
        .arg(&onnx_file)
        .arg("--inputs")
        .arg(&inputs_file)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let layers = report["layers"].as_array().unwrap();
    for (value, carrying) in &marked {
        let layer = layers
            .iter()
            .find(|l| l["torch_value"] == value.as_str())
            .unwrap_or_else(|| panic!("{value} is marked on both sides but not compared"));
        let onnx_value = layer["onnx_value"].as_str().unwrap();
        assert!(
            carrying.contains(onnx_value),
            "{value} is compared with {onnx_value}, not with its node's {carrying:?}"
        );
    }
}
