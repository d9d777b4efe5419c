//! The JSON report is a public contract. This reader is written from the README's key list,
//! not from the tool's own types, so renaming or dropping a documented key breaks this test
//! even when the tool still agrees with itself.

use crate::common::check_fixture;
use serde::{Deserialize, Deserializer};

/// A key that must be there, `null` or not (serde would take a missing key for `None`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

#[derive(Deserialize)]
struct Report {
    schema_version: u32,
    verdict: String,
    first_divergence: Option<Divergence>,
    layers: Vec<Layer>,
    outputs: Vec<Output>,
    coverage: Coverage,
    inputs: Vec<Input>,
    timing: serde_json::Map<String, serde_json::Value>,
    memory: Memory,
    #[serde(deserialize_with = "present")]
    isolation: Option<Isolation>,
    #[serde(deserialize_with = "present")]
    accumulated_drift: Option<Drift>,
    #[serde(deserialize_with = "present")]
    repro: Option<Repro>,
    #[serde(deserialize_with = "present")]
    accumulated: Option<Accumulated>,
    small_values: Vec<SmallValues>,
    discrete_flips: Vec<Flip>,
}

#[derive(Deserialize)]
struct Isolation {
    reason: String,
    fed_values: usize,
    isolated_layers: usize,
    runs: usize,
    #[serde(deserialize_with = "present")]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Isolated {
    max_abs: Option<f64>,
    rel_to_range: Option<f64>,
    pass: bool,
}

