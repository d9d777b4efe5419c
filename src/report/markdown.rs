//! The Markdown report: a short summary for a pull-request comment or a CI job summary. The
//! verdict, the first divergence with its Python source line, the worst layers (ten at most),
//! coverage and how many unpaired values nothing explains; the HTML and JSON reports hold the
//! rest. When isolation ran, the worst-layers table has an isolated column and the verdict
//! names accumulated drift where no layer fails on its own; without it the summary is as it
//! was before isolation existed.
//!
//! Every model-supplied string goes into a code span (where Markdown renders markup as text),
//! with table pipes escaped, so a hostile node name cannot become HTML in the rendered comment.

use super::format::{file_name, fmt_num, isolation_ran, module_label, severity};
use super::narrative::{Headline, Markup, Narrative};
use crate::text::sentence_case;
use super::{findings, Format, Report};
use crate::capture::tensor::format_shape;
use crate::outcome::{LayerResult, LayerStatus, Outcome, Verdict};
use anyhow::Result;
use std::io::Write;

/// Rows of the worst-layers table.
const WORST_ROWS: usize = 10;

/// `s` as an inline code span that is safe in a table cell: the fence is longer than any run
/// of backticks inside, `|` is escaped (GitHub splits cells before parsing code spans), line
/// breaks become spaces.
pub(super) fn code(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let text: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .replace('|', "\\|");
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    // A span that starts or ends with a backtick needs a space so the fence is not extended.
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// Plain text outside code spans: markup characters as entities, pipes escaped.
pub(super) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '|' => out.push_str("\\|"),
            '`' | '*' | '_' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Markdown's markup for the shared narrative: names in code spans, prose escaped, a
/// headline's lead in bold.
struct Md;

impl Markup for Md {
    fn text(&self, s: &str) -> String {
        text(s)
    }
    fn name(&self, s: &str) -> String {
        code(s)
    }
    fn lead(&self, words: &str) -> String {
        format!("**{}**", text(&sentence_case(words)))
    }
}

fn verdict_cell(l: &LayerResult) -> &'static str {
    match l.status() {
        LayerStatus::Ok => "ok",
        LayerStatus::Origin => "**FAIL**",
        LayerStatus::Inherited => "FAIL (inherited)",
        LayerStatus::Accumulated => "accumulated",
        LayerStatus::Unconfirmed => "unconfirmed",
    }
}

pub const FORMAT: Format = Format {
    key: "markdown",
    flag: "markdown",
    help: "Write a short Markdown summary (for a pull-request comment or job summary) to PATH",
    writer: &Markdown,
};

#[derive(Debug)]
pub struct Markdown;

impl Report for Markdown {
    fn write(&self, outcome: &Outcome, out: &mut dyn Write) -> Result<()> {
        verdict(outcome, out)?;
        worst_layers(outcome, out)?;
        outputs(outcome, out)?;
        coverage(outcome, out)?;
        footer(outcome, out)?;
        Ok(())
    }
}

/// The Markdown summary of `outcome`.
pub fn render(outcome: &Outcome) -> String {
    let bytes = super::render_to_vec(&Markdown, outcome).expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the summary is UTF-8")
}


/// The heading with the verdict, the headline and the narrative's sentences, then the
/// notes: findings, isolation, training mode, signature.
fn verdict(outcome: &Outcome, out: &mut dyn Write) -> std::io::Result<()> {
    let heading = match outcome.verdict {
        Verdict::Pass => "✅ PASS",
        Verdict::Fail => "❌ FAIL",
    };
    let headline = sentence_case(&Headline::of(outcome).render(&Md));
    writeln!(out, "## align-check: {heading}\n\n{headline}.")?;
    let narrative = Narrative::of(outcome, &Md);
    if let Some(cause) = &narrative.cause {
        writeln!(out, "\n{}.", sentence_case(cause))?;
    }
    if !narrative.gates.is_empty() {
        writeln!(out)?;
        for g in &narrative.gates {
            writeln!(out, "- {g}")?;
        }
    }
    if let Some(origins) = &narrative.origins {
        writeln!(out, "\n{origins}")?;
    }
    for line in findings::lines(outcome) {
        writeln!(out, "\n> {}", text(&line))?;
    }
    if let Some(note) = &narrative.isolation_failed {
        writeln!(out, "\n> {}.", sentence_case(note))?;
    }
    for line in &outcome.training_mode {
        writeln!(
            out,
            "\n> Compared in training mode as asked (--allow-training-mode): {}",
            text(line)
        )?;
    }
    for line in outcome.signature.lines() {
        writeln!(out, "\n> {}", text(&line))?;
    }
    Ok(())
}


