//! torch.export archives (`.pt2`) as the reference (issue 51), on the archives
//! `scripts/make_pt2_fixtures.py` writes to tests/fixtures/pt2/ from zoo networks: each pairs
//! with its zoo fixture's ONNX model and inputs. A clean pair passes, a planted fault is found
//! at the module the manifest names (as with the TorchScript reference), and every value the
//! interpreter captures equals what PyTorch's own `ep.module()` computed for that node when
//! the fixtures were made (values.npz, written without align-check).

use crate::common::{binary, fixture};
use align_check::capture::store::Keep;
use align_check::capture::tensor::HostTensor;
use align_check::capture::ValueRole;
use align_check::inputs::npy::read_npz;
use align_check::onnx;
use align_check::torch::TorchModel;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

fn entries() -> Vec<Value> {
    let path = fixture("pt2").join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: run .venv/bin/python scripts/make_pt2_fixtures.py",
            path.display()
        )
    });
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(entries.len() >= 5, "too few .pt2 fixtures");
    entries
}

/// An archive whose program calls an operator from a library (`--torch-ops`; tested in
/// custom_ops.rs, which builds the library).
fn needs_library(entry: &Value) -> bool {
    entry["torch_ops"] == true
}

fn archive(name: &str) -> PathBuf {
    fixture("pt2").join(name).join("model.pt2")
}

/// Runs `align-check model.pt2 model.onnx --inputs inputs.npz --json` on a zoo fixture.
fn check(name: &str) -> (i32, Value, String) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(archive(name))
        .arg(fixture(name).join("model.onnx"))
        .arg("--inputs")
        .arg(fixture(name).join("inputs.npz"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), report, text)
}

#[test]
fn clean_pairs_pass_and_faults_are_found_where_the_trace_finds_them() {
    for entry in entries()
        .iter()
        .filter(|e| e["onnx"] == true && !needs_library(e))
    {
        let name = entry["name"].as_str().unwrap();
        let (code, report, text) = check(name);
        match entry["expected_module"].as_str() {
            None => {
                assert_eq!(code, 0, "{name}: {text}");
                assert_eq!(report["coverage"]["torch_ratio"], 1.0, "{name}: {text}");
            }
            Some(module) => {
                assert_eq!(code, 1, "{name}: {text}");
                assert_eq!(
                    report["first_divergence"]["module"].as_str(),
                    Some(module),
                    "{name}: {text}"
                );
            }
        }
    }
}

/// The fixture's inputs, in the ONNX signature's order (an archive without an ONNX pair:
/// its own inputs.npz, in0, in1, ...).
fn inputs_of(name: &str) -> Vec<HostTensor> {
    let own = fixture("pt2").join(name).join("inputs.npz");
    if own.exists() {
        let mut arrays = read_npz(&own).unwrap();
        arrays.sort_by(|a, b| a.0.cmp(&b.0));
        return arrays.into_iter().map(|(_, t)| t).collect();
    }
    let model = onnx::model::load(&fixture(name).join("model.onnx")).unwrap();
    let arrays = read_npz(&fixture(name).join("inputs.npz")).unwrap();
    onnx::signature::inputs(&model)
        .unwrap()
        .iter()
        .map(|s| arrays.iter().find(|(n, _)| n == &s.name).unwrap().1.clone())
        .collect()
}

