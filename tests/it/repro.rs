//! `--repro DIR`: the bundle reproduces the reported error without align-check. For two
//! different planted faults, the bundle's repro.py, run with the bootstrap environment's
//! onnxruntime, prints the layer's isolated error as the JSON report gives it (within 1e-6
//! relative) and exits 1; the bundle's model holds only the layer's own nodes and weights.
//! Needs the pinned Python environment (`.venv`, made by scripts/bootstrap.sh).

use crate::common::{binary, fixture};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/bootstrap.sh",
        python.display()
    );
    python
}

/// Runs the check on `dir` with `--repro bundle` and `extra`; the report and the bundle's
/// folder.
fn check_with_repro(dir: &Path, out: &Path, extra: &[&str]) -> (i32, Value, PathBuf) {
    let json = out.join("report.json");
    let bundle = out.join("bundle");
    let mut cmd = binary();
    cmd.arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("-q")
        .arg("--json")
        .arg(&json)
        .arg("--repro")
        .arg(&bundle)
        .args(extra);
    if dir.join("inputs.npz").exists() {
        cmd.arg("--inputs").arg(dir.join("inputs.npz"));
    }
    let code = cmd.status().unwrap().code().unwrap_or(-1);
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (code, report, bundle)
}

/// `max_abs` and `rel_to_range` as repro.py prints them, and its exit code.
fn run_repro(bundle: &Path) -> (f64, f64, i32) {
    let out = Command::new(python())
        .arg("repro.py")
        .current_dir(bundle)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("max_abs="))
        .unwrap_or_else(|| {
            panic!(
                "no figures in {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let figure = |key: &str| -> f64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        figure("max_abs="),
        figure("rel_to_range="),
        out.status.code().unwrap_or(-1),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(f64::MIN_POSITIVE)
}

#[test]
fn bundles_for_two_faults_reproduce_the_reported_error() {
    for (name, dir) in [
        ("fault_conv_weight", fixture("fault_conv_weight")),
        ("drift_and_fault", fixture("drift").join("drift_and_fault")),
    ] {
        let out = tempfile::tempdir().unwrap();
        let (code, report, bundle) = check_with_repro(&dir, out.path(), &[]);
        assert_eq!(code, 1, "{name}");
        let first = report["first_divergence"]["layer_index"].as_u64().unwrap() as usize;
        assert_eq!(report["repro"]["layer_index"], first as u64, "{name}");
        let isolated = &report["layers"][first]["isolated"];
        let (max_abs, rel, py_code) = run_repro(&bundle);
        assert_eq!(py_code, 1, "{name}: repro.py must fail beyond tolerance");
        assert!(
            close(max_abs, isolated["max_abs"].as_f64().unwrap()),
            "{name}: {max_abs} vs {isolated}"
        );
        assert!(
            close(rel, isolated["rel_to_range"].as_f64().unwrap()),
            "{name}: {rel} vs {isolated}"
        );
        // Only the layer's own segment: a fraction of the model's nodes and weights.
        let original = std::fs::metadata(dir.join("model.onnx")).unwrap().len();
        let segment = std::fs::metadata(bundle.join("model.onnx")).unwrap().len();
        assert!(
            segment * 4 < original,
            "{name}: bundle model {segment} of {original} bytes"
        );
        for file in ["inputs.npz", "expected.npz", "repro.json", "README.md"] {
            assert!(bundle.join(file).exists(), "{name}: {file}");
        }
        let readme = std::fs::read_to_string(bundle.join("README.md")).unwrap();
        assert!(readme.contains("python repro.py") && readme.contains("onnxruntime=="));
    }
}

#[test]
fn another_layer_can_be_named_and_a_passing_one_reproduces_as_passing() {
    let dir = fixture("drift").join("drift_and_fault");
    let out = tempfile::tempdir().unwrap();
    let (_, report, bundle) = check_with_repro(&dir, out.path(), &["--repro-layer", "blocks.3.fc"]);
    let index = report["repro"]["layer_index"].as_u64().unwrap() as usize;
    assert_eq!(report["layers"][index]["module"], "blocks.3.fc");
    let (_, rel, py_code) = run_repro(&bundle);
    assert_eq!(py_code, 0);
    // The block's own planted 1.5e-5, not the error accumulated above it.
    assert!((1e-5..2e-5).contains(&rel), "{rel}");
}

#[test]
fn a_clean_pass_has_nothing_to_reproduce_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let (code, report, bundle) = check_with_repro(&fixture("resnet_tiny_legacy"), out.path(), &[]);
    assert_eq!(code, 0);
    assert!(report["repro"].is_null());
    assert!(!bundle.exists());
}

#[test]
fn nothing_to_reproduce_is_said_in_one_clean_sentence() {
    let out = tempfile::tempdir().unwrap();
    let dir = fixture("resnet_tiny_legacy");
    let run = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--repro")
        .arg(out.path().join("bundle"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let stderr = String::from_utf8(run.stderr).unwrap();
    let line = stderr
        .lines()
        .find(|l| l.contains("--repro:"))
        .unwrap_or_else(|| panic!("no --repro line in:\n{stderr}"));
    assert_eq!(
        line,
        "align-check: --repro: no layer diverges, so there is nothing to reproduce (name one \
         with --repro-layer)"
    );
    assert!(!line.contains("  "), "a run of spaces: {line:?}");
}
