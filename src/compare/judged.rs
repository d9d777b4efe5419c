//! The judged pairs: one layer's or output's comparison as every report shows it (statistics,
//! tolerance verdict, isolated error, origin), the divergences they make and the accumulated
//! drift, and why a divergence fails where that is known beyond its error (`Cause`). The
//! comparison stage builds these; `outcome` gathers them into the one result of a run and
//! re-exports them, so the types a layer is built from and the result live in one direction
//! (outcome above compare, never both ways).

use crate::compare::stats::{finite_or_null, ErrorStats};
use crate::text::module_label;
use serde::{Serialize, Serializer};
use std::ops::{Deref, DerefMut};

/// One compared pair as the report shows it: what was compared, its statistics (each defined
/// once, in `ErrorStats`, and serialised in place), and over how many samples. Reads as its
/// statistics (`cmp.rel_to_range`) through `Deref`.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub shape: Vec<usize>,
    pub dtype: String,
    pub onnx_dtype: String,
    /// The precision the pair is judged in: the lower of the precisions the two values were
    /// computed in (`float16` for every value of a model converted to float16, including
    /// the float32 outputs it casts back to).
    pub precision: String,
    /// The worst sample's statistics.
    #[serde(flatten)]
    pub stats: ErrorStats,
    /// Input samples this pair was compared on; the statistics above are the worst one's.
    pub samples: usize,
    pub worst_sample: usize,
    /// 95th percentile of `rel_to_range` across samples (equal to it for one sample).
    #[serde(serialize_with = "finite_or_null")]
    pub p95_rel_to_range: f64,
    /// Whether the pair passes the per-layer rule. The same as `pass` for a layer; for a graph
    /// output, judged by its own looser rule, what the per-layer rule says of it: a witness of
    /// whether an error upstream propagates (`evaluate::unconfirmed_layers`).
    #[serde(skip)]
    pub pass_as_layer: bool,
}

impl Deref for Comparison {
    type Target = ErrorStats;

    fn deref(&self) -> &ErrorStats {
        &self.stats
    }
}

impl DerefMut for Comparison {
    fn deref_mut(&mut self) -> &mut ErrorStats {
        &mut self.stats
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LayerResult {
    /// Position in `layers`, in TorchScript execution order.
    pub index: usize,
    pub module: String,
    pub module_type: String,
    pub torch_op: String,
    pub torch_value: String,
    pub onnx_node: String,
    pub onnx_op: String,
    pub onnx_value: String,
    pub paired_by: String,
    /// Module paths compared as part of this pair (the conv of a fused conv+bn).
    pub fused: Vec<String>,
    /// The line of the model's code that made the value: the innermost frame of its Python
    /// stack outside PyTorch (TorchScript's record, else the dynamo exporter's).
    pub source: Option<String>,
    /// That whole stack, outermost frame first (`file:line`); empty where neither side
    /// recorded one.
    pub source_stack: Vec<String>,
    /// Whether some layer upstream of this one already fails (its error may be inherited).
    pub upstream_failed: bool,
    /// Exceeds its tolerance while every paired layer computed from it agrees with PyTorch:
    /// the signature of a doubtful pair (a real fault propagates), so it is reported but
    /// neither gated nor named as a divergence on its own.
    pub unconfirmed: bool,
    /// For an unconfirmed layer: its pair breaks the dataflow, or its nearest consumers show
    /// none of its error (`Witnesses::none_carries`): evidence that the pair is wrong which a
    /// real fault does not give. Only such a pair stays unconfirmed when it fails in
    /// isolation too.
    #[serde(skip)]
    pub refuted: bool,
    #[serde(flatten)]
    pub cmp: Comparison,
    /// The error this layer's own ONNX segment adds when fed PyTorch's values (see
    /// `compare::isolation`); `None` when isolation did not run or could not isolate it.
    pub isolated: Option<Isolated>,
    /// Whether a failing layer introduces its error or receives it from upstream, judged from
    /// `isolated`; `None` where `isolated` is.
    pub origin: Option<Origin>,
    #[serde(skip)]
    pub torch_id: usize,
    #[serde(skip)]
    pub onnx_id: usize,
}

/// A layer's error in isolation: ONNX Runtime's value when the layer's segment reads
/// PyTorch's values for every paired value it consumes, against PyTorch's own.
#[derive(Debug, Clone, Serialize)]
pub struct Isolated {
    #[serde(serialize_with = "finite_or_null")]
    pub max_abs: f64,
    #[serde(serialize_with = "finite_or_null")]
    pub rel_to_range: f64,
    /// Within the same tolerance the layer is judged by, or within its rounding floor.
    pub pass: bool,
    /// Signal to error power in dB (the SQNR a quantised model's layers are judged by);
    /// `null` when infinite (no error) or not measured.
    pub snr_db: Option<f64>,
    /// Measured only for a layer beyond its tolerance in isolation: the isolated error (of
    /// range) that float rounding alone may reach in its segment (`compare::rounding`);
    /// `null` otherwise.
    pub rounding_floor: Option<f64>,
    /// An integer output of a selection that differs only in the order of equal values: the
    /// node's values output agrees in isolation (`tied_selection`). It passes.
    pub tied: bool,
    /// Elements whose finiteness differs from PyTorch's in isolation (an `inf` where
    /// PyTorch is finite: the layer overflows on PyTorch's own inputs). They fail the layer
    /// whatever its rounding floor.
    pub nonfinite_mismatch: usize,
}

/// Where a layer's error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Fails, and fails in isolation too: this layer's own computation differs.
    Introduced,
    /// Fails, but passes in isolation: the error comes from upstream.
    Accumulated,
    /// Within tolerance.
    Pass,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Introduced => "introduced",
            Origin::Accumulated => "accumulated",
            Origin::Pass => "pass",
        }
    }
}