/// The table of the worst layers by error relative to range (NaN first), at most
/// `WORST_ROWS`, with each one's isolated error when isolation ran.
fn worst_layers(outcome: &Outcome, out: &mut dyn Write) -> std::io::Result<()> {
    let mut worst: Vec<&LayerResult> = outcome.layers.iter().collect();
    worst.sort_by(|a, b| {
        let key = |l: &LayerResult| severity(l.cmp.rel_to_range);
        key(b).total_cmp(&key(a)).then(a.index.cmp(&b.index))
    });
    worst.truncate(WORST_ROWS);
    if worst.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\n### Worst layers ({} of {}, {} failing)\n",
        worst.len(),
        outcome.layers.len(),
        outcome.layers.iter().filter(|l| l.fails()).count()
    )?;
    let isolated = isolation_ran(outcome);
    let (head, rule) = if isolated {
        (" isolated |", "--:|")
    } else {
        ("", "")
    };
    writeln!(
        out,
        "| # | module | class | ONNX node | op | shape | max abs | error / range |{head} verdict |"
    )?;
    writeln!(out, "|--:|---|---|---|---|---|--:|--:|{rule}---|")?;
    for l in worst {
        let cell = match (isolated, &l.isolated) {
            (false, _) => String::new(),
            (true, None) => " - |".to_string(),
            (true, Some(iso)) => format!(" {} |", fmt_num(iso.rel_to_range)),
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |{} {} |",
            l.index,
            code(module_label(&l.module)),
            text(&l.module_type),
            code(&l.onnx_node),
            text(&l.onnx_op),
            format_shape(&l.cmp.shape),
            fmt_num(l.cmp.max_abs),
            fmt_num(l.cmp.rel_to_range),
            cell,
            verdict_cell(l)
        )?;
    }
    if isolated {
        writeln!(
            out,
            "\n*isolated*: the error the layer's own ONNX computation adds when fed PyTorch's values; \
             accumulated: beyond its tolerance only by error from upstream (passes in \
             isolation), not gated."
        )?;
    }
    Ok(())
}

fn outputs(outcome: &Outcome, out: &mut dyn Write) -> std::io::Result<()> {
    if outcome.outputs.is_empty() {
        return Ok(());
    }
    let list = outcome
        .outputs
        .iter()
        .map(|o| {
            format!(
                "{} {} of range ({}; {})",
                code(&o.name),
                fmt_num(o.cmp.rel_to_range),
                match (o.cmp.pass, o.passes()) {
                    (true, _) => "ok",
                    (false, true) => "ok: float32 rounding",
                    (false, false) => "**FAIL**",
                },
                text(&findings::required_tolerance(&o.cmp))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    writeln!(out, "\n**Outputs:** {list}")
}

fn coverage(outcome: &Outcome, out: &mut dyn Write) -> std::io::Result<()> {
    let c = &outcome.coverage;
    let open = c.unpaired.iter().filter(|u| !u.accounted).count();
    writeln!(
        out,
        "\n**Coverage:** {}/{} {} layers ({:.1}%, gate {:.1}%), {}/{} ONNX nodes ({:.1}%); \
         {} unpaired value(s) not accounted for{}.",
        c.counts.torch_layers_paired,
        c.counts.torch_layers_total,
        outcome.reference.name(),
        c.torch_ratio * 100.0,
        c.min_coverage * 100.0,
        c.counts.onnx_nodes_paired,
        c.counts.onnx_nodes_total,
        c.onnx_ratio * 100.0,
        open,
        if c.uncapturable.is_empty() {
            String::new()
        } else {
            format!("; {} value(s) could not be captured (branches not taken, ONNX subgraphs)", c.uncapturable.len())
        }
    )
}

/// Versions, model files and run time, in small print.
fn footer(outcome: &Outcome, out: &mut dyn Write) -> std::io::Result<()> {
    let e = &outcome.environment;
    writeln!(
        out,
        "\n<sub>align-check {} · libtorch {} · ONNX Runtime {} · {} vs {} · {:.2} s</sub>",
        text(&e.align_check),
        text(&e.libtorch),
        text(&e.onnxruntime),
        code(file_name(&outcome.torch_model.path)),
        code(file_name(&outcome.onnx_model.path)),
        outcome.timing.total_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_survive_backticks_and_pipes() {
        assert_eq!(code("a|b"), "`a\\|b`");
        assert_eq!(code("x`y"), "``x`y``");
        assert_eq!(code("`z"), "`` `z ``");
        assert_eq!(code(""), "");
    }

    #[test]
    fn plain_text_has_no_markup() {
        assert_eq!(text("<img src=x>"), "&lt;img src=x&gt;");
    }
}
