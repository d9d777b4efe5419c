//! What the human reports say about isolation, end to end: the real binary on the drift
//! fixtures (tests/fixtures/drift, scripts/make_drift_fixtures.py) shows each layer's isolated
//! error in the terminal table, the Markdown summary and the HTML page (a second curve on the
//! network chart), names the planted fault as the first divergence, and calls drift without
//! a fault accumulated drift. A run without isolation keeps the table it always had, since
//! scripts read it; isolation that could not run says so.

use crate::common::{binary, fixture};
use align_check::outcome::Outcome;
use align_check::report::format::fmt_num;
use align_check::report::{html, markdown, terminal};
use clap::Parser;
use serde_json::Value;
use std::path::Path;

/// The table header of a run without isolation, as it has always been.
const PLAIN_HEADER: &str = "   #  module                       class          ONNX node                      op           shape            max abs rel/range   cosine  SNR dB  verdict";

/// The colour of the isolated curve on the network chart (`charts::ISOLATED`).
const ISOLATED_COLOUR: &str = "#762A83";

/// What one run wrote: exit code, stdout, and the JSON, HTML and Markdown reports.
struct Run {
    code: i32,
    stdout: String,
    json: Value,
    html: String,
    markdown: String,
}

fn run(dir: &Path, extra: &[&str]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let path = |name: &str| out.path().join(name);
    let output = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--json")
        .arg(path("report.json"))
        .arg("--html")
        .arg(path("report.html"))
        .arg("--markdown")
        .arg(path("report.md"))
        .args(extra)
        .output()
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(path(name)).unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        json: serde_json::from_str(&read("report.json")).unwrap(),
        html: read("report.html"),
        markdown: read("report.md"),
    }
}

fn drift(name: &str) -> std::path::PathBuf {
    fixture(&format!("drift/{name}"))
}

/// The headline of each human report as plain words: the terminal's first line after the
/// verdict, the Markdown's verdict paragraph and the HTML's sentence, markup taken off.
fn headlines(r: &Run) -> [String; 3] {
    let terminal = r.stdout.lines().next().unwrap();
    let terminal = terminal.split_once(' ').unwrap().1.to_string();
    let markdown = r.markdown.lines().nth(2).unwrap().replace(['*', '`'], "");
    let start = r.html.find("<p class=\"sentence\">").unwrap();
    let sentence = &r.html[start..start + r.html[start..].find("</p>").unwrap()];
    let mut html = String::new();
    let mut in_tag = false;
    for c in sentence.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => html.push(c),
            _ => {}
        }
    }
    // The HTML links each layer it names by its row number (`#24 blocks.12.fc`).
    let html: Vec<&str> = html.split(' ').filter(|w| !w.starts_with('#')).collect();
    let lower_first = |s: &str| {
        let s = s.trim_end_matches('.');
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_lowercase().chain(c).collect())
            .unwrap_or_default()
    };
    [
        lower_first(&terminal),
        lower_first(&markdown),
        lower_first(&html.join(" ").replace("&#39;", "'")),
    ]
}

#[test]
fn every_human_report_words_the_headline_alike() {
    for (dir, extra) in [
        (drift("drift_and_fault"), vec![]),
        (drift("drift_only"), vec!["--output-atol", "1e-5"]),
    ] {
        let r = run(&dir, &extra);
        let [terminal, markdown, html] = headlines(&r);
        assert!(terminal.len() > 40, "{terminal}");
        assert_eq!(terminal, markdown, "{}", dir.display());
        assert_eq!(terminal, html, "{}", dir.display());
    }
}

/// The table row of `module` (columns split on whitespace).
fn row<'a>(stdout: &'a str, module: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.get(1) == Some(&module))
        .unwrap_or_else(|| panic!("no row for {module}:\n{stdout}"))
}

/// The first SVG of the page: the error-along-the-network chart.
fn network_chart(doc: &str) -> &str {
    let start = doc.find("<svg").expect("the page has a network chart");
    &doc[start..start + doc[start..].find("</svg>").unwrap()]
}

#[test]
fn drift_and_fault_reports_show_isolated_errors_and_name_the_fault() {
    let r = run(&drift("drift_and_fault"), &["--all"]);
    assert_eq!(r.code, 1, "{}", r.stdout);

    let first = r.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("FAIL first divergence at blocks.12.fc (Linear)"),
        "{first}"
    );
    assert!(
        first.ends_with("; fails in isolation too (0.0196 of range)"),
        "{first}"
    );
    let header = r.stdout.lines().find(|l| l.contains("rel/range")).unwrap();
    assert!(header.contains("rel/range  isolated"), "{header}");

    // Every row's isolated figure is the JSON's, in the error column's format; the fault's
    // row fails on its own, the rows before it that fail only carry drift.
    for l in r.json["layers"].as_array().unwrap() {
        let module = l["module"].as_str().unwrap();
        let cols = row(&r.stdout, module);
        let rel = fmt_num(l["rel_to_range"].as_f64().unwrap());
        let iso = fmt_num(l["isolated"]["rel_to_range"].as_f64().unwrap());
        let at = cols
            .iter()
            .position(|c| *c == rel)
            .expect("rel/range column");
        assert_eq!(cols[at + 1], iso, "{module}: {cols:?}");
    }
    let fault = row(&r.stdout, "blocks.12.fc");
    assert_eq!(fault.last(), Some(&"FAIL"), "{fault:?}");
    // Carried error is shown, not failed: the drift blocks read `accumulated`.
    let carried = row(&r.stdout, "blocks.10.fc");
    assert_eq!(carried.last(), Some(&"accumulated"), "{carried:?}");
    assert!(r
        .stdout
        .contains("isolated: the error a layer's own ONNX computation adds"));

    // HTML: the isolated column, and the isolated curve with its legend on the network chart.
    assert!(r.html.contains(">isolated</th>"));
    let chart = network_chart(&r.html);
    assert!(chart.contains(ISOLATED_COLOUR), "no isolated curve");
    assert!(chart.contains("error in isolation"), "no legend entry");
    assert!(
        chart.contains("error (accumulated, as run)"),
        "no legend entry"
    );
    assert!(r
        .html
        .contains("; fails in isolation too (0.0196 of range)"));

    // Markdown: the isolated column and the fault's own error.
    assert!(
        r.markdown
            .contains("| max abs | error / range | isolated | verdict |"),
        "{}",
        r.markdown
    );
    assert!(
        r.markdown
            .contains("**First divergence at** `blocks.12.fc`")
            && r.markdown.contains("fails in isolation too"),
        "{}",
        r.markdown
    );
}

