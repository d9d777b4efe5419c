//! Fuzz target: arbitrary bytes as an `.npy` input file (`--input NAME=FILE.npy`), through
//! `npy::read_npy_bytes`, the in-memory twin of `read_npy`. A tensor that comes back must be
//! consistent: its element count is the product of its shape.

#![no_main]

use align_check::inputs::npy::read_npy_bytes;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = read_npy_bytes(Path::new("fuzz.npy"), data) {
        assert_eq!(t.shape.iter().product::<usize>(), t.data.len());
        // Nothing can come out of a file larger than the file.
        assert!(t.data.len() <= data.len());
    }
});
