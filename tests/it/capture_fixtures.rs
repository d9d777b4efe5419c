//! Capture on real exported fixtures, both runtimes: instrumenting a model must not change
//! what it computes, in-place ops must not rewrite captured values, and `inspect` must show
//! the module paths each fixture's manifest promises.

use crate::common::{binary, fixture, manifest, selected};
use align_check::capture::store::Keep;
use align_check::capture::tensor::HostTensor;
use align_check::capture::{Capture, ValueRole};
use align_check::inputs::npy::read_npz;
use align_check::onnx;
use align_check::torch::TorchModel;

/// Fixtures of tests/fixtures/manifest.json that export (two of its 25 entries record an
/// export error: the dynamo exporter cannot take them).
const MIN_FIXTURES: usize = 23;

fn init() {
    let rt = align_check::cli::config::RuntimeConfig {
        threads: 2,
        ort_lib: None,
        ort_custom_ops: None,
        torch_ops: vec![],
        max_memory: None,
    };
    align_check::app::runtimes::init(&rt, true).unwrap();
}

/// The fixture's inputs, in the ONNX signature's order.
fn inputs_of(name: &str) -> Vec<(String, HostTensor)> {
    let model = onnx::model::load(&fixture(name).join("model.onnx")).unwrap();
    let specs = onnx::signature::inputs(&model).unwrap();
    let arrays = read_npz(&fixture(name).join("inputs.npz")).unwrap();
    specs
        .iter()
        .map(|s| {
            let (_, t) = arrays
                .iter()
                .find(|(n, _)| n == &s.name)
                .expect("input in npz");
            (s.name.clone(), t.clone())
        })
        .collect()
}

fn captured_outputs(c: &Capture) -> Vec<HostTensor> {
    c.outputs()
        .iter()
        .map(|v| v.in_memory().unwrap().clone())
        .collect()
}

#[test]
fn instrumented_outputs_equal_plain_runs_exactly_on_every_fixture() {
    init();
    for entry in selected(manifest(), "exported fixtures", MIN_FIXTURES) {
        let name = entry["name"].as_str().unwrap();
        let inputs = inputs_of(name);
        let tensors: Vec<HostTensor> = inputs.iter().map(|(_, t)| t.clone()).collect();

        let torch = TorchModel::load(&fixture(name).join("model.pt")).unwrap();
        let plain = torch.forward(&tensors).unwrap();
        let cap = torch.capture(&tensors, &Keep::Memory).unwrap();
        assert_eq!(
            captured_outputs(&cap),
            plain,
            "{name}: TorchScript outputs changed"
        );
        assert!(
            cap.values
                .iter()
                .filter(|v| v.role == ValueRole::Intermediate)
                .count()
                > 2,
            "{name}: too few TorchScript values captured"
        );

        let model = onnx::model::load(&fixture(name).join("model.onnx")).unwrap();
        let plain: Vec<HostTensor> = onnx::capture::run_plain(&model, &inputs, 2, None)
            .unwrap()
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        let cap = onnx::capture::capture(&model, &inputs, 2, None).unwrap();
        assert_eq!(
            captured_outputs(&cap),
            plain,
            "{name}: ONNX outputs changed"
        );
        let nodes = model.proto.graph.as_ref().unwrap().node.len();
        let exposed = cap
            .values
            .iter()
            .filter(|v| v.role == ValueRole::Intermediate)
            .count();
        assert!(
            exposed >= nodes,
            "{name}: {exposed} values for {nodes} nodes"
        );
    }
}

#[test]
fn conv_output_captured_before_inplace_relu_keeps_its_negative_values() {
    init();
    let name = "conv_bn_legacy";
    let tensors: Vec<HostTensor> = inputs_of(name).into_iter().map(|(_, t)| t).collect();
    let torch = TorchModel::load(&fixture(name).join("model.pt")).unwrap();
    let cap = torch.capture(&tensors, &Keep::Memory).unwrap();
    let find = |module: &str, op: &str| {
        cap.values
            .iter()
            .find(|v| v.module_path() == module && v.op == op)
            .unwrap_or_else(|| panic!("{op} in {module}"))
    };
    let min = |t: &HostTensor| {
        t.data
            .to_f64_vec()
            .into_iter()
            .fold(f64::INFINITY, f64::min)
    };
    let bn = find("bn1", "aten::batch_norm");
    let relu = find("relu1", "aten::relu_");
    assert!(
        min(bn.in_memory().unwrap()) < 0.0,
        "bn1 output was rewritten by relu_"
    );
    assert!(min(find("conv1", "aten::_convolution").in_memory().unwrap()) < 0.0);
    assert!(min(relu.in_memory().unwrap()) >= 0.0);
}

#[test]
fn inspect_lists_the_module_paths_of_the_manifest() {
    for entry in selected(manifest(), "exported fixtures", MIN_FIXTURES) {
        let name = entry["name"].as_str().unwrap();
        let dir = fixture(name);
        let out = binary()
            .arg("inspect")
            .arg(dir.join("model.pt"))
            .arg("--onnx")
            .arg(dir.join("model.onnx"))
            .arg("--inputs")
            .arg(dir.join("inputs.npz"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let listed: Vec<&str> = text
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        for module in entry["expected_modules"].as_array().unwrap() {
            let module = module.as_str().unwrap();
            assert!(
                listed.contains(&module),
                "{name}: inspect does not list {module}"
            );
        }
    }
}
