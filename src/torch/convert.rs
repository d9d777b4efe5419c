//! Conversion between tch tensors and the tool's `HostTensor`.
//!
//! Captured tensors are copied out of libtorch into host buffers of their own element type,
//! so the statistics see exactly what PyTorch computed; inputs go the other way so that the
//! TorchScript module receives the same bytes as ONNX Runtime.

use crate::capture::tensor::{DType, HostTensor, TensorData};
use anyhow::{bail, Result};
use half::{bf16, f16};
use tch::{Kind, Tensor};

pub fn dtype_of(kind: Kind) -> Option<DType> {
    Some(match kind {
        Kind::Half => DType::F16,
        Kind::BFloat16 => DType::Bf16,
        Kind::Float => DType::F32,
        Kind::Double => DType::F64,
        Kind::Int8 => DType::I8,
        Kind::Int16 => DType::I16,
        Kind::Int => DType::I32,
        Kind::Int64 => DType::I64,
        Kind::Uint8 => DType::U8,
        Kind::Bool => DType::Bool,
        _ => return None,
    })
}

fn copy_out<T: tch::kind::Element + Default + Clone>(t: &Tensor, numel: usize) -> Result<Vec<T>> {
    let mut buf = vec![T::default(); numel];
    t.f_copy_data(&mut buf, numel)?;
    Ok(buf)
}

/// tch gives `half::bf16` the element kind of float16 (`Kind::Half`), so bfloat16 data is
/// moved as its 16-bit patterns: `copy_data::<bf16>` would refuse a BFloat16 tensor, and
/// `from_slice` of bf16 values would make a Half tensor of the wrong numbers.
fn bfloat16_out(t: &Tensor, numel: usize) -> Result<Vec<bf16>> {
    let bits = copy_out::<i16>(&t.f_view_dtype(Kind::Int16)?, numel)?;
    Ok(bits
        .into_iter()
        .map(|b| bf16::from_bits(b as u16))
        .collect())
}

/// A BFloat16 tensor of `v` (see `bfloat16_out`).
fn bfloat16_in(v: &[bf16]) -> Result<Tensor> {
    let bits: Vec<i16> = v.iter().map(|x| x.to_bits() as i16).collect();
    Ok(Tensor::f_from_slice(&bits)?.f_view_dtype(Kind::BFloat16)?)
}

/// A tensor's shape, element count and element type, or why the tool cannot hold it.
fn layout(t: &Tensor) -> Result<(Vec<usize>, usize, DType)> {
    // tch panics on the kind of an undefined tensor; say what it is instead.
    if !t.defined() {
        bail!("an undefined tensor (an optional result the op did not compute)");
    }
    let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
    let numel: usize = shape.iter().product();
    let Some(dtype) = dtype_of(t.kind()) else {
        bail!("tensor of unsupported element type {:?}", t.kind());
    };
    Ok((shape, numel, dtype))
}

/// Copies a (CPU) tensor into host memory.
pub fn to_host(t: &Tensor) -> Result<HostTensor> {
    let (shape, numel, dtype) = layout(t)?;
    let t = t.contiguous();
    let data = match dtype {
        DType::F16 => TensorData::F16(copy_out::<f16>(&t, numel)?),
        DType::Bf16 => TensorData::Bf16(bfloat16_out(&t, numel)?),
        DType::F32 => TensorData::F32(copy_out::<f32>(&t, numel)?),
        DType::F64 => TensorData::F64(copy_out::<f64>(&t, numel)?),
        DType::I8 => TensorData::I8(copy_out::<i8>(&t, numel)?),
        DType::I16 => TensorData::I16(copy_out::<i16>(&t, numel)?),
        DType::I32 => TensorData::I32(copy_out::<i32>(&t, numel)?),
        DType::I64 => TensorData::I64(copy_out::<i64>(&t, numel)?),
        DType::U8 => TensorData::U8(copy_out::<u8>(&t, numel)?),
        DType::Bool => TensorData::Bool(copy_out::<bool>(&t, numel)?),
    };
    Ok(HostTensor::new(shape, data))
}

/// Hands `f` a (CPU) tensor's element type, shape and element bytes in libtorch's own memory
/// (made contiguous first where it is not), for writing them out without a copy of their own.
/// The bytes are what `to_host` would copy: native order, booleans as 0/1 bytes, bfloat16 as
/// its bit patterns.
pub fn with_bytes<R>(t: &Tensor, f: impl FnOnce(DType, &[usize], &[u8]) -> Result<R>) -> Result<R> {
    let (shape, numel, dtype) = layout(t)?;
    if t.device() != tch::Device::Cpu {
        bail!("tensor on {:?}, not the CPU", t.device());
    }
    let t = t.contiguous();
    let len = numel * t.kind().elt_size_in_bytes();
    let bytes: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: `t` is a contiguous CPU tensor of `numel` elements of this size, alive for
        // the whole borrow, and its elements are plain bytes (bool is one 0/1 byte).
        unsafe { std::slice::from_raw_parts(t.data_ptr().cast::<u8>(), len) }
    };
    f(dtype, &shape, bytes)
}

