//! The CI gate beyond one input: several samples (worst case wins) and a baseline that
//! catches error growth while it is still under tolerance.

use crate::common::{binary, fixture, stderr_of};
use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

#[test]
fn a_fault_seen_by_one_sample_of_eight_fails_the_gate() {
    let dir = fixture("fault_one_sample");
    let run = |inputs: &std::path::Path| {
        let out = tempfile::tempdir().unwrap();
        let json = out.path().join("r.json");
        let status = binary()
            .arg(dir.join("model.pt"))
            .arg(dir.join("model.onnx"))
            .arg("--inputs")
            .arg(inputs)
            .arg("--json")
            .arg(&json)
            .status()
            .unwrap();
        let report: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        (status.code(), report)
    };
    // Each benign sample alone passes: a single-input check would miss the fault.
    let (code, report) = run(&dir.join("samples/sample_0.npz"));
    assert_eq!(code, Some(0));
    assert_eq!(report["verdict"], "pass");

    let (code, report) = run(&dir.join("samples"));
    assert_eq!(code, Some(1));
    assert_eq!(report["samples"].as_array().unwrap().len(), 8);
    assert_eq!(report["first_divergence"]["module"], "act");
    let act =
        &report["layers"][report["first_divergence"]["layer_index"].as_u64().unwrap() as usize];
    assert_eq!(act["worst_sample"], 5);
    assert_eq!(act["samples"], 8);
    assert!(report["samples"][5]
        .as_str()
        .unwrap()
        .ends_with("sample_5.npz"));
}

#[test]
fn seeded_samples_aggregate_on_a_clean_model() {
    let dir = fixture("resnet_tiny_legacy");
    let out = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .args(["--samples", "3", "--json", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["samples"],
        serde_json::json!(["seed 0", "seed 1", "seed 2"])
    );
    assert!(report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["samples"] == 3));
}

/// Runs srcnn_legacy (a clean fixture) with `--baseline PATH` and `extra` arguments.
fn srcnn_against_baseline(baseline: &Path, extra: &[&str]) -> Output {
    let fx = fixture("srcnn_legacy");
    binary()
        .arg(fx.join("model.pt"))
        .arg(fx.join("model.onnx"))
        .arg("--inputs")
        .arg(fx.join("inputs.npz"))
        .arg("--baseline")
        .arg(baseline)
        .args(extra)
        .output()
        .unwrap()
}

