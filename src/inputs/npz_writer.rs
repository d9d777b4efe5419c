//! Writing tensors as a NumPy `.npz` archive (the reverse of `npy`): what a repro bundle
//! hands to a bug report, readable by `numpy.load` with no align-check installed.
//!
//! An `.npz` is a zip of `.npy` files, one per array, named after it. Each array is written
//! with npyz in its own element type (float16 as NumPy's `<f2`); bfloat16, which NumPy has
//! no type for, is refused with the reason rather than silently widened.

use crate::capture::tensor::{HostTensor, TensorData};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

/// Writes `arrays` (name, tensor) to `path` as an uncompressed `.npz`.
pub fn write_npz(path: &Path, arrays: &[(&str, &HostTensor)]) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    // Stored, not deflated: activations barely compress and NumPy reads either.
    let options =
        zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, tensor) in arrays {
        let bytes = npy_bytes(tensor).with_context(|| format!("array `{name}`"))?;
        zip.start_file(npyz::npz::file_name_from_array_name(name), options)
            .and_then(|()| Ok(zip.write_all(&bytes)?))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    zip.finish()
        .and_then(|mut w| Ok(w.flush()?))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// One tensor as the bytes of a `.npy` file.
fn npy_bytes(t: &HostTensor) -> Result<Vec<u8>> {
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let mut out = Vec::new();
    match &t.data {
        TensorData::F32(v) => npy(&mut out, &shape, v)?,
        TensorData::F64(v) => npy(&mut out, &shape, v)?,
        TensorData::F16(v) => npy(&mut out, &shape, v)?,
        TensorData::I8(v) => npy(&mut out, &shape, v)?,
        TensorData::I16(v) => npy(&mut out, &shape, v)?,
        TensorData::I32(v) => npy(&mut out, &shape, v)?,
        TensorData::I64(v) => npy(&mut out, &shape, v)?,
        TensorData::U8(v) => npy(&mut out, &shape, v)?,
        TensorData::Bool(v) => npy(&mut out, &shape, v)?,
        TensorData::Bf16(_) => {
            bail!("bfloat16 has no NumPy type, so it cannot be written to an .npz file")
        }
    }
    Ok(out)
}

fn npy<T>(out: &mut Vec<u8>, shape: &[u64], values: &[T]) -> std::io::Result<()>
where
    T: npyz::Serialize + npyz::AutoSerialize + Clone,
{
    use npyz::WriterBuilder;
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(out)
        .begin_nd()?;
    writer.extend(values.iter().cloned())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_read_back_with_their_names_types_and_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npz");
        let x = HostTensor::f32(vec![2, 3], (0..6).map(|v| v as f32).collect());
        let h = HostTensor::new(
            vec![2],
            TensorData::F16(vec![half::f16::from_f32(1.5), half::f16::from_f32(-2.0)]),
        );
        let i = HostTensor::new(vec![], TensorData::I64(vec![7]));
        write_npz(&path, &[("x/in.1", &x), ("h", &h), ("i", &i)]).unwrap();
        let back = crate::inputs::npy::read_npz(&path).unwrap();
        let names: Vec<&str> = back.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x/in.1", "h", "i"]);
        assert_eq!(back[0].1, x);
        assert_eq!(back[1].1, h);
        assert_eq!(back[2].1, i);
    }

    #[test]
    fn bfloat16_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let t = HostTensor::new(vec![1], TensorData::Bf16(vec![half::bf16::from_f32(1.0)]));
        let err = write_npz(&dir.path().join("b.npz"), &[("b", &t)]).unwrap_err();
        assert!(
            format!("{err:#}").contains("bfloat16 has no NumPy type"),
            "{err:#}"
        );
    }
}
