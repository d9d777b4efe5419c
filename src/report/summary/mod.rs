//! `align-check summary`: many runs' JSON reports (a CI matrix, one job per model) merged into
//! one overview, a row per model. This file turns the reports, as `reader` read them, into
//! those rows (model names, verdict and failed gates, first divergence, worst layer,
//! coverage, time, the report to open) and their totals; `markdown`, `junit` and `html` each
//! write the one `Summary` in their format, the way the single-run reports each write one
//! `Outcome`, and `link` makes the relative links two of them need.
//!
//! Rows keep the order the reports were given in (a matrix's order), and every string in
//! them is raw: each writer escapes for its own format.

pub mod html;
pub mod junit;
mod link;
pub mod markdown;
pub mod reader;

pub use link::link;

use super::format::severity;
use super::Destination;
use anyhow::Result;
use reader::{ModelReport, Verdict};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The three forms of the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Markdown,
    Junit,
    Html,
}

/// Writes `summary` in `form` to `to`: a file atomically (as every report is), with links
/// relative to its folder; stdout in one piece, with links relative to the working directory.
pub fn emit(summary: &Summary, form: Form, to: &Destination) -> Result<()> {
    let fill = |base: &Path, out: &mut dyn Write| match form {
        Form::Markdown => markdown::write(summary, base, out),
        Form::Junit => junit::write(summary, out),
        Form::Html => html::write(summary, base, out),
    };
    match to {
        Destination::Stdout => {
            let mut bytes = Vec::new();
            fill(Path::new("."), &mut bytes)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
            Ok(())
        }
        Destination::File(path) => {
            let base = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            super::write_atomically(path, |out| fill(base, out))
        }
    }
}

/// An error relative to the reference's range; `None` where the JSON has `null` (not finite).
pub type Rel = Option<f64>;

/// A layer as a cell names it: module path (empty outside any module), ONNX op, error.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerCell {
    pub module: String,
    pub onnx_op: String,
    pub rel_to_range: Rel,
}

/// One model's line in the summary.
#[derive(Debug, Clone)]
pub struct Row {
    /// The TorchScript and ONNX file names, with as many parent folders as it takes to tell
    /// the models of this summary apart.
    pub torch_model: String,
    pub onnx_model: String,
    pub passed: bool,
    /// Names of the failed gates (`layers`, `outputs`, `coverage`, `baseline`).
    pub failed_gates: Vec<String>,
    /// One sentence per failed gate, as the report wrote it.
    pub gate_failures: Vec<String>,
    pub first_divergence: Option<LayerCell>,
    /// Failed with no layer failing on its own: many small errors added up.
    pub accumulated_drift: bool,
    /// The layer with the largest error (a non-finite one counts as the largest).
    pub worst_layer: Option<LayerCell>,
    /// Share of TorchScript layers compared.
    pub coverage: f64,
    pub seconds: f64,
    /// The JSON report, as found.
    pub json: PathBuf,
    /// Its HTML report, when one with the same stem lies next to it.
    pub html: Option<PathBuf>,
}

impl Row {
    /// The name a model goes by in lists: `resnet/model.pt vs resnet/model.onnx`.
    pub fn label(&self) -> String {
        format!("{} vs {}", self.torch_model, self.onnx_model)
    }

    /// The report a reader should open: the HTML one when it exists, else the JSON.
    pub fn report(&self) -> &Path {
        self.html.as_deref().unwrap_or(&self.json)
    }
}

/// Every row and their totals.
#[derive(Debug, Clone)]
pub struct Summary {
    pub rows: Vec<Row>,
}

impl Summary {
    /// Rows from `(JSON path, report)` pairs, in that order.
    pub fn new(reports: Vec<(PathBuf, ModelReport)>) -> Summary {
        let depth = distinguishing_depth(&reports);
        let rows = reports
            .into_iter()
            .map(|(json, r)| row(json, r, depth))
            .collect();
        Summary { rows }
    }

    pub fn failed(&self) -> usize {
        self.rows.iter().filter(|r| !r.passed).count()
    }

    pub fn passed(&self) -> usize {
        self.rows.len() - self.failed()
    }

