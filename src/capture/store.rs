//! Where captured tensors wait between the run that produced them and their comparison.
//!
//! A tensor is either kept in memory (`Keep::Memory`) or written to an anonymous spill file
//! the moment it is captured (`Keep::Spill`) and read back only while its pair is compared
//! or drawn, so the process holds a handful of tensors at a time however large the network's
//! activations are. A spill that is only an optimisation (`strict: false`) falls back to
//! memory when the temporary folder cannot take the data; under `--max-memory` it is strict.
//! The spill file is created unlinked in the temporary folder: it never appears next to the
//! user's models and disappears with the process, even after a crash.

use crate::capture::tensor::{DType, HostTensor, TensorData};
use anyhow::{Context, Result};
use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

/// An append-only file of tensor bytes, shared by every value spilled into it.
pub struct SpillFile {
    file: File,
    end: Mutex<u64>,
}

impl SpillFile {
    /// A new, already unlinked file in the temporary folder (`TMPDIR`).
    pub fn create() -> Result<Arc<SpillFile>> {
        let file = tempfile::tempfile().with_context(|| {
            format!(
                "cannot create a spill file in {} for --max-memory",
                std::env::temp_dir().display()
            )
        })?;
        Ok(Arc::new(SpillFile {
            file,
            end: Mutex::new(0),
        }))
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        *self.end.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn append(self: &Arc<Self>, t: &HostTensor) -> Result<SpillRef> {
        self.append_raw(t.dtype(), &t.shape, &as_bytes(&t.data))
    }

    /// Appends one tensor given as its element bytes (native order, booleans as 0/1 bytes).
    fn append_raw(
        self: &Arc<Self>,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<SpillRef> {
        let mut end = self.end.lock().unwrap_or_else(|p| p.into_inner());
        let offset = *end;
        self.file
            .write_all_at(bytes, offset)
            .context("cannot write to the spill file (is the temporary folder full?)")?;
        *end += bytes.len() as u64;
        Ok(SpillRef {
            file: Arc::clone(self),
            offset,
            dtype,
            shape: shape.to_vec(),
        })
    }
}

/// One tensor's place in a spill file.
#[derive(Clone)]
pub struct SpillRef {
    file: Arc<SpillFile>,
    offset: u64,
    dtype: DType,
    shape: Vec<usize>,
}

impl std::fmt::Debug for SpillRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SpillRef({} {:?} at {})",
            self.dtype, self.shape, self.offset
        )
    }
}

impl SpillRef {
    /// Reads the tensor back into memory: straight into the typed buffer, since every
    /// tensor of a check is read back at least once and a second copy would cost as much
    /// as the read.
    pub fn load(&self) -> Result<HostTensor> {
        let numel: usize = self.shape.iter().product();

        Ok(HostTensor::new(
            self.shape.clone(),
            self.load_elements(0, numel)?,
        ))
    }

    /// Elements `start..start + numel` of the flattened tensor.
    fn load_elements(&self, start: usize, numel: usize) -> Result<TensorData> {
        let offset = self.offset + (start * self.dtype.size_bytes()) as u64;
        let read = |bytes: &mut [u8]| {
            self.file
                .file
                .read_exact_at(bytes, offset)
                .context("cannot read back from the spill file")
        };
        fn typed<T: Copy + Default>(
            numel: usize,
            read: impl FnOnce(&mut [u8]) -> Result<()>,
        ) -> Result<Vec<T>> {
            let mut v = vec![T::default(); numel];
            // SAFETY: T is a plain numeric type without padding for which every bit pattern
            // is a valid value (f16/bf16 are u16 inside); the slice covers exactly `v`.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(
                    v.as_mut_ptr().cast::<u8>(),
                    std::mem::size_of_val(v.as_slice()),
                )
            };
            read(bytes)?;
            Ok(v)
        }
        Ok(match self.dtype {
            DType::F16 => TensorData::F16(typed(numel, read)?),
            DType::Bf16 => TensorData::Bf16(typed(numel, read)?),
            DType::F32 => TensorData::F32(typed(numel, read)?),
            DType::F64 => TensorData::F64(typed(numel, read)?),
            DType::I8 => TensorData::I8(typed(numel, read)?),
            DType::I16 => TensorData::I16(typed(numel, read)?),
            DType::I32 => TensorData::I32(typed(numel, read)?),
            DType::I64 => TensorData::I64(typed(numel, read)?),
            DType::U8 => TensorData::U8(typed(numel, read)?),
            // Written as 0/1 bytes; not every byte is a valid bool.
            DType::Bool => {
                let mut raw = vec![0u8; numel];
                read(&mut raw)?;
                TensorData::Bool(raw.iter().map(|&b| b != 0).collect())
            }
        })
    }
}

