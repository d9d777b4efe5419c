//! Stage 5, outcome: the one serialisable result of a run (this file), the gates that decide
//! its verdict (`verdict`) and the comparison with a previous report (`baseline`).
//!
//! The one serialisable result of a run. The JSON report is this plus `schema_version`;
//! the terminal table and every other report are derived from it.
//!
//! Field names here are the public JSON contract documented in the README. Non-finite
//! numbers (an SNR of +inf for identical tensors) are written as `null`, since JSON has no
//! infinity.

pub mod baseline;
pub mod gate;
pub mod reference;
pub mod verdict;

use crate::capture::Uncapturable;
use crate::compare::details::LayerDetail;
use crate::compare::discrete::DiscreteFlip;
pub use crate::compare::judged::{
    Cause, Comparison, Divergence, Drift, DriftContributor, Isolated, LayerResult, LayerStatus,
    Origin, OutputResult,
};
use crate::compare::small_values::SmallValues;
pub use crate::compare::stats::finite_or_null;
use crate::compare::tolerance_rule::ToleranceRule;
use crate::inputs::ResolvedInput;
use crate::outcome::baseline::BaselineReport;
use crate::pairing::{Coverage, Unpaired};
pub use gate::{Gate, GateFinding, GateName};
use serde::Serialize;

