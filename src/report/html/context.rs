//! The serialisable context the HTML page is rendered from: everything the template shows,
//! already formatted, derived from one `Outcome`.
//!
//! Strings here are raw (a module name is the module name): the template escapes every one of
//! them on output. The only pre-rendered markup is the charts' SVG, which plotters produced
//! with its text escaped, and the verdict narrative (`headline`, `narrative`), which
//! `markup::Html` wrote with every name escaped; the template marks exactly those safe.
//!
//! Isolation shows only where it ran (`show_isolated`, `isolation`), so that the
//! page of a run without it is the page it always was.

use crate::outcome::reference::{Reference, ReferenceFormat};
use super::charts;
use super::tree::{module_tree, TreeItem};
use crate::capture::tensor::format_shape;
use crate::compare::tolerance_rule::ToleranceRule;
use super::markup::Html;
use crate::outcome::{
    Comparison, CoverageReport, Environment, Isolated, IsolationReport, LayerResult, Outcome,
    ToleranceInfo, Verdict,
};
use crate::report::format::{
    band_of, bytes, file_name, fmt_num, isolation_ran, module_label, snr, BANDS,
};
use crate::report::narrative::{Headline, Narrative};
use crate::text::sentence_case;
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Serialize)]
pub struct Page {
    pub title: String,
    /// `pass` or `fail`.
    pub verdict: &'static str,
    pub summary: Summary,
    /// The verdict's headline and the sentences after it (`report::narrative`), as
    /// finished markup with every name escaped; the template marks these safe.
    pub headline: String,
    pub narrative: NarrativeView,
    /// Present when isolation ran (or was asked for and could not).
    pub isolation: Option<IsolationView>,
    /// Whether the table has an isolated column and the network chart an isolated curve.
    pub show_isolated: bool,
    /// What runs in training mode, under `--allow-training-mode`.
    pub training_mode: Vec<String>,
    /// What the run found beyond pass and fail (`report::findings`): carried rounding,
    /// tiny-valued layers, discrete flips.
    pub findings: Vec<String>,
    /// How the two signatures met (mapping, one-sided inputs and outputs, state).
    pub signature: Vec<String>,
    pub models: Vec<FileView>,
    pub inputs: Vec<InputView>,
    /// Input samples when more than one was checked.
    pub samples: Vec<String>,
    /// Overrides and the defaults of the dtypes this model has.
    pub tolerances: Vec<ToleranceView>,
    /// Defaults of dtypes no compared value has, folded away on the page.
    pub other_tolerances: Vec<ToleranceView>,
    pub versions: Vec<Fact>,
    pub timing: Vec<Fact>,
    pub outputs: Vec<OutputView>,
    pub network_chart: String,
    /// How many layers one point of the network chart stands for.
    pub network_bucket: usize,
    pub details: Vec<DetailView>,
    /// Detail entries of the outcome left out by `MAX_DETAILS`.
    pub details_left_out: usize,
    pub tree: Vec<TreeItem>,
    pub legend: Vec<LegendEntry>,
    pub rows: Vec<Row>,
    /// Rows the layer table lays out when the page opens (see `ROW_LIMIT`).
    pub row_limit: usize,
    /// Whether the table needs a dtype column (more than one dtype, or the sides differ).
    pub show_dtype: bool,
    /// Distinct ops (ONNX and TorchScript) for the table's op filter.
    pub ops: Vec<String>,
    pub unpaired: Vec<UnpairedView>,
    /// Unpaired values that no rule accounts for (fusion, vanished modules, bookkeeping).
    pub unpaired_open: usize,
    pub uncapturable: Vec<UncapturableView>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    /// The reference's name (`TorchScript`, `ExportedProgram`).
    pub reference: &'static str,
    pub layers: usize,
    pub failing: usize,
    pub outputs: usize,
    pub failing_outputs: usize,
    pub torch_coverage: String,
    pub onnx_coverage: String,
    pub min_coverage: String,
}

