//! Reduced precision (`scripts/make_precision_fixtures.py`): a float32 TorchScript model
//! against its ONNX export converted to float16 by onnxconverter-common (with and without
//! `keep_io_types`), and a half or bfloat16 TorchScript against float32 ONNX. Each pair is judged
//! by the tolerance of the lower precision of its two sides, so clean conversions pass; a
//! layer whose values exceed float16's range is the first divergence and is named an overflow.

use crate::common::{binary, fixture, stderr_of};
use serde_json::Value;

/// Runs align-check on a precision fixture: exit code, JSON report, stdout.
fn check(name: &str) -> (i32, Value, String) {
    let dir = fixture("precision").join(name);
    assert!(
        dir.join("model.onnx").exists(),
        "{} is missing: run .venv/bin/python scripts/make_precision_fixtures.py",
        dir.display()
    );
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let code = output.status.code().unwrap_or(-1);
    let report = std::fs::read_to_string(&json)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_else(|_| panic!("{name}: no report: {}", stderr_of(&output)));
    (
        code,
        report,
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn clean_float16_conversions_pass_under_the_float16_tolerance() {
    for (name, precision) in [
        ("cnn_fp16_keepio", "float16"),
        ("cnn_fp16", "float16"),
        ("attention_fp16_keepio", "float16"),
        ("half_torchscript", "float16"),
        ("bf16_torchscript", "bfloat16"),
    ] {
        let (code, report, stdout) = check(name);
        assert_eq!(code, 0, "{name}: {stdout}");
        let layers = report["layers"].as_array().unwrap();
        assert!(!layers.is_empty(), "{name}");
        // Every layer was judged in the reduced precision, including the float32 values a
        // keep_io_types model casts back to at its outputs.
        for layer in layers {
            assert_eq!(layer["precision"], precision, "{name}: {layer}");
        }
        let ratio = crate::common::coverage_ratio(&report);
        assert!(ratio >= 0.95, "{name}: coverage {ratio}");
    }
}

#[test]
fn a_float16_overflow_is_the_first_divergence_and_says_so() {
    let (code, report, stdout) = check("overflow_fp16");
    assert_eq!(code, 1, "{stdout}");
    let first = &report["first_divergence"];
    assert_eq!(first["module"], "fc2", "{first}");
    let index = first["layer_index"].as_u64().unwrap() as usize;
    assert_eq!(report["layers"][index]["origin"], "introduced");
    let cause = first["cause"].as_str().unwrap_or_default();
    assert!(
        cause.starts_with("float16 overflow at fc2: max |reference| ") && cause.contains("65504"),
        "{cause}"
    );
    assert!(stdout.contains("float16 overflow at fc2"), "{stdout}");
    // The layers before it pass: rounding is not mistaken for the fault.
    for layer in report["layers"].as_array().unwrap() {
        if layer["module"] == "fc1" {
            assert_eq!(layer["pass"], true, "{layer}");
        }
    }
}

/// A model converted to float16 without `keep_io_types` takes float16 inputs; the user's
/// float32 data (the inputs of the original model) is rounded to float16 for both runtimes,
/// the report says so, and the clean conversion still passes.
#[test]
fn float32_data_for_a_float16_model_is_converted_and_noted() {
    use align_check::capture::tensor::HostTensor;
    let dir = fixture("precision").join("cnn_fp16");
    let out = tempfile::tempdir().unwrap();
    let npz = out.path().join("inputs.npz");
    let values: Vec<f32> = (0..3 * 16 * 16).map(|i| (i as f32 * 0.37).sin()).collect();
    let x = HostTensor::f32(vec![1, 3, 16, 16], values);
    align_check::inputs::npz_writer::write_npz(&npz, &[("x", &x)]).unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--inputs")
        .arg(&npz)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(
        stdout.contains("input 'x' was given as float32 and converted to float16"),
        "{stdout}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let input = &report["inputs"][0];
    assert_eq!(input["dtype"], "float16", "{input}");
    assert_eq!(input["converted_from"], "float32", "{input}");
}