/// Bumped whenever a key is renamed or removed or its meaning changes; adding keys does not.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// The first layer, in execution order, whose output holds NaN or Inf on one side.
#[derive(Debug, Clone, Serialize)]
pub struct NonFinite {
    pub layer_index: usize,
    pub module: String,
    pub nan: usize,
    pub inf: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FirstNonFinite {
    pub torch: Option<NonFinite>,
    pub onnx: Option<NonFinite>,
}

impl FirstNonFinite {
    pub fn find(layers: &[LayerResult]) -> FirstNonFinite {
        let first = |pick: &dyn Fn(&Comparison) -> (usize, usize)| {
            layers.iter().find_map(|l| {
                let (nan, inf) = pick(&l.cmp);
                (nan + inf > 0).then(|| NonFinite {
                    layer_index: l.index,
                    module: l.module.clone(),
                    nan,
                    inf,
                })
            })
        };
        FirstNonFinite {
            torch: first(&|c| (c.nan_ref, c.inf_ref)),
            onnx: first(&|c| (c.nan_test, c.inf_test)),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CoverageReport {
    #[serde(flatten)]
    pub counts: Coverage,
    pub torch_ratio: f64,
    pub onnx_ratio: f64,
    pub min_coverage: f64,
    pub unpaired: Vec<Unpaired>,
    pub uncapturable: Vec<Uncapturable>,
    pub steered_control_flow: SteeredControlFlow,
}

/// The ONNX control flow the check's own inputs steered: the ifs inlined and the loops
/// unrolled for the conditions and trip counts a first run measured on every sample.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SteeredControlFlow {
    pub if_conditions: usize,
    pub loop_trips: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    pub path: String,
    pub size_bytes: u64,
    pub sha256: String,
}

/// Versions of everything that computed the numbers in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub align_check: String,
    pub libtorch: String,
    pub onnxruntime: String,
    pub threads: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToleranceInfo {
    /// The rule, written as its label (`default float32`) in every report.
    pub applies_to: ToleranceRule,
    pub atol: f64,
    pub rtol: f64,
}

/// How isolation went.
#[derive(Debug, Clone, Serialize)]
pub struct IsolationReport {
    /// Why it ran: `--isolate`, or a failing layer or output.
    pub reason: String,
    /// Paired ONNX values replaced by PyTorch's (confirmed pairs whose type can be fed).
    pub fed_values: usize,
    /// Layers with an isolated error.
    pub isolated_layers: usize,
    /// ONNX Runtime runs it took (more than one under a memory budget).
    pub runs: usize,
    /// Why isolation could not run, when it could not; the origins are then judged
    /// without it, as before isolation existed.
    pub error: Option<String>,
}

/// The repro bundle written for `--repro DIR`.
#[derive(Debug, Clone, Serialize)]
pub struct ReproReport {
    pub dir: String,
    pub layer_index: usize,
    pub module: String,
    pub onnx_node: String,
    /// Nodes of the bundle's model.
    pub nodes: usize,
    /// Bytes of all the bundle's files.
    pub bytes: u64,
    /// The layer's isolated error as the bundle's own model gives it.
    pub isolated: Isolated,
}

/// The largest error carried from upstream by a layer that passes in isolation.
#[derive(Debug, Clone, Serialize)]
pub struct AccumulatedError {
    pub layer_index: usize,
    pub module: String,
    pub onnx_node: String,
    #[serde(serialize_with = "finite_or_null")]
    pub rel_to_range: f64,
    #[serde(serialize_with = "finite_or_null")]
    pub max_abs: f64,
    /// Layers beyond their per-layer tolerance by accumulated error only.
    pub layers: usize,
}

impl AccumulatedError {
    /// The worst of the layers whose failure is accumulated, if any.
    pub fn of(layers: &[LayerResult]) -> Option<AccumulatedError> {
        let carried: Vec<&LayerResult> = layers
            .iter()
            .filter(|l| l.status() == LayerStatus::Accumulated)
            .collect();
        let worst = carried
            .iter()
            .max_by(|a, b| a.cmp.rel_to_range.total_cmp(&b.cmp.rel_to_range))?;
        Some(AccumulatedError {
            layer_index: worst.index,
            module: worst.module.clone(),
            onnx_node: worst.onnx_node.clone(),
            rel_to_range: worst.cmp.rel_to_range,
            max_abs: worst.cmp.max_abs,
            layers: carried.len(),
        })
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Timing {
    pub load_s: f64,
    pub torch_run_s: f64,
    pub onnx_run_s: f64,
    /// ONNX Runtime runs made, over all samples (more than one per sample under a budget).
    pub onnx_runs: usize,
    pub pairing_s: f64,
    pub statistics_s: f64,
    /// The isolation run and its comparisons (0 when it did not run).
    pub isolation_s: f64,
    /// The production session and its bisection (0 with `--production off`).
    pub production_s: f64,
    /// Rendering and writing the HTML, Markdown and JUnit reports (the JSON report cannot
    /// time itself; it is written last).
    pub reports_s: f64,
    pub total_s: f64,
}

/// Memory the run used, as the OS counts it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemoryReport {
    /// Peak resident set of the process up to the end of the check (before reports).
    pub peak_rss_bytes: Option<u64>,
    /// The budget the check kept to: `--max-memory`, or the one chosen from the memory the
    /// machine had free (`app::memory_plan`); `None` when everything was captured at once.
    pub budget_bytes: Option<u64>,
    /// Bytes of tensors written to the temporary spill file (0 without a budget).
    pub spilled_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub schema_version: u32,
    pub environment: Environment,
    /// What the reference model is (TorchScript or a torch.export `.pt2`), and the name every
    /// report calls it by.
    pub reference: reference::Reference,
    pub verdict: Verdict,
    /// Why the verdict is what it is, one short sentence per failed gate: the `detail` of
    /// each failed entry of `gates`, kept as its own key for the JSON contract.
    pub gate_failures: Vec<String>,
    /// Every gate this run was held to, in the order they were applied. The verdict and
    /// `gate_failures` follow from these alone (`add_gate`).
    pub gates: Vec<Gate>,
    pub first_divergence: Option<Divergence>,
    /// Every failing layer that introduces its error: with isolation, each that fails in
    /// isolation; without, each whose upstream layers all pass (parallel branches can have
    /// several).
    pub divergence_origins: Vec<Divergence>,
    /// With several origins: the nearest value two or more of them are computed from that no
    /// pair compared (the suspect: an error made there reaches each of them); `null` else.
    pub shared_producer: Option<crate::compare::shared_producer::SharedProducer>,
    /// Present when isolation ran (a layer or output failed, or `--isolate`): what it fed
    /// and whether it could run.
    pub isolation: Option<IsolationReport>,
    /// Present when a float32 output exceeded its tolerance with no layer introducing an
    /// error: the float64 run of the TorchScript module that measured what rounding alone
    /// does to the outputs (each output's `rounding`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounding_reference: Option<crate::compare::rounding_reference::RoundingRun>,
    /// Present when layers or outputs fail but no layer fails in isolation: many small
    /// contributions added up, none beyond tolerance on its own.
    pub accumulated_drift: Option<Drift>,
    /// Present when some layers exceed their per-layer tolerance only by error carried from
    /// upstream (each passes in isolation): the largest such error and where, as
    /// information; the outputs' rule decides whether it matters.
    pub accumulated: Option<AccumulatedError>,
    /// Layers that pass only because their values lie below the absolute tolerance while
    /// their error is large against their range (gated with `--strict-small`).
    pub small_values: Vec<SmallValues>,
    /// Integer or boolean results (TopK indices, a mask) that differ while their own
    /// computation, fed PyTorch's values, agrees: near-ties decided the other way.
    pub discrete_flips: Vec<DiscreteFlip>,
    /// Present with `--repro DIR` when a bundle was written.
    pub repro: Option<ReproReport>,
    /// Where NaN or Inf first appear on each side, if anywhere.
    pub first_nonfinite: FirstNonFinite,
    /// What runs in training mode in either model, one line per side; only ever non-empty
    /// under `--allow-training-mode` (otherwise such a pair is refused before running).
    pub training_mode: Vec<String>,
    /// How the two signatures met: the input mapping, outputs one side lacks, inputs fed
    /// to one side only or differently, a module that writes its own state.
    pub signature: crate::signature::SignatureReport,
    pub torch_model: FileInfo,
    pub onnx_model: FileInfo,
    /// The first sample's inputs.
    pub inputs: Vec<ResolvedInput>,
    /// Every input sample checked (a file or a seed each); `worst_sample` indexes this list.
    pub samples: Vec<String>,
    pub tolerances: Vec<ToleranceInfo>,
    pub layers: Vec<LayerResult>,
    pub outputs: Vec<OutputResult>,
    pub coverage: CoverageReport,
    /// Present with `--baseline`: every layer's error against the previous report.
    pub baseline: Option<BaselineReport>,
    /// Element-level detail (scatter samples, per-channel error) for the divergence origins
    /// and the worst layers.
    pub details: Vec<LayerDetail>,
    pub timing: Timing,
    pub memory: MemoryReport,
    /// The session the user ships, run after the check (absent with `--production off`).
    pub production: Option<crate::production::report::ProductionReport>,
    /// Present for a quantised ONNX model: its SQNR ranking, curve and exclude list.
    pub quantized: Option<crate::quantized::analysis::QuantizedReport>,
}

impl Outcome {
    /// Records one gate's result; the only way the verdict and `gate_failures` change, so
    /// that every report, reading `gates`, agrees with the verdict.
    pub fn add_gate(&mut self, gate: Gate) {
        if !gate.passed {
            self.verdict = Verdict::Fail;
            self.gate_failures.push(gate.detail());
        }
        self.gates.push(gate);
    }

    /// The gates that failed, in the order they were applied.
    pub fn failed_gates(&self) -> impl Iterator<Item = &Gate> {
        self.gates.iter().filter(|g| !g.passed)
    }

    /// The result of one gate, if this run applied it.
    pub fn gate(&self, name: GateName) -> Option<&Gate> {
        self.gates.iter().find(|g| g.name == name)
    }
}
