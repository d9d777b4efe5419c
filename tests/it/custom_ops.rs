//! The `my_add` custom operator (2*a + b) end to end, on the real binary with real operator
//! libraries: the TorchScript op from tests/custom_ops/torch_my_add.cpp (`--torch-ops`) and
//! the ONNX Runtime kernels from tests/custom_ops/ort_my_add*.rs (`--ort-custom-ops`), built by
//! scripts/build_custom_ops.sh once per test binary, on the fixture custom_op_lib_legacy
//! (scripts/make_custom_op_fixture.py), whose model.pt and model.onnx both call the op.
//!
//! What must hold: a missing library is an exit-2 error naming the op and the option to pass,
//! a library that cannot be used is an exit-2 error naming it, the correct kernel aligns with
//! the op's layer paired and compared, and a wrong kernel is caught at the op's layer.

use crate::common::{check_fixture, stderr_of};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const FIXTURE: &str = "custom_op_lib_legacy";
const TORCH_OP: &str = "my_ops::my_add";

/// The libraries printed by scripts/build_custom_ops.sh.
struct Libraries {
    torch_ops: PathBuf,
    ort_custom_ops: PathBuf,
    ort_custom_ops_wrong: PathBuf,
}

/// Builds the libraries once per test binary (the script is quick when they are up to date).
fn libraries() -> &'static Libraries {
    static LIBS: OnceLock<Libraries> = OnceLock::new();
    LIBS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new("bash")
            .arg(root.join("scripts/build_custom_ops.sh"))
            .current_dir(root)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "scripts/build_custom_ops.sh failed:\n{}",
            stderr_of(&out)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let path = |key: &str| {
            let p = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("build_custom_ops.sh printed no {key}=: {text}"));
            let p = PathBuf::from(p);
            assert!(p.is_file(), "{} was not built", p.display());
            p
        };
        Libraries {
            torch_ops: path("torch_ops"),
            ort_custom_ops: path("ort_custom_ops"),
            ort_custom_ops_wrong: path("ort_custom_ops_wrong"),
        }
    })
}

/// Runs the check on the fixture with `--torch-ops`/`--ort-custom-ops` as given.
fn check(torch_ops: Option<&Path>, ort_custom_ops: Option<&Path>) -> (i32, Value, Output) {
    let mut extra: Vec<&str> = Vec::new();
    if let Some(p) = torch_ops {
        extra.extend(["--torch-ops", p.to_str().unwrap()]);
    }
    if let Some(p) = ort_custom_ops {
        extra.extend(["--ort-custom-ops", p.to_str().unwrap()]);
    }
    check_fixture(FIXTURE, &extra)
}

/// Exit 2 with exactly one line on stderr, an error and not a panic; returns the line.
fn one_line_error(code: i32, output: &Output) -> String {
    let err = stderr_of(output);
    assert_eq!(code, 2, "expected exit 2, stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {err}");
    assert!(
        lines[0].starts_with("align-check: error:") && !err.contains("panicked"),
        "{err}"
    );
    lines[0].to_string()
}

/// The layer whose TorchScript op is the custom op.
fn my_add_layer(report: &Value) -> &Value {
    let layers = report["layers"].as_array().expect("layers");
    let found: Vec<&Value> = layers
        .iter()
        .filter(|l| l["torch_op"] == TORCH_OP)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the my_add layer must be paired exactly once; layers: {:#}",
        report["layers"]
    );
    found[0]
}

#[test]
fn without_torch_ops_the_error_names_the_op_and_the_option() {
    // The ONNX model is loaded first: give it its library so that the TorchScript side's
    // missing operator is the error.
    let libs = libraries();
    let (code, _, output) = check(None, Some(&libs.ort_custom_ops));
    let line = one_line_error(code, &output);
    assert!(
        line.contains(TORCH_OP) && line.contains("--torch-ops LIB"),
        "{line}"
    );
    assert!(line.contains("model.pt"), "{line}");
}

#[test]
fn without_ort_custom_ops_the_error_names_the_op_and_the_option() {
    let libs = libraries();
    let (code, _, output) = check(Some(&libs.torch_ops), None);
    let line = one_line_error(code, &output);
    assert!(
        line.contains("`my_ops::my_add`") && line.contains("--ort-custom-ops LIB"),
        "{line}"
    );
    assert!(line.contains("model.onnx"), "{line}");
}

#[test]
fn the_correct_kernel_aligns_with_the_op_layer_compared() {
    let libs = libraries();
    let (code, report, output) = check(Some(&libs.torch_ops), Some(&libs.ort_custom_ops));
    assert_eq!(code, 0, "stderr: {}", stderr_of(&output));
    assert_eq!(report["verdict"], "pass");
    assert!(report["first_divergence"].is_null());
    let layer = my_add_layer(&report);
    assert_eq!(layer["onnx_op"], TORCH_OP, "{layer:#}");
    assert_eq!(layer["pass"], true, "{layer:#}");
    assert_eq!(layer["shape"], serde_json::json!([1, 3, 8, 8]));
    // Same formula, same float32 arithmetic: anything but rounding noise would be a bug.
    let rel = layer["rel_to_range"].as_f64().unwrap();
    assert!(rel < 1e-6, "my_add error relative to range {rel}");
    // Every TorchScript layer, the custom op included, was compared.
    assert_eq!(
        report["coverage"]["torch_ratio"], 1.0,
        "{:#}",
        report["coverage"]
    );
}