/// How a capture keeps the tensors it produces.
#[derive(Clone)]
pub enum Keep {
    Memory,
    Spill { file: Arc<SpillFile>, strict: bool },
}

/// A kept tensor: in memory, or in a spill file.
#[derive(Debug, Clone)]
pub enum Stored {
    Memory(HostTensor),
    Spilled(SpillRef),
}

impl Stored {
    /// The tensor itself, read back from disk when it was spilled.
    pub fn data(&self) -> Result<Cow<'_, HostTensor>> {
        match self {
            Stored::Memory(t) => Ok(Cow::Borrowed(t)),
            Stored::Spilled(r) => r.load().map(Cow::Owned),
        }
    }

    /// The first and the last `k` elements (all of them when there are at most `2k`),
    /// widened to f64: a glance at a value that reads only those elements back.
    pub fn edges(&self, k: usize) -> Result<Vec<f64>> {
        match self {
            Stored::Memory(t) => {
                let n = t.numel();
                let ends = edge_ranges(n, k);
                Ok(ends.flat_map(|r| r.map(|i| t.data.get_f64(i))).collect())
            }
            Stored::Spilled(r) => {
                let n: usize = r.shape.iter().product();
                let mut out = Vec::new();
                for range in edge_ranges(n, k) {
                    let part = r.load_elements(range.start, range.len())?;
                    out.extend((0..part.len()).map(|i| part.get_f64(i)));
                }
                Ok(out)
            }
        }
    }

    /// The in-memory tensor, if it is in memory.
    pub fn in_memory(&self) -> Option<&HostTensor> {
        match self {
            Stored::Memory(t) => Some(t),
            Stored::Spilled(_) => None,
        }
    }
}

impl Keep {
    /// Keeps `t` (moving it to disk under a budget, so its memory is freed here).
    pub fn keep(&self, t: HostTensor) -> Result<Stored> {
        match self {
            Keep::Memory => Ok(Stored::Memory(t)),
            Keep::Spill { file, strict } => match file.append(&t) {
                Ok(r) => Ok(Stored::Spilled(r)),
                Err(_) if !strict => Ok(Stored::Memory(t)),
                Err(e) => Err(e),
            },
        }
    }

