//! Pairs whose TorchScript and ONNX files come from different tools (issue #21), from
//! tests/fixtures/signature/ (written by scripts/make_signature_fixtures.py): a streaming
//! cell keeping its state inside the TorchScript module but taking it as an ONNX input, a
//! context window prepended on one side only, Hugging Face style dict inputs, and BERT traced
//! directly against an optimum-shaped ONNX export. Each is run through the real binary: the
//! clean pair must pass, the planted fault must fail at its layer, and an ambiguous mapping
//! must stop with a message naming the flag that settles it.

use crate::common::{binary, fixtures_dir, selected, stderr_of, summary};

/// Fixtures of tests/fixtures/signature/manifest.json (scripts/make_signature_fixtures.py).
const MIN_SIGNATURE_FIXTURES: usize = 7;
use serde_json::Value;
use std::path::PathBuf;

fn manifest() -> Vec<Value> {
    let path = fixtures_dir().join("signature/manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{} cannot be read ({e}): run .venv/bin/python scripts/make_signature_fixtures.py",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("manifest is JSON")
}

fn folder(entry: &Value) -> PathBuf {
    fixtures_dir()
        .join("signature")
        .join(entry["name"].as_str().unwrap())
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Runs the check in the fixture's folder (its argument files are relative to it):
/// (exit code, JSON report or Null, stderr, stdout).
fn run(entry: &Value, onnx: &str, args: &[String]) -> (i32, Value, String, String) {
    let dir = folder(entry);
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let output = binary()
        .current_dir(&dir)
        .arg("model.pt")
        .arg(onnx)
        .arg("--json")
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (
        output.status.code().unwrap_or(-1),
        report,
        stderr_of(&output),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The report's mapping as (TorchScript slot, ONNX input, how) triples, JSON null for a
/// missing side, as the manifest writes them.
fn mapping(report: &Value) -> Vec<Value> {
    report["signature"]["mapping"]
        .as_array()
        .expect("signature.mapping")
        .iter()
        .map(|m| Value::Array(vec![m["torch"].clone(), m["onnx"].clone(), m["by"].clone()]))
        .collect()
}

#[test]
fn clean_pairs_pass_with_the_mapping_and_one_sided_outputs_reported() {
    for entry in selected(manifest(), "signature fixtures", MIN_SIGNATURE_FIXTURES) {
        let name = entry["name"].as_str().unwrap();
        let (code, report, stderr, stdout) = run(&entry, "model.onnx", &strings(&entry["args"]));
        assert_eq!(code, 0, "{name}: {stderr} {}", summary(&report));
        assert_eq!(
            mapping(&report),
            *entry["mapping"].as_array().unwrap(),
            "{name}"
        );
        let not_compared: Vec<Value> = report["signature"]["outputs_not_compared"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| Value::Array(vec![o["side"].clone(), o["name"].clone()]))
            .collect();
        assert_eq!(
            not_compared,
            *entry["not_compared"].as_array().unwrap(),
            "{name}"
        );
        assert_eq!(
            report["signature"]["state_writes"], entry["state_writes"],
            "{name}"
        );
        // Every layer compared or accounted for: nothing the signatures' difference leaves
        // over counts against coverage.
        assert_eq!(
            report["coverage"]["torch_ratio"].as_f64(),
            Some(1.0),
            "{name}: {}",
            report["coverage"]["unpaired"]
        );
        // The terminal table says the same in its notes.
        for note in strings(&report["signature"]["notes"]) {
            assert!(stdout.contains(&note), "{name}: {note} not in\n{stdout}");
        }
        // The model as shipped runs on the same inputs: weights listed among the graph
        // inputs (weights_as_inputs) are weights there too, not inputs left unfed.
        assert_eq!(
            report["production"]["status"], "agrees",
            "{name}: {}",
            report["production"]["error"]
        );
    }
}

#[test]
fn planted_faults_fail_at_their_layer() {
    for entry in selected(manifest(), "signature fixtures", MIN_SIGNATURE_FIXTURES) {
        let name = entry["name"].as_str().unwrap();
        let (code, report, stderr, _) = run(&entry, "fault.onnx", &strings(&entry["args"]));
        assert_eq!(code, 1, "{name}: {stderr} {}", summary(&report));
        assert_eq!(
            report["first_divergence"]["module"],
            entry["fault_module"],
            "{name}: {}",
            summary(&report)
        );
    }
}

#[test]
fn ambiguous_mappings_stop_with_the_flag_that_settles_them() {
    for entry in selected(manifest(), "signature fixtures", MIN_SIGNATURE_FIXTURES) {
        let name = entry["name"].as_str().unwrap();
        let case = &entry["ambiguous"];
        if case.is_null() {
            continue;
        }
        let onnx = case["onnx"].as_str().unwrap();
        let mut args = strings(&entry["args"]);
        if case["args"].is_array() {
            args = strings(&case["args"]);
        }
        let (code, _, stderr, _) = run(&entry, onnx, &args);
        assert_eq!(code, 2, "{name}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{name}: one line expected: {stderr}");
        for m in strings(&case["mention"]) {
            assert!(stderr.contains(&m), "{name}: '{m}' not in {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        if case["resolve"].is_array() {
            args.extend(strings(&case["resolve"]));
            let (code, report, stderr, _) = run(&entry, onnx, &args);
            assert_eq!(
                code,
                0,
                "{name} with {args:?}: {stderr} {}",
                summary(&report)
            );
            let by_map = mapping(&report).iter().filter(|m| m[2] == "map").count();
            assert_eq!(by_map * 2, strings(&case["resolve"]).len(), "{name}");
        }
    }
}

fn entry(name: &str) -> Value {
    manifest()
        .into_iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} in the manifest"))
}

#[test]
fn dict_elements_fall_back_to_position_when_no_key_matches() {
    let e = entry("dict_inputs");
    let case = &e["by_position"];
    let (code, report, stderr, stdout) =
        run(&e, case["onnx"].as_str().unwrap(), &strings(&case["args"]));
    assert_eq!(code, 0, "{stderr} {}", summary(&report));
    let expected: Vec<Value> = serde_json::from_str(
        r#"[["inputs.input_ids", "ids", "position"], ["inputs.attention_mask", "mask", "position"],
            ["scaled", null, "torch_only"], ["bias", null, "torch_only"]]"#,
    )
    .unwrap();
    assert_eq!(mapping(&report), expected);
    // The arguments ONNX does not take get their default and None.
    let values: Vec<&Value> = report["signature"]["mapping"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["by"] == "torch_only")
        .map(|m| &m["value"])
        .collect();
    assert_eq!(values, [&Value::from("its default"), &Value::from("None")]);
    assert!(
        stdout.contains("inputs.input_ids ← ids, inputs.attention_mask ← mask"),
        "{stdout}"
    );
}

/// The streaming cell's state lives in the TorchScript module: several samples must each
/// start from the loaded state (otherwise every sample after the first runs from the state
/// the previous one left, while the ONNX model gets zeros, and the check fails).
#[test]
fn a_module_that_writes_its_state_runs_each_sample_from_the_loaded_state() {
    let e = entry("stream_state");
    let args: Vec<String> = ["--samples", "3", "--arg", "rate=3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (code, report, stderr, _) = run(&e, "model.onnx", &args);
    assert_eq!(code, 0, "{stderr} {}", summary(&report));
    assert_eq!(report["samples"].as_array().unwrap().len(), 3);
    // --arg sets the TorchScript int and the ONNX input it maps to alike.
    let rate = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "rate")
        .unwrap()
        .clone();
    assert_eq!(rate["source"], "arg:rate=3", "{rate}");
    let m = report["signature"]["mapping"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["torch"] == "rate")
        .unwrap()
        .clone();
    assert_eq!(m["value"], "3", "{m}");
    // The state ONNX takes is zero-filled, said so, and compared with the module's own.
    let state = report["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "state")
        .unwrap()
        .clone();
    assert_eq!(state["source"], "zeros");
    assert!(state["onnx_only"].is_string(), "{state}");
}

#[test]
fn per_side_inputs_are_reported_as_differing_in_every_report() {
    let e = entry("context_window");
    let out = tempfile::tempdir().unwrap();
    let (md, html, junit) = (
        out.path().join("s.md"),
        out.path().join("r.html"),
        out.path().join("j.xml"),
    );
    let mut args = strings(&e["args"]);
    for (flag, path) in [("--markdown", &md), ("--html", &html), ("--junit", &junit)] {
        args.push(flag.to_string());
        args.push(path.display().to_string());
    }
    let (code, report, stderr, stdout) = run(&e, "model.onnx", &args);
    assert_eq!(code, 0, "{stderr} {}", summary(&report));
    let input = &report["inputs"][0];
    let differs = input["torch_differs"].as_str().expect("torch_differs");
    assert!(
        differs.contains("1x4x6") && differs.contains("1x4x8"),
        "{differs}"
    );
    // Quotes are escaped differently by each format; these fragments are not.
    let fragments = [
        "inputs differ: ONNX input",
        "(float32 1x4x6) instead of this input (float32 1x4x8)",
    ];
    for f in fragments {
        assert!(stdout.contains(f), "{stdout}");
    }
    for path in [&md, &html, &junit] {
        let text = std::fs::read_to_string(path).unwrap();
        for f in fragments {
            assert!(text.contains(f), "{}: {f} not in {text}", path.display());
        }
    }
}

#[test]
fn bad_signature_flags_are_one_line_errors_naming_what_exists() {
    let e = entry("stream_state");
    for (args, mention) in [
        (
            vec!["--map", "y=input"],
            "its arguments: x, rate, self.state",
        ),
        (vec!["--map", "x=nope"], "its inputs: input, state, rate"),
        (vec!["--arg", "rate=fast"], "rate is an int"),
        (vec!["--arg", "x=1"], "'x' is a Tensor"),
    ] {
        let mut all = strings(&e["args"]);
        all.extend(args.iter().map(|s| s.to_string()));
        let (code, _, stderr, _) = run(&e, "model.onnx", &all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(mention), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

#[test]
fn the_config_file_maps_arguments_too() {
    let e = entry("stream_state");
    let dir = folder(&e);
    let cfg = tempfile::tempdir().unwrap();
    let path = cfg.path().join("align-check.toml");
    std::fs::write(
        &path,
        format!(
            "torch_model = {:?}\nonnx_model = {:?}\n[inputs]\narchive = {:?}\nmap = {{ rate = \"sample_rate\", \"self.state\" = \"h0\" }}\nargs = {{ rate = 2 }}\n",
            dir.join("model.pt"),
            dir.join("renamed.onnx"),
            dir.join("inputs.npz")
        ),
    )
    .unwrap();
    let output = binary()
        .arg("--config")
        .arg(&path)
        .arg("--quiet")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
}

#[test]
fn inspect_shows_both_signatures_with_the_mapping_a_check_would_use() {
    let e = entry("stream_state");
    let output = binary()
        .current_dir(folder(&e))
        .args([
            "inspect",
            "model.pt",
            "--onnx",
            "model.onnx",
            "--inputs",
            "inputs.npz",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for row in [
        "x: Tensor",
        "input: float32 1x2x6  by position",
        "self.state (module state) ←  state: float32 1x8",
        "rate: int",
        "rate: int64 scalar    by name",
        "ONNX outputs: output, state_out",
    ] {
        assert!(text.contains(row), "'{row}' not in\n{text}");
    }
    // The mapped arguments run: the capture lists the values of the TorchScript module.
    assert!(
        text.contains("values captured from the TorchScript model"),
        "{text}"
    );
}
