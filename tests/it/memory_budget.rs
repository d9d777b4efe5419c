//! `--max-memory`: a network whose captured activations (~1 GB over both sides) are many
//! times a 450 MB budget is checked under that budget, with every statistic identical to the
//! unbounded run, isolated errors included (the isolation run goes in groups too). Peak memory is the kernel's high-water
//! mark of the child's own address space (`VmHWM`, which the report carries as
//! `memory.peak_rss_bytes`), not the child's rusage: `ru_maxrss` of a spawned child also
//! counts the resident memory of the process that spawned it (the vfork'd child execs out of
//! the parent's address space and inherits its high-water mark), so in the full suite, with
//! other tests' captures resident in this process, it read 456-461 MB for a run that peaks at
//! 329 MB on its own. Fixture: tests/fixtures/big_activations_legacy (scripts/make_memory_fixture.py).

use crate::common::{binary, fixture};
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;

const BUDGET_MB: u64 = 450;

struct Run {
    code: i32,
    peak_rss_mb: u64,
    stderr: String,
    report: Value,
}

/// Runs the binary on the fixture and reads its report.
fn run(extra: &[&str], dir: &Path) -> Run {
    let m = fixture("big_activations_legacy");
    let json = dir.join(format!("report{}.json", extra.len()));
    let err_path = dir.join(format!("stderr{}.txt", extra.len()));
    let child = binary()
        .arg(m.join("model.pt"))
        .arg(m.join("model.onnx"))
        .args(["--threads", "2", "-q", "--json"])
        .arg(&json)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let code = child
        .wait_with_output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1);
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    Run {
        code,
        peak_rss_mb: report["memory"]["peak_rss_bytes"]
            .as_u64()
            .unwrap_or(u64::MAX)
            >> 20,
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        report,
    }
}

#[test]
fn a_budget_far_below_the_activations_is_kept_with_identical_statistics() {
    let dir = tempfile::tempdir().unwrap();
    // With --isolate, so that the isolation run is held to the budget too (in groups).
    let unbounded = run(&["--isolate"], dir.path());
    let budget = format!("{BUDGET_MB}M");
    let bounded = run(&["--isolate", "--max-memory", &budget], dir.path());
    assert_eq!(unbounded.code, 0, "{}", unbounded.stderr);
    assert_eq!(bounded.code, 0, "{}", bounded.stderr);

    // The test means something only if the activations are many times the budget (under a
    // budget every captured tensor of both sides goes through the spill file) and the
    // unbounded run does not fit it.
    let spilled_mb = bounded.report["memory"]["spilled_bytes"].as_u64().unwrap() >> 20;
    assert!(
        spilled_mb > BUDGET_MB * 2,
        "only {spilled_mb} MB of activations: the fixture no longer exceeds the budget"
    );
    assert!(
        unbounded.peak_rss_mb > BUDGET_MB,
        "unbounded run peaked at {} MB, within the budget",
        unbounded.peak_rss_mb
    );
    assert!(
        bounded.peak_rss_mb < BUDGET_MB,
        "bounded run peaked at {} MB, over the {BUDGET_MB} MB budget",
        bounded.peak_rss_mb
    );
    assert!(bounded.report["timing"]["onnx_runs"].as_u64().unwrap() > 1);
    assert_eq!(unbounded.report["timing"]["onnx_runs"].as_u64(), Some(1));
    assert!(bounded.report["isolation"]["runs"].as_u64().unwrap() > 1);
    assert_eq!(unbounded.report["isolation"]["runs"].as_u64(), Some(1));
    assert!(bounded.report["isolation"]["error"].is_null());

    // Every statistic (isolated errors included), every detail, the verdict and the pairing
    // are the same.
    for key in [
        "verdict",
        "layers",
        "outputs",
        "details",
        "first_divergence",
        "first_nonfinite",
        "coverage",
    ] {
        assert!(
            unbounded.report[key] == bounded.report[key],
            "`{key}` differs between the unbounded and the bounded run"
        );
    }
    assert_eq!(unbounded.report["layers"].as_array().unwrap().len(), 61);
}

#[test]
fn a_budget_below_the_loaded_models_says_what_would_fit() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&["--max-memory", "100M"], dir.path());
    assert_eq!(r.code, 2, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].contains("--max-memory 100 MB is too small")
            && lines[0].contains("use at least --max-memory"),
        "{}",
        lines[0]
    );
    assert!(!r.stderr.contains("panicked"));
}

#[test]
fn sizes_that_are_not_sizes_are_refused_by_the_parser() {
    let out = binary()
        .args(["a.pt", "b.onnx", "--max-memory", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--max-memory") && err.contains("not a size"),
        "{err}"
    );
}