#[test]
fn captured_values_equal_what_the_program_computes_in_python() {
    let rt = align_check::cli::config::RuntimeConfig {
        threads: 2,
        ort_lib: None,
        ort_custom_ops: None,
        torch_ops: vec![],
        max_memory: None,
    };
    align_check::app::runtimes::init(&rt, false).unwrap();
    for entry in entries().iter().filter(|e| !needs_library(e)) {
        let name = entry["name"].as_str().unwrap();
        let expected: HashMap<String, HostTensor> =
            read_npz(&fixture("pt2").join(name).join("values.npz"))
                .expect("values.npz is made on each machine: run scripts/make_pt2_values.py")
                .into_iter()
                .collect();
        let model = TorchModel::load(&archive(name)).unwrap();
        let capture = model.capture(&inputs_of(name), &Keep::Memory).unwrap();
        let mut compared = 0;
        for value in &capture.values {
            let key = match value.role {
                ValueRole::Output(k) => format!("output.{k}"),
                ValueRole::Intermediate => value.name.clone(),
                _ => continue,
            };
            let Some(want) = expected.get(&key) else {
                continue;
            };
            let got = value.in_memory().unwrap();
            assert_eq!(got.shape, want.shape, "{name}: {key}");
            let worst = got
                .data
                .to_f64_vec()
                .iter()
                .zip(want.data.to_f64_vec())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert_eq!(worst, 0.0, "{name}: {key} differs from ep.module()'s");
            compared += 1;
        }
        let intermediates = capture
            .values
            .iter()
            .filter(|v| v.role == ValueRole::Intermediate)
            .count();
        // Every node's tensors and every output were compared.
        assert_eq!(
            compared,
            intermediates + capture.outputs().len(),
            "{name}: some captured values have no Python counterpart"
        );
        // Python records a multi-output op's tuple and its getitems: at least as many.
        assert!(intermediates > 0, "{name}: nothing captured");
        assert!(
            intermediates as u64 <= entry["captured_values"].as_u64().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn inspect_lists_module_paths_and_source_lines_of_an_archive() {
    let output = binary()
        .args(["inspect"])
        .arg(archive("conv_bn_dynamo"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("torch.export archive (.pt2)"), "{text}");
    for module in ["conv1", "bn1", "conv2", "bn2"] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(module)),
            "{module}: {text}"
        );
    }
    assert!(text.contains("models.py:"), "{text}");
    // Given no inputs, it runs on the archive's own: shapes are listed, and the values are
    // named as coming from the ExportedProgram.
    assert!(text.contains("the archive's own sample inputs"), "{text}");
    assert!(
        text.contains("values captured from the ExportedProgram model"),
        "{text}"
    );
    assert!(!text.contains("shapes unknown"), "{text}");
}

#[test]
fn a_higher_order_op_is_refused_in_one_line_naming_it() {
    let output = binary()
        .args(["inspect"])
        .arg(fixture("pt2").join("cond").join("model.pt2"))
        .output()
        .unwrap();
    let stderr = crate::common::stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("higher-order op `cond`"), "{stderr}");
}

/// Runs `align-check model.pt2 model.onnx --json` with `extra` arguments (no inputs given
/// unless `extra` gives them).
fn run(pt2: &std::path::Path, onnx: &std::path::Path, extra: &[&str]) -> (i32, Value, String) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .arg(pt2)
        .arg(onnx)
        .args(extra)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), report, text)
}

#[test]
fn an_archives_sample_inputs_are_what_it_was_exported_with() {
    // make_pt2_fixtures.py exported each zoo network with the zoo's inputs.npz (written by
    // numpy), and the others with their own: the archive's sample inputs, read by libtorch,
    // must be exactly those arrays, in the program's order. `wrapped` was exported with two
    // keyword arguments, which come after the positional one in the order they were given.
    let mut keywords = 0;
    for entry in entries().iter().filter(|e| !needs_library(e)) {
        let name = entry["name"].as_str().unwrap();
        let model = TorchModel::load(&archive(name)).unwrap();
        let (origin, samples) = model.sample_inputs().unwrap().unwrap();
        assert!(origin.ends_with("data/sample_inputs/model.pt"), "{origin}");
        assert_eq!(samples, inputs_of(name), "{name}");
        keywords += usize::from(name == "wrapped");
    }
    assert_eq!(
        keywords, 1,
        "the archive exported with keyword arguments was not read"
    );
    // A TorchScript module has none.
    let traced = TorchModel::load(&fixture("conv_bn_dynamo").join("model.pt")).unwrap();
    assert!(traced.sample_inputs().is_none());
}

