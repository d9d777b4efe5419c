//! The terminal report: verdict first, then a table of layers that stays readable for a
//! thousand of them.
//!
//! Without `--all` the table shows the layers around the first divergence and the worst N
//! by error relative to range, with a line saying how many rows were left out. Colour is
//! used only when stdout is a terminal and `NO_COLOR` is unset.
//!
//! When isolation ran, the table gains one column (each layer's isolated error) and the
//! verdict says where the error starts, or that it is accumulated drift; when it did not,
//! the report is exactly what it was before isolation existed, since scripts read it.

use super::findings;
use super::format::{fmt_num, growth, isolation_ran, module_label, severity, snr};
use super::narrative::{Headline, Narrative, Plain};
use super::Report;
use crate::capture::tensor::format_shape;
use crate::outcome::{LayerResult, LayerStatus, Outcome, Verdict};
use crate::pairing::Unpaired;
use anyhow::Result;
use std::collections::BTreeSet;
use std::io::{self, Write};

#[derive(Debug, Clone)]
pub struct TableOptions {
    pub all_rows: bool,
    pub worst: usize,
    pub color: bool,
    pub verbose: bool,
}

/// Rows shown on each side of the first divergence.
const CONTEXT_ROWS: usize = 3;
/// Below this many layers the whole table is always shown.
const SHOW_ALL_BELOW: usize = 40;

