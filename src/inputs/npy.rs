//! Reading `.npy` files and `.npz` archives into `HostTensor`s.
//!
//! Users bring real inputs (an image, a point cloud) as NumPy files. Every way such a file can
//! be wrong (unreadable, not NumPy, Fortran order, an element type the tool cannot feed, a
//! header that promises more than the file holds) becomes an error naming the file and the
//! array, never a panic. The header is checked here before npyz sees it, because npyz trusts
//! it: it allocates whatever header length the file claims and multiplies the shape without
//! overflow checks (a panic in debug builds, a wrong element count in release ones).
//!
//! The path functions are thin wrappers over the in-memory/reader ones, which the fuzz targets
//! (`tests/fuzz/`) call directly.

use crate::capture::tensor::{HostTensor, TensorData};
use anyhow::{anyhow, bail, Context, Result};
use npyz::{DType as NpyDType, NpyFile, Order, TypeChar};
use std::io::{Cursor, Read, Seek};
use std::path::Path;

/// Longest header accepted. NumPy itself refuses headers over 10 000 bytes unless told
/// otherwise; a real one is about 128 bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Deepest bracket nesting accepted in a header. The header parser (pest) backtracks
/// exponentially on nested brackets that do not close: 28 unclosed `{` in a 157-byte file
/// took it minutes (found by fuzzing). An array the tool can read nests 2 deep (the dict and
/// the shape tuple); structured dtypes, refused anyway, nest deeper.
const MAX_HEADER_NESTING: usize = 4;

fn read_array<R: Read>(npy: NpyFile<R>, data_bytes: u64) -> Result<HostTensor> {
    if npy.order() == Order::Fortran {
        bail!("Fortran-ordered arrays are not supported; save it with np.ascontiguousarray");
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let NpyDType::Plain(ts) = npy.dtype() else {
        bail!("structured arrays are not supported");
    };
    let size = ts.size_field();
    let supported = matches!(
        (ts.type_char(), size),
        (TypeChar::Float, 2 | 4 | 8)
            | (TypeChar::Int, 1 | 2 | 4 | 8)
            | (TypeChar::Uint | TypeChar::Bool, 1)
    );
    if !supported {
        bail!("element type {ts} is not supported");
    }
    let elements = checked_elements(npy.shape())
        .ok_or_else(|| anyhow!("the shape {:?} has too many elements", npy.shape()))?;
    // Checked before reading so that a header claiming 2^60 elements is refused at once
    // instead of after reading (and growing a buffer for) everything the file does hold.
    let needed = elements.checked_mul(size);
    if needed.is_none_or(|n| n > data_bytes) {
        bail!(
            "the header's shape {:?} of {ts} needs more data than the file holds \
             ({data_bytes} bytes; truncated file?)",
            npy.shape()
        );
    }
    let data = match (ts.type_char(), size) {
        (TypeChar::Float, 2) => TensorData::F16(npy.into_vec()?),
        (TypeChar::Float, 4) => TensorData::F32(npy.into_vec()?),
        (TypeChar::Float, 8) => TensorData::F64(npy.into_vec()?),
        (TypeChar::Int, 1) => TensorData::I8(npy.into_vec()?),
        (TypeChar::Int, 2) => TensorData::I16(npy.into_vec()?),
        (TypeChar::Int, 4) => TensorData::I32(npy.into_vec()?),
        (TypeChar::Int, 8) => TensorData::I64(npy.into_vec()?),
        (TypeChar::Uint, 1) => TensorData::U8(npy.into_vec()?),
        (TypeChar::Bool, 1) => TensorData::Bool(npy.into_vec()?),
        _ => bail!("element type {ts} is not supported"),
    };
    if data.len() as u64 != elements {
        bail!("the data is shorter than its shape says (truncated file?)");
    }
    Ok(HostTensor::new(shape, data))
}

/// The element count of `shape`, or `None` when it, or any partial product npyz computes
/// (strides, in either order), does not fit in 64 bits. Zero dimensions do not hide an
/// overflow: `(0, 2^40, 2^40)` has no elements, but its strides still overflow.
fn checked_elements(shape: &[u64]) -> Option<u64> {
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
    usize::try_from(nonzero).ok()?;
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

/// Reads the magic, version and header of an `.npy` stream and checks what npyz would trust
/// in them (header length, nesting, the shape's element count) against `available`, the
/// stream's length. Returns the bytes consumed, for npyz to read again.
fn read_checked_header<R: Read>(reader: &mut R, available: u64) -> Result<Vec<u8>, String> {
    let mut head = vec![0u8; 8];
    if reader.read_exact(&mut head).is_err() || !head.starts_with(b"\x93NUMPY") {
        return Err("magic not found for NPY file".into());
    }
    let header_len = match head[6] {
        1 => {
            let mut len = [0u8; 2];
            read_into(reader, &mut len, &mut head)?;
            u16::from_le_bytes(len) as usize
        }
        2 | 3 => {
            let mut len = [0u8; 4];
            read_into(reader, &mut len, &mut head)?;
            u32::from_le_bytes(len) as usize
        }
        // npyz names the unsupported version.
        _ => return Ok(head),
    };
    let remaining = available.saturating_sub(head.len() as u64);
    if header_len > MAX_HEADER_BYTES || header_len as u64 > remaining {
        return Err(format!(
            "the header claims {header_len} bytes (the file has {remaining} left, and headers \
             over {MAX_HEADER_BYTES} bytes are refused)"
        ));
    }
    let start = head.len();
    head.resize(start + header_len, 0);
    reader
        .read_exact(&mut head[start..])
        .map_err(|_| "the header is cut short".to_string())?;
    check_header_text(&head[start..])?;
    Ok(head)
}

fn read_into<R: Read>(
    reader: &mut R,
    buf: &mut [u8],
    consumed: &mut Vec<u8>,
) -> Result<(), String> {
    reader
        .read_exact(buf)
        .map_err(|_| "the header is cut short".to_string())?;
    consumed.extend_from_slice(buf);
    Ok(())
}

/// Refuses headers whose shape npyz would overflow on. Anything this cannot read is left for
/// npyz to reject with its own message; the shape is found exactly as npyz finds it (the same
/// literal parser, the last `shape` key of the dict).
fn check_header_text(text: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(text) else {
        return Ok(());
    };
    // Brackets are counted inside strings too: only the names of structured fields could
    // hold any, and those arrays are refused anyway.
    let mut depth = 0usize;
    for c in text.bytes() {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or("the header's brackets do not balance")?
            }
            _ => {}
        }
        if depth > MAX_HEADER_NESTING {
            return Err(format!(
                "the header nests brackets more than {MAX_HEADER_NESTING} deep"
            ));
        }
    }
    if depth != 0 {
        return Err("the header's brackets do not balance".into());
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let Ok(py_literal::Value::Dict(entries)) = text.parse::<py_literal::Value>() else {
        return Ok(());
    };
    let shape = entries
        .iter()
        .rev()
        .find(|(k, _)| k.as_string().is_some_and(|k| k == "shape"))
        .map(|(_, v)| v);
    let dims = match shape {
        Some(py_literal::Value::Tuple(d) | py_literal::Value::List(d)) => d,
        _ => return Ok(()),
    };
    let mut parsed = Vec::with_capacity(dims.len());
    for d in dims {
        match d {
            py_literal::Value::Integer(i) => match i.to_string().parse::<u64>() {
                Ok(v) => parsed.push(v),
                Err(_) => return Ok(()),
            },
            _ => return Ok(()),
        }
    }
    if checked_elements(&parsed).is_none() {
        return Err(format!("the shape {parsed:?} has too many elements"));
    }
    Ok(())
}

/// A foreign error as one short line: npyz passes on the header parser's messages, which
/// span several lines and quote the whole header (up to `MAX_HEADER_BYTES`).
fn brief(e: impl std::fmt::Display) -> String {
    let line = crate::onnx::model::one_line(&e.to_string());
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{} ...", &line[..cut]),
        None => line,
    }
}

