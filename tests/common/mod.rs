//! Shared by the integration tests: the fixture manifest written by
//! `scripts/make_fixtures.py`, fixture paths, running the real binary, and which fixtures of
//! a manifest a test checks (`selected`: all of them, at least as many as expected, or those
//! `ALIGN_CHECK_FIXTURE` names).

#![allow(dead_code)]

pub mod npz;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Manifest entries that were exported (entries with an `export_error` have no files).
pub fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures_dir().join("manifest.json"))
        .expect("tests/fixtures/manifest.json exists (run scripts/make_fixtures.py)");
    let all: Vec<Value> = serde_json::from_str(&text).expect("manifest is JSON");
    all.into_iter()
        .filter(|e| e["export_error"].is_null())
        .collect()
}

/// Entries of the second fixture family (`tests/fixtures/lib/`, models from transformers,
/// timm and Ultralytics, written by `scripts/make_library_fixtures.py`), with their names
/// made relative to `tests/fixtures` (`lib/bert_legacy`) so `fixture` and `check_fixture`
/// take them as they are.
pub fn library_manifest() -> Vec<Value> {
    let path = fixtures_dir().join("lib/manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{} cannot be read ({e}): run .venv/bin/python scripts/make_library_fixtures.py",
            path.display()
        )
    });
    let all: Vec<Value> = serde_json::from_str(&text).expect("library manifest is JSON");
    all.into_iter()
        .filter(|e| e["export_error"].is_null())
        .map(|mut e| {
            let name = format!("lib/{}", e["name"].as_str().unwrap_or_default());
            e["name"] = Value::String(name);
            e
        })
        .collect()
}

/// The fixtures `ALIGN_CHECK_FIXTURE=NAME[,NAME...]` asks for, if it is set.
fn fixture_filter() -> Option<Vec<String>> {
    let names = std::env::var("ALIGN_CHECK_FIXTURE").ok()?;
    Some(
        names
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect(),
    )
}

/// Whether fixture `name` (`fault_gelu`, `lib/bert_legacy`) is named by `filter`, by its
/// whole name or its last component.
fn named(name: &str, filter: &[String]) -> bool {
    let last = name.rsplit('/').next().unwrap_or(name);
    filter.iter().any(|f| f == name || f == last)
}

/// The entries of `manifest` (`what` says which, for the message) a test loops over: all of
/// them, after checking there are at least `min` (a fixture whose export failed drops out of
/// its manifest, which must fail the test rather than shrink it), or only those
/// `ALIGN_CHECK_FIXTURE` names when it is set.
pub fn selected(manifest: Vec<Value>, what: &str, min: usize) -> Vec<Value> {
    assert!(
        manifest.len() >= min,
        "only {} {what} (at least {min} expected): did a fixture fail to export? {:?}",
        manifest.len(),
        manifest.iter().map(|e| &e["name"]).collect::<Vec<_>>()
    );
    match fixture_filter() {
        None => manifest,
        Some(filter) => manifest
            .into_iter()
            .filter(|e| named(e["name"].as_str().unwrap_or_default(), &filter))
            .collect(),
    }
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

pub fn binary() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_align-check"));
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Runs `align-check DIR/model.pt DIR/model.onnx -q --json OUT` (random inputs) and returns
/// the exit code and the parsed JSON report.
pub fn check_dir(dir: &Path, extra: &[&str]) -> (i32, Value) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let status = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("-q")
        .arg("--json")
        .arg(&json)
        .args(extra)
        .status()
        .unwrap();
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (status.code().unwrap_or(-1), report)
}

/// Runs `align-check MODEL_PT MODEL_ONNX --inputs inputs.npz --json OUT` on a fixture and
/// returns the exit code and the parsed JSON report.
pub fn check_fixture(name: &str, extra: &[&str]) -> (i32, Value, Output) {
    let dir = fixture(name);
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--inputs")
        .arg(dir.join("inputs.npz"))
        .arg("--json")
        .arg(&json)
        .args(extra)
        .output()
        .unwrap();
    let code = output.status.code().unwrap_or(-1);
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (code, report, output)
}

pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Share of TorchScript layers the report compared or accounted for.
pub fn coverage_ratio(report: &Value) -> f64 {
    let c = &report["coverage"];
    c["torch_layers_paired"].as_f64().unwrap_or(0.0)
        / c["torch_layers_total"].as_f64().unwrap_or(1.0)
}

/// The module paths a planted fault may be reported at: `expected_module` and any of
/// `expected_modules_any` (a fused conv may be named by its BatchNorm or itself).
pub fn expected_fault_modules(fault: &Value) -> Vec<&str> {
    let mut expected: Vec<&str> = vec![fault["expected_module"].as_str().unwrap()];
    if let Some(any) = fault["expected_modules_any"].as_array() {
        expected.extend(any.iter().filter_map(|v| v.as_str()));
    }
    expected
}

/// A one-line account of a run for failure messages: verdict, first divergence, coverage
/// and the first failing layers.
pub fn summary(report: &Value) -> String {
    let worst = report["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["pass"] == false)
        .map(|l| {
            format!(
                "#{} {} {} ({})",
                l["index"], l["module"], l["onnx_node"], l["rel_to_range"]
            )
        })
        .take(3)
        .collect::<Vec<_>>()
        .join("; ");
    format!(
        "verdict {}, first divergence {}, coverage {:.3}, failing: {worst}",
        report["verdict"],
        report["first_divergence"],
        coverage_ratio(report)
    )
}

#[test]
#[should_panic(expected = "did a fixture fail to export?")]
fn a_manifest_shorter_than_expected_fails_the_test() {
    let entries = vec![serde_json::json!({"name": "a"})];
    selected(entries, "fixtures", 2);
}

#[test]
fn a_fixture_is_named_by_its_whole_name_or_its_last_component() {
    let filter = vec!["bert_legacy".to_string(), "lib/vit_slim".to_string()];
    assert!(named("lib/bert_legacy", &filter));
    assert!(named("lib/vit_slim", &filter));
    assert!(!named("vit_slim_other", &filter));
    assert!(!named("lib/bert_dynamo", &filter));
}