    /// `3 models: 2 passed, 1 failed`.
    pub fn totals(&self) -> String {
        let n = self.rows.len();
        format!(
            "{n} model{}: {} passed, {} failed",
            if n == 1 { "" } else { "s" },
            self.passed(),
            self.failed()
        )
    }

    /// Seconds of all runs together (the matrix's jobs ran apart; this is their sum).
    pub fn seconds(&self) -> f64 {
        self.rows.iter().map(|r| r.seconds).sum()
    }
}

fn row(json: PathBuf, r: ModelReport, depth: usize) -> Row {
    let worst_layer = r
        .layers
        .iter()
        // `max_by` keeps the last of equals: reversed, the first layer with the worst error.
        .rev()
        .max_by(|a, b| rel_severity(a.rel_to_range).total_cmp(&rel_severity(b.rel_to_range)))
        .map(|l| LayerCell {
            module: l.module.clone(),
            onnx_op: l.onnx_op.clone(),
            rel_to_range: l.rel_to_range,
        });
    let html = json.with_extension("html");
    Row {
        torch_model: tail(&r.torch_model.path, depth),
        onnx_model: tail(&r.onnx_model.path, depth),
        passed: r.verdict == Verdict::Pass,
        failed_gates: r.failed_gates().into_iter().map(String::from).collect(),
        first_divergence: r.first_divergence.map(|d| LayerCell {
            module: d.module,
            onnx_op: d.onnx_op,
            rel_to_range: d.rel_to_range,
        }),
        accumulated_drift: r.accumulated_drift.is_some(),
        worst_layer,
        coverage: r.coverage.torch_ratio,
        seconds: r.timing.total_s,
        html: html.is_file().then_some(html),
        json,
        gate_failures: r.gate_failures,
    }
}

/// How a report's error ranks: `null` (not finite) above every number.
fn rel_severity(rel: Rel) -> f64 {
    severity(rel.unwrap_or(f64::NAN))
}

/// The last `depth` components of a recorded model path, `/`-separated.
fn tail(path: &str, depth: usize) -> String {
    let parts: Vec<&str> = path.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    parts[parts.len().saturating_sub(depth)..].join("/")
}

