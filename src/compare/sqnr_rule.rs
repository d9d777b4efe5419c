//! The tolerance of a quantised model: signal-to-quantisation-noise ratio (SQNR, in dB)
//! instead of per-element atol/rtol. A layer passes when the error its own computation
//! introduces (its isolated error, fed PyTorch's values) keeps at least `layer_db`; an output
//! passes when it keeps at least `output_db` against PyTorch's float output.
//!
//! Defaults, measured on ONNX Runtime 1.31's `quantize_static` (QDQ, per-tensor int8, MinMax
//! calibration) of calibrated CNNs (tests/fixtures/quantized, docs/quantized.md): the two
//! clean models keep 38.8 and 40.2 dB at the output and every layer at least 35.6 dB in
//! isolation; the model with an outlier channel keeps 30.4 dB at the output, and its worst
//! layer 30.9 dB. The defaults sit between the two: 33 dB per layer, 35 dB per output. (An
//! ideal 8-bit quantiser gives 6.02 * 8 + 1.76 = 49.9 dB on a full-scale uniform signal.)

use crate::compare::stats::ErrorStats;
use serde::Serialize;

pub const DEFAULT_LAYER_SQNR_DB: f64 = 33.0;
pub const DEFAULT_OUTPUT_SQNR_DB: f64 = 35.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SqnrRule {
    /// The least SQNR a layer's isolated error may leave (`--quant-layer-sqnr`).
    pub layer_db: f64,
    /// The least SQNR an output may have against PyTorch (`--quant-output-sqnr`).
    pub output_db: f64,
}

impl Default for SqnrRule {
    fn default() -> Self {
        SqnrRule {
            layer_db: DEFAULT_LAYER_SQNR_DB,
            output_db: DEFAULT_OUTPUT_SQNR_DB,
        }
    }
}

impl SqnrRule {
    pub fn validated(self) -> Result<Self, String> {
        for (name, v) in [
            ("--quant-layer-sqnr", self.layer_db),
            ("--quant-output-sqnr", self.output_db),
        ] {
            if !v.is_finite() {
                return Err(format!("{name} must be a finite number of dB, got {v}"));
            }
        }
        Ok(self)
    }

    /// Judges a layer's statistics (accumulated or isolated) by the layer SQNR.
    pub fn judge_layer(&self, stats: &mut ErrorStats) {
        stats.pass = passes(stats, self.layer_db);
    }

    /// Judges an output's statistics by the output SQNR.
    pub fn judge_output(&self, stats: &mut ErrorStats) {
        stats.pass = passes(stats, self.output_db);
    }
}

/// NaN/Inf must agree; an exact match (infinite SQNR) always passes.
fn passes(stats: &ErrorStats, min_db: f64) -> bool {
    stats.nonfinite_mismatch == 0 && !stats.snr_db.is_nan() && stats.snr_db >= min_db
}