#[derive(Deserialize)]
#[allow(dead_code)] // read for its shape: the keys must be there
struct Drift {
    contributors: Vec<Contributor>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // read for its shape: the keys must be there
struct Contributor {
    layer_index: usize,
    module: String,
    isolated_rel_to_range: Option<f64>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // read for its shape: the keys must be there
struct Repro {
    dir: String,
    layer_index: usize,
    module: String,
    onnx_node: String,
    nodes: usize,
    bytes: u64,
    isolated: Isolated,
}

#[derive(Deserialize)]
struct Memory {
    peak_rss_bytes: Option<u64>,
    budget_bytes: Option<u64>,
    spilled_bytes: u64,
}

#[derive(Deserialize)]
struct Divergence {
    module: String,
    module_type: String,
    onnx_node: String,
    onnx_op: String,
    source: Option<String>,
    layer_index: usize,
}

#[derive(Deserialize)]
struct Stats {
    max_abs: Option<f64>,
    mean_abs: Option<f64>,
    rmse: Option<f64>,
    max_rel: Option<f64>,
    rel_to_range: Option<f64>,
    cosine: Option<f64>,
    snr_db: Option<f64>,
    mismatch_ratio: f64,
    atol: f64,
    rtol: f64,
    #[serde(deserialize_with = "present")]
    required_atol: Option<f64>,
    #[serde(deserialize_with = "present")]
    required_rtol: Option<f64>,
    pass: bool,
}

#[derive(Deserialize)]
#[allow(dead_code)] // read for its shape: the keys must be there
struct Accumulated {
    layer_index: usize,
    module: String,
    onnx_node: String,
    rel_to_range: Option<f64>,
    max_abs: Option<f64>,
    layers: usize,
}

#[derive(Deserialize)]
#[allow(dead_code)] // read for its shape: the keys must be there
struct SmallValues {
    layer_index: usize,
    module: String,
    onnx_node: String,
    rel_to_range: Option<f64>,
    max_value: f64,
    atol: f64,
}

#[derive(Deserialize)]
#[allow(dead_code)] // read for its shape: the keys must be there
struct Flip {
    layer_index: usize,
    module: String,
    onnx_node: String,
    onnx_op: String,
    differing: usize,
    total: usize,
    input_max_abs: Option<f64>,
    input_rel_to_range: Option<f64>,
}

#[derive(Deserialize)]
struct Layer {
    index: usize,
    module: String,
    module_type: String,
    torch_op: String,
    onnx_node: String,
    onnx_op: String,
    shape: Vec<usize>,
    dtype: String,
    paired_by: String,
    #[serde(deserialize_with = "present")]
    isolated: Option<Isolated>,
    #[serde(deserialize_with = "present")]
    origin: Option<String>,
    #[serde(flatten)]
    stats: Stats,
}

#[derive(Deserialize)]
struct Output {
    name: String,
    #[serde(flatten)]
    stats: Stats,
}

#[derive(Deserialize)]
struct Coverage {
    torch_layers_total: usize,
    torch_layers_paired: usize,
    onnx_nodes_total: usize,
    onnx_nodes_paired: usize,
    unpaired: Vec<Unpaired>,
    steered_control_flow: Steered,
}

#[derive(Deserialize)]
struct Steered {
    if_conditions: usize,
    loop_trips: usize,
}

#[derive(Deserialize)]
struct Unpaired {
    side: String,
    reason: String,
}

#[derive(Deserialize)]
struct Input {
    name: String,
    shape: Vec<usize>,
    dtype: String,
    source: String,
}

fn read(name: &str) -> (i32, Report) {
    let (code, json, _) = check_fixture(name, &[]);
    let report: Report =
        serde_json::from_value(json).expect("report follows the documented contract");
    (code, report)
}

#[test]
fn failing_report_follows_the_contract() {
    let (code, r) = read("fault_conv_weight");
    assert_eq!(code, 1);
    assert_eq!(r.schema_version, 2);
    assert_eq!(r.verdict, "fail");
    let d = r.first_divergence.expect("a fault has a first divergence");
    let layer = &r.layers[d.layer_index];
    assert_eq!(layer.index, d.layer_index);
    assert_eq!(layer.module, d.module);
    assert_eq!(layer.module_type, d.module_type);
    assert_eq!(layer.onnx_node, d.onnx_node);
    assert_eq!(layer.onnx_op, d.onnx_op);
    assert!(!layer.stats.pass);
    assert!(layer.stats.mismatch_ratio > 0.0);
    assert!(d.source.is_some_and(|s| s.contains(':')));
    assert_eq!(layer.paired_by, "fusion");
    // Layers before the divergence pass.
    assert!(r.layers[..d.layer_index].iter().all(|l| l.stats.pass));
    for (i, l) in r.layers.iter().enumerate() {
        assert_eq!(l.index, i);
        assert!(!l.torch_op.is_empty() && !l.dtype.is_empty() && !l.shape.is_empty());
        let rel = l.stats.rel_to_range.unwrap();
        assert!((0.0..=f64::MAX).contains(&rel));
        assert!(l.stats.max_abs.unwrap() >= l.stats.mean_abs.unwrap());
        assert!(l.stats.rmse.unwrap() >= l.stats.mean_abs.unwrap() - 1e-12);
        let _ = (l.stats.max_rel, l.stats.cosine, l.stats.snr_db);
        assert!(
            l.stats.atol > 0.0,
            "every layer of this float model has an atol"
        );
        // The smallest atol that passes it (rtol 0) is its error over max(1, range).
        let need = l.stats.required_atol.unwrap();
        assert!(need <= l.stats.max_abs.unwrap() + 1e-15);
        if l.stats.pass {
            // Passing at its own atol, it needs no more rtol than it has.
            assert!(l.stats.required_rtol.unwrap() <= l.stats.rtol * (1.0 + 1e-9));
        }
    }
    // Below the fault, layers that pass in isolation only carry its error.
    let carried = r
        .layers
        .iter()
        .filter(|l| l.origin.as_deref() == Some("accumulated"))
        .count();
    assert_eq!(r.accumulated.map_or(0, |a| a.layers), carried);
    assert!(r.small_values.is_empty() && r.discrete_flips.is_empty());
    assert_eq!(r.outputs.len(), 1);
    assert!(!r.outputs[0].name.is_empty());
    assert!(!r.outputs[0].stats.pass, "the fault reaches the logits");
    assert!(r.outputs[0].stats.rel_to_range.unwrap() > 1e-3);
    assert!(r.coverage.torch_layers_paired <= r.coverage.torch_layers_total);
    assert!(r.coverage.onnx_nodes_paired <= r.coverage.onnx_nodes_total);
    // A model without control flow has none for its inputs to steer.
    let steered = &r.coverage.steered_control_flow;
    assert_eq!((steered.if_conditions, steered.loop_trips), (0, 0));
    assert!(r
        .coverage
        .unpaired
        .iter()
        .all(|u| !u.reason.is_empty() && !u.side.is_empty()));
    assert_eq!(r.inputs.len(), 1);
    assert_eq!(r.inputs[0].dtype, "float32");
    assert_eq!(r.inputs[0].shape, vec![1, 3, 32, 32]);
    assert!(r.inputs[0].source.starts_with("npz:"));
    assert!(!r.inputs[0].name.is_empty());
    for key in [
        "load_s",
        "torch_run_s",
        "onnx_run_s",
        "pairing_s",
        "statistics_s",
        "reports_s",
        "total_s",
    ] {
        assert!(r.timing[key].as_f64().is_some(), "timing.{key}");
    }
    assert!(r.timing["onnx_runs"].as_u64() >= Some(1));
    // A failing run isolates: the divergence fails on its own, and nothing was left out.
    let iso = r.isolation.expect("a failing run isolates");
    assert!(
        iso.reason.contains("exceed their tolerance"),
        "{}",
        iso.reason
    );
    assert_eq!(iso.error, None);
    // The segment run, and one more for the failing layer's rounding floor.
    assert_eq!(iso.runs, 2);
    assert!(iso.fed_values > 0 && iso.isolated_layers == r.layers.len());
    assert_eq!(layer.origin.as_deref(), Some("introduced"));
    let isolated = layer.isolated.as_ref().unwrap();
    assert!(!isolated.pass && isolated.max_abs.unwrap() > 0.0);
    assert!(isolated.rel_to_range.unwrap() <= layer.stats.rel_to_range.unwrap() * 1.5);
    assert!(r.accumulated_drift.is_none() && r.repro.is_none());
    assert!(r.timing["isolation_s"].as_f64().unwrap() > 0.0);
    // Without --max-memory only the TorchScript side is spilled (every value of it at least
    // once), and the OS's peak reading is there.
    assert!(r.memory.peak_rss_bytes.unwrap() > 10 << 20);
    assert_eq!(r.memory.budget_bytes, None);
    assert!(r.memory.spilled_bytes > 0);
}

#[test]
fn passing_report_has_null_first_divergence_and_perfect_identity_stats() {
    let (code, r) = read("vk_int_bool_legacy");
    assert_eq!(code, 0);
    assert_eq!(r.verdict, "pass");
    assert!(r.first_divergence.is_none());
    // A clean pass does not isolate.
    assert!(r.isolation.is_none() && r.accumulated_drift.is_none());
    assert!(r
        .layers
        .iter()
        .all(|l| l.isolated.is_none() && l.origin.is_none()));
    // An argmax and a comparison are exact on both sides on any CPU (float layers differ in
    // the last bits between machines' kernels): identical tensors give zero error and
    // infinite SNR, which JSON carries as null.
    let exact = r
        .layers
        .iter()
        .find(|l| l.stats.max_abs == Some(0.0))
        .expect("an exact layer");
    assert_eq!(exact.stats.cosine, Some(1.0));
    assert_eq!(exact.stats.snr_db, None);
    assert_eq!(exact.stats.mismatch_ratio, 0.0);
}
