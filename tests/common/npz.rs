//! Writing `.npz` archives byte by byte for tests that need inputs align-check's own writer
//! would never make (an element type the ONNX model does not take, an array under the wrong
//! name) or that must not depend on the code under test: the NPY format (version 1.0 header,
//! padded to 64 bytes, C order) written from its specification.

use std::path::Path;

/// One array of an archive: its name (without `.npy`), numpy's `descr` (`<f4`, `<f8`), its
/// shape, and the bytes of the one element value every position holds.
pub struct NpyArray<'a> {
    pub name: &'a str,
    pub descr: &'a str,
    pub shape: &'a [usize],
    pub element: Vec<u8>,
}

/// Writes `arrays` to the archive at `path`.
pub fn write_npz(path: &Path, arrays: &[NpyArray]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for array in arrays {
        zip.start_file(
            format!("{}.npy", array.name),
            zip::write::FileOptions::default(),
        )
        .unwrap();
        std::io::Write::write_all(&mut zip, &npy_bytes(array)).unwrap();
    }
    zip.finish().unwrap();
}

/// An archive of one float32 array filled with `value`.
pub fn constant_npz(path: &Path, name: &str, shape: &[usize], value: f32) {
    let element = value.to_le_bytes().to_vec();
    write_npz(
        path,
        &[NpyArray {
            name,
            descr: "<f4",
            shape,
            element,
        }],
    );
}

fn npy_bytes(array: &NpyArray) -> Vec<u8> {
    // Python's tuple syntax: `(3,)` for one dimension, `()` for none.
    let dims: Vec<String> = array.shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        array.descr
    );
    // Magic (6) + version (2) + length (2) + header + newline: a multiple of 64.
    while (header.len() + 11) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for _ in 0..array.shape.iter().product::<usize>() {
        bytes.extend(&array.element);
    }
    bytes
}