struct Paint(bool);

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn red(&self, s: &str) -> String {
        self.wrap("1;31", s)
    }
    fn green(&self, s: &str) -> String {
        self.wrap("1;32", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.wrap("1;33", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(width - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// The indices of the rows the table shows.
fn chosen_rows(outcome: &Outcome, opts: &TableOptions) -> BTreeSet<usize> {
    let n = outcome.layers.len();
    if opts.all_rows || n <= SHOW_ALL_BELOW {
        return (0..n).collect();
    }
    let mut rows = BTreeSet::new();
    for origin in &outcome.divergence_origins {
        let i = origin.layer_index;
        rows.extend(i.saturating_sub(CONTEXT_ROWS)..(i + CONTEXT_ROWS + 1).min(n));
    }
    let mut by_error: Vec<&LayerResult> = outcome.layers.iter().collect();
    by_error.sort_by(|a, b| severity(b.cmp.rel_to_range).total_cmp(&severity(a.cmp.rel_to_range)));
    rows.extend(by_error.iter().take(opts.worst).map(|l| l.index));
    rows.insert(n - 1);
    rows
}

/// The terminal report with its options.
#[derive(Debug)]
pub struct Terminal(pub TableOptions);

impl Report for Terminal {
    fn write(&self, outcome: &Outcome, out: &mut dyn Write) -> Result<()> {
        let (opts, paint) = (&self.0, Paint(self.0.color));
        verdict(outcome, &paint, out)?;
        writeln!(out)?;
        table(outcome, opts, &paint, out)?;
        writeln!(out)?;
        outputs(outcome, &paint, out)?;
        notes(outcome, &paint, out)?;
        if opts.verbose {
            timing_and_unpaired(outcome, out)?;
        }
        Ok(())
    }
}

/// The terminal report of `outcome`, as text.
pub fn render(outcome: &Outcome, opts: &TableOptions) -> String {
    let bytes = super::render_to_vec(&Terminal(opts.clone()), outcome)
        .expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the table is UTF-8")
}

/// The verdict: PASS or FAIL and the headline, then the narrative's sentences one a line.
fn verdict(outcome: &Outcome, paint: &Paint, out: &mut dyn Write) -> io::Result<()> {
    let badge = match outcome.verdict {
        Verdict::Pass => paint.green("PASS"),
        Verdict::Fail => paint.red("FAIL"),
    };
    writeln!(out, "{badge} {}", Headline::of(outcome).render(&Plain))?;
    let narrative = Narrative::of(outcome, &Plain);
    if let Some(cause) = &narrative.cause {
        writeln!(out, "  {cause}")?;
    }
    for gate in &narrative.gates {
        writeln!(out, "  - {gate}")?;
    }
    if let Some(origins) = &narrative.origins {
        writeln!(out, "  {origins}")?;
    }
    // On a pass too: `--isolate` was asked for and did not happen.
    if let Some(note) = &narrative.isolation_failed {
        writeln!(out, "  {} {note}", paint.yellow("note:"))?;
    }
    Ok(())
}

/// The layer table: the chosen rows, a line for each run of rows left out, and how many
/// were shown.
fn table(
    outcome: &Outcome,
    opts: &TableOptions,
    paint: &Paint,
    out: &mut dyn Write,
) -> io::Result<()> {
    let rows = chosen_rows(outcome, opts);
    let isolated = isolation_ran(outcome);
    let header = format!(
        "{:>4}  {:<28} {:<14} {:<30} {:<12} {:<14} {:>9} {:>9}{} {:>8} {:>7}  {}",
        "#",
        "module",
        "class",
        "ONNX node",
        "op",
        "shape",
        "max abs",
        "rel/range",
        if isolated {
            format!(" {:>9}", "isolated")
        } else {
            String::new()
        },
        "cosine",
        "SNR dB",
        "verdict"
    );
    writeln!(out, "{}", paint.dim(&header))?;
    let mut last: Option<usize> = None;
    for &i in &rows {
        if let Some(prev) = last {
            if i > prev + 1 {
                writeln!(
                    out,
                    "{}",
                    paint.dim(&format!("{:>4}  … {} layers", "", i - prev - 1))
                )?;
            }
        }
        last = Some(i);
        layer_row(i, &outcome.layers[i], isolated, paint, out)?;
    }
    if let Some(prev) = last {
        if prev + 1 < outcome.layers.len() {
            writeln!(
                out,
                "{}",
                paint.dim(&format!(
                    "{:>4}  … {} layers",
                    "",
                    outcome.layers.len() - prev - 1
                ))
            )?;
        }
    }
    if rows.len() < outcome.layers.len() {
        writeln!(
            out,
            "{}",
            paint.dim(&format!(
                "showing {} of {} layers (around the divergence and the {} worst); --all shows every layer",
                rows.len(),
                outcome.layers.len(),
                opts.worst
            ))
        )?;
    }
    if isolated {
        writeln!(
            out,
            "{}",
            paint.dim(
                "isolated: the error a layer's own ONNX computation adds when fed PyTorch's values; \
                 accumulated: beyond its tolerance only by error from upstream (passes in \
                 isolation), not gated"
            )
        )?;
    }
    Ok(())
}

/// One layer's row; `isolated` adds the isolated error column (`-` where isolation could not
/// compute this layer), red where the layer fails on its own.
fn layer_row(
    i: usize,
    l: &LayerResult,
    isolated: bool,
    paint: &Paint,
    out: &mut dyn Write,
) -> io::Result<()> {
    let verdict = match l.status() {
        LayerStatus::Ok => paint.green("ok"),
        LayerStatus::Origin => paint.red("FAIL"),
        LayerStatus::Inherited => paint.red("FAIL (inherited)"),
        LayerStatus::Accumulated => paint.yellow("accumulated"),
        LayerStatus::Unconfirmed => paint.yellow("unconfirmed"),
    };
    let isolated = match (isolated, &l.isolated) {
        (false, _) => String::new(),
        (true, None) => format!(" {:>9}", "-"),
        (true, Some(iso)) => {
            let cell = format!(" {:>9}", fmt_num(iso.rel_to_range));
            if iso.pass {
                cell
            } else {
                paint.red(&cell)
            }
        }
    };
    writeln!(
        out,
        "{:>4}  {:<28} {:<14} {:<30} {:<12} {:<14} {:>9} {:>9}{} {:>8} {:>7}  {}",
        i,
        truncate(module_label(&l.module), 28),
        truncate(&l.module_type, 14),
        truncate(&l.onnx_node, 30),
        truncate(&l.onnx_op, 12),
        truncate(&format_shape(&l.cmp.shape), 14),
        fmt_num(l.cmp.max_abs),
        fmt_num(l.cmp.rel_to_range),
        isolated,
        fmt_num(l.cmp.cosine),
        snr(l.cmp.snr_db),
        verdict
    )
}

fn outputs(outcome: &Outcome, paint: &Paint, out: &mut dyn Write) -> io::Result<()> {
    for o in &outcome.outputs {
        writeln!(
            out,
            "output {:<20} {:<14} max abs {:>9}  rel/range {:>9}  {}  ({})",
            truncate(&o.name, 20),
            format_shape(&o.cmp.shape),
            fmt_num(o.cmp.max_abs),
            fmt_num(o.cmp.rel_to_range),
            match (o.cmp.pass, o.passes()) {
                (true, _) => paint.green("ok"),
                (false, true) => paint.green("ok: float32 rounding"),
                (false, false) => paint.red("FAIL"),
            },
            findings::required_tolerance(&o.cmp)
        )?;
    }
    Ok(())
}

/// One line each on what else the reader should know.
fn notes(outcome: &Outcome, paint: &Paint, out: &mut dyn Write) -> io::Result<()> {
    for line in outcome.signature.lines() {
        writeln!(out, "{line}")?;
    }
    for line in findings::lines(outcome) {
        writeln!(out, "{} {line}", paint.yellow("note:"))?;
    }
    input_notes(outcome, out)?;
    run_notes(outcome, out)?;
    coverage_notes(outcome, paint, out)
}

/// Inputs holding NaN/Inf, given to TorchScript only or converted to the ONNX input type, and where each side first produces
/// NaN/Inf.
fn input_notes(outcome: &Outcome, out: &mut dyn Write) -> io::Result<()> {
    for input in &outcome.inputs {
        if input.nonfinite > 0 {
            writeln!(
                out,
                "input '{}' itself holds {} NaN/Inf element(s)",
                input.name, input.nonfinite
            )?;
        }
        if let Some(note) = &input.torch_only {
            writeln!(out, "input '{}': {note}", input.name)?;
        }
        if let Some(given) = &input.converted_from {
            writeln!(
                out,
                "input '{}' was given as {given} and converted to {}, the ONNX model's input type; both runtimes got the converted values",
                input.name, input.dtype
            )?;
        }
    }
    for (side, first) in [
        (outcome.reference.name(), &outcome.first_nonfinite.torch),
        ("ONNX Runtime", &outcome.first_nonfinite.onnx),
    ] {
        if let Some(nf) = first {
            writeln!(
                out,
                "{side} first produces NaN/Inf at layer {} ({}): {} NaN, {} Inf",
                nf.layer_index,
                module_label(&nf.module),
                nf.nan,
                nf.inf
            )?;
        }
    }
    Ok(())
}

/// How many samples were checked, and the growth against the baseline.
fn run_notes(outcome: &Outcome, out: &mut dyn Write) -> io::Result<()> {
    if outcome.samples.len() > 1 {
        let worst = outcome
            .first_divergence
            .as_ref()
            .map(|d| outcome.layers[d.layer_index].cmp.worst_sample);
        writeln!(
            out,
            "checked {} input samples; statistics are the worst sample's per layer{}",
            outcome.samples.len(),
            worst
                .map(|w| format!(
                    "; the first divergence is worst on sample {w} ({})",
                    outcome.samples[w]
                ))
                .unwrap_or_default()
        )?;
    }
    if let Some(b) = &outcome.baseline {
        let mut grown: Vec<_> = b.changes.iter().collect();
        grown.sort_by(|x, y| y.growth.total_cmp(&x.growth));
        writeln!(
            out,
            "baseline {}: largest growth {} (limit {}x){}",
            b.path,
            grown
                .iter()
                .take(3)
                .map(|g| format!("{} {}x", module_label(&g.name), growth(g.growth)))
                .collect::<Vec<_>>()
                .join(", "),
            b.max_growth,
            if b.unmatched > 0 {
                format!("; {} layer(s) not in the baseline", b.unmatched)
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

/// Coverage and failing layers, training mode, unconfirmed pairs, values that could not be
/// captured.
fn coverage_notes(outcome: &Outcome, paint: &Paint, out: &mut dyn Write) -> io::Result<()> {
    let failed_layers = outcome.layers.iter().filter(|l| l.fails()).count();
    let c = &outcome.coverage;
    writeln!(
        out,
        "coverage: {}/{} {} layers ({:.1}%), {}/{} ONNX nodes ({:.1}%); {} failing layer(s)",
        c.counts.torch_layers_paired,
        c.counts.torch_layers_total,
        outcome.reference.name(),
        c.torch_ratio * 100.0,
        c.counts.onnx_nodes_paired,
        c.counts.onnx_nodes_total,
        c.onnx_ratio * 100.0,
        failed_layers
    )?;
    for line in &outcome.training_mode {
        writeln!(
            out,
            "{} compared in training mode as asked (--allow-training-mode): {line}",
            paint.yellow("note:")
        )?;
    }
    let unconfirmed: Vec<&LayerResult> = outcome.layers.iter().filter(|l| l.unconfirmed).collect();
    if let Some(first) = unconfirmed.first() {
        writeln!(
            out,
            "{} {} layer(s) exceed their tolerance while every paired layer computed from them agrees (a doubtful pair, not gated), first #{} {}",
            paint.yellow("unconfirmed:"),
            unconfirmed.len(),
            first.index,
            module_label(&first.module)
        )?;
    }
    let steered = &c.steered_control_flow;
    if steered.if_conditions + steered.loop_trips > 0 {
        writeln!(
            out,
            "{} control flow steered by these inputs: {} If condition(s) and {} Loop trip count(s) measured by a first ONNX Runtime run; the branches that ran are inlined and the iterations unrolled, and compared like any layer",
            paint.yellow("note:"),
            steered.if_conditions,
            steered.loop_trips
        )?;
    }
    if !c.uncapturable.is_empty() {
        writeln!(
            out,
            "{} value(s) could not be captured: not run on this input or inside an ONNX control-flow subgraph (see the JSON report's coverage.uncapturable)",
            c.uncapturable.len()
        )?;
    }
    Ok(())
}

/// `--verbose`: stage timings, memory, and every unpaired value nothing accounts for.
fn timing_and_unpaired(outcome: &Outcome, out: &mut dyn Write) -> io::Result<()> {
    let t = &outcome.timing;
    writeln!(
        out,
        "timing: load {:.3}s, {} run {:.3}s, ONNX run {:.3}s ({} run(s)), pairing {:.3}s, statistics {:.3}s, {}reports {:.3}s, total {:.3}s",
        t.load_s,
        outcome.reference.name(),
        t.torch_run_s,
        t.onnx_run_s,
        t.onnx_runs,
        t.pairing_s,
        t.statistics_s,
        match &outcome.isolation {
            Some(i) => format!("isolation {:.3}s ({} run(s)), ", t.isolation_s, i.runs),
            None => String::new(),
        },
        t.reports_s,
        t.total_s
    )?;
    let m = &outcome.memory;
    let mb = |b: u64| crate::capture::memory::show_bytes(b);
    writeln!(
        out,
        "memory: peak RSS {}{}{}",
        m.peak_rss_bytes.map_or("unknown".to_string(), mb),
        m.budget_bytes
            .map_or(String::new(), |b| format!(" (budget {})", mb(b))),
        if m.spilled_bytes > 0 {
            format!(", {} spilled to a temporary file", mb(m.spilled_bytes))
        } else {
            String::new()
        }
    )?;
    unpaired_lines(&outcome.coverage.unpaired, out)
}

/// Every unpaired value nothing accounts for, one a line, with its reason in words.
fn unpaired_lines(unpaired: &[Unpaired], out: &mut dyn Write) -> io::Result<()> {
    for u in unpaired.iter().filter(|u| !u.accounted) {
        writeln!(
            out,
            "unpaired {:?} {} [{}] in {}: {}",
            u.side,
            u.name,
            u.op,
            module_label(&u.module),
            u.reason
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Side;
    use crate::pairing::UnpairedReason;

    #[test]
    fn verbose_lists_only_unaccounted_values_with_their_reason_in_words() {
        let value = |name: &str, reason: UnpairedReason| Unpaired {
            side: Side::Torch,
            id: 0,
            name: name.into(),
            op: "aten::linear".into(),
            module: "blocks.0.fc".into(),
            accounted: reason.covered(),
            reason,
        };
        let unpaired = [
            value(
                "v3",
                UnpairedReason::FusedIntoNode {
                    node: "/fc/Gemm".into(),
                    compared_after: "blocks.0.act".into(),
                },
            ),
            value(
                "v4",
                UnpairedReason::InsideKeptControlFlow {
                    op: "Loop".into(),
                    node: "/Loop".into(),
                },
            ),
        ];
        let mut out = Vec::new();
        unpaired_lines(&unpaired, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "unpaired Torch v4 [aten::linear] in blocks.0.fc: not compared: computed inside \
             ONNX Loop node /Loop, which keeps its subgraph (coverage.uncapturable says why); \
             only that node's result is compared\n"
        );
    }
}