#[test]
fn drift_alone_reads_as_accumulated_drift_in_every_human_report() {
    // Beyond an output tolerance tighter than the default, the drift fails the outputs.
    let r = run(&drift("drift_only"), &["--output-atol", "1e-5"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let first = r.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("FAIL accumulated drift: no layer fails in isolation"),
        "{first}"
    );
    let named = r.json["accumulated_drift"]["contributors"][0]["module"]
        .as_str()
        .unwrap();
    assert!(first.contains(named), "{first}");
    // Said once, in the headline; the gate lines under it keep to their counts.
    assert_eq!(
        r.stdout.matches("accumulated drift").count(),
        1,
        "{}",
        r.stdout
    );
    // The layers only carry the drift (each passes in isolation); the outputs fail.
    assert!(
        r.stdout
            .contains("\n  - output(s) y exceed their tolerance\n"),
        "{}",
        r.stdout
    );

    assert!(
        r.markdown.contains("**Accumulated drift:**"),
        "{}",
        r.markdown
    );
    assert!(r.markdown.contains(&format!("`{named}`")), "{}", r.markdown);
    assert!(r.html.contains("<p class=\"sentence\">Accumulated drift:"));
    assert!(network_chart(&r.html).contains(ISOLATED_COLOUR));
}

#[test]
fn a_clean_run_keeps_its_table_unless_isolation_is_asked_for() {
    let dir = fixture("resnet_tiny_legacy");
    let plain = run(&dir, &["--all"]);
    assert_eq!(plain.code, 0, "{}", plain.stdout);
    assert!(plain.json["isolation"].is_null());
    assert!(
        plain.stdout.lines().any(|l| l == PLAIN_HEADER),
        "{}",
        plain.stdout
    );
    for report in [&plain.stdout, &plain.markdown] {
        assert!(!report.contains("isolat"), "{report}");
    }
    assert!(!plain.html.contains(">isolated</th>"));
    assert!(!network_chart(&plain.html).contains(ISOLATED_COLOUR));

    let asked = run(&dir, &["--all", "--isolate"]);
    assert_eq!(asked.code, 0, "{}", asked.stdout);
    let header = asked
        .stdout
        .lines()
        .find(|l| l.contains("rel/range"))
        .unwrap();
    assert!(header.contains("rel/range  isolated"), "{header}");
    assert!(
        asked.markdown.contains("| isolated |"),
        "{}",
        asked.markdown
    );
    assert!(network_chart(&asked.html).contains(ISOLATED_COLOUR));
}

/// The drift fixture's outcome through the library, exactly as the CLI builds it.
fn outcome_of(dir: &Path) -> Outcome {
    let (pt, onnx) = (dir.join("model.pt"), dir.join("model.onnx"));
    let cli = align_check::cli::Cli::try_parse_from([
        "align-check",
        pt.to_str().unwrap(),
        onnx.to_str().unwrap(),
    ])
    .unwrap();
    let cfg = align_check::cli::config::CheckConfig::from_args(&cli.check).unwrap();
    let progress = align_check::app::progress::Progress::new(false);
    align_check::app::check::outcome(&cfg, &progress).unwrap()
}

#[test]
fn isolation_that_could_not_run_is_said_in_every_human_report() {
    // As the pipeline leaves it when the isolation run fails: no layer isolated, origins
    // judged from the accumulated error, no drift.
    let mut outcome = outcome_of(&drift("drift_only"));
    let isolation = outcome.isolation.as_mut().expect("a failing run isolates");
    isolation.error = Some("ONNX Runtime ran out of memory".into());
    for l in &mut outcome.layers {
        l.isolated = None;
        l.origin = None;
    }
    outcome.accumulated_drift = None;

    let opts = terminal::TableOptions {
        all_rows: true,
        worst: 10,
        color: false,
        verbose: false,
    };
    let text = terminal::render(&outcome, &opts);
    assert!(
        text.contains("isolation could not run: ONNX Runtime ran out of memory; origins judged from accumulated error"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == PLAIN_HEADER), "{text}");
    let md = markdown::render(&outcome);
    assert!(
        md.contains("> Isolation could not run: ONNX Runtime ran out of memory"),
        "{md}"
    );
    let doc = String::from_utf8(html::render(&outcome).unwrap()).unwrap();
    assert!(doc.contains("Isolation could not run: ONNX Runtime ran out of memory"));
    assert!(!doc.contains(">isolated</th>"));
}