    /// Keeps a tensor that another library holds, given as its element bytes (native order,
    /// booleans as 0/1 bytes), when this keeper spills: written straight from that memory,
    /// one copy of every spilled tensor fewer than `keep` after a copy out. `None` when the
    /// tensor is to be held in memory, including a spill that is only an optimisation and
    /// failed; the caller then copies it out and calls `keep`.
    pub fn keep_raw(&self, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Option<Stored>> {
        match self {
            Keep::Memory => Ok(None),
            Keep::Spill { file, strict } => match file.append_raw(dtype, shape, bytes) {
                Ok(r) => Ok(Some(Stored::Spilled(r))),
                Err(_) if !strict => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// Bytes written to disk by this keeper so far.
    pub fn spilled_bytes(&self) -> u64 {
        match self {
            Keep::Memory => 0,
            Keep::Spill { file, .. } => file.bytes_written(),
        }
    }

    /// A keeper with a new spill file; when it is not `strict` and no file can be created,
    /// memory.
    pub fn spill(strict: bool) -> Result<Keep> {
        match SpillFile::create() {
            Ok(file) => Ok(Keep::Spill { file, strict }),
            Err(_) if !strict => Ok(Keep::Memory),
            Err(e) => Err(e),
        }
    }
}

/// The element bytes in native order. Booleans are written as 0/1 bytes.
fn as_bytes(data: &TensorData) -> Cow<'_, [u8]> {
    fn raw<T: Copy>(v: &[T]) -> Cow<'_, [u8]> {
        // SAFETY: T is a plain numeric type without padding (f16/bf16 are u16 inside), so
        // its elements are valid bytes; the slice covers exactly their memory.
        Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        })
    }
    match data {
        TensorData::F16(v) => raw(v),
        TensorData::Bf16(v) => raw(v),
        TensorData::F32(v) => raw(v),
        TensorData::F64(v) => raw(v),
        TensorData::I8(v) => raw(v),
        TensorData::I16(v) => raw(v),
        TensorData::I32(v) => raw(v),
        TensorData::I64(v) => raw(v),
        TensorData::U8(v) => raw(v),
        TensorData::Bool(v) => Cow::Owned(v.iter().map(|&b| b as u8).collect()),
    }
}

/// The index ranges of the first and last `k` of `n` elements, one range when they meet.
fn edge_ranges(n: usize, k: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (head, tail) = if n <= 2 * k {
        (0..n, n..n)
    } else {
        (0..k, n - k..n)
    };
    [head, tail].into_iter().filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn edges_read_the_same_elements_from_memory_and_from_the_spill_file() {
        let spill = Keep::spill(true).unwrap();
        let values: Vec<f32> = (0..10).map(|i| i as f32 - 0.5).collect();
        let t = HostTensor::f32(vec![2, 5], values.clone());
        for stored in [
            Keep::Memory.keep(t.clone()).unwrap(),
            spill.keep(t).unwrap(),
        ] {
            let widened = |r: std::ops::Range<usize>| -> Vec<f64> {
                r.map(|i| f64::from(values[i])).collect()
            };
            let mut ends = widened(0..3);
            ends.extend(widened(7..10));
            assert_eq!(stored.edges(3).unwrap(), ends);
            // Ends that meet are read once, whole.
            assert_eq!(stored.edges(5).unwrap(), widened(0..10));
            assert_eq!(stored.edges(8).unwrap(), widened(0..10));
        }
    }

    #[test]
    fn spilled_tensors_read_back_identical() {
        let keep = Keep::spill(true).unwrap();
        let cases = vec![
            HostTensor::f32(
                vec![2, 3],
                vec![1.0, -2.5, f32::NAN, 0.0, f32::INFINITY, -6.0],
            ),
            HostTensor::new(vec![3], TensorData::I64(vec![1, -2, i64::MAX])),
            HostTensor::new(vec![2], TensorData::Bool(vec![true, false])),
            HostTensor::new(vec![2], TensorData::F16(vec![f16::from_f32(1.5), f16::MIN])),
            HostTensor::new(vec![1], TensorData::Bf16(vec![bf16::from_f32(-0.25)])),
            HostTensor::new(vec![], TensorData::F64(vec![7.0])),
            HostTensor::new(vec![0, 4], TensorData::F32(vec![])),
        ];
        let stored: Vec<Stored> = cases
            .iter()
            .map(|t| keep.keep(t.clone()).unwrap())
            .collect();
        for (s, t) in stored.iter().zip(&cases) {
            let back = s.data().unwrap();
            assert_eq!(back.shape, t.shape);
            assert_eq!(back.dtype(), t.dtype());
            // NaN != NaN, so compare bit patterns through the f64 view.
            for i in 0..t.numel() {
                assert_eq!(back.data.get_f64(i).to_bits(), t.data.get_f64(i).to_bits());
            }
        }
        assert!(matches!(stored[0], Stored::Spilled(_)));
    }
}