#[test]
fn without_inputs_the_archives_sample_inputs_are_used_and_reported() {
    for entry in entries()
        .iter()
        .filter(|e| e["onnx"] == true && !needs_library(e))
    {
        let name = entry["name"].as_str().unwrap();
        let (code, report, text) = run(&archive(name), &fixture(name).join("model.onnx"), &[]);
        // The same verdict and divergence as with the inputs given explicitly.
        let expected = entry["expected_module"].as_str();
        assert_eq!(
            code,
            if expected.is_some() { 1 } else { 0 },
            "{name}: {text}"
        );
        assert_eq!(
            report["first_divergence"]["module"].as_str(),
            expected,
            "{name}"
        );
        for input in report["inputs"].as_array().unwrap() {
            let source = input["source"].as_str().unwrap();
            assert!(
                source.starts_with("pt2-sample:") && source.contains("data/sample_inputs/"),
                "{name}: {source}"
            );
        }
        let notes = report["signature"]["notes"].to_string();
        assert!(
            notes.contains("the .pt2 archive's own sample inputs"),
            "{name}: {notes}"
        );
        assert!(
            text.contains("inputs: the .pt2 archive's own sample inputs"),
            "{text}"
        );
        assert_eq!(report["reference"]["format"], "pt2");
        assert!(text.contains("ExportedProgram layers"), "{text}");
        assert!(!text.contains("TorchScript"), "{name}: {text}");
    }
    // Asking for random inputs keeps them random.
    let (code, report, text) = run(
        &archive("conv_bn_dynamo"),
        &fixture("conv_bn_dynamo").join("model.onnx"),
        &["--seed", "3"],
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(report["inputs"][0]["source"], "random:seed=3");
}

#[test]
fn sample_inputs_that_do_not_fit_the_onnx_model_are_not_a_panic() {
    // encoder_block's program takes two tensors, conv_bn's ONNX model one: the sample inputs
    // cannot be used, and the random inputs made instead do not fit the program either.
    let (code, _, text) = run(
        &archive("encoder_block"),
        &fixture("conv_bn_dynamo").join("model.onnx"),
        &[],
    );
    assert_eq!(code, 2, "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert_eq!(text.trim().lines().count(), 1, "{text}");
}

#[test]
fn inputs_outside_the_programs_range_constraints_are_refused_in_one_line() {
    let entry = entries()
        .into_iter()
        .find(|e| e["name"] == "dynamic")
        .unwrap();
    let (min, max) = (
        entry["batch_range"][0].as_u64().unwrap(),
        entry["batch_range"][1].as_u64().unwrap(),
    );
    let dir = fixture("pt2").join("dynamic");
    let (pt2, onnx) = (dir.join("model.pt2"), dir.join("model.onnx"));
    // Its own sample inputs, the inputs it was made with, and any batch in the range run.
    let (code, report, text) = run(&pt2, &onnx, &[]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        report["inputs"][0]["shape"][0].as_u64(),
        entry["sample_batch"].as_u64()
    );
    let inputs = dir.join("inputs.npz");
    let (code, _, text) = run(&pt2, &onnx, &["--inputs", inputs.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    for batch in [min, max] {
        let shape = format!("x={batch}x4");
        let (code, report, text) = run(&pt2, &onnx, &["--shape", &shape]);
        assert_eq!(code, 0, "{shape}: {text}");
        assert_eq!(report["inputs"][0]["shape"][0].as_u64(), Some(batch));
    }
    for batch in [min - 1, max + 1] {
        let shape = format!("x={batch}x4");
        let (code, _, text) = run(&pt2, &onnx, &["--shape", &shape]);
        assert_eq!(code, 2, "{shape}: {text}");
        assert_eq!(text.trim().lines().count(), 1, "{text}");
        let line = text.trim();
        assert!(
            line.contains(&format!("input 'x' dimension 0 is {batch}"))
                && line.contains(&format!("[{min}, {max}]")),
            "{line}"
        );
    }
    // A static dimension is a range of one.
    let (code, _, text) = run(&pt2, &onnx, &["--shape", "x=3x5"]);
    assert_eq!(code, 2, "{text}");
}

#[test]
fn every_report_names_the_reference_an_exported_program() {
    let out = tempfile::tempdir().unwrap();
    let path = |file: &str| out.path().join(file).to_str().unwrap().to_string();
    let (md, html, junit) = (path("r.md"), path("r.html"), path("r.xml"));
    let name = "fault_gelu";
    let (code, report, text) = run(
        &archive(name),
        &fixture(name).join("model.onnx"),
        &["--markdown", &md, "--html", &html, "--junit", &junit],
    );
    assert_eq!(code, 1, "{text}");
    assert_eq!(report["reference"]["format"], "pt2");
    assert_eq!(report["reference"]["name"], "ExportedProgram");
    let gates = report["gates"].to_string();
    assert!(gates.contains("of ExportedProgram layers"), "{gates}");
    for (what, content) in [
        ("terminal", text),
        ("Markdown", std::fs::read_to_string(&md).unwrap()),
        ("HTML", std::fs::read_to_string(&html).unwrap()),
        ("JUnit", std::fs::read_to_string(&junit).unwrap()),
    ] {
        assert!(content.contains("ExportedProgram"), "{what}: {content}");
        assert!(!content.contains("TorchScript"), "{what} says TorchScript");
    }
}

#[test]
fn signature_mistakes_on_an_exported_program_never_name_torchscript() {
    let name = "fault_gelu";
    let onnx = fixture(name).join("model.onnx");
    for extra in [&["--map", "nope=x"][..], &["--arg", "nope=2"][..]] {
        let (code, _, text) = run(&archive(name), &onnx, extra);
        assert_eq!(code, 2, "{extra:?}: {text}");
        assert!(text.contains("'nope'"), "{extra:?}: {text}");
        assert!(!text.contains("TorchScript"), "{extra:?}: {text}");
    }
}
