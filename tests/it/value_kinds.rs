//! Every kind of value and odd model of issue 6, one table row each (tests/fixtures/
//! value_kinds.json, written by scripts/make_value_fixtures.py): fp16/bf16/fp64 models,
//! integer and bool tensors, zero-size and 0-d values, tuple/list/dict/nested outputs, an
//! argument the ONNX export dropped, a non-tensor output, NaN/Inf inputs. Each row is run
//! through the real binary and judged by its exit code and either its one-line error or the
//! facts its JSON report must show.

use crate::common::{binary, fixture, fixtures_dir, selected, stderr_of};
use serde_json::Value;

fn table() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures_dir().join("value_kinds.json"))
        .expect("tests/fixtures/value_kinds.json exists (run scripts/make_value_fixtures.py)");
    serde_json::from_str(&text).expect("value_kinds.json is JSON")
}

/// Runs the check on one fixture: (exit code, JSON report or Null, stderr).
fn run(entry: &Value, extra: &[&str]) -> (i32, Value, String) {
    let dir = fixture(entry["name"].as_str().unwrap());
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let mut cmd = binary();
    cmd.arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--json")
        .arg(&json)
        .arg("--quiet");
    if entry["inputs_npz"] != false && !extra.contains(&"--inputs") {
        cmd.arg("--inputs").arg(dir.join("inputs.npz"));
    }
    let output = cmd.args(extra).output().unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (
        output.status.code().unwrap_or(-1),
        report,
        stderr_of(&output),
    )
}

/// What is wrong with an error run, if anything: exit 2, one line, the expected words, no
/// panic or C++ trace.
fn check_error(stderr: &str, mention: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != 1 {
        problems.push(format!("expected one line on stderr, got {}", lines.len()));
    }
    for m in mention.iter().filter_map(Value::as_str) {
        if !stderr.contains(m) {
            problems.push(format!("'{m}' not in the message"));
        }
    }
    for bad in [
        "panicked",
        "RUST_BACKTRACE",
        "frame #",
        "Exception raised from",
    ] {
        if stderr.contains(bad) {
            problems.push(format!("'{bad}' on stderr"));
        }
    }
    problems
}

