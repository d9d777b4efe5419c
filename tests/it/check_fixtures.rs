//! The whole check on real fixtures, judged from the JSON report the way a CI job reads it:
//! clean fixtures pass, every planted fault fails with the right first divergence (a layer
//! that fails in isolation too: `introduced`), and
//! pairing covers at least 95% of TorchScript layers with both exporters.

use crate::common::{
    check_fixture, coverage_ratio, expected_fault_modules, manifest, selected, stderr_of,
};

#[test]
fn clean_fixtures_pass_with_high_coverage() {
    let mut failures = Vec::new();
    let clean = manifest()
        .into_iter()
        .filter(|e| e["fault"].is_null())
        .collect();
    for entry in selected(clean, "clean fixtures", 18) {
        let name = entry["name"].as_str().unwrap();
        let (code, report, output) = check_fixture(name, &[]);
        if code != 0 || report["verdict"] != "pass" {
            failures.push(format!(
                "{name}: exit {code}, first divergence {}, stderr {}",
                report["first_divergence"],
                stderr_of(&output)
            ));
            continue;
        }
        let ratio = coverage_ratio(&report);
        if ratio < 0.95 {
            failures.push(format!("{name}: coverage {ratio:.3} < 0.95"));
        }
        assert!(report["first_divergence"].is_null());
        // A clean pass costs nothing extra: no isolation run.
        assert!(report["isolation"].is_null(), "{name}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_planted_fault_fails_at_the_expected_layer() {
    let mut failures = Vec::new();
    let faults = manifest()
        .into_iter()
        .filter(|e| !e["fault"].is_null())
        .collect();
    for entry in selected(faults, "planted faults", 5) {
        let name = entry["name"].as_str().unwrap();
        let fault = &entry["fault"];
        let expected = expected_fault_modules(fault);
        let (code, report, output) = check_fixture(name, &[]);
        let first = &report["first_divergence"];
        let module = first["module"].as_str().unwrap_or("<none>");
        if code != 1 || report["verdict"] != "fail" || !expected.contains(&module) {
            failures.push(format!(
                "{name}: exit {code}, first divergence {module} (expected one of {expected:?}); stderr {}",
                stderr_of(&output)
            ));
        }
        let index = first["layer_index"].as_u64().unwrap_or(u64::MAX) as usize;
        if let Some(layer) = report["layers"].as_array().and_then(|l| l.get(index)) {
            assert_eq!(
                layer["pass"], false,
                "{name}: first divergence layer passes"
            );
            assert_eq!(layer["module"], first["module"]);
            // Its own segment, fed PyTorch's values, fails too: it makes the error.
            assert_eq!(layer["origin"], "introduced", "{name}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn exit_zero_reports_without_gating() {
    let (code, report, _) = check_fixture("fault_my_add", &["--exit-zero"]);
    assert_eq!(code, 0);
    assert_eq!(report["verdict"], "fail");
}

#[test]
fn coverage_gate_fails_when_asked_for_more_than_was_compared() {
    // fault_my_add compares most but not all of its TorchScript layers (the aten::mul of
    // my_add has no ONNX twin); asking for 100% of it must fail, and asking for 0 must not.
    let (code, report, output) =
        check_fixture("fault_my_add", &["--min-coverage", "1.0", "--exit-zero"]);
    assert_eq!(code, 0, "{}", stderr_of(&output));
    let ratio = coverage_ratio(&report);
    assert!(
        ratio < 1.0,
        "fault_my_add must leave a layer unpaired for this test to mean anything: {}",
        report["coverage"]
    );
    let failures = report["gate_failures"].to_string();
    assert!(failures.contains("min-coverage"), "{failures}");

    let (code, report, output) =
        check_fixture("fault_my_add", &["--min-coverage", "0", "--exit-zero"]);
    assert_eq!(code, 0, "{}", stderr_of(&output));
    let failures = report["gate_failures"].to_string();
    assert!(
        report["gate_failures"].is_array() && !failures.contains("min-coverage"),
        "{failures}"
    );
}
