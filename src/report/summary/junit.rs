//! The summary as JUnit XML, for CI systems that show test results (GitLab's test report,
//! Jenkins, Azure, GitHub test reporters): one test suite, one test case per model, named by
//! its model files (stable from run to run, so CI can track each model's history), with the
//! run's time. A failing model's case has a failure element: the failed gates' names as its
//! message and their sentences, the first divergence and the report's path as its text.
//!
//! Every string is escaped with the single-run JUnit report's own function, which also
//! replaces characters XML 1.0 cannot carry.

use super::markdown::rel;
use super::{Row, Summary};
use crate::report::format::module_label;
use crate::report::junit::xml;
use anyhow::Result;
use std::io::Write;

/// Writes the summary's test suite.
pub fn write(summary: &Summary, out: &mut dyn Write) -> Result<()> {
    let (tests, failures) = (summary.rows.len(), summary.failed());
    let time = format!("{:.3}", summary.seconds());
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="align-check summary" tests="{tests}" failures="{failures}" errors="0" time="{time}">"#
    )?;
    writeln!(
        out,
        r#"  <testsuite name="align-check summary" tests="{tests}" failures="{failures}" errors="0" skipped="0" time="{time}">"#
    )?;
    for row in &summary.rows {
        let open = format!(
            r#"    <testcase classname="align-check" name="{}" time="{:.3}""#,
            xml(&row.label()),
            row.seconds
        );
        if row.passed {
            writeln!(out, "{open}/>")?;
            continue;
        }
        writeln!(out, "{open}>")?;
        writeln!(
            out,
            r#"      <failure message="{}" type="gate">{}</failure>"#,
            xml(&message(row)),
            xml(&body(row))
        )?;
        writeln!(out, "    </testcase>")?;
    }
    writeln!(out, "  </testsuite>")?;
    writeln!(out, "</testsuites>")?;
    Ok(())
}

/// The JUnit summary as a string.
pub fn render(summary: &Summary) -> String {
    let mut bytes = Vec::new();
    write(summary, &mut bytes).expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the summary is UTF-8")
}

/// `failed gates: layers, outputs`, or the first sentence where the report named no gates.
fn message(row: &Row) -> String {
    if row.failed_gates.is_empty() {
        row.gate_failures
            .first()
            .cloned()
            .unwrap_or_else(|| "the check failed".into())
    } else {
        format!("failed gates: {}", row.failed_gates.join(", "))
    }
}

/// Every failed gate's sentence, one a line, then where it first diverges and the report.
fn body(row: &Row) -> String {
    let mut lines = row.gate_failures.clone();
    if let Some(d) = &row.first_divergence {
        lines.push(format!(
            "first divergence: {} [{}], error {} of range",
            module_label(&d.module),
            d.onnx_op,
            rel(d.rel_to_range)
        ));
    } else if row.accumulated_drift {
        lines.push("accumulated drift: no layer fails in isolation".into());
    }
    lines.push(format!("report: {}", row.report().display()));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::super::reader::{parse, Read};
    use super::*;
    use std::path::PathBuf;

    fn summary(verdicts: &[&str]) -> Summary {
        Summary::new(
            verdicts
                .iter()
                .enumerate()
                .map(|(i, verdict)| {
                    let text = format!(
                        r#"{{"schema_version": 1, "verdict": "{verdict}",
                        "gate_failures": {failures}, "gates": {gates},
                        "first_divergence": null, "accumulated_drift": {{"contributors": []}},
                        "layers": [], "coverage": {{"torch_ratio": 1.0}},
                        "timing": {{"total_s": 1.5}},
                        "torch_model": {{"path": "m{i}<&>.pt"}}, "onnx_model": {{"path": "m{i}.onnx"}}}}"#,
                        failures = if *verdict == "fail" { r#"["outputs \"y\" drift"]"# } else { "[]" },
                        gates = if *verdict == "fail" {
                            r#"[{"name": "outputs", "passed": false}]"#
                        } else {
                            "[]"
                        },
                    );
                    match parse(&text).unwrap() {
                        Read::Report(r) => (PathBuf::from(format!("r{i}.json")), *r),
                        Read::NotAReport => unreachable!(),
                    }
                })
                .collect(),
        )
    }

    #[test]
    fn one_case_per_model_and_a_failure_for_each_failing_one() {
        let xml = render(&summary(&["pass", "fail"]));
        assert!(xml.contains(r#"<testsuite name="align-check summary" tests="2" failures="1" errors="0" skipped="0" time="3.000">"#), "{xml}");
        assert!(xml.contains(r#"<testcase classname="align-check" name="m0&lt;&amp;&gt;.pt vs m0.onnx" time="1.500"/>"#), "{xml}");
        assert!(
            xml.contains(
                r#"<failure message="failed gates: outputs" type="gate">outputs &quot;y&quot; drift
accumulated drift: no layer fails in isolation
report: r1.json</failure>"#
            ),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase ").count(), 2);
    }
}