/// Parses one `.npy` stream of `available` bytes; errors are bare (the caller names the file).
fn parse_npy<R: Read>(mut reader: R, available: u64) -> Result<HostTensor> {
    let head = read_checked_header(&mut reader, available)
        .map_err(|e| anyhow!("not a readable .npy file: {e}"))?;
    let data_bytes = available.saturating_sub(head.len() as u64);
    let npy = NpyFile::new(Cursor::new(head).chain(reader))
        .map_err(|e| anyhow!("not a readable .npy file: {}", brief(e)))?;
    read_array(npy, data_bytes)
}

pub fn read_npy(path: &Path) -> Result<HostTensor> {
    let file =
        std::fs::File::open(path).map_err(|e| anyhow!("cannot open {}: {e}", path.display()))?;
    let len = file
        .metadata()
        .map_err(|e| anyhow!("cannot read {}: {e}", path.display()))?
        .len();
    parse_npy(std::io::BufReader::new(file), len).with_context(|| format!("{}", path.display()))
}

/// The contents of an `.npy` file already in memory; `path` only names it in errors.
pub fn read_npy_bytes(path: &Path, bytes: &[u8]) -> Result<HostTensor> {
    parse_npy(bytes, bytes.len() as u64).with_context(|| format!("{}", path.display()))
}

/// Every array of an `.npz` archive, by name, in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, HostTensor)>> {
    let file =
        std::fs::File::open(path).map_err(|e| anyhow!("cannot open {}: {e}", path.display()))?;
    read_npz_from(path, std::io::BufReader::new(file))
}

/// Every array of an `.npz` archive read from `reader`; `path` only names it in errors.
pub fn read_npz_from<R: Read + Seek>(path: &Path, reader: R) -> Result<Vec<(String, HostTensor)>> {
    let mut archive = npyz::npz::NpzArchive::new(reader).map_err(|e| {
        anyhow!(
            "{} is not a readable .npz archive: {}",
            path.display(),
            brief(e)
        )
    })?;
    // In archive order: the zip's own name list is a hash map's, in no order.
    let zip = archive.zip_archive();
    let mut names: Vec<String> = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let entry = zip
            .by_index_raw(i)
            .map_err(|e| anyhow!("{}: member {i}: {}", path.display(), brief(e)))?;
        if let Some(name) = npyz::npz::array_name_from_file_name(entry.name()) {
            names.push(name.to_string());
        }
    }
    let mut arrays = Vec::with_capacity(names.len());
    for name in names {
        // The member is opened through the zip archive rather than `NpzArchive::by_name` so
        // that its header is checked before npyz parses it.
        let member = npyz::npz::file_name_from_array_name(&name);
        let entry = archive
            .zip_archive()
            .by_name(&member)
            .map_err(|e| anyhow!("{}: array {name}: {}", path.display(), brief(e)))?;
        let size = entry.size();
        let tensor =
            parse_npy(entry, size).with_context(|| format!("{}: array {name}", path.display()))?;
        arrays.push((name, tensor));
    }
    Ok(arrays)
}
