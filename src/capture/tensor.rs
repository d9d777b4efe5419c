//! Host-memory tensors shared by both runtimes and every later stage.
//!
//! A `HostTensor` is a flat buffer in row-major order plus a shape and an element type. Both
//! capture sides convert into it, so pairing, statistics and reports never see tch or ort
//! types and can be unit-tested on hand-built values. Data keeps its original precision
//! (fp16 stays fp16) so that statistics can be computed in f64 from the exact values that
//! each runtime produced.

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Element types the tool understands, named as users see them in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F16,
    Bf16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    Bool,
}

impl DType {
    /// Every element type, in declaration order: the one list anything that maps over all
    /// of them (names, ONNX types, tolerances) walks.
    pub const ALL: [DType; 10] = [
        DType::F16,
        DType::Bf16,
        DType::F32,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::Bf16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// The dtype `name()` returns `name` for.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::Bf16 | DType::F32 | DType::F64)
    }

    /// Signed or unsigned integers (not bool).
    pub fn is_integer(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F16 | DType::Bf16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The element buffer, one variant per supported element type.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Applies `$body` to the typed vector inside a `TensorData`, whatever its element type.
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F16($v) => $body,
            TensorData::Bf16($v) => $body,
            TensorData::F32($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::I8($v) => $body,
            TensorData::I16($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::U8($v) => $body,
            TensorData::Bool($v) => $body,
        }
    };
}

impl TensorData {
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F16(_) => DType::F16,
            TensorData::Bf16(_) => DType::Bf16,
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::I8(_) => DType::I8,
            TensorData::I16(_) => DType::I16,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::U8(_) => DType::U8,
            TensorData::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` widened to f64, the precision every statistic is computed in.
    #[inline]
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            TensorData::F16(v) => v[i].to_f64(),
            TensorData::Bf16(v) => v[i].to_f64(),
            TensorData::F32(v) => v[i] as f64,
            TensorData::F64(v) => v[i],
            TensorData::I8(v) => v[i] as f64,
            TensorData::I16(v) => v[i] as f64,
            TensorData::I32(v) => v[i] as f64,
            TensorData::I64(v) => v[i] as f64,
            TensorData::U8(v) => v[i] as f64,
            TensorData::Bool(v) => v[i] as u8 as f64,
        }
    }

    /// All elements widened to f64 (allocates; for small tensors and tests).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get_f64(i)).collect()
    }
}

/// A tensor held in host memory.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: TensorData,
}

impl HostTensor {
    pub fn new(shape: Vec<usize>, data: TensorData) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        HostTensor { shape, data }
    }

    pub fn f32(shape: Vec<usize>, values: Vec<f32>) -> Self {
        HostTensor::new(shape, TensorData::F32(values))
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn size_bytes(&self) -> usize {
        self.numel() * self.dtype().size_bytes()
    }

    /// This floating-point tensor in another floating-point dtype (rounded to nearest when
    /// narrowing); `None` when either dtype is not floating point.
    pub fn cast_float(&self, to: DType) -> Option<HostTensor> {
        if !self.dtype().is_float() {
            return None;
        }
        let values = (0..self.numel()).map(|i| self.data.get_f64(i));
        let data = match to {
            DType::F16 => TensorData::F16(values.map(half::f16::from_f64).collect()),
            DType::Bf16 => TensorData::Bf16(values.map(half::bf16::from_f64).collect()),
            DType::F32 => TensorData::F32(values.map(|v| v as f32).collect()),
            DType::F64 => TensorData::F64(values.collect()),
            _ => return None,
        };
        Some(HostTensor::new(self.shape.clone(), data))
    }

    /// This integer tensor in another integer dtype; `None` when either dtype is not an
    /// integer type or a value does not fit the target (nothing is wrapped or clamped).
    pub fn cast_integer(&self, to: DType) -> Option<HostTensor> {
        let values: Vec<i64> = match &self.data {
            TensorData::I8(v) => v.iter().map(|&x| x.into()).collect(),
            TensorData::I16(v) => v.iter().map(|&x| x.into()).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x.into()).collect(),
            TensorData::I64(v) => v.clone(),
            TensorData::U8(v) => v.iter().map(|&x| x.into()).collect(),
            _ => return None,
        };
        fn narrow<T: TryFrom<i64>>(values: &[i64]) -> Option<Vec<T>> {
            values.iter().map(|&v| T::try_from(v).ok()).collect()
        }
        let data = match to {
            DType::I8 => TensorData::I8(narrow(&values)?),
            DType::I16 => TensorData::I16(narrow(&values)?),
            DType::I32 => TensorData::I32(narrow(&values)?),
            DType::I64 => TensorData::I64(values),
            DType::U8 => TensorData::U8(narrow(&values)?),
            _ => return None,
        };
        Some(HostTensor::new(self.shape.clone(), data))
    }
}

/// `1x3x224x224`, the way shapes are written on the command line and in reports.
pub fn format_shape(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

pub(crate) use with_data;
