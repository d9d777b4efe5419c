//! Reading `.npy` files and `.npz` archives into `HostTensor`s.
//!
//! Users bring real inputs (an image, a point cloud) as NumPy files. Every way such a file can
//! be wrong (unreadable, not NumPy, Fortran order, an element type the tool cannot feed)
//! becomes an error naming the file and the array, never a panic.

use crate::tensor::{HostTensor, TensorData};
use anyhow::{anyhow, bail, Context, Result};
use npyz::{DType as NpyDType, NpyFile, Order, TypeChar};
use std::io::Read;
use std::path::Path;

fn read_array<R: Read>(npy: NpyFile<R>) -> Result<HostTensor> {
    if npy.order() == Order::Fortran {
        bail!("Fortran-ordered arrays are not supported; save it with np.ascontiguousarray");
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let NpyDType::Plain(ts) = npy.dtype() else {
        bail!("structured arrays are not supported");
    };
    let size = ts.size_field();
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
    if data.len() != shape.iter().product::<usize>() {
        bail!("the data is shorter than its shape says (truncated file?)");
    }
    Ok(HostTensor::new(shape, data))
}

pub fn read_npy(path: &Path) -> Result<HostTensor> {
    let file =
        std::fs::File::open(path).map_err(|e| anyhow!("cannot open {}: {e}", path.display()))?;
    let npy = NpyFile::new(std::io::BufReader::new(file))
        .map_err(|e| anyhow!("{} is not a readable .npy file: {e}", path.display()))?;
    read_array(npy).with_context(|| format!("reading {}", path.display()))
}

/// Every array of an `.npz` archive, by name, in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, HostTensor)>> {
    let mut archive = npyz::npz::NpzArchive::open(path)
        .map_err(|e| anyhow!("{} is not a readable .npz archive: {e}", path.display()))?;
    let names: Vec<String> = archive.array_names().map(str::to_string).collect();
    let mut arrays = Vec::with_capacity(names.len());
    for name in names {
        let npy = archive
            .by_name(&name)
            .map_err(|e| anyhow!("{}: array {name}: {e}", path.display()))?
            .ok_or_else(|| anyhow!("{}: array {name} disappeared", path.display()))?;
        let tensor =
            read_array(npy).with_context(|| format!("{}: array {name}", path.display()))?;
        arrays.push((name, tensor));
    }
    Ok(arrays)
}