/// Builds a libtorch tensor holding a copy of `t`.
pub fn from_host(t: &HostTensor) -> Result<Tensor> {
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    let flat = match &t.data {
        TensorData::F16(v) => Tensor::f_from_slice(v)?,
        TensorData::Bf16(v) => bfloat16_in(v)?,
        TensorData::F32(v) => Tensor::f_from_slice(v)?,
        TensorData::F64(v) => Tensor::f_from_slice(v)?,
        TensorData::I8(v) => Tensor::f_from_slice(v)?,
        TensorData::I16(v) => Tensor::f_from_slice(v)?,
        TensorData::I32(v) => Tensor::f_from_slice(v)?,
        TensorData::I64(v) => Tensor::f_from_slice(v)?,
        TensorData::U8(v) => Tensor::f_from_slice(v)?,
        TensorData::Bool(v) => Tensor::f_from_slice(v)?,
    };
    Ok(flat.f_reshape(shape)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_dtype_shape_and_values() {
        let cases = vec![
            HostTensor::f32(vec![2, 3], vec![1.0, -2.5, 3.0, 0.0, 5.5, -6.0]),
            HostTensor::new(vec![3], TensorData::I64(vec![1, -2, 3])),
            HostTensor::new(vec![2], TensorData::Bool(vec![true, false])),
            HostTensor::new(
                vec![2],
                TensorData::F16(vec![f16::from_f32(1.5), f16::from_f32(-0.25)]),
            ),
            HostTensor::new(
                vec![3],
                TensorData::Bf16(vec![
                    bf16::from_f32(1.5),
                    bf16::from_f32(-3.0e38),
                    bf16::from_f32(0.1),
                ]),
            ),
            HostTensor::new(vec![], TensorData::F64(vec![7.0])),
            HostTensor::new(vec![0, 4], TensorData::F32(vec![])),
        ];
        for host in cases {
            let back = to_host(&from_host(&host).unwrap()).unwrap();
            assert_eq!(back, host);
        }
    }

    /// A tensor spilled straight from libtorch's memory reads back as `to_host` copies it:
    /// every element type, and a transposed view, whose bytes are made contiguous first.
    #[test]
    fn a_tensor_spilled_from_libtorch_memory_reads_back_as_copied() {
        use crate::capture::store::{Keep, Stored};
        let hosts = [
            HostTensor::f32(
                vec![2, 3],
                vec![1.0, -2.5, f32::NAN, 0.0, f32::INFINITY, -6.0],
            ),
            HostTensor::new(vec![3], TensorData::I64(vec![1, -2, i64::MAX])),
            HostTensor::new(vec![3], TensorData::Bool(vec![true, false, true])),
            HostTensor::new(vec![2], TensorData::F16(vec![f16::from_f32(1.5), f16::MIN])),
            HostTensor::new(vec![2], TensorData::Bf16(vec![bf16::from_f32(-0.25); 2])),
            HostTensor::new(vec![0, 4], TensorData::F32(vec![])),
        ];
        let mut tensors: Vec<Tensor> = hosts.iter().map(|h| from_host(h).unwrap()).collect();
        tensors.push(tensors[0].transpose(0, 1));
        let keep = Keep::spill(true).unwrap();
        for t in &tensors {
            let expected = to_host(t).unwrap();
            let stored = with_bytes(t, |dtype, shape, bytes| keep.keep_raw(dtype, shape, bytes))
                .unwrap()
                .expect("a spill keeper writes the bytes");
            assert!(matches!(stored, Stored::Spilled(_)));
            let back = stored.data().unwrap();
            assert_eq!(
                (&back.shape, back.dtype()),
                (&expected.shape, expected.dtype())
            );
            for i in 0..expected.numel() {
                let bits = |h: &HostTensor| h.data.get_f64(i).to_bits();
                assert_eq!(
                    bits(&back),
                    bits(&expected),
                    "element {i} of {:?}",
                    expected.shape
                );
            }
        }
        // A keeper that holds tensors in memory leaves the copy to the caller.
        let declined = with_bytes(&tensors[0], |d, s, b| Keep::Memory.keep_raw(d, s, b));
        assert!(declined.unwrap().is_none());
    }

    #[test]
    fn bfloat16_reaches_libtorch_as_bfloat16_with_its_values() {
        let host = HostTensor::new(vec![2], TensorData::Bf16(vec![bf16::from_f32(2.5); 2]));
        let t = from_host(&host).unwrap();
        assert_eq!(t.kind(), Kind::BFloat16);
        let as_f64 = t.to_kind(Kind::Double);
        assert_eq!(as_f64.double_value(&[1]), 2.5);
    }
}
