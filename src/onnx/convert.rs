//! Conversion between `HostTensor` and ort values, for every element type the tool knows.
//!
//! Types that Rust and ort share (f32, i64, bool, ...) go through ort's typed tensors. ort's
//! `half` feature is not enabled in this build, so float16 and bfloat16 tensors are created
//! as type-erased tensors of the right ONNX element type and filled (and read) as raw bytes;
//! `half::f16`/`bf16` have exactly ONNX's bit layout, so no value changes. Everything a run
//! returns that is not a CPU tensor of a supported type is an error here, which the capture
//! turns into an "uncapturable" entry with this message as the reason.

use crate::capture::tensor::{HostTensor, TensorData};
use anyhow::{anyhow, bail, Result};
use half::{bf16, f16};
use ort::memory::Allocator;
use ort::value::{
    DynTensor, DynTensorValueType, DynValue, PrimitiveTensorElementType, Tensor, TensorElementType,
    ValueType,
};

/// An ort tensor holding a copy of `t`.
pub fn to_ort(t: &HostTensor) -> Result<DynValue> {
    // Creating a value calls into ONNX Runtime, which must be loaded by then.
    super::runtime::init(None, 0)?;
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    match &t.data {
        TensorData::F32(v) => typed(shape, v),
        TensorData::F64(v) => typed(shape, v),
        TensorData::I8(v) => typed(shape, v),
        TensorData::I16(v) => typed(shape, v),
        TensorData::I32(v) => typed(shape, v),
        TensorData::I64(v) => typed(shape, v),
        TensorData::U8(v) => typed(shape, v),
        TensorData::Bool(v) => typed(shape, v),
        TensorData::F16(v) => raw_tensor(TensorElementType::Float16, shape, v),
        TensorData::Bf16(v) => raw_tensor(TensorElementType::Bfloat16, shape, v),
    }
    .map_err(|e| anyhow!("cannot create a {} tensor for ONNX Runtime: {e}", t.dtype()))
}

/// A tensor of a type ort knows natively; it takes ownership of a copy of the data.
fn typed<T>(shape: Vec<i64>, values: &[T]) -> ort::Result<DynValue>
where
    T: PrimitiveTensorElementType + Clone + std::fmt::Debug + 'static,
{
    Ok(Tensor::from_array((shape, values.to_vec()))?.into_dyn())
}

/// Marker for the 16-bit float types copied as bytes: plain data, no padding, any bit
/// pattern valid.
trait Pod16: Copy {}
impl Pod16 for f16 {}
impl Pod16 for bf16 {}

/// A CPU tensor of element type `ty` filled with the bytes of `values`.
fn raw_tensor<T: Pod16>(
    ty: TensorElementType,
    shape: Vec<i64>,
    values: &[T],
) -> ort::Result<DynValue> {
    let mut tensor = DynTensor::new(&Allocator::default(), ty, shape)?;
    if !values.is_empty() {
        let dst = tensor.data_ptr_mut().cast::<T>();
        // SAFETY: the tensor was allocated on the CPU for exactly `values.len()` elements of
        // a 2-byte type, and `T` is a 2-byte plain-data type (`Pod16`).
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), dst, values.len()) };
    }
    Ok(tensor.into_dyn())
}

/// A host copy of an ort value. Errors for sequences, maps, optionals, tensors outside CPU
/// memory and element types the tool does not support.
pub fn from_ort(v: &DynValue) -> Result<HostTensor> {
    let (ty, shape) = match v.dtype() {
        ValueType::Tensor { ty, shape, .. } => (*ty, shape),
        ValueType::Sequence(_) => bail!("a sequence value, not a tensor"),
        ValueType::Map { .. } => bail!("a map value, not a tensor"),
        ValueType::Optional(_) => bail!("an optional value, not a tensor"),
    };
    let dims: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| anyhow!("tensor with negative dimension {d}")))
        .collect::<Result<_>>()?;
    let n: usize = dims.iter().product();
    let data = match ty {
        TensorElementType::Float32 => TensorData::F32(copy_elements(v, n)?),
        TensorElementType::Float64 => TensorData::F64(copy_elements(v, n)?),
        TensorElementType::Int8 => TensorData::I8(copy_elements(v, n)?),
        TensorElementType::Int16 => TensorData::I16(copy_elements(v, n)?),
        TensorElementType::Int32 => TensorData::I32(copy_elements(v, n)?),
        TensorElementType::Int64 => TensorData::I64(copy_elements(v, n)?),
        TensorElementType::Uint8 => TensorData::U8(copy_elements(v, n)?),
        // Read as bytes: a byte other than 0 or 1 must not become an invalid Rust `bool`.
        TensorElementType::Bool => TensorData::Bool(
            copy_elements::<u8>(v, n)?
                .into_iter()
                .map(|b| b != 0)
                .collect(),
        ),
        TensorElementType::Float16 => TensorData::F16(
            copy_elements::<u16>(v, n)?
                .into_iter()
                .map(f16::from_bits)
                .collect(),
        ),
        TensorElementType::Bfloat16 => TensorData::Bf16(
            copy_elements::<u16>(v, n)?
                .into_iter()
                .map(bf16::from_bits)
                .collect(),
        ),
        other => bail!("element type {other} is not supported by align-check"),
    };
    Ok(HostTensor::new(dims, data))
}

