//! The options of quantised models: the SQNR rule that replaces the float tolerances when
//! the ONNX model is quantised (`--quant-layer-sqnr`, `--quant-output-sqnr`, or
//! `[quantized]` in the configuration file), flag first, then the file, then the defaults of
//! `quantized::rule`; and the float model a quantised one was made from (`--float-onnx`,
//! `[quantized] float_onnx`).

use crate::quantized::rule::SqnrRule;
use anyhow::{anyhow, Result};
use clap::Args;
use serde::Deserialize;

#[derive(Debug, Args)]
pub struct QuantizedArgs {
    /// For a quantised ONNX model (QDQ, QOperator, dynamic): the least SQNR, in dB, the error
    /// a layer introduces in isolation may leave [default: 33]
    #[arg(long, value_name = "DB", help_heading = "Tolerances")]
    pub quant_layer_sqnr: Option<f64>,

    /// For a quantised ONNX model: the least SQNR, in dB, an output may have against
    /// PyTorch's [default: 35]
    #[arg(long, value_name = "DB", help_heading = "Tolerances")]
    pub quant_output_sqnr: Option<f64>,

    /// The float ONNX model a quantised one was made from: the exclude list is then checked
    /// with those nodes' float weights (otherwise with their dequantised int8 weights)
    #[arg(long, value_name = "PATH", help_heading = "Diagnosis")]
    pub float_onnx: Option<std::path::PathBuf>,
}

/// `[quantized]` of align-check.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantizedSection {
    pub layer_sqnr_db: Option<f64>,
    pub output_sqnr_db: Option<f64>,
    /// `--float-onnx`, relative to the file's folder.
    pub float_onnx: Option<std::path::PathBuf>,
}

pub fn rule(args: &QuantizedArgs, file: &QuantizedSection) -> Result<SqnrRule> {
    let default = SqnrRule::default();
    SqnrRule {
        layer_db: args
            .quant_layer_sqnr
            .or(file.layer_sqnr_db)
            .unwrap_or(default.layer_db),
        output_db: args
            .quant_output_sqnr
            .or(file.output_sqnr_db)
            .unwrap_or(default.output_db),
    }
    .validated()
    .map_err(|e| anyhow!(e))
}

/// The float model: the flag's, else the file's.
pub fn float_onnx(args: &QuantizedArgs, file: &QuantizedSection) -> Option<std::path::PathBuf> {
    args.float_onnx.clone().or_else(|| file.float_onnx.clone())
}
