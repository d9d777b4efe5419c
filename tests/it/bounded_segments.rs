//! Bounded mode as consecutive graph segments (`onnx::segmented`): under a memory budget the
//! ONNX side fetches its values in groups, each from the segment of the graph that computes
//! them, fed from the values earlier groups fetched. What is checked:
//!
//! - on the fixture zoo, a capture with every value in a group of its own (as many segments
//!   as the model has values) holds every value bit for bit as the single-run capture does,
//!   with the same uncapturable list, and almost every group ran as a segment rather than
//!   the whole graph;
//! - through the binary, `--max-memory` on a fixture many times the budget reports every
//!   statistic as the unbounded run does, stays within the budget, and says under `-v` that
//!   its groups ran as segments (none fell back to the whole graph).

use crate::common::{binary, fixture, fixtures_dir};
use align_check::capture::store::Keep;
use align_check::capture::tensor::{DType, HostTensor};
use align_check::capture::Capture;
use align_check::inputs::npy::read_npz;
use align_check::inputs::random::random_tensor;
use align_check::onnx;
use align_check::onnx::capture::{GroupSplit, OnnxRunner};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Models whose single-run capture is larger than this are left to the binary test below
/// (captured twice in memory here).
const MAX_CAPTURE_BYTES: u64 = 64 << 20;
/// Fixtures that must be compared for the test to mean something (the zoo has about 70 ONNX
/// models; a few need a custom-op library, or inputs the archive names otherwise).
const MIN_COMPARED: usize = 55;

/// Every value as text that tells apart each bit the comparisons read (NaN equals NaN here,
/// -0.0 does not equal 0.0), with its name, type and shape.
fn values(c: &Capture) -> Vec<String> {
    c.values
        .iter()
        .map(|v| {
            let t = v.tensor.as_ref().expect("captured values hold data");
            format!(
                "{} {:?} {:?} {:?}",
                v.name,
                v.dtype,
                v.shape,
                t.data().unwrap()
            )
        })
        .collect()
}

fn uncapturable(c: &Capture) -> Vec<(String, String)> {
    c.uncapturable
        .iter()
        .map(|u| (u.name.clone(), u.reason.clone()))
        .collect()
}

/// The fixture's own inputs, or seeded random ones of the graph's signature (a symbolic
/// dimension as 2) for a fixture that has none.
fn inputs_for(dir: &Path, model: &onnx::OnnxModel) -> Vec<(String, HostTensor)> {
    if dir.join("inputs.npz").is_file() {
        return read_npz(&dir.join("inputs.npz")).unwrap();
    }
    onnx::inputs(model)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, spec)| {
            let shape: Vec<usize> = spec
                .dims
                .iter()
                .map(|d| match d {
                    onnx::Dim::Fixed(n) => *n,
                    onnx::Dim::Symbolic(_) => 2,
                })
                .collect();
            (spec.name, random_tensor(spec.dtype, &shape, 7, i))
        })
        .collect()
}

