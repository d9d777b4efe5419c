//! The floating-point precision each captured value was computed in, for judging it by the
//! right tolerance.
//!
//! A model converted to float16 (onnxconverter-common, with or without `keep_io_types`) or a
//! half-precision TorchScript carries the rounding of its lowest precision into every value
//! downstream, including values cast back to float32 (the outputs under `keep_io_types`). A
//! value's computed precision is therefore the lowest floating-point precision among its own
//! dtype and the computed precisions of the values it was computed from; a pair is judged by
//! the lower of its two sides' computed precisions.

use crate::capture::tensor::DType;
use crate::capture::Capture;

/// How many significant bits a floating-point dtype keeps; `None` for integers and bools.
fn mantissa_bits(dtype: DType) -> Option<u32> {
    match dtype {
        DType::Bf16 => Some(8),
        DType::F16 => Some(11),
        DType::F32 => Some(24),
        DType::F64 => Some(53),
        _ => None,
    }
}

/// The less precise of two dtypes; a non-float side defers to the other.
pub fn lower(a: DType, b: DType) -> DType {
    match (mantissa_bits(a), mantissa_bits(b)) {
        (Some(x), Some(y)) if y < x => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

/// Per value of `capture` (indexed like `capture.values`), the lowest floating-point
/// precision it passed through. Values come in execution order, so producers are resolved
/// before their consumers.
pub fn computed_precision(capture: &Capture) -> Vec<DType> {
    let index: std::collections::HashMap<usize, usize> = capture
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| (v.id, i))
        .collect();
    let mut out: Vec<DType> = Vec::with_capacity(capture.values.len());
    for v in &capture.values {
        let mut lowest = v.dtype;
        if v.dtype.is_float() {
            for producer in &v.inputs {
                if let Some(&i) = index.get(producer) {
                    if i < out.len() && out[i].is_float() {
                        lowest = lower(lowest, out[i]);
                    }
                }
            }
        }
        out.push(lowest);
    }
    out
}

/// The largest finite magnitude of a reduced-precision dtype, for naming an overflow.
pub fn max_finite(dtype: DType) -> Option<f64> {
    match dtype {
        DType::F16 => Some(65504.0),
        DType::Bf16 => Some(3.389_531_389_251_535e38),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_picks_the_fewer_mantissa_bits() {
        assert_eq!(lower(DType::F32, DType::F16), DType::F16);
        assert_eq!(lower(DType::F16, DType::Bf16), DType::Bf16);
        assert_eq!(lower(DType::F32, DType::F64), DType::F32);
        assert_eq!(lower(DType::I64, DType::F16), DType::F16);
        assert_eq!(lower(DType::F32, DType::I64), DType::F32);
    }
}