/// How a layer stands, the one mapping every report uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerStatus {
    Ok,
    /// Fails with every upstream layer passing: where an error starts.
    Origin,
    /// Fails below a failing layer: the error may be inherited.
    Inherited,
    /// Fails, but passes in isolation: its error comes from upstream (isolation ran).
    Accumulated,
    /// Beyond tolerance, but every paired layer computed from it agrees: a doubtful pair.
    Unconfirmed,
}

impl LayerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LayerStatus::Ok => "ok",
            LayerStatus::Origin => "origin",
            LayerStatus::Inherited => "inherited",
            LayerStatus::Accumulated => "accumulated",
            LayerStatus::Unconfirmed => "unconfirmed",
        }
    }
}

impl LayerResult {
    /// Whether this layer counts against the gate: beyond tolerance, not unconfirmed, and not
    /// merely carrying error from upstream. A layer is gated by the error it introduces; the
    /// rounding a deep network accumulates is information, and the outputs' own rule decides
    /// whether it matters (see `compare::output_tolerance`).
    pub fn fails(&self) -> bool {
        !self.cmp.pass && !self.unconfirmed && self.origin != Some(Origin::Accumulated)
    }

    /// Isolation, where it ran, decides between origin and accumulated; without it a failing
    /// layer with a failing layer upstream may be inheriting its error.
    pub fn status(&self) -> LayerStatus {
        if self.cmp.pass {
            LayerStatus::Ok
        } else if self.unconfirmed {
            LayerStatus::Unconfirmed
        } else {
            match self.origin {
                Some(Origin::Introduced) => LayerStatus::Origin,
                Some(Origin::Accumulated) => LayerStatus::Accumulated,
                _ if self.upstream_failed => LayerStatus::Inherited,
                _ => LayerStatus::Origin,
            }
        }
    }

    /// Where an error starts: the first divergence and its peers.
    pub fn is_origin(&self) -> bool {
        self.status() == LayerStatus::Origin
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct OutputResult {
    pub name: String,
    pub position: usize,
    #[serde(flatten)]
    pub cmp: Comparison,
    /// What float32 rounding alone does to this output, measured on PyTorch run in float64;
    /// present when the output exceeds its tolerance and no layer introduces an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounding: Option<crate::compare::rounding_reference::RoundingReference>,
}

impl OutputResult {
    /// Whether the output passes its gate: within its tolerance, or beyond it by no more than
    /// float32 rounding moves PyTorch's own result (`compare::rounding_reference`).
    pub fn passes(&self) -> bool {
        self.cmp.pass
            || self
                .rounding
                .as_ref()
                .is_some_and(|r| r.explains && r.decides)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Divergence {
    pub module: String,
    pub module_type: String,
    pub onnx_node: String,
    pub onnx_op: String,
    pub torch_op: String,
    pub source: Option<String>,
    pub layer_index: usize,
    #[serde(serialize_with = "finite_or_null")]
    pub rel_to_range: f64,
    #[serde(serialize_with = "finite_or_null")]
    pub max_abs: f64,
    /// Why the layer fails, when that is known beyond its error: a reduced-precision
    /// overflow (serialised "float16 overflow at fc2: max |reference| 1.1e5 exceeds 65504").
    pub cause: Option<Cause>,
}

/// Accumulated drift: the layers adding the most error in isolation, largest first.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub contributors: Vec<DriftContributor>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DriftContributor {
    pub layer_index: usize,
    pub module: String,
    #[serde(serialize_with = "finite_or_null")]
    pub isolated_rel_to_range: f64,
}

/// Why a divergence fails, when that is known beyond its error, as data; serialised as the
/// one sentence the JSON's `cause` has always held.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    /// A layer judged in a reduced precision whose reference values exceed its largest finite
    /// number: the other side clamped them or made them infinite.
    Overflow {
        /// The precision's name (`float16`).
        precision: String,
        module: String,
        /// max |reference| of the layer, and the precision's largest finite number.
        max_reference: f64,
        limit: f64,
    },
}

impl Cause {
    /// "float16 overflow at fc2: max |reference| 1.10e5 exceeds 65504".
    pub fn sentence(&self) -> String {
        match self {
            Cause::Overflow {
                precision,
                module,
                max_reference,
                limit,
            } => format!(
                "{precision} overflow at {}: max |reference| {max_reference:.2e} exceeds {limit}",
                module_label(module)
            ),
        }
    }
}

impl Serialize for Cause {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.sentence())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::{HostTensor, TensorData};
    use crate::compare::rounding_reference::judge;

    #[test]
    fn an_output_beyond_its_tolerance_passes_by_rounding_only_under_the_default_tolerance() {
        let t32 = HostTensor::f32(vec![3], vec![1.0, 2.0, 3.0]);
        let t64 = HostTensor::new(vec![3], TensorData::F64(vec![1.0, 2.0 + 1e-4, 3.0]));
        let mut cmp = crate::compare::evaluate::tests::layer_result(0).cmp;
        cmp.stats.pass = false;
        cmp.stats.max_abs = 5e-4;
        let mut out = OutputResult {
            name: "out".into(),
            position: 0,
            cmp,
            rounding: None,
        };
        assert!(!out.passes());
        out.rounding = Some(judge(&out.cmp, (&t32, &t64), false));
        assert!(!out.passes(), "a tolerance the user set decides");
        out.rounding = Some(judge(&out.cmp, (&t32, &t64), true));
        assert!(out.passes());
    }
}
