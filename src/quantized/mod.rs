//! Quantised ONNX models (QDQ from `onnxruntime.quantization.quantize_static`, QOperator,
//! dynamic quantisation), judged as what they are: int8 arithmetic is not float32 rounding,
//! so a float32 tolerance fails every layer and says nothing about which ones matter.
//!
//! `detect` recognises the format and maps each paired ONNX value to the node
//! `quantize_static` names it by; `rule` is the SQNR tolerance that replaces the float
//! tolerance for every layer's isolated error and every output; `analysis` ranks the layers
//! by the error they introduce, keeps the accumulated SQNR curve and estimates the
//! `nodes_to_exclude` list that would bring the output within its rule.

pub mod analysis;
pub mod detect;
pub mod exclude;
/// The SQNR rule lives with the other tolerances (`compare` judges by it).
pub use crate::compare::sqnr_rule as rule;