#[test]
fn grouped_captures_equal_the_single_run_bit_for_bit_on_the_zoo() {
    // The zoo's models and those one folder down (quantised, control flow, optimised).
    let subdirs = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    let mut dirs: Vec<PathBuf> = subdirs(&fixtures_dir())
        .into_iter()
        .flat_map(|d| {
            let mut v = subdirs(&d);
            v.push(d);
            v
        })
        .filter(|d| d.join("model.onnx").is_file())
        .collect();
    dirs.sort();
    let (mut compared, mut runs, mut whole_graph, mut half) = (0, 0, 0, 0);
    for dir in &dirs {
        let model = onnx::load(&dir.join("model.onnx")).unwrap();
        let inputs = inputs_for(dir, &model);
        let Ok(mut single) = OnnxRunner::new(&model, 1, None) else {
            continue; // a custom op whose library this test does not register
        };
        if single.capture_estimate() > MAX_CAPTURE_BYTES {
            continue;
        }
        // Inputs the archive names otherwise than the graph are not this test's business.
        let Ok(expected) = single.capture(&inputs, &Keep::Memory, None) else {
            continue;
        };
        drop(single);
        let mut grouped = OnnxRunner::from_model(model, 1, None, true).unwrap();
        // Every value its own group (as many segments as the model has values), each fed
        // whatever its cut holds.
        let split = GroupSplit {
            fetch: 1,
            feed: u64::MAX,
        };
        let got = grouped
            .capture_split(&inputs, &Keep::Memory, Some(split))
            .unwrap_or_else(|e| panic!("{}: grouped capture failed: {e}", dir.display()));
        let shown = dir.display();
        runs += grouped.runs_last_capture;
        whole_graph += grouped.whole_graph_runs_last_capture;
        let (got_values, expected_values) = (values(&got), values(&expected));
        assert_eq!(got_values.len(), expected_values.len(), "{shown}");
        assert_eq!(uncapturable(&got), uncapturable(&expected), "{shown}");
        // Half precision: ONNX Runtime computes it in float32 where its CPU kernels lack it,
        // and whether a consumer reads the float32 or the rounded output depends on which
        // values are graph outputs (whole-graph group runs differ from one run the same way);
        // such a model is held to the same values, types and shapes, not the same bits.
        if got
            .values
            .iter()
            .any(|v| matches!(v.dtype, DType::F16 | DType::Bf16))
        {
            let layout = |c: &Capture| -> Vec<String> {
                c.values
                    .iter()
                    .map(|v| format!("{} {:?} {:?}", v.name, v.dtype, v.shape))
                    .collect()
            };
            assert_eq!(layout(&got), layout(&expected), "{shown}");
            half += 1;
            continue;
        }
        let differ: Vec<&str> = got_values
            .iter()
            .zip(&expected_values)
            .zip(&got.values)
            .filter(|((g, e), _)| g != e)
            .map(|(_, v)| v.name.as_str())
            .collect();
        assert!(differ.is_empty(), "{shown}: values differ: {differ:?}");
        compared += 1;
    }
    eprintln!(
        "{compared} fixtures compared bit for bit ({half} half-precision ones by layout): {runs} group runs, {whole_graph} of them the whole graph"
    );
    assert!(
        compared >= MIN_COMPARED,
        "only {compared} fixtures compared"
    );
    // The groups are many (otherwise the comparison proves little), and almost all of them
    // ran as segments: a graph output no node computes, or a cut larger than its share, is
    // the exception.
    assert!(
        runs > 5 * compared,
        "only {runs} group runs over {compared} models"
    );
    assert!(
        whole_graph * 20 < runs,
        "{whole_graph} of {runs} group runs fell back to the whole graph"
    );
}

/// Runs the binary on `big_activations_legacy` with `extra` and returns the report and stderr.
fn run(extra: &[&str], dir: &Path, tag: &str) -> (Value, String) {
    let m = fixture("big_activations_legacy");
    let json = dir.join(format!("{tag}.json"));
    let out = binary()
        .arg(m.join("model.pt"))
        .arg(m.join("model.onnx"))
        .args(["--threads", "2", "-v", "--json"])
        .arg(&json)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (report, stderr)
}

#[test]
fn a_budgeted_check_runs_segments_with_the_unbounded_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let (unbounded, _) = run(&[], dir.path(), "unbounded");
    let (bounded, stderr) = run(&["--max-memory", "450M"], dir.path(), "bounded");
    let runs = bounded["timing"]["onnx_runs"].as_u64().unwrap();
    assert!(runs > 1, "one ONNX run: the budget did not bind");
    assert!(
        stderr.contains(&format!(
            "fetched in {runs} run(s): {runs} graph segment(s) fed from the previous cut, 0 whole-graph run(s)"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("runs the whole graph instead"), "{stderr}");
    let peak = bounded["memory"]["peak_rss_bytes"].as_u64().unwrap();
    assert!(peak < 450 << 20, "peak {} MB over the budget", peak >> 20);
    for key in [
        "verdict",
        "layers",
        "outputs",
        "details",
        "first_divergence",
        "coverage",
    ] {
        assert!(unbounded[key] == bounded[key], "`{key}` differs");
    }
}