/// Writes srcnn_legacy's baseline to `baseline`, then pretends its worst layer was ten times
/// more accurate when it was taken; returns that layer's module path and ONNX node.
fn baseline_ten_times_better(baseline: &Path) -> (String, String) {
    // Writing the first baseline on purpose, then checking against it, passes.
    let out = srcnn_against_baseline(baseline, &["--update-baseline"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(srcnn_against_baseline(baseline, &[]).status.code(), Some(0));

    let mut report: Value =
        serde_json::from_str(&std::fs::read_to_string(baseline).unwrap()).unwrap();
    let layers = report["layers"].as_array_mut().unwrap();
    let worst = layers
        .iter_mut()
        .max_by(|a, b| {
            a["rel_to_range"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["rel_to_range"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(worst["pass"], true, "the layer is under tolerance");
    let module = worst["module"].as_str().unwrap().to_string();
    let onnx_node = worst["onnx_node"].as_str().unwrap().to_string();
    let rel = worst["rel_to_range"].as_f64().unwrap();
    worst["rel_to_range"] = serde_json::json!(rel / 10.0);
    std::fs::write(baseline, serde_json::to_vec(&report).unwrap()).unwrap();
    (module, onnx_node)
}

#[test]
fn tenfold_error_growth_under_tolerance_fails_against_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    let (module, onnx_node) = baseline_ten_times_better(&baseline);

    let out = srcnn_against_baseline(&baseline, &["--json", "-"]);
    assert_eq!(out.status.code(), Some(1));
    let now: Value = serde_json::from_slice(&out.stdout).unwrap();
    let grown: Vec<&Value> = now["baseline"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["exceeded"] == true)
        .collect();
    assert_eq!(grown.len(), 1, "{grown:?}");
    assert_eq!(grown[0]["name"], module.as_str());
    assert_eq!(grown[0]["onnx_node"], onnx_node.as_str());
    assert!(now["layers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["pass"] == true));
    // A looser limit accepts the same growth.
    assert_eq!(
        srcnn_against_baseline(&baseline, &["--max-growth", "20"])
            .status
            .code(),
        Some(0)
    );
}

/// (classname, name, failure message) of every test case of a JUnit report.
fn junit_cases(xml: &str) -> Vec<(String, String, Option<String>)> {
    crate::junit_xml::parse(xml)
        .cases
        .into_iter()
        .map(|c| (c.classname, c.name, c.failure))
        .collect()
}

/// A run that fails on baseline growth alone (every layer and output within tolerance, full
/// coverage) must fail every report the same way: the JUnit file once had zero failures
/// because it judged the gates itself and knew nothing of the baseline.
#[test]
fn a_run_failing_only_on_baseline_growth_fails_in_every_report() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    let (module, _) = baseline_ten_times_better(&baseline);
    let (junit, json, md) = (
        dir.path().join("r.junit.xml"),
        dir.path().join("r.json"),
        dir.path().join("r.md"),
    );
    let out = srcnn_against_baseline(
        &baseline,
        &[
            "--junit",
            junit.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["verdict"], "fail");
    let gates = report["gates"]
        .as_array()
        .expect("the JSON report lists its gates");
    let failed: Vec<&str> = gates
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["baseline"], "{gates:?}");
    let names: Vec<&str> = gates.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["layers", "outputs", "coverage", "production", "baseline"]
    );
    assert_eq!(
        report["gate_failures"],
        serde_json::json!([gates[4]["detail"]]),
        "gate_failures are the failed gates' details"
    );

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"failures="1""#), "{xml}");
    let failing: Vec<_> = junit_cases(&xml)
        .into_iter()
        .filter(|(_, _, failure)| failure.is_some())
        .collect();
    assert_eq!(failing.len(), 1, "{xml}");
    let (classname, name, message) = &failing[0];
    assert_eq!(classname, "align-check.baseline", "{xml}");
    assert!(name.contains("baseline"), "{xml}");
    let message = message.as_deref().unwrap();
    assert!(
        message.contains("baseline") && message.contains(&module),
        "the failure names the baseline and the layer that grew: {message}"
    );

    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("FAIL") && md.contains("since the baseline"),
        "{md}"
    );
}

#[test]
fn config_file_holds_the_check_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture("fault_gelu");
    let config = dir.path().join("align-check.toml");
    std::fs::write(
        &config,
        format!(
            "torch_model = {:?}\nonnx_model = {:?}\n[inputs]\narchive = {:?}\n\
             [[tolerances.override]]\npattern = \"mlp.*\"\natol = 1e-2\nrtol = 1e-2\n\
             [reports]\njson = \"report.json\"\n",
            fx.join("model.pt"),
            fx.join("model.onnx"),
            fx.join("inputs.npz"),
        ),
    )
    .unwrap();
    let out = binary().arg("--config").arg(&config).output().unwrap();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    // The override loosens the GELU layer only; the fault still shows downstream, so the
    // first divergence moves past mlp.act.
    let act = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["module"] == "mlp.act")
        .unwrap();
    assert_eq!(act["pass"], true);
    assert_eq!(act["atol"], 1e-2);
    assert!(out.status.code().is_some());

    // A flag wins over the file: an impossible coverage demand fails the gate.
    let out = binary()
        .arg("--config")
        .arg(&config)
        .args(["--min-coverage", "1.0", "--json", "-", "--exit-zero"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["coverage"]["min_coverage"], 1.0);

    // Unknown keys are errors that name the key.
    std::fs::write(&config, "torch_model = \"a.pt\"\n[tolerances]\natoll = 1\n").unwrap();
    let out = binary().arg("--config").arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("atoll"));
}

/// align-check's own work (pairing, statistics in parallel chunks merged in a fixed order)
/// is deterministic. The runtimes' kernels are not across thread counts: libtorch and ONNX
/// Runtime split reductions by thread, which moves results by ~1e-8 (seen with 4 threads on
/// this 2-core machine). So each thread count is checked against itself, in separate runs.
#[test]
fn same_models_inputs_and_seed_give_the_same_report_on_one_thread_and_many() {
    let dir = fixture("resnet_tiny_dynamo");
    let report = |threads: &str| {
        let out = binary()
            .arg(dir.join("model.pt"))
            .arg(dir.join("model.onnx"))
            .args(["--seed", "3", "--threads", threads, "--json", "-"])
            .output()
            .unwrap();
        let mut r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let obj = r.as_object_mut().unwrap();
        obj.remove("timing");
        // The OS's peak-memory reading is a measurement, like the timings.
        obj["memory"]
            .as_object_mut()
            .unwrap()
            .remove("peak_rss_bytes");
        obj["environment"]
            .as_object_mut()
            .unwrap()
            .remove("threads");
        r
    };
    for threads in ["1", "2", "4"] {
        let first = report(threads);
        assert_eq!(first["verdict"], "pass");
        assert_eq!(
            first,
            report(threads),
            "two runs with --threads {threads} differ"
        );
    }
}

/// Checks the pair in folder `models` (model.pt, model.onnx, inputs.npz), writing its JSON
/// report to `json` and, when asked, its HTML report to `html`; returns the exit code.
fn check_into(models: &Path, json: &Path, html: Option<&Path>) -> i32 {
    let mut cmd = binary();
    cmd.arg(models.join("model.pt"))
        .arg(models.join("model.onnx"))
        .arg("--inputs")
        .arg(models.join("inputs.npz"))
        .arg("--json")
        .arg(json)
        .arg("--quiet");
    if let Some(html) = html {
        cmd.arg("--html").arg(html);
    }
    let out = cmd.output().unwrap();
    assert!(json.is_file(), "{}", stderr_of(&out));
    out.status.code().unwrap_or(-1)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The cells of the Markdown table's model rows (the header and rule left out), split on
/// the pipes that are not escaped.
fn markdown_rows(md: &str) -> Vec<Vec<String>> {
    md.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| model |"))
        .map(|l| {
            l.replace("\\|", "\u{0}")
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('\u{0}', "\\|"))
                .collect()
        })
        .collect()
}

/// Every `href` of an XML-well-formed HTML page, unescaped.
fn hrefs(html: &str) -> Vec<String> {
    let mut reader = Reader::from_str(html);
    reader.config_mut().check_end_names = true;
    let mut found = Vec::new();
    loop {
        match reader.read_event().expect("the index is well-formed XML") {
            Event::Start(e) | Event::Empty(e) => {
                for a in e.attributes().map(|a| a.unwrap()) {
                    if a.key.as_ref() == "href" {
                        found.push(
                            a.normalized_value(XmlVersion::Implicit1_0)
                                .unwrap()
                                .into_owned(),
                        );
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    found
}

/// The layer with the largest error of a report (null, not finite, counts as the largest),
/// worked out here from the JSON independently of the summary.
fn worst_module(report: &Value) -> String {
    let rank = |l: &Value| l["rel_to_range"].as_f64().unwrap_or(f64::INFINITY);
    let layers = report["layers"].as_array().unwrap();
    let mut worst = &layers[0];
    for l in layers {
        if rank(l) > rank(worst) {
            worst = l;
        }
    }
    match worst["module"].as_str().unwrap() {
        "" => "(top level)".into(),
        m => m.into(),
    }
}

/// A CI matrix in small: three models checked apart, one of them with a planted fault, one
/// in a folder whose name is markup, merged by `align-check summary` into a row each.
#[test]
fn summary_merges_the_reports_of_many_runs_into_a_row_per_model() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    std::fs::create_dir_all(reports.join("faults")).unwrap();
    // The hostile-names fixture (markup in every ONNX name) in a folder named with markup.
    let hostile = dir.path().join("<img src=x onerror=alert(1)>");
    std::fs::create_dir(&hostile).unwrap();
    for file in ["model.pt", "model.onnx", "inputs.npz"] {
        std::fs::copy(
            fixture("hostile_names_legacy").join(file),
            hostile.join(file),
        )
        .unwrap();
    }
    let (conv_bn, hostile_json, fault) = (
        reports.join("conv_bn.json"),
        reports.join("hostile.json"),
        reports.join("faults/fault_conv_weight.json"),
    );
    let conv_bn_html = reports.join("conv_bn.html");
    assert_eq!(
        check_into(&fixture("conv_bn_legacy"), &conv_bn, Some(&conv_bn_html)),
        0
    );
    assert_eq!(check_into(&hostile, &hostile_json, None), 0);

    // All clean: exit 0, the Markdown on stdout and nothing else there.
    let out = binary().arg("summary").arg(&reports).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let md = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(md.starts_with("## align-check summary: ✅ PASS"), "{md}");
    assert!(md.contains("2 models: 2 passed, 0 failed"), "{md}");
    assert!(
        stderr_of(&out).contains("read 2 reports"),
        "{}",
        stderr_of(&out)
    );

    // The planted fault, and a JSON file of another kind next to it (a repro bundle's).
    assert_eq!(
        check_into(
            &fixture("fault_conv_weight"),
            &fault,
            Some(&fault.with_extension("html"))
        ),
        1
    );
    std::fs::write(reports.join("faults/repro.json"), r#"{"layer": "conv1"}"#).unwrap();

    let out_dir = dir.path().join("summary");
    std::fs::create_dir(&out_dir).unwrap();
    let (md_path, junit, index) = (
        out_dir.join("summary.md"),
        out_dir.join("summary.xml"),
        out_dir.join("index.html"),
    );
    let out = binary()
        .arg("summary")
        .arg(&reports)
        .arg("--markdown")
        .arg(&md_path)
        .arg("--junit")
        .arg(&junit)
        .arg("--html")
        .arg(&index)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(out.stdout.is_empty(), "every output went to a file");
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("read 3 reports")
            && stderr.contains("skipped 1 JSON file")
            && stderr.contains("repro.json"),
        "{stderr}"
    );

    // Markdown: the totals, then a row per model in path order (conv_bn, faults/, hostile).
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.starts_with("## align-check summary: ❌ FAIL"), "{md}");
    assert!(md.contains("3 models: 2 passed, 1 failed"), "{md}");
    let rows = markdown_rows(&md);
    assert_eq!(rows.len(), 3, "{md}");
    assert!(rows.iter().all(|r| r.len() == 7), "{rows:?}");
    assert_eq!(
        rows[0][0],
        "`conv_bn_legacy/model.pt` vs `conv_bn_legacy/model.onnx`"
    );
    assert_eq!(
        rows[1][0],
        "`fault_conv_weight/model.pt` vs `fault_conv_weight/model.onnx`"
    );
    assert_eq!(
        rows[2][0],
        "`<img src=x onerror=alert(1)>/model.pt` vs `<img src=x onerror=alert(1)>/model.onnx`",
        "markup stays inside code spans"
    );
    assert_eq!(rows[0][1], "✅ pass");
    assert_eq!(rows[2][1], "✅ pass");
    assert_eq!(rows[0][2], "-", "no divergence on a clean model");

    let fault_report = read_json(&fault);
    let failed_gates: Vec<&str> = fault_report["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(failed_gates.contains(&"layers"), "{failed_gates:?}");
    assert_eq!(
        rows[1][1],
        format!("❌ **fail** ({})", failed_gates.join(", "))
    );
    let fault_manifest = crate::common::manifest()
        .into_iter()
        .find(|e| e["name"] == "fault_conv_weight")
        .unwrap();
    let expected = crate::common::expected_fault_modules(&fault_manifest["fault"]);
    let divergence = &fault_report["first_divergence"];
    let module = divergence["module"].as_str().unwrap();
    assert!(expected.contains(&module), "{module} not in {expected:?}");
    assert_eq!(
        rows[1][2],
        format!(
            "`{module}` [{}] {:.4}",
            divergence["onnx_op"].as_str().unwrap(),
            divergence["rel_to_range"].as_f64().unwrap()
        )
    );
    for (row, report) in [(&rows[0], &read_json(&conv_bn)), (&rows[1], &fault_report)] {
        assert!(
            row[3].starts_with(&format!("`{}` [", worst_module(report))),
            "{row:?}"
        );
        let coverage = report["coverage"]["torch_ratio"].as_f64().unwrap() * 100.0;
        assert_eq!(row[4], format!("{coverage:.1}%"));
        let seconds = report["timing"]["total_s"].as_f64().unwrap();
        assert_eq!(row[5], format!("{seconds:.1} s"));
    }
    // Links from the Markdown's folder: the HTML report where one was written, else the JSON.
    assert!(
        rows[0][6].ends_with("(../reports/conv_bn.html)"),
        "{:?}",
        rows[0]
    );
    assert!(
        rows[1][6].ends_with("(../reports/faults/fault_conv_weight.html)"),
        "{:?}",
        rows[1]
    );
    assert!(
        rows[2][6].ends_with("(../reports/hostile.json)"),
        "{:?}",
        rows[2]
    );
    // The failed gates' sentences, under the table.
    let sentence = fault_report["gate_failures"][0].as_str().unwrap();
    let words: String = sentence
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        md.split("### Failed gates")
            .nth(1)
            .unwrap()
            .contains(&words),
        "{md}"
    );

    // JUnit: one case per model, named by its files, a failure on the faulty one only.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"tests="3" failures="1""#), "{xml}");
    let cases = junit_cases(&xml);
    let names: Vec<&str> = cases.iter().map(|(_, name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "conv_bn_legacy/model.pt vs conv_bn_legacy/model.onnx",
            "fault_conv_weight/model.pt vs fault_conv_weight/model.onnx",
            "<img src=x onerror=alert(1)>/model.pt vs <img src=x onerror=alert(1)>/model.onnx",
        ]
    );
    let failures: Vec<Option<&str>> = cases.iter().map(|(_, _, f)| f.as_deref()).collect();
    assert_eq!(
        failures,
        [
            None,
            Some(format!("failed gates: {}", failed_gates.join(", ")).as_str()),
            None
        ]
    );

    // HTML: well-formed, no markup from a name, and links that reach the reports.
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(!html.contains("<img"), "a folder name became markup");
    assert!(html.contains("3 models: 2 passed, 1 failed"));
    let links = hrefs(&html);
    assert_eq!(
        links,
        [
            "../reports/conv_bn.html",
            "../reports/faults/fault_conv_weight.html",
            "../reports/hostile.json"
        ]
    );
    for link in &links {
        assert!(
            out_dir.join(link).is_file(),
            "{link} does not reach its report"
        );
    }
}

/// Exit 2, one line naming the file, for whatever is not a report this build can read; and
/// nothing on stdout, so a CI step never publishes half a summary.
#[test]
fn summary_refuses_what_is_not_a_report_it_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    assert_eq!(check_into(&fixture("srcnn_legacy"), &good, None), 0);
    let mut newer = read_json(&good);
    newer["schema_version"] = Value::from(99);
    let newer_path = dir.path().join("newer.json");
    std::fs::write(&newer_path, newer.to_string()).unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"layer": "fc"}"#).unwrap();
    // A truncated report in a folder (an interrupted upload) is an error, never skipped.
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    std::fs::write(folder.join("cut.json"), &text[..text.len() / 2]).unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();

    // (what is given besides the good report, what the line says, the file it names)
    let missing = dir.path().join("missing.json");
    let cases: [(Option<&Path>, &Path, &str, &str); 5] = [
        (
            Some(&good),
            &newer_path,
            "newer align-check (schema_version 99",
            "newer.json",
        ),
        (
            Some(&good),
            &other,
            "not an align-check JSON report",
            "other.json",
        ),
        (Some(&good), &folder, "it is not JSON", "cut.json"),
        (
            Some(&good),
            &missing,
            "no such file or folder",
            "missing.json",
        ),
        (None, &empty, "no align-check JSON reports found", "empty"),
    ];
    for (with, arg, says, names) in cases {
        let out = binary()
            .arg("summary")
            .args(with)
            .arg(arg)
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", arg.display());
        assert!(out.stdout.is_empty(), "{}", arg.display());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(names),
            "{}: {stderr}",
            arg.display()
        );
    }
    // An output that would overwrite a report being read.
    let out = binary()
        .arg("summary")
        .arg(&good)
        .arg("--html")
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("refusing to overwrite"),
        "{}",
        stderr_of(&out)
    );
    assert!(
        read_json(&good)["schema_version"].is_u64(),
        "the report is untouched"
    );
}