/// The narrative's sentences after the headline, each escaped markup.
#[derive(Debug, Serialize)]
pub struct NarrativeView {
    pub cause: Option<String>,
    pub gates: Vec<String>,
    pub origins: Option<String>,
    pub isolation_failed: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct IsolationView {
    pub reason: String,
    pub fed_values: usize,
    pub isolated_layers: usize,
    pub runs: usize,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct FileView {
    pub role: &'static str,
    pub path: String,
    pub size: String,
    pub sha256: String,
}

#[derive(Debug, Serialize)]
pub struct InputView {
    pub name: String,
    pub shape: String,
    pub dtype: String,
    pub source: String,
}

#[derive(Debug, Serialize)]
pub struct ToleranceView {
    pub applies_to: String,
    pub atol: String,
    pub rtol: String,
}

/// A labelled value for the small fact tables.
#[derive(Debug, Serialize)]
pub struct Fact {
    pub label: &'static str,
    pub value: String,
}

#[derive(Debug, Serialize)]
pub struct OutputView {
    pub name: String,
    pub shape: String,
    pub max_abs: String,
    pub rel: String,
    pub cosine: String,
    pub pass: bool,
}

#[derive(Debug, Serialize)]
pub struct DetailView {
    pub anchor: String,
    pub why: String,
    pub index: usize,
    pub module: String,
    pub module_type: String,
    pub onnx_node: String,
    pub onnx_op: String,
    pub torch_op: String,
    pub shape: String,
    pub source: Option<String>,
    pub status: &'static str,
    pub facts: Vec<Fact>,
    pub charts: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct LegendEntry {
    pub colour: &'static str,
    pub label: &'static str,
}

/// One row of the layer table. `*_key` fields are the exact numbers the table sorts by.
#[derive(Debug, Serialize)]
pub struct Row {
    pub index: usize,
    /// The module path cut after each `.`, where the page lets it wrap.
    pub module_parts: Vec<String>,
    pub module_type: String,
    pub torch_op: String,
    /// The ONNX node name cut after each `/`: the page lets long names wrap there.
    pub onnx_node_parts: Vec<String>,
    pub onnx_op: String,
    pub shape: String,
    pub dtype: String,
    pub paired_by: String,
    pub fused: String,
    pub source: String,
    pub max_abs: String,
    pub max_abs_key: String,
    pub rel: String,
    pub rel_key: String,
    pub cosine: String,
    pub cosine_key: String,
    pub snr: String,
    pub snr_key: String,
    pub mismatch: String,
    pub mismatch_key: String,
    pub colour: &'static str,
    /// Error in isolation (`-` where isolation could not compute it), its sort key (below
    /// every number when missing) and colour class (none when missing).
    pub isolated: String,
    pub isolated_key: String,
    pub isolated_colour: &'static str,
    pub status: &'static str,
}

#[derive(Debug, Serialize)]
pub struct UnpairedView {
    pub side: &'static str,
    pub name: String,
    pub op: String,
    pub module: String,
    pub reason: String,
    pub accounted: bool,
}

#[derive(Debug, Serialize)]
pub struct UncapturableView {
    pub name: String,
    pub op: String,
    pub module: String,
    pub reason: String,
}

/// Rows the layer table shows when the page opens. Laying out every row of a table of
/// thousands is most of the time a large page takes to open; the rest are a click, a filter
/// or a sort away (and all shown when script is off).
pub const ROW_LIMIT: usize = 500;

/// Layer close-ups drawn at most (about 60 KB of SVG each). Outcomes list every divergence
/// origin, and a model with many broken parallel branches would otherwise make the page huge;
/// the first divergence comes first, and the rest are in the table.
pub const MAX_DETAILS: usize = 16;

fn legend() -> Vec<LegendEntry> {
    BANDS
        .iter()
        .map(|b| LegendEntry {
            colour: b.class,
            label: b.label,
        })
        .collect()
}

/// A number as the table sorts it: `parseFloat` reads every one of these, NaN sorts as the
/// worst value there is.
fn sort_key(v: f64) -> String {
    if v.is_nan() || v == f64::INFINITY {
        "1e999".into()
    } else if v == f64::NEG_INFINITY {
        "-1e999".into()
    } else {
        format!("{v:e}")
    }
}

fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

fn tolerance_view(t: &ToleranceInfo) -> ToleranceView {
    ToleranceView {
        applies_to: t.applies_to.to_string(),
        atol: fmt_num(t.atol),
        rtol: fmt_num(t.rtol),
    }
}

fn narrative(outcome: &Outcome) -> NarrativeView {
    let n = Narrative::of(outcome, &Html);
    NarrativeView {
        cause: n.cause.map(|c| sentence_case(&c)),
        gates: n.gates,
        origins: n.origins,
        isolation_failed: n.isolation_failed.map(|c| sentence_case(&c)),
    }
}

fn isolation_view(i: &IsolationReport) -> IsolationView {
    IsolationView {
        reason: i.reason.clone(),
        fed_values: i.fed_values,
        isolated_layers: i.isolated_layers,
        runs: i.runs,
        error: i.error.clone(),
    }
}

fn row(l: &LayerResult) -> Row {
    let c = &l.cmp;
    Row {
        index: l.index,
        module_parts: module_label(&l.module)
            .split_inclusive('.')
            .map(str::to_string)
            .collect(),
        module_type: l.module_type.clone(),
        torch_op: l.torch_op.clone(),
        onnx_node_parts: l
            .onnx_node
            .split_inclusive('/')
            .map(str::to_string)
            .collect(),
        onnx_op: l.onnx_op.clone(),
        shape: format_shape(&c.shape),
        dtype: if c.dtype == c.onnx_dtype {
            c.dtype.clone()
        } else {
            format!("{} / {}", c.dtype, c.onnx_dtype)
        },
        paired_by: l.paired_by.clone(),
        fused: l.fused.join(", "),
        source: l.source.clone().unwrap_or_default(),
        max_abs: fmt_num(c.max_abs),
        max_abs_key: sort_key(c.max_abs),
        rel: fmt_num(c.rel_to_range),
        rel_key: sort_key(c.rel_to_range),
        cosine: fmt_num(c.cosine),
        cosine_key: sort_key(c.cosine),
        snr: snr(c.snr_db),
        snr_key: sort_key(c.snr_db),
        mismatch: format!("{:.2}%", c.mismatch_ratio * 100.0),
        mismatch_key: sort_key(c.mismatch_ratio),
        colour: band_of(c.rel_to_range).class,
        isolated: l
            .isolated
            .as_ref()
            .map_or("-".to_string(), |iso| fmt_num(iso.rel_to_range)),
        isolated_key: l
            .isolated
            .as_ref()
            .map_or("-1e999".to_string(), |iso| sort_key(iso.rel_to_range)),
        isolated_colour: l
            .isolated
            .as_ref()
            .map_or("", |iso| band_of(iso.rel_to_range).class),
        status: l.status().as_str(),
    }
}

/// The statistics a detail section lists next to its charts, with the error in isolation
/// when isolation measured it.
fn detail_facts(c: &Comparison, isolated: Option<&Isolated>) -> Vec<Fact> {
    let tol = charts::tolerance_abs(c);
    let mut facts = vec![
        Fact {
            label: "max |ONNX - ref|",
            value: format!(
                "{} at [{}]",
                fmt_num(c.max_abs),
                index_text(&c.max_abs_index)
            ),
        },
        Fact {
            label: "error / range",
            value: fmt_num(c.rel_to_range),
        },
    ];
    if let Some(iso) = isolated {
        facts.push(Fact {
            label: "error / range in isolation",
            value: format!(
                "{} (max abs {}){}",
                fmt_num(iso.rel_to_range),
                fmt_num(iso.max_abs),
                match (iso.pass, c.pass) {
                    (false, _) => ": fails on its own",
                    (true, false) => ": passes on its own, the error comes from upstream",
                    (true, true) => ": within tolerance",
                }
            ),
        });
    }
    facts.extend([
        Fact {
            label: "mean abs / RMSE",
            value: format!("{} / {}", fmt_num(c.mean_abs), fmt_num(c.rmse)),
        },
        Fact {
            label: "cosine / SNR",
            value: format!("{} / {} dB", fmt_num(c.cosine), snr(c.snr_db)),
        },
        Fact {
            label: "elements outside tolerance",
            value: format!("{:.3}%", c.mismatch_ratio * 100.0),
        },
        Fact {
            label: "tolerance",
            value: format!(
                "atol {} (×max(1, range) = {}), rtol {}",
                fmt_num(c.tol.atol),
                fmt_num(tol),
                fmt_num(c.tol.rtol)
            ),
        },
    ]);
    let nonfinite = c.nan_ref + c.nan_test + c.inf_ref + c.inf_test;
    if nonfinite > 0 {
        facts.push(Fact {
            label: "NaN / Inf (ref, ONNX)",
            value: format!(
                "NaN {} / {}, Inf {} / {}",
                c.nan_ref, c.nan_test, c.inf_ref, c.inf_test
            ),
        });
    }
    facts
}

fn index_text(index: &[usize]) -> String {
    index
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn details(outcome: &Outcome) -> Result<Vec<DetailView>> {
    let mut out = Vec::new();
    for (k, d) in outcome.details.iter().take(MAX_DETAILS).enumerate() {
        let Some(l) = outcome.layers.get(d.layer_index) else {
            continue;
        };
        let mut svgs = vec![charts::error_histogram(&l.cmp)?];
        if !d.scatter.is_empty() {
            svgs.push(charts::scatter(d, &l.cmp)?);
        }
        if !d.channel_max_abs.is_empty() {
            svgs.push(charts::channel_errors(d, &l.cmp)?);
        }
        out.push(DetailView {
            anchor: format!("detail-{k}"),
            why: d.why.clone(),
            index: l.index,
            module: module_label(&l.module).to_string(),
            module_type: l.module_type.clone(),
            onnx_node: l.onnx_node.clone(),
            onnx_op: l.onnx_op.clone(),
            torch_op: l.torch_op.clone(),
            shape: format_shape(&l.cmp.shape),
            source: l.source.clone(),
            status: l.status().as_str(),
            facts: detail_facts(&l.cmp, l.isolated.as_ref()),
            charts: svgs,
        });
    }
    Ok(out)
}

/// The page of `outcome`: each part below derives one group of the page's fields.
pub fn page(outcome: &Outcome) -> Result<Page> {
    let c = &outcome.coverage;
    let first = outcome
        .first_divergence
        .as_ref()
        .map(|d| (d.layer_index, module_label(&d.module)));
    let (network_chart, network_bucket) = charts::error_along_network(&outcome.layers, first)?;
    let (tolerances, other_tolerances) = tolerances(outcome);
    Ok(Page {
        title: format!(
            "align-check: {} vs {}",
            file_name(&outcome.torch_model.path),
            file_name(&outcome.onnx_model.path)
        ),
        verdict: match outcome.verdict {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
        },
        summary: summary(outcome),
        headline: sentence_case(&Headline::of(outcome).render(&Html)),
        narrative: narrative(outcome),
        isolation: outcome.isolation.as_ref().map(isolation_view),
        show_isolated: isolation_ran(outcome),
        training_mode: outcome.training_mode.clone(),
        findings: crate::report::findings::lines(outcome),
        signature: outcome.signature.lines(),
        models: models(outcome),
        inputs: inputs(outcome),
        samples: if outcome.samples.len() > 1 {
            outcome.samples.clone()
        } else {
            Vec::new()
        },
        tolerances,
        other_tolerances,
        versions: versions(&outcome.environment),
        timing: timing(outcome),
        outputs: outputs(outcome),
        network_chart,
        network_bucket,
        details: details(outcome)?,
        details_left_out: outcome.details.len().saturating_sub(MAX_DETAILS),
        tree: module_tree(outcome),
        legend: legend(),
        rows: outcome.layers.iter().map(row).collect(),
        row_limit: ROW_LIMIT,
        show_dtype: show_dtype(outcome),
        ops: ops(outcome),
        unpaired: unpaired(c, &outcome.reference),
        unpaired_open: c.unpaired.iter().filter(|u| !u.accounted).count(),
        uncapturable: uncapturable(c),
    })
}

/// The verdict box's counts and coverage.
fn summary(outcome: &Outcome) -> Summary {
    let c = &outcome.coverage;
    Summary {
        reference: outcome.reference.name(),
        layers: outcome.layers.len(),
        failing: outcome.layers.iter().filter(|l| !l.cmp.pass).count(),
        outputs: outcome.outputs.len(),
        failing_outputs: outcome.outputs.iter().filter(|o| !o.passes()).count(),
        torch_coverage: format!(
            "{}/{} ({:.1}%)",
            c.counts.torch_layers_paired,
            c.counts.torch_layers_total,
            c.torch_ratio * 100.0
        ),
        onnx_coverage: format!(
            "{}/{} ({:.1}%)",
            c.counts.onnx_nodes_paired,
            c.counts.onnx_nodes_total,
            c.onnx_ratio * 100.0
        ),
        min_coverage: format!("{:.1}%", c.min_coverage * 100.0),
    }
}

/// The reference's file role and run label, by what the reference is.
fn labels(outcome: &Outcome) -> (&'static str, &'static str) {
    match outcome.reference.format {
        ReferenceFormat::Pt2 => ("ExportedProgram (reference)", "ExportedProgram run"),
        ReferenceFormat::Torchscript => ("TorchScript (reference)", "TorchScript run"),
    }
}

fn models(outcome: &Outcome) -> Vec<FileView> {
    [
        (labels(outcome).0, &outcome.torch_model),
        ("ONNX", &outcome.onnx_model),
    ]
    .into_iter()
    .map(|(role, f)| FileView {
        role,
        path: f.path.clone(),
        size: bytes(f.size_bytes),
        sha256: f.sha256.clone(),
    })
    .collect()
}

fn inputs(outcome: &Outcome) -> Vec<InputView> {
    outcome
        .inputs
        .iter()
        .map(|i| InputView {
            name: i.name.clone(),
            shape: format_shape(&i.shape),
            dtype: match &i.converted_from {
                Some(given) => format!("{} (given as {given})", i.dtype),
                None => i.dtype.clone(),
            },
            source: i.source.clone(),
        })
        .collect()
}

/// The tolerances shown up front, and those folded away. The policy lists a default per
/// dtype; ten rows of int defaults would bury the one that matters, so only the dtypes
/// present (and every override) are shown up front.
fn tolerances(outcome: &Outcome) -> (Vec<ToleranceView>, Vec<ToleranceView>) {
    let dtypes: BTreeSet<&str> = outcome
        .layers
        .iter()
        .map(|l| &l.cmp)
        .chain(outcome.outputs.iter().map(|o| &o.cmp))
        .flat_map(|c| [c.dtype.as_str(), c.onnx_dtype.as_str()])
        .collect();
    let (relevant, other): (Vec<&ToleranceInfo>, Vec<&ToleranceInfo>) = outcome
        .tolerances
        .iter()
        .partition(|t| shown_up_front(&t.applies_to, &dtypes));
    (
        relevant.into_iter().map(tolerance_view).collect(),
        other.into_iter().map(tolerance_view).collect(),
    )
}

/// Whether `rule` is shown up front: every rule but the default of a dtype the run did not
/// compare (`dtypes`, by name).
fn shown_up_front(rule: &ToleranceRule, dtypes: &BTreeSet<&str>) -> bool {
    match rule {
        ToleranceRule::Default(dtype) => dtypes.contains(dtype.name()),
        _ => true,
    }
}

fn versions(e: &Environment) -> Vec<Fact> {
    vec![
        Fact {
            label: "align-check",
            value: e.align_check.clone(),
        },
        Fact {
            label: "libtorch",
            value: e.libtorch.clone(),
        },
        Fact {
            label: "ONNX Runtime",
            value: e.onnxruntime.clone(),
        },
        Fact {
            label: "threads",
            // Resolved by the configuration: 0 ("all cores") is never recorded.
            value: e.threads.to_string(),
        },
    ]
}

/// Stage times; isolation's only when it ran.
fn timing(outcome: &Outcome) -> Vec<Fact> {
    let t = &outcome.timing;
    let isolation = outcome
        .isolation
        .as_ref()
        .map(|_| ("isolation", t.isolation_s));
    [
        ("total", t.total_s),
        ("loading", t.load_s),
        (labels(outcome).1, t.torch_run_s),
        ("ONNX Runtime run", t.onnx_run_s),
        ("pairing", t.pairing_s),
        ("statistics", t.statistics_s),
    ]
    .into_iter()
    .chain(isolation)
    .map(|(label, s)| Fact {
        label,
        value: seconds(s),
    })
    .collect()
}

fn outputs(outcome: &Outcome) -> Vec<OutputView> {
    outcome
        .outputs
        .iter()
        .map(|o| OutputView {
            name: o.name.clone(),
            shape: format_shape(&o.cmp.shape),
            max_abs: fmt_num(o.cmp.max_abs),
            rel: fmt_num(o.cmp.rel_to_range),
            cosine: fmt_num(o.cmp.cosine),
            pass: o.passes(),
        })
        .collect()
}

/// Whether the layer table needs a dtype column: more than one dtype, or the sides differ.
fn show_dtype(outcome: &Outcome) -> bool {
    outcome
        .layers
        .iter()
        .any(|l| l.cmp.dtype != l.cmp.onnx_dtype || l.cmp.dtype != outcome.layers[0].cmp.dtype)
}

/// Distinct ops of both sides, for the table's op filter.
fn ops(outcome: &Outcome) -> Vec<String> {
    let ops: BTreeSet<String> = outcome
        .layers
        .iter()
        .flat_map(|l| [l.onnx_op.clone(), l.torch_op.clone()])
        .filter(|op| !op.is_empty())
        .collect();
    ops.into_iter().collect()
}

fn unpaired(c: &CoverageReport, reference: &Reference) -> Vec<UnpairedView> {
    c.unpaired
        .iter()
        .map(|u| UnpairedView {
            side: reference.side_label(u.side),
            name: u.name.clone(),
            op: u.op.clone(),
            module: module_label(&u.module).to_string(),
            reason: u.reason.to_string(),
            accounted: u.accounted,
        })
        .collect()
}

fn uncapturable(c: &CoverageReport) -> Vec<UncapturableView> {
    c.uncapturable
        .iter()
        .map(|u| UncapturableView {
            name: u.name.clone(),
            op: u.op.clone(),
            module: module_label(&u.module).to_string(),
            reason: u.reason.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_keys_parse_as_numbers() {
        assert_eq!(sort_key(f64::NAN), "1e999");
        assert_eq!(sort_key(0.5), "5e-1");
    }

    #[test]
    fn legend_lists_every_band() {
        let legend = legend();
        assert_eq!(legend.len(), BANDS.len());
        assert_eq!(legend[7].colour, "c7");
        assert_eq!(legend[7].label, "≥ 1e-1");
    }

    #[test]
    fn only_the_defaults_of_dtypes_the_run_compared_are_shown_up_front() {
        use crate::capture::tensor::DType;
        let compared: BTreeSet<&str> = ["float16"].into();
        assert!(shown_up_front(&ToleranceRule::Default(DType::F16), &compared));
        assert!(!shown_up_front(&ToleranceRule::Default(DType::I64), &compared));
        let over = ToleranceRule::Override("layer4.*".into());
        assert!(shown_up_front(&over, &compared));
        assert!(shown_up_front(&ToleranceRule::Outputs(DType::I64), &compared));
        let info = ToleranceInfo {
            applies_to: ToleranceRule::Default(DType::F16),
            atol: 1e-5,
            rtol: 1e-2,
        };
        assert_eq!(tolerance_view(&info).applies_to, "default float16");
    }

    #[test]
    fn unpaired_rows_carry_their_reason_in_words() {
        use crate::capture::Side;
        use crate::pairing::{Coverage, Unpaired, UnpairedReason};
        let reason = UnpairedReason::Identity {
            input: "v2".into(),
        };
        let coverage = CoverageReport {
            counts: Coverage::default(),
            torch_ratio: 1.0,
            onnx_ratio: 1.0,
            min_coverage: 0.0,
            unpaired: vec![Unpaired {
                side: Side::Torch,
                id: 3,
                name: "v3".into(),
                op: "aten::slice".into(),
                module: String::new(),
                accounted: reason.covered(),
                reason,
            }],
            uncapturable: vec![],
            steered_control_flow: Default::default(),
        };
        let rows = unpaired(&coverage, &Reference::new(ReferenceFormat::Pt2));
        assert_eq!(rows[0].side, "ExportedProgram");
        assert_eq!(
            rows[0].reason,
            "equals its input v2 (an identity the exporter drops)"
        );
        assert!(rows[0].accounted);
    }
}