/// What is wrong with a report against the row's facts, if anything.
fn check_facts(report: &Value, facts: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let outputs = report["outputs"].as_array().cloned().unwrap_or_default();
    let layers = report["layers"].as_array().cloned().unwrap_or_default();
    if let Some(dtype) = facts["dtype"].as_str() {
        // Every compared float value has the model's precision and was judged by that
        // precision's default tolerance, which the report lists under the same name: the
        // layers' (`default float16`) and the outputs' own (`outputs float16`).
        let rule = |applies_to: String| {
            report["tolerances"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["applies_to"] == applies_to)
                .cloned()
                .unwrap_or(Value::Null)
        };
        let (layer_tol, output_tol) = (
            rule(format!("default {dtype}")),
            rule(format!("outputs {dtype}")),
        );
        let judged = outputs
            .iter()
            .map(|v| (v, &output_tol))
            .chain(layers.iter().map(|v| (v, &layer_tol)));
        for (v, tol) in judged {
            if v["dtype"] != dtype {
                problems.push(format!("value {} has dtype {}", v["module"], v["dtype"]));
            }
            if v["atol"] != tol["atol"] || v["rtol"] != tol["rtol"] {
                problems.push(format!(
                    "value {} judged by atol {} rtol {}, not the {dtype} default",
                    v["module"], v["atol"], v["rtol"]
                ));
            }
        }
        if layers.is_empty() {
            problems.push("no layer compared".to_string());
        }
    }
    if let Some(want) = facts["output_dtypes"].as_array() {
        let got: Vec<&Value> = outputs.iter().map(|o| &o["dtype"]).collect();
        if got != want.iter().collect::<Vec<_>>() {
            problems.push(format!("output dtypes {got:?}, expected {want:?}"));
        }
        // Integer and bool values are compared exactly, as layers as well as outputs.
        for v in outputs.iter().chain(&layers) {
            if matches!(v["dtype"].as_str(), Some("int64" | "bool")) && v["atol"] != 0.0 {
                problems.push(format!("{} compared with atol {}", v["dtype"], v["atol"]));
            }
        }
    }
    if let Some(want) = facts["exact_layers"].as_u64() {
        let exact_layers = layers
            .iter()
            .filter(|l| matches!(l["dtype"].as_str(), Some("int64" | "bool")))
            .count();
        if (exact_layers as u64) < want {
            problems.push(format!(
                "{exact_layers} int64/bool layers compared, expected {want} (argmax and mask)"
            ));
        }
    }
    if facts["only_coverage_fails"] == true {
        for v in outputs.iter().chain(&layers) {
            if v["pass"] != true {
                problems.push(format!("value {} fails", v["module"]));
            }
        }
        let gates = report["gate_failures"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if gates.is_empty() || gates.iter().any(|g| !g.to_string().contains("compared")) {
            problems.push(format!("gate failures {gates:?}, expected coverage only"));
        }
    }
    if let Some(shape) = facts["output_shape"].as_array() {
        if outputs.first().map(|o| &o["shape"]) != Some(&Value::Array(shape.clone())) {
            problems.push(format!("output shape {:?}", outputs.first()));
        }
    }
    if let Some(n) = facts["scalar_outputs"].as_u64() {
        let scalars = outputs
            .iter()
            .filter(|o| o["shape"].as_array().is_some_and(|s| s.is_empty()))
            .count();
        if scalars as u64 != n {
            problems.push(format!("{scalars} 0-d outputs, expected {n}"));
        }
    }
    if let Some(n) = facts["outputs"].as_u64() {
        if outputs.len() as u64 != n {
            problems.push(format!("{} outputs compared, expected {n}", outputs.len()));
        }
    }
    if let Some(names) = facts["unused_by_onnx"].as_array() {
        let noted: Vec<&Value> = report["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["torch_only"].is_string())
            .map(|i| &i["name"])
            .collect();
        if noted != names.iter().collect::<Vec<_>>() {
            problems.push(format!("inputs noted as TorchScript-only: {noted:?}"));
        }
    }
    if facts["input_nonfinite"] == true {
        let input = &report["inputs"][0];
        if input["nonfinite"].as_u64().unwrap_or(0) == 0 {
            problems.push(format!("input's non-finite count not reported: {input}"));
        }
        // The NaN/Inf are counted on both sides, where they first appear.
        for side in ["torch", "onnx"] {
            let first = &report["first_nonfinite"][side];
            if first["nan"].as_u64().unwrap_or(0) + first["inf"].as_u64().unwrap_or(0) == 0 {
                problems.push(format!("first_nonfinite.{side} is {first}"));
            }
        }
    }
    problems
}

#[test]
fn every_value_kind_is_handled_or_refused_in_one_line() {
    let mut failures = Vec::new();
    let exported = table()
        .into_iter()
        .filter(|e| e["export_error"].is_null())
        .collect();
    for entry in selected(exported, "exported value-kind fixtures", 28) {
        let name = entry["name"].as_str().unwrap().to_string();
        let expect = &entry["expect"];
        let want = expect["exit"].as_i64().unwrap() as i32;
        let (code, report, stderr) = run(&entry, &[]);
        eprintln!("{name}: exit {code} {}", stderr.trim());
        if code != want {
            failures.push(format!(
                "{name}: exit {code}, expected {want}; stderr: {}",
                stderr.trim()
            ));
            continue;
        }
        let problems = if want == 2 {
            check_error(&stderr, expect["mention"].as_array().unwrap_or(&vec![]))
        } else {
            let verdict = if want == 0 { "pass" } else { "fail" };
            let mut p = Vec::new();
            if report["verdict"] != verdict {
                p.push(format!("verdict {}", report["verdict"]));
            }
            p.extend(check_facts(&report, &expect["facts"]));
            p
        };
        failures.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The unused argument gets the data the user names, and a used one is accepted once the
/// user gives it a shape.
#[test]
fn torch_only_argument_takes_the_users_data() {
    let entry = table()
        .into_iter()
        .find(|e| e["name"] == "vk_used_arg_legacy")
        .unwrap();
    let (code, report, stderr) = run(&entry, &["--shape", "bias=2x3"]);
    // TorchScript adds the random bias, ONNX does not: a real divergence at the output.
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["verdict"], "fail");
    let bias = &report["inputs"][1];
    assert_eq!(bias["name"], "bias");
    assert_eq!(bias["shape"], serde_json::json!([2, 3]));
    assert!(bias["torch_only"].is_string(), "{bias}");

    // An argument the legacy export dropped as unused takes the shape given, and the pair
    // still passes: the data cannot matter.
    let entry = table()
        .into_iter()
        .find(|e| e["name"] == "vk_unused_arg_legacy")
        .unwrap();
    let (code, report, stderr) = run(&entry, &["--shape", "mask=2x5"]);
    assert_eq!(code, 0, "{stderr}");
    let mask = &report["inputs"][1];
    assert_eq!(mask["shape"], serde_json::json!([2, 5]));
    assert!(mask["source"].as_str().unwrap().starts_with("random:"));

    // An archive holding every forward argument: the dropped one's array goes to TorchScript.
    let all = fixture("vk_unused_arg_legacy").join("inputs_all_arguments.npz");
    let (code, report, stderr) = run(&entry, &["--inputs", all.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let mask = &report["inputs"][1];
    assert_eq!(mask["shape"], serde_json::json!([2, 5]));
    assert!(
        mask["source"].as_str().unwrap().ends_with("[mask]"),
        "{mask}"
    );
}

/// NaN and infinities in the input are counted on each side in the output row (they agree
/// position by position, so the verdict is a pass) and the input says how many it held, so
/// a reader knows they came from the data and not from either runtime.
#[test]
fn nan_inputs_are_counted_in_the_output_row() {
    let entry = table()
        .into_iter()
        .find(|e| e["name"] == "vk_nan_inputs_legacy")
        .unwrap();
    let (code, report, stderr) = run(&entry, &[]);
    assert_eq!(code, 0, "{stderr}");
    let out = &report["outputs"][0];
    assert_eq!(
        (out["nan_torch"].as_u64(), out["nan_onnx"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        (out["inf_torch"].as_u64(), out["inf_onnx"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(report["inputs"][0]["nonfinite"], 3);
}
