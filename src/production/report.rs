//! What the production-session check found, as the outcome carries it (JSON `production`),
//! the one sentence every human report shows for it, and the gate it is held to.
//!
//! A production-only difference (an output beyond its tolerance in the session the user ships
//! while the unoptimised capture session is within it) fails the `production` gate unless
//! the user opted out (`--no-production-gate`): it is what the application will compute. A
//! difference both sessions share is the outputs gate's business and is only described here.

use super::bisect::Finding;
use super::layers::LayerFinding;
use super::settings::{OptLevel, ProductionSettings, DISABLE_OPTIMIZERS_KEY};
use crate::compare::stats::finite_or_null;
use crate::text::fmt_num;
use serde::Serialize;

/// One graph output's error in the production session, worst over the samples.
#[derive(Debug, Clone, Serialize)]
pub struct ProductionOutput {
    pub name: String,
    /// Against PyTorch, by the outputs' own tolerance.
    pub vs_torch: Difference,
    /// Against the unoptimised (capture) session's value of the same output.
    pub vs_unoptimised: Difference,
    /// Whether the unoptimised session's value passes against PyTorch.
    pub unoptimised_passes: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Difference {
    #[serde(serialize_with = "finite_or_null")]
    pub max_abs: f64,
    #[serde(serialize_with = "finite_or_null")]
    pub rel_to_range: f64,
    /// Within the outputs' tolerance.
    pub pass: bool,
    /// Elements NaN or infinite on one side only, which `max_abs` leaves out.
    pub nonfinite_mismatch: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProductionStatus {
    /// Every output within its tolerance of PyTorch's.
    Agrees,
    /// Some output is beyond its tolerance only in the production session.
    ProductionOnly,
    /// The outputs beyond tolerance are so in the unoptimised session too.
    DiffersAsUnoptimised,
    /// An output beyond tolerance of PyTorch's only in the production session, but within
    /// it of the unoptimised session's, which passes, or no more than twice as far from
    /// PyTorch: the two sessions' float rounding added up (`judge::production_only`). Not
    /// gated.
    Rounding,
    /// The production session could not be built or run (`error` says why).
    Error,
}

/// The config line that works around a named pass, for the command line and for Python.
#[derive(Debug, Clone, Serialize)]
pub struct Workaround {
    pub key: String,
    pub value: String,
    /// `--ort-config KEY=VALUE`.
    pub flag: String,
    /// The same as a line of the application's Python session setup.
    pub python: String,
}

impl Workaround {
    pub fn disabling(settings: &ProductionSettings, pass: &str) -> Workaround {
        let (key, value) = settings
            .config_disabling(&[pass])
            .into_iter()
            .find(|(k, _)| k == DISABLE_OPTIMIZERS_KEY)
            .expect("config_disabling sets the key");
        Workaround {
            flag: format!("--ort-config {key}={value}"),
            python: format!("session_options.add_session_config_entry(\"{key}\", \"{value}\")"),
            key,
            value,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProductionReport {
    pub level: OptLevel,
    pub threads: usize,
    /// The session config entries it ran with (`--ort-config`), as `KEY=VALUE`.
    pub config: Vec<String>,
    pub gated: bool,
    pub status: ProductionStatus,
    /// Per graph output, in the report's output order.
    pub outputs: Vec<ProductionOutput>,
    /// The bisection's result, when the difference is production-only.
    pub finding: Option<Finding>,
    /// How to keep the named pass out of the production session, when one was named.
    pub workaround: Option<Workaround>,
    /// With a named pass: the first paired layer it changes, or why none can be named.
    pub layer: Option<LayerFinding>,
    pub error: Option<String>,
    /// ONNX Runtime sessions this check built (1 plus the bisection's); the time they took
    /// is the outcome's `timing.production_s`.
    pub sessions: usize,
}

impl ProductionReport {
    /// The output that differs most from PyTorch, relative to its range.
    pub fn worst(&self) -> Option<&ProductionOutput> {
        self.outputs
            .iter()
            .max_by(|a, b| a.vs_torch.rel_to_range.total_cmp(&b.vs_torch.rel_to_range))
    }

    fn session_label(&self) -> String {
        let mut label = format!(
            "production session (ONNX Runtime {}, {} thread{}",
            self.level,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        );
        for entry in &self.config {
            label.push_str(", ");
            label.push_str(entry);
        }
        label.push(')');
        label
    }

    /// The one line every report shows: "agrees", or what differs, by how much, and why.
    pub fn line(&self) -> String {
        let label = self.session_label();
        if let Some(error) = &self.error {
            return format!("{label} could not run: {error}");
        }
        let Some(worst) = self.worst() else {
            return format!("{label}: the model has no output to compare");
        };
        // An element NaN or infinite on one side only is no amount of error: say it first.
        let nonfinite = match worst.vs_torch.nonfinite_mismatch {
            0 => "largest".to_string(),
            n => {
                format!("{n} element(s) NaN or infinite where PyTorch's are not; the others within")
            }
        };
        let amounts = format!(
            "{nonfinite} {} of range (max abs {}) from PyTorch, {} from the unoptimised run",
            fmt_num(worst.vs_torch.rel_to_range),
            fmt_num(worst.vs_torch.max_abs),
            fmt_num(worst.vs_unoptimised.rel_to_range)
        );
        match self.status {
            ProductionStatus::Agrees => {
                format!("{label}: agrees, every output within its tolerance ({amounts})")
            }
            ProductionStatus::DiffersAsUnoptimised => {
                format!("{label}: differs from PyTorch as the unoptimised run does ({amounts})")
            }
            ProductionStatus::Rounding => format!(
                "{label}: beyond the outputs' tolerance of PyTorch by no more than the \
                 unoptimised run's own rounding, which agrees with PyTorch; the two sessions' \
                 rounding adds up, not gated ({amounts})"
            ),
            ProductionStatus::Error => format!("{label} could not run"),
            ProductionStatus::ProductionOnly => {
                let gate = if self.gated {
                    ""
                } else {
                    " (not gated: --no-production-gate)"
                };
                format!(
                    "{label}: differs where the unoptimised run agrees{gate}: {}",
                    self.cause(worst)
                )
            }
        }
    }

    /// "ONNX Runtime's GeluApproximation (extended) changes output `y` by 1.7e-3 of range
    /// (max abs 4.8e-4); disable it with ...".
    fn cause(&self, worst: &ProductionOutput) -> String {
        let change = format!(
            "output `{}` by {} of range (max abs {})",
            worst.name,
            fmt_num(worst.vs_torch.rel_to_range),
            fmt_num(worst.vs_torch.max_abs)
        );
        match (&self.finding, &self.workaround) {
            (
                Some(Finding::Pass {
                    name,
                    level,
                    verified,
                }),
                Some(w),
            ) => {
                let check = if *verified {
                    "(checked: the outputs then agree)"
                } else {
                    "(not enough alone: the outputs still differ with it disabled)"
                };
                let layer = self
                    .layer
                    .as_ref()
                    .map(|l| l.clause(name))
                    .unwrap_or_default();
                format!(
                    "ONNX Runtime's {name} ({level} level) changes {change}{layer}; disable it \
                     with {} or, in Python, {} {check}",
                    w.flag, w.python
                )
            }
            (Some(Finding::NotAnOptimiser), _) => format!(
                "it changes {change} even with graph optimisation disabled: the session config \
                 entries or the thread count do it, not an optimiser"
            ),
            (Some(Finding::Unresolved { level }), _) => format!(
                "it changes {change} from the {level} level on, and still does with every \
                 transformer that level adds disabled; run the session one level lower \
                 (graph_optimization_level {})",
                lower(*level).python_name()
            ),
            _ => format!("it changes {change}"),
        }
    }

    /// One line per output: its error against PyTorch and against the unoptimised run.
    pub fn output_lines(&self) -> String {
        self.outputs
            .iter()
            .map(|o| {
                format!(
                    "output {}: {} of range (max abs {}) from PyTorch, {} of range from the unoptimised run{}",
                    o.name,
                    fmt_num(o.vs_torch.rel_to_range),
                    fmt_num(o.vs_torch.max_abs),
                    fmt_num(o.vs_unoptimised.rel_to_range),
                    if o.vs_torch.pass { "" } else { ": beyond its tolerance" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The `production` gate: fails on a production-only difference unless opted out.
    /// Whether the production gate passes: it fails on a production-only difference,
    /// unless `--no-production-gate` turned the gate off.
    pub fn gate_passed(&self) -> bool {
        !(self.gated && self.status == ProductionStatus::ProductionOnly)
    }
}

fn lower(level: OptLevel) -> OptLevel {
    match level {
        OptLevel::Disable | OptLevel::Basic => OptLevel::Disable,
        OptLevel::Extended => OptLevel::Basic,
        OptLevel::All => OptLevel::Extended,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: ProductionStatus, torch_rel: f64) -> ProductionReport {
        ProductionReport {
            level: OptLevel::All,
            threads: 2,
            config: vec!["optimization.enable_gelu_approximation=1".into()],
            gated: true,
            status,
            outputs: vec![ProductionOutput {
                name: "y".into(),
                vs_torch: Difference {
                    max_abs: 4.8e-4,
                    rel_to_range: torch_rel,
                    pass: status == ProductionStatus::Agrees,
                    nonfinite_mismatch: 0,
                },
                vs_unoptimised: Difference {
                    max_abs: 4.8e-4,
                    rel_to_range: torch_rel,
                    pass: false,
                    nonfinite_mismatch: 0,
                },
                unoptimised_passes: true,
            }],
            finding: None,
            workaround: None,
            layer: None,
            error: None,
            sessions: 1,
        }
    }

    #[test]
    fn a_named_pass_comes_with_the_line_that_disables_it() {
        let mut r = report(ProductionStatus::ProductionOnly, 1.7e-3);
        let settings = ProductionSettings {
            level: OptLevel::All,
            threads: 2,
            config: Vec::new(),
            gate: true,
        };
        r.finding = Some(Finding::Pass {
            name: "GeluApproximation".into(),
            level: OptLevel::Extended,
            verified: true,
        });
        r.workaround = Some(Workaround::disabling(&settings, "GeluApproximation"));
        r.layer = Some(LayerFinding::Layer {
            layer_index: 2,
            module: "act1".into(),
            onnx_node: "/act1/Mul_1".into(),
            max_abs: 2.5e-4,
            rel_to_range: 1.2e-4,
        });
        let line = r.line();
        assert!(
            line.contains("the first paired layer it changes is #2 act1 (/act1/Mul_1)"),
            "{line}"
        );
        assert!(
            line.contains("ONNX Runtime's GeluApproximation (extended level) changes output `y`"),
            "{line}"
        );
        assert!(
            line.contains(
                "--ort-config optimization.disable_specified_optimizers=GeluApproximation"
            ),
            "{line}"
        );
        assert!(
            line.contains("optimization.enable_gelu_approximation=1"),
            "{line}"
        );
        assert!(!r.gate_passed());
        r.gated = false;
        assert!(r.gate_passed());
        assert!(r.line().contains("not gated"), "{}", r.line());
    }

    #[test]
    fn agreement_and_shared_differences_pass_the_gate() {
        let r = report(ProductionStatus::Agrees, 3e-7);
        assert!(r.gate_passed());
        assert!(r.line().contains(": agrees"), "{}", r.line());
        let r = report(ProductionStatus::DiffersAsUnoptimised, 0.2);
        assert!(r.gate_passed());
        assert!(
            r.line().contains("as the unoptimised run does"),
            "{}",
            r.line()
        );
    }

    /// An output NaN where PyTorch is finite has no size of error: the line says how many
    /// elements, not "0 of range" alone.
    #[test]
    fn non_finite_elements_are_named_before_the_amounts() {
        let mut r = report(ProductionStatus::DiffersAsUnoptimised, 0.0);
        r.outputs[0].vs_torch.nonfinite_mismatch = 48;
        let line = r.line();
        assert!(
            line.contains("48 element(s) NaN or infinite where PyTorch's are not; the others within 0 of range"),
            "{line}"
        );
    }
}
