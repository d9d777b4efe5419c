//! Fuzz target: arbitrary bytes as an `.npz` input archive (`--inputs FILE.npz`), through
//! `npy::read_npz_from`, the reader-based twin of `read_npz`. Every tensor that comes back
//! must be consistent: its element count is the product of its shape.

#![no_main]

use align_check::inputs::npy::read_npz_from;
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(arrays) = read_npz_from(Path::new("fuzz.npz"), Cursor::new(data)) {
        for (_, t) in arrays {
            assert_eq!(t.shape.iter().product::<usize>(), t.data.len());
        }
    }
});
