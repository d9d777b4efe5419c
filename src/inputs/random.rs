//! Seeded, reproducible random inputs for each element type.
//!
//! The generator is a small SplitMix64 written here rather than a crate: the stream must stay
//! the same across versions of align-check, because a baseline report names the seed it was
//! made with. Each input gets its own stream derived from the seed and the input's position,
//! so adding an input does not change the others.

use crate::capture::tensor::{DType, HostTensor, TensorData};
use half::{bf16, f16};

struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller): activations of trained networks look like this more
    /// than like uniform noise.
    fn next_normal(&mut self) -> f64 {
        let u1 = self.next_f64().max(f64::MIN_POSITIVE);
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Integer inputs are usually indices or small codes; 0..8 stays valid for most of them.
const INT_RANGE: u64 = 8;

pub fn random_tensor(dtype: DType, shape: &[usize], seed: u64, position: usize) -> HostTensor {
    let mut rng = SplitMix64(seed ^ (position as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let n: usize = shape.iter().product();
    let mut ints = || {
        (0..n)
            .map(|_| rng.next_u64() % INT_RANGE)
            .collect::<Vec<u64>>()
    };
    let data = match dtype {
        DType::Bool => TensorData::Bool(ints().into_iter().map(|v| v % 2 == 1).collect()),
        DType::I8 => TensorData::I8(ints().into_iter().map(|v| v as i8).collect()),
        DType::I16 => TensorData::I16(ints().into_iter().map(|v| v as i16).collect()),
        DType::I32 => TensorData::I32(ints().into_iter().map(|v| v as i32).collect()),
        DType::I64 => TensorData::I64(ints().into_iter().map(|v| v as i64).collect()),
        DType::U8 => TensorData::U8(ints().into_iter().map(|v| v as u8).collect()),
        DType::F16 => TensorData::F16((0..n).map(|_| f16::from_f64(rng.next_normal())).collect()),
        DType::Bf16 => {
            TensorData::Bf16((0..n).map(|_| bf16::from_f64(rng.next_normal())).collect())
        }
        DType::F32 => TensorData::F32((0..n).map(|_| rng.next_normal() as f32).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| rng.next_normal()).collect()),
    };
    HostTensor::new(shape.to_vec(), data)
}

/// A tensor with every element `value` (zeros for state no TorchScript argument carries, a
/// `--arg` number for the ONNX input it maps to), converted to `dtype`.
pub fn filled(dtype: DType, shape: &[usize], value: f64) -> HostTensor {
    let n: usize = shape.iter().product();
    let data = match dtype {
        DType::Bool => TensorData::Bool(vec![value != 0.0; n]),
        DType::I8 => TensorData::I8(vec![value as i8; n]),
        DType::I16 => TensorData::I16(vec![value as i16; n]),
        DType::I32 => TensorData::I32(vec![value as i32; n]),
        DType::I64 => TensorData::I64(vec![value as i64; n]),
        DType::U8 => TensorData::U8(vec![value as u8; n]),
        DType::F16 => TensorData::F16(vec![f16::from_f64(value); n]),
        DType::Bf16 => TensorData::Bf16(vec![bf16::from_f64(value); n]),
        DType::F32 => TensorData::F32(vec![value as f32; n]),
        DType::F64 => TensorData::F64(vec![value; n]),
    };
    HostTensor::new(shape.to_vec(), data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_tensor_other_seed_other_tensor() {
        let a = random_tensor(DType::F32, &[2, 3], 7, 0);
        assert_eq!(a, random_tensor(DType::F32, &[2, 3], 7, 0));
        assert_ne!(a, random_tensor(DType::F32, &[2, 3], 8, 0));
        assert_ne!(a, random_tensor(DType::F32, &[2, 3], 7, 1));
    }

    #[test]
    fn normal_values_have_plausible_moments() {
        let t = random_tensor(DType::F64, &[20000], 1, 0).data.to_f64_vec();
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        let var = t.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / t.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
    }

    #[test]
    fn integers_stay_in_range() {
        let t = random_tensor(DType::I64, &[1000], 3, 0).data.to_f64_vec();
        assert!(t.iter().all(|&v| (0.0..INT_RANGE as f64).contains(&v)));
    }
}
