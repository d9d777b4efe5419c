//! The summary as Markdown, for a CI job summary (`$GITHUB_STEP_SUMMARY`, which renders
//! GitHub-flavoured Markdown) or a pull-request comment: a heading with the overall verdict,
//! the totals line, one table row per model, then the failed gates' sentences per failing
//! model (too long for a table cell).
//!
//! Names go into code spans and other text is escaped, with the single-run Markdown report's
//! own functions, so a hostile file or module name renders as text. Links are relative to
//! the folder the Markdown is written to and percent-encoded; their text is the report's
//! path as it was found, which says which artifact to open where the link cannot resolve.

use super::{LayerCell, Row, Summary};
use crate::report::markdown::{code, text};
use crate::text::{fmt_num, module_label};
use anyhow::Result;
use std::io::Write;
use std::path::Path;

/// Writes the summary, with links relative to the folder `base`.
pub fn write(summary: &Summary, base: &Path, out: &mut dyn Write) -> Result<()> {
    let verdict = if summary.failed() == 0 {
        "✅ PASS"
    } else {
        "❌ FAIL"
    };
    writeln!(out, "## align-check summary: {verdict}\n")?;
    writeln!(out, "{}.\n", summary.totals())?;
    writeln!(
        out,
        "| model | verdict | first divergence | worst layer | coverage | time | report |"
    )?;
    writeln!(out, "|---|---|---|---|---:|---:|---|")?;
    for row in &summary.rows {
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.1}% | {:.1} s | {} |",
            model(row),
            verdict_cell(row),
            divergence_cell(row),
            row.worst_layer
                .as_ref()
                .map(layer)
                .unwrap_or_else(|| "-".into()),
            row.coverage * 100.0,
            row.seconds,
            report_link(row, base)
        )?;
    }
    let failing: Vec<&Row> = summary.rows.iter().filter(|r| !r.passed).collect();
    if !failing.is_empty() {
        writeln!(out, "\n### Failed gates\n")?;
        for row in failing {
            writeln!(out, "- {}", model(row))?;
            for sentence in &row.gate_failures {
                writeln!(out, "  - {}", text(sentence))?;
            }
        }
    }
    Ok(())
}

/// The Markdown summary as a string, links relative to `base`.
pub fn render(summary: &Summary, base: &Path) -> String {
    let mut bytes = Vec::new();
    write(summary, base, &mut bytes).expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the summary is UTF-8")
}

fn model(row: &Row) -> String {
    format!("{} vs {}", code(&row.torch_model), code(&row.onnx_model))
}

fn verdict_cell(row: &Row) -> String {
    if row.passed {
        "✅ pass".into()
    } else if row.failed_gates.is_empty() {
        "❌ **fail**".into()
    } else {
        format!("❌ **fail** ({})", text(&row.failed_gates.join(", ")))
    }
}

fn divergence_cell(row: &Row) -> String {
    match (&row.first_divergence, row.accumulated_drift) {
        (Some(d), _) => layer(d),
        (None, true) => "accumulated drift".into(),
        (None, false) => "-".into(),
    }
}

/// `` `layer1.1.bn2` [Conv] 1.4e-02 `` (the error relative to the reference's range).
fn layer(cell: &LayerCell) -> String {
    format!(
        "{} [{}] {}",
        code(module_label(&cell.module)),
        text(&cell.onnx_op),
        rel(cell.rel_to_range)
    )
}

pub(super) fn rel(rel: Option<f64>) -> String {
    rel.map(fmt_num).unwrap_or_else(|| "non-finite".into())
}

fn report_link(row: &Row, base: &Path) -> String {
    let report = row.report();
    format!(
        "[{}]({})",
        text(&report.display().to_string()),
        super::link(report, base)
    )
}

#[cfg(test)]
mod tests {
    use super::super::reader::{parse, Read};
    use super::*;
    use std::path::PathBuf;

    fn summary(reports: &[&str]) -> Summary {
        Summary::new(
            reports
                .iter()
                .enumerate()
                .map(|(i, text)| match parse(text).unwrap() {
                    Read::Report(r) => (PathBuf::from(format!("r{i}.json")), *r),
                    Read::NotAReport => unreachable!(),
                })
                .collect(),
        )
    }

    const FAILING: &str = r#"{"schema_version": 1, "verdict": "fail",
        "gate_failures": ["layer a|b exceeds <its> tolerance"],
        "gates": [{"name": "layers", "passed": false}, {"name": "coverage", "passed": true}],
        "first_divergence": {"module": "a|b", "onnx_op": "Conv", "rel_to_range": 0.014},
        "layers": [{"module": "a|b", "onnx_op": "Conv", "rel_to_range": 0.014},
                   {"module": "", "onnx_op": "Add", "rel_to_range": null}],
        "coverage": {"torch_ratio": 0.75}, "timing": {"total_s": 2.31},
        "torch_model": {"path": "m/x`y.pt"}, "onnx_model": {"path": "m/x.onnx"}}"#;

    const PASSING: &str = r#"{"schema_version": 1, "verdict": "pass", "gate_failures": [],
        "gates": [], "first_divergence": null,
        "layers": [{"module": "fc", "onnx_op": "Gemm", "rel_to_range": 2e-7}],
        "coverage": {"torch_ratio": 1.0}, "timing": {"total_s": 1.0},
        "torch_model": {"path": "p.pt"}, "onnx_model": {"path": "p.onnx"}}"#;

    #[test]
    fn one_table_row_per_model_with_names_escaped() {
        let md = render(&summary(&[FAILING, PASSING]), Path::new("."));
        assert!(md.starts_with("## align-check summary: ❌ FAIL"), "{md}");
        assert!(md.contains("2 models: 1 passed, 1 failed."), "{md}");
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 3, "header and two rows: {md}");
        assert_eq!(
            rows[1],
            "| ``x`y.pt`` vs `x.onnx` | ❌ **fail** (layers) | `a\\|b` [Conv] 0.0140 | \
             `(top level)` [Add] non-finite | 75.0% | 2.3 s | [r0.json](r0.json) |"
        );
        assert!(
            rows[2].starts_with("| `p.pt` vs `p.onnx` | ✅ pass | - | `fc` [Gemm] 2.00e-7 |"),
            "{md}"
        );
        // Every row has the header's seven cells: no pipe in a name split one.
        for row in &rows {
            assert_eq!(row.replace("\\|", "").matches('|').count(), 8, "{row}");
        }
        assert!(
            md.contains("  - layer a\\|b exceeds &lt;its&gt; tolerance"),
            "{md}"
        );
    }

    #[test]
    fn all_passing_has_no_failed_gates_section() {
        let md = render(&summary(&[PASSING]), Path::new("."));
        assert!(md.starts_with("## align-check summary: ✅ PASS"), "{md}");
        assert!(md.contains("1 model: 1 passed, 0 failed."), "{md}");
        assert!(!md.contains("Failed gates"), "{md}");
    }
}
