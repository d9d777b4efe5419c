//! The summary as one self-contained HTML index page (styles inline, nothing fetched): the
//! overall verdict and totals, then a row per model linking to its own report, so that the
//! artifacts of a CI matrix open from one page.
//!
//! Rendered from a serialisable context through a minijinja template (`index.html`) whose
//! auto-escaping covers every string a report supplies: file names, module names, ops, gate
//! sentences, paths. The page is also well-formed XML (self-closed void elements, the style
//! in CDATA), so tests can check it with an XML parser, as they do the single-run report.

use super::markdown::rel;
use super::{LayerCell, Row, Summary};
use crate::report::format::module_label;
use anyhow::{Context, Result};
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

const PAGE: &str = include_str!("index.html");

#[derive(Debug, Serialize)]
struct Page {
    /// `pass` or `fail`.
    verdict: &'static str,
    totals: String,
    time: String,
    rows: Vec<RowView>,
}

#[derive(Debug, Serialize)]
struct RowView {
    torch_model: String,
    onnx_model: String,
    passed: bool,
    failed_gates: String,
    gate_failures: Vec<String>,
    divergence: Option<CellView>,
    drift: bool,
    worst: Option<CellView>,
    coverage: String,
    time: String,
    /// The report's URL relative to the page.
    href: String,
    /// The report's path as it was found.
    report: String,
}

#[derive(Debug, Serialize)]
struct CellView {
    module: String,
    onnx_op: String,
    rel: String,
}

fn cell(c: &LayerCell) -> CellView {
    CellView {
        module: module_label(&c.module).to_string(),
        onnx_op: c.onnx_op.clone(),
        rel: rel(c.rel_to_range),
    }
}

fn row_view(r: &Row, base: &Path) -> RowView {
    RowView {
        torch_model: r.torch_model.clone(),
        onnx_model: r.onnx_model.clone(),
        passed: r.passed,
        failed_gates: r.failed_gates.join(", "),
        gate_failures: r.gate_failures.clone(),
        divergence: r.first_divergence.as_ref().map(cell),
        drift: r.accumulated_drift,
        worst: r.worst_layer.as_ref().map(cell),
        coverage: format!("{:.1}%", r.coverage * 100.0),
        time: format!("{:.1} s", r.seconds),
        href: super::link(r.report(), base),
        report: r.report().display().to_string(),
    }
}

/// Writes the index page, with links relative to the folder `base` (where the page goes).
pub fn write(summary: &Summary, base: &Path, out: &mut dyn Write) -> Result<()> {
    let page = Page {
        verdict: if summary.failed() == 0 {
            "pass"
        } else {
            "fail"
        },
        totals: summary.totals(),
        time: format!("{:.1} s", summary.seconds()),
        rows: summary.rows.iter().map(|r| row_view(r, base)).collect(),
    };
    let mut env = Environment::new();
    // A misspelt field must fail the page, not render as an empty string.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // The single-run report's escaping: every markup character, but not `/` (paths).
    env.set_formatter(crate::report::html::formatter);
    // The `.html` name turns on HTML auto-escaping.
    env.add_template("index.html", PAGE)?;
    let html = env
        .get_template("index.html")?
        .render(minijinja::value::Serde(&page))
        .context("rendering the HTML summary")?;
    out.write_all(html.as_bytes())?;
    Ok(())
}

/// The HTML index as a string, links relative to `base`.
pub fn render(summary: &Summary, base: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    write(summary, base, &mut bytes)?;
    Ok(String::from_utf8(bytes).expect("the page is UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::super::reader::{parse, Read};
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn every_name_is_escaped() {
        let hostile = "<img src=x onerror=alert(1)>";
        let text = format!(
            r#"{{"schema_version": 1, "verdict": "fail", "gate_failures": ["{hostile} fails"],
            "gates": [{{"name": "layers", "passed": false}}],
            "first_divergence": {{"module": "{hostile}", "onnx_op": "{hostile}", "rel_to_range": 0.5}},
            "layers": [{{"module": "{hostile}", "onnx_op": "Conv", "rel_to_range": 0.5}}],
            "coverage": {{"torch_ratio": 1.0}}, "timing": {{"total_s": 1.0}},
            "torch_model": {{"path": "{hostile}.pt"}}, "onnx_model": {{"path": "m.onnx"}}}}"#
        );
        let Read::Report(r) = parse(&text).unwrap() else {
            unreachable!()
        };
        let summary = Summary::new(vec![(PathBuf::from("<b>.json"), *r)]);
        let html = render(&summary, Path::new(".")).unwrap();
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;.pt"),
            "{html}"
        );
        assert!(html.contains(r#"href="%3Cb%3E.json""#), "{html}");
        assert!(html.contains("1 model: 0 passed, 1 failed"), "{html}");
    }
}
