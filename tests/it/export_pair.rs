//! The export helper `scripts/export_pair.py` end to end, the way a user meets it: export the
//! two custom-op examples in `scripts/examples/` (my_add and SRCNN, both `torch.autograd.Function`
//! ops with a `symbolic`) with the pinned interpreter, then run the real align-check binary on
//! the files it wrote and read the verdict from the JSON report. Also: a bad module path is
//! exit code 2 with one line on stderr, never a Python traceback.
//!
//! Needs the pinned Python environment (`.venv`, made by scripts/bootstrap.sh); without it
//! these tests fail and say so rather than skip.

use crate::common::{binary, stderr_of};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The export script run by the pinned interpreter, from the repository root.
fn export_pair(args: &[&str]) -> Command {
    let python = repo().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/bootstrap.sh to install the pinned Python environment",
        python.display()
    );
    let mut cmd = Command::new(python);
    cmd.current_dir(repo())
        .arg("scripts/export_pair.py")
        .args(args);
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exports one example into a fresh folder, checks the three files, runs align-check on them
/// and asserts a passing verdict. Returns the report for further checks.
fn export_and_check(args: &[&str]) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let output: Output = export_pair(args).arg("--out").arg(&out).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "export_pair.py {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let stdout = text(&output.stdout);
    for file in ["model.pt", "model.onnx", "inputs.npz"] {
        assert!(
            out.join(file).is_file(),
            "{file} not written; stdout:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("align-check ") && stdout.contains("--inputs "),
        "no next command printed:\n{stdout}"
    );

    let json = tmp.path().join("report.json");
    let check = binary()
        .arg(out.join("model.pt"))
        .arg(out.join("model.onnx"))
        .arg("--inputs")
        .arg(out.join("inputs.npz"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report: Value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    assert_eq!(
        check.status.code(),
        Some(0),
        "align-check on {args:?} exports: first divergence {}\nstdout:\n{}\nstderr:\n{}",
        report["first_divergence"],
        text(&check.stdout),
        stderr_of(&check)
    );
    assert_eq!(report["verdict"], "pass", "{report}");
    report
}

#[test]
fn my_add_example_exports_and_passes() {
    export_and_check(&[
        "scripts.examples.my_add:factory",
        "--input",
        "a=1x3x16x16",
        "--input",
        "b=1x3x16x16",
    ]);
}

#[test]
fn pt2_reference_is_written_and_passes_at_another_batch_size() {
    // --pt2 writes the torch.export archive too; with a dynamic batch it runs at a batch size
    // other than the example's (symbolic sizes are computed at run time).
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let output = export_pair(&[
        "scripts.examples.my_add:factory",
        "--input",
        "a=2x3x16x16",
        "--input",
        "b=2x3x16x16",
        "--dynamic",
        "a=0",
        "--dynamic",
        "b=0",
        "--pt2",
    ])
    .arg("--out")
    .arg(&out)
    .output()
    .unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        stderr_of(&output)
    );
    assert!(stdout.contains("model.pt2 "), "{stdout}");
    let check = binary()
        .arg(out.join("model.pt2"))
        .arg(out.join("model.onnx"))
        .args(["--shape", "a=3x3x16x16", "--shape", "b=3x3x16x16"])
        .output()
        .unwrap();
    let report = text(&check.stdout);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{report}{}",
        stderr_of(&check)
    );
    assert!(report.starts_with("PASS"), "{report}");
}

#[test]
fn srcnn_example_exports_and_passes() {
    // The scales input must be [1,1,3,3]: model.pt bakes in the traced factor, while the ONNX
    // Resize reads it from the input.
    export_and_check(&[
        "scripts.examples.srcnn:factory",
        "--input",
        "x=1x3x16x16",
        "--input",
        "upscale_factor=4:float32",
        "--value",
        "upscale_factor=1,1,3,3",
    ]);
}

fn assert_one_line_error(output: &Output, expect: &str) {
    let stderr = stderr_of(output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "not one line:\n{stderr}"
    );
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(stderr.contains(expect), "expected {expect:?} in:\n{stderr}");
}

#[test]
fn bad_module_path_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out: PathBuf = tmp.path().join("export");
    let output = export_pair(&["no_such_pkg.model:factory", "--input", "x=1x3x8x8"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_one_line_error(&output, "no_such_pkg");
    assert!(
        !out.exists(),
        "an output folder was made for a failed import"
    );
}

#[test]
fn bad_shape_is_one_line_and_exit_2() {
    let output = export_pair(&["scripts.examples.my_add:factory", "--input", "a=1x3xfoo"])
        .output()
        .unwrap();
    assert_one_line_error(&output, "1x3xfoo");
}

/// NaN produced inside the model, identically on both sides: the layers still pass (the
/// NaN pattern agrees) and the report names the first layer that produces them, per side.
#[test]
fn nan_produced_inside_the_model_is_located_on_each_side() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let status = export_pair(&["scripts.examples.nan_model:factory", "--input", "x=1x3x8x8"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    let run = binary()
        .arg(out.join("model.pt"))
        .arg(out.join("model.onnx"))
        .arg("--inputs")
        .arg(out.join("inputs.npz"))
        .args(["--json", "-"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    for side in ["torch", "onnx"] {
        let first = &report["first_nonfinite"][side];
        assert_eq!(first["module"], "", "{side}: {first}");
        assert!(first["nan"].as_u64().unwrap() > 0, "{side}: {first}");
    }
    let log = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["torch_op"] == "aten::log")
        .expect("log layer compared");
    assert_eq!(log["pass"], true, "same NaN pattern on both sides passes");
}