/// Element types for which every bit pattern is a valid value, so a tensor's bytes can be
/// copied into them as they are.
trait Plain: Copy {}
impl Plain for u8 {}
impl Plain for u16 {}
impl Plain for i8 {}
impl Plain for i16 {}
impl Plain for i32 {}
impl Plain for i64 {}
impl Plain for f32 {}
impl Plain for f64 {}

/// A copy of the `n` elements of a CPU tensor whose element type has the size of `T`.
///
/// Copied byte by byte on purpose: a graph output that is an initializer comes back
/// pointing into the model's protobuf bytes, at whatever offset the field had, so the
/// buffer is not necessarily aligned for `T` (ort's typed `try_extract_tensor` assumes it
/// is, and debug builds abort on such a slice).
fn copy_elements<T: Plain>(v: &DynValue, n: usize) -> Result<Vec<T>> {
    let tensor = v
        .view()
        .downcast::<DynTensorValueType>()
        .map_err(|e| anyhow!("not a tensor: {e}"))?;
    if !tensor.memory_info().is_cpu_accessible() {
        bail!("tensor is not in CPU memory");
    }
    let bytes = n * std::mem::size_of::<T>();
    if tensor.data_type().byte_size(n) != Some(bytes) {
        bail!(
            "{} elements do not have the expected size",
            tensor.data_type()
        );
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    if tensor.size().is_some_and(|size| size < bytes) {
        bail!("tensor buffer is smaller than its shape says");
    }
    let src = tensor.data_ptr().cast::<u8>();
    if src.is_null() {
        bail!("tensor has no data buffer");
    }
    let mut out: Vec<T> = Vec::with_capacity(n);
    // SAFETY: `src` is CPU memory holding at least `bytes` bytes (checked above); `out` has
    // room for `n` elements of `T`, i.e. `bytes` bytes; a byte copy needs no alignment; every
    // bit pattern is a valid `T` (`Plain`), so the `n` elements are initialised after it.
    unsafe {
        std::ptr::copy_nonoverlapping(src, out.as_mut_ptr().cast::<u8>(), bytes);
        out.set_len(n);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads ONNX Runtime; its absence fails the test (a skipped test would pass without
    /// checking anything), saying how to get it.
    fn require_ort() {
        if let Err(e) = crate::onnx::runtime::init(None, 1) {
            panic!("ONNX Runtime cannot be loaded ({e}): run bash scripts/bootstrap.sh");
        }
    }

    /// Bitwise equality: NaN payloads and the sign of zero count, `PartialEq` would not.
    fn bits(t: &HostTensor) -> Vec<u64> {
        match &t.data {
            TensorData::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            TensorData::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
            TensorData::F16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            TensorData::Bf16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            other => other.to_f64_vec().iter().map(|x| x.to_bits()).collect(),
        }
    }

    fn round_trip(t: HostTensor) {
        let v = to_ort(&t).unwrap();
        let back = from_ort(&v).unwrap();
        assert_eq!(
            (back.shape.clone(), back.dtype()),
            (t.shape.clone(), t.dtype())
        );
        assert_eq!(bits(&back), bits(&t), "{t:?}");
    }

    #[test]
    fn every_dtype_round_trips_bit_for_bit() {
        require_ort();
        let shape = vec![2, 2];
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::F32(vec![1.5, -0.0, f32::NAN, f32::INFINITY]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::F64(vec![1e-300, -2.0, 3.0, 4.0]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::I8(vec![-128, 0, 1, 127]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::I16(vec![-32768, 0, 1, 32767]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::I32(vec![i32::MIN, 0, 1, i32::MAX]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::I64(vec![i64::MIN, 0, 1, i64::MAX]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::U8(vec![0, 1, 254, 255]),
        ));
        round_trip(HostTensor::new(
            shape.clone(),
            TensorData::Bool(vec![true, false, false, true]),
        ));
        let h: Vec<f16> = [1.0f32, -2.5, 65504.0, 6e-8]
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect();
        round_trip(HostTensor::new(shape.clone(), TensorData::F16(h)));
        let b: Vec<bf16> = [1.0f32, -2.5, 3e38, 1e-38]
            .iter()
            .map(|&x| bf16::from_f32(x))
            .collect();
        round_trip(HostTensor::new(shape, TensorData::Bf16(b)));
        // Scalars and empty tensors.
        round_trip(HostTensor::new(vec![], TensorData::F32(vec![7.0])));
        round_trip(HostTensor::new(vec![0, 3], TensorData::F16(vec![])));
        round_trip(HostTensor::new(vec![2, 0], TensorData::Bool(vec![])));
    }

    #[test]
    fn the_ort_value_has_the_onnx_element_type() {
        require_ort();
        let v = to_ort(&HostTensor::new(vec![1], TensorData::Bf16(vec![bf16::ONE]))).unwrap();
        assert!(matches!(
            v.dtype(),
            ValueType::Tensor {
                ty: TensorElementType::Bfloat16,
                ..
            }
        ));
        let v = to_ort(&HostTensor::new(
            vec![3],
            TensorData::F16(vec![f16::ONE; 3]),
        ))
        .unwrap();
        match v.dtype() {
            ValueType::Tensor { ty, shape, .. } => {
                assert_eq!(*ty, TensorElementType::Float16);
                assert_eq!(&shape[..], &[3]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsupported_element_types_are_errors() {
        require_ort();
        let v = Tensor::from_array((vec![2i64], vec![1u32, 2]))
            .unwrap()
            .into_dyn();
        let e = from_ort(&v).unwrap_err().to_string();
        assert!(e.contains("not supported"), "{e}");
    }
}