#[test]
fn a_wrong_kernel_is_caught_at_the_op() {
    let libs = libraries();
    let (code, report, output) = check(Some(&libs.torch_ops), Some(&libs.ort_custom_ops_wrong));
    assert_eq!(code, 1, "stderr: {}", stderr_of(&output));
    assert_eq!(report["verdict"], "fail");
    let first = &report["first_divergence"];
    assert_eq!(first["torch_op"], TORCH_OP, "{first:#}");
    assert_eq!(first["onnx_op"], TORCH_OP, "{first:#}");
    let layer = my_add_layer(&report);
    assert_eq!(first["layer_index"], layer["index"]);
    assert_eq!(layer["pass"], false);
    assert_eq!(layer["upstream_failed"], false);
    // float16 rounding: up to 2^-11 of each value, far above float32 rounding noise (the
    // correct kernel shows none) and above the default rtol of 1e-4, on a good share of the
    // elements (a systematic kernel fault, not one outlier).
    let rel = first["rel_to_range"].as_f64().unwrap();
    assert!((1e-5..=1e-3).contains(&rel), "rel_to_range {rel}");
    let share = layer["mismatch_ratio"].as_f64().unwrap();
    assert!(share > 0.1, "share of elements out of tolerance {share}");
    // The only origin: everything before the op passes, everything after inherits.
    let origins = report["divergence_origins"].as_array().unwrap();
    assert_eq!(origins.len(), 1, "{origins:#?}");
    for l in report["layers"].as_array().unwrap() {
        let before = l["index"].as_u64() < layer["index"].as_u64();
        if before {
            assert_eq!(l["pass"], true, "{l:#}");
        } else if l["index"] != layer["index"] {
            assert_eq!(l["upstream_failed"], true, "{l:#}");
        }
    }
}

#[test]
fn operator_libraries_that_cannot_be_used_are_one_line_errors() {
    let libs = libraries();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libmissing.so");
    let garbage = dir.path().join("libgarbage.so");
    std::fs::write(&garbage, b"not a shared library\n").unwrap();

    for bad in [&missing, &garbage] {
        let (code, _, output) = check(Some(bad), None);
        let line = one_line_error(code, &output);
        assert!(
            line.contains("--torch-ops") && line.contains(bad.to_str().unwrap()),
            "{line}"
        );
        let (code, _, output) = check(Some(&libs.torch_ops), Some(bad));
        let line = one_line_error(code, &output);
        assert!(
            line.contains("--ort-custom-ops") && line.contains(bad.to_str().unwrap()),
            "{line}"
        );
    }

    // The libraries swapped: the ONNX Runtime kernel registers no TorchScript op (so the model
    // still needs --torch-ops), and the TorchScript library has no RegisterCustomOps.
    let (code, _, output) = check(Some(&libs.ort_custom_ops), Some(&libs.ort_custom_ops));
    let line = one_line_error(code, &output);
    assert!(
        line.contains(TORCH_OP) && line.contains("--torch-ops"),
        "{line}"
    );
    let (code, _, output) = check(Some(&libs.torch_ops), Some(&libs.torch_ops));
    let line = one_line_error(code, &output);
    assert!(
        line.contains(libs.torch_ops.to_str().unwrap()) && line.contains("RegisterCustomOps"),
        "{line}"
    );
}

/// Runs the check with the fixture's torch.export archive as the reference
/// (tests/fixtures/pt2/custom_op_lib_legacy/model.pt2, the same network saved by
/// torch.export.save, scripts/make_pt2_fixtures.py) and the zoo fixture's ONNX and inputs.
fn check_pt2(torch_ops: Option<&Path>, ort_custom_ops: &Path) -> (i32, Value, Output) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let mut cmd = crate::common::binary();
    cmd.arg(root.join("pt2").join(FIXTURE).join("model.pt2"))
        .arg(root.join(FIXTURE).join("model.onnx"))
        .arg("--inputs")
        .arg(root.join(FIXTURE).join("inputs.npz"))
        .arg("--ort-custom-ops")
        .arg(ort_custom_ops)
        .arg("--json")
        .arg(&json);
    if let Some(lib) = torch_ops {
        cmd.arg("--torch-ops").arg(lib);
    }
    let output = cmd.output().unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), report, output)
}

#[test]
fn an_exported_program_loads_its_custom_op_from_torch_ops() {
    let libs = libraries();
    let (code, _, output) = check_pt2(None, &libs.ort_custom_ops);
    let line = one_line_error(code, &output);
    assert!(
        line.contains(TORCH_OP) && line.contains("--torch-ops LIB") && line.contains("model.pt2"),
        "{line}"
    );

    let (code, report, output) = check_pt2(Some(&libs.torch_ops), &libs.ort_custom_ops);
    assert_eq!(code, 0, "stderr: {}", stderr_of(&output));
    assert_eq!(report["reference"]["format"], "pt2");
    let layer = my_add_layer(&report);
    assert_eq!(layer["onnx_op"], TORCH_OP, "{layer:#}");
    assert_eq!(layer["pass"], true, "{layer:#}");
    let rel = layer["rel_to_range"].as_f64().unwrap();
    assert!(rel < 1e-6, "my_add error relative to range {rel}");
    assert_eq!(report["coverage"]["torch_ratio"], 1.0);

    // The float16-rounding kernel: caught at the op itself, as with the TorchScript reference.
    let (code, report, output) = check_pt2(Some(&libs.torch_ops), &libs.ort_custom_ops_wrong);
    assert_eq!(code, 1, "stderr: {}", stderr_of(&output));
    let first = &report["first_divergence"];
    assert_eq!(first["torch_op"], TORCH_OP, "{first:#}");
    assert_eq!(first["layer_index"], my_add_layer(&report)["index"]);
}