/// The fewest trailing path components that give every report's pair of models a name of
/// its own: a matrix whose jobs all export `model.pt` and `model.onnx` into a folder per
/// model needs the folder, one whose files are named after the model does not. When no depth
/// tells two rows apart (the same pair checked twice), the file names alone.
fn distinguishing_depth(reports: &[(PathBuf, ModelReport)]) -> usize {
    let deepest = reports
        .iter()
        .flat_map(|(_, r)| [&r.torch_model.path, &r.onnx_model.path])
        .map(|p| p.split(['/', '\\']).filter(|c| !c.is_empty()).count())
        .max()
        .unwrap_or(1);
    (1..=deepest.max(1))
        .find(|&depth| {
            let mut names: Vec<(String, String)> = reports
                .iter()
                .map(|(_, r)| {
                    (
                        tail(&r.torch_model.path, depth),
                        tail(&r.onnx_model.path, depth),
                    )
                })
                .collect();
            names.sort();
            names.windows(2).all(|w| w[0] != w[1])
        })
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(torch: &str, onnx: &str, verdict: &str, layers: &str) -> ModelReport {
        let text = format!(
            r#"{{"schema_version": 1, "verdict": "{verdict}", "gate_failures": [], "gates": [],
                "first_divergence": null, "layers": [{layers}],
                "coverage": {{"torch_ratio": 1.0}}, "timing": {{"total_s": 2.0}},
                "torch_model": {{"path": "{torch}"}}, "onnx_model": {{"path": "{onnx}"}}}}"#
        );
        match reader::parse(&text).unwrap() {
            reader::Read::Report(r) => *r,
            reader::Read::NotAReport => unreachable!(),
        }
    }

    fn layer(module: &str, rel: &str) -> String {
        format!(r#"{{"module": "{module}", "onnx_op": "Conv", "rel_to_range": {rel}}}"#)
    }

    #[test]
    fn names_get_the_folders_it_takes_to_tell_models_apart() {
        let same_names = Summary::new(vec![
            (
                PathBuf::from("a.json"),
                report("/x/resnet/model.pt", "/x/resnet/model.onnx", "pass", ""),
            ),
            (
                PathBuf::from("b.json"),
                report("/x/vit/model.pt", "/x/vit/model.onnx", "pass", ""),
            ),
        ]);
        assert_eq!(
            same_names.rows[0].label(),
            "resnet/model.pt vs resnet/model.onnx"
        );
        assert_eq!(same_names.rows[1].torch_model, "vit/model.pt");

        let own_names = Summary::new(vec![
            (
                PathBuf::from("a.json"),
                report("/x/y/resnet.pt", "/x/y/resnet.onnx", "pass", ""),
            ),
            (
                PathBuf::from("b.json"),
                report("vit.pt", "C:\\\\m\\\\vit.onnx", "pass", ""),
            ),
        ]);
        assert_eq!(own_names.rows[0].label(), "resnet.pt vs resnet.onnx");
        assert_eq!(own_names.rows[1].onnx_model, "vit.onnx");

        // The same pair twice: no depth helps, so the file names alone.
        let twice = Summary::new(vec![
            (
                PathBuf::from("a.json"),
                report("/m/model.pt", "/m/model.onnx", "pass", ""),
            ),
            (
                PathBuf::from("b.json"),
                report("/m/model.pt", "/m/model.onnx", "pass", ""),
            ),
        ]);
        assert_eq!(twice.rows[1].label(), "model.pt vs model.onnx");
    }

    #[test]
    fn totals_count_verdicts() {
        let s = Summary::new(vec![
            (
                PathBuf::from("a.json"),
                report("a.pt", "a.onnx", "pass", ""),
            ),
            (
                PathBuf::from("b.json"),
                report("b.pt", "b.onnx", "fail", ""),
            ),
            (
                PathBuf::from("c.json"),
                report("c.pt", "c.onnx", "pass", ""),
            ),
        ]);
        assert_eq!(s.totals(), "3 models: 2 passed, 1 failed");
        assert_eq!(s.seconds(), 6.0);
        let one = Summary::new(vec![(
            PathBuf::from("a.json"),
            report("a.pt", "a.onnx", "fail", ""),
        )]);
        assert_eq!(one.totals(), "1 model: 0 passed, 1 failed");
    }

    #[test]
    fn the_worst_layer_is_the_first_largest_and_non_finite_beats_every_number() {
        let layers = [layer("a", "0.1"), layer("b", "0.3"), layer("c", "0.3")].join(",");
        let s = Summary::new(vec![(
            PathBuf::from("r.json"),
            report("a.pt", "a.onnx", "pass", &layers),
        )]);
        let worst = s.rows[0].worst_layer.as_ref().unwrap();
        assert_eq!(
            (worst.module.as_str(), worst.rel_to_range),
            ("b", Some(0.3))
        );

        let layers = [layer("a", "0.1"), layer("b", "null"), layer("c", "0.9")].join(",");
        let s = Summary::new(vec![(
            PathBuf::from("r.json"),
            report("a.pt", "a.onnx", "pass", &layers),
        )]);
        assert_eq!(s.rows[0].worst_layer.as_ref().unwrap().module, "b");

        let s = Summary::new(vec![(
            PathBuf::from("r.json"),
            report("a.pt", "a.onnx", "pass", ""),
        )]);
        assert!(s.rows[0].worst_layer.is_none());
    }

    #[test]
    fn the_html_report_next_to_the_json_is_the_one_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let (with, without) = (dir.path().join("a.json"), dir.path().join("b.json"));
        std::fs::write(dir.path().join("a.html"), "<html/>").unwrap();
        let s = Summary::new(vec![
            (with.clone(), report("a.pt", "a.onnx", "pass", "")),
            (without.clone(), report("b.pt", "b.onnx", "pass", "")),
        ]);
        assert_eq!(s.rows[0].report(), dir.path().join("a.html"));
        assert_eq!(s.rows[1].report(), without);
    }
}
