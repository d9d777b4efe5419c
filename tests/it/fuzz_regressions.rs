//! Replays every file under `tests/fixtures/fuzz_regressions/` (inputs that once crashed a
//! fuzz target of `tests/fuzz/`, found by `scripts/fuzz.sh`, and hand-made hostile files from
//! `scripts/make_fuzz_regressions.py`) through the same library entry points the fuzz targets
//! call and through the real binary. Nothing reachable from a user's file may panic: the
//! library answers with a one-line error naming the file (or a value), the binary with exit
//! code 2 and one line on stderr.
//!
//! Folders are named after the fuzz target: `onnx_model/` and `onnx_expose/` hold `.onnx`
//! files, `npy/` `.npy` files, `npz/` `.npz` archives.

use crate::common::{binary, fixture, fixtures_dir, stderr_of};
use align_check::capture::sniff::sniff;
use align_check::inputs::npy::{read_npy, read_npy_bytes, read_npz, read_npz_from};
use align_check::onnx::{expose_all, inputs, model, output_names, scope};
use std::path::{Path, PathBuf};

fn regression_files(target: &str) -> Vec<PathBuf> {
    let dir = fixtures_dir().join("fuzz_regressions").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn onnx_files() -> Vec<PathBuf> {
    let mut files = regression_files("onnx_model");
    files.extend(regression_files("onnx_expose"));
    files
}

/// The whole error chain, as the binary prints it.
fn chain(e: &anyhow::Error) -> String {
    format!("{e:#}")
}

fn assert_one_line_naming(message: &str, path: &Path) {
    assert!(!message.contains('\n'), "not one line: {message}");
    assert!(
        message.contains(&path.display().to_string()),
        "does not name {}: {message}",
        path.display()
    );
    assert!(
        message.len() < 1000,
        "too long ({}): {message}",
        message.len()
    );
}

#[test]
fn every_target_has_regression_inputs() {
    for target in ["onnx_model", "npy", "npz"] {
        assert!(
            !regression_files(target).is_empty(),
            "tests/fixtures/fuzz_regressions/{target} is empty (scripts/make_fuzz_regressions.py)"
        );
    }
}

/// What the `onnx_model` fuzz target does with one file, from its path.
#[test]
fn onnx_regressions_are_clean_errors_or_values_in_the_library() {
    for path in onnx_files() {
        let bytes = std::fs::read(&path).unwrap();
        let _ = sniff(&bytes);
        let from_memory = model::from_bytes(&path, &bytes);
        let from_disk = model::load(&path);
        match (&from_memory, &from_disk) {
            (Err(a), Err(b)) => {
                assert_eq!(chain(a), chain(b), "load and from_bytes disagree");
                assert_one_line_naming(&chain(a), &path);
                continue;
            }
            (Ok(_), Ok(_)) => {}
            _ => panic!("{}: load and from_bytes disagree", path.display()),
        }
        let m = from_memory.unwrap();
        let _ = m.opset();
        if let Err(e) = inputs(&m) {
            assert_one_line_naming(&chain(&e), &path);
        }
        let _ = output_names(&m);
        for node in &m.graph().node {
            let _ = scope::node_scope(node);
            let _ = scope::node_source(node);
        }
        if let Err(e) = expose_all(&m.proto) {
            assert!(!chain(&e).contains('\n'), "{}", chain(&e));
        }
    }
}

#[test]
fn npy_regressions_are_clean_errors_in_the_library() {
    for path in regression_files("npy") {
        let bytes = std::fs::read(&path).unwrap();
        let from_memory = read_npy_bytes(&path, &bytes);
        let from_disk = read_npy(&path);
        match (from_memory, from_disk) {
            (Err(a), Err(b)) => {
                assert_eq!(chain(&a), chain(&b), "read_npy and read_npy_bytes disagree");
                assert_one_line_naming(&chain(&a), &path);
            }
            (Ok(a), Ok(b)) => {
                assert_eq!(a.shape, b.shape);
                assert_eq!(a.shape.iter().product::<usize>(), a.data.len());
            }
            _ => panic!("{}: read_npy and read_npy_bytes disagree", path.display()),
        }
    }
}

#[test]
fn npz_regressions_are_clean_errors_in_the_library() {
    for path in regression_files("npz") {
        let bytes = std::fs::read(&path).unwrap();
        let from_memory = read_npz_from(&path, std::io::Cursor::new(bytes));
        let from_disk = read_npz(&path);
        match (from_memory, from_disk) {
            (Err(a), Err(b)) => {
                assert_eq!(chain(&a), chain(&b), "read_npz and read_npz_from disagree");
                assert_one_line_naming(&chain(&a), &path);
            }
            (Ok(a), Ok(b)) => {
                assert_eq!(a.len(), b.len());
                for (_, t) in a {
                    assert_eq!(t.shape.iter().product::<usize>(), t.data.len());
                }
            }
            _ => panic!("{}: read_npz and read_npz_from disagree", path.display()),
        }
    }
}

/// The hand-made files each stand for one lie; each must be refused for that lie, before the
/// readers act on it (these panicked or allocated by the header's word before the checks).
#[test]
fn hand_made_lies_are_refused_for_what_they_are() {
    let dir = fixtures_dir().join("fuzz_regressions");
    let npy_cases = [
        ("hand_shape_2p60.npy", "needs more data than the file holds"),
        ("hand_shape_overflow.npy", "too many elements"),
        ("hand_shape_zero_then_overflow.npy", "too many elements"),
        ("hand_shape_hex_escaped_key.npy", "too many elements"),
        (
            "hand_header_len_4gib.npy",
            "the header claims 4294967295 bytes",
        ),
        ("hand_header_deep_nesting.npy", "nests brackets"),
        (
            "hand_truncated_data.npy",
            "needs more data than the file holds",
        ),
    ];
    for (name, expected) in npy_cases {
        let path = dir.join("npy").join(name);
        let e = chain(&read_npy(&path).unwrap_err());
        assert!(e.contains(expected), "{name}: {e}");
    }
    let npz_cases = [
        (
            "hand_member_not_npy.npz",
            "array input: not a readable .npy file",
        ),
        ("hand_member_shape_2p60.npz", "needs more data"),
        ("hand_member_shape_overflow.npz", "too many elements"),
        ("hand_not_a_zip.npz", "is not a readable .npz archive"),
    ];
    for (name, expected) in npz_cases {
        let path = dir.join("npz").join(name);
        let e = chain(&read_npz(&path).unwrap_err());
        assert!(e.contains(expected), "{name}: {e}");
    }
    let cycle = model::load(&dir.join("onnx_model/hand_cycle.onnx")).unwrap();
    let e = chain(&expose_all(&cycle.proto).unwrap_err());
    assert!(e.contains("cycle") && e.contains("`/p/Add`"), "{e}");
    let newline = model::load(&dir.join("onnx_model/hand_cycle_newline_name.onnx")).unwrap();
    let e = chain(&expose_all(&newline.proto).unwrap_err());
    assert!(e.contains("`evil\\nname`"), "{e}");
    let deep =
        chain(&model::load(&dir.join("onnx_model/hand_nested_subgraphs_40.onnx")).unwrap_err());
    assert!(deep.contains("recursion limit reached"), "{deep}");
}

fn assert_clean_exit_2(what: &Path, output: &std::process::Output) {
    let stderr = stderr_of(output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}: exit code; stderr: {stderr}",
        what.display()
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{}: expected one line: {stderr}",
        what.display()
    );
    for bad in [
        "panicked",
        "internal error",
        "RUST_BACKTRACE",
        "frame #",
        "Exception raised from",
    ] {
        assert!(
            !stderr.contains(bad),
            "{}: '{bad}' in: {stderr}",
            what.display()
        );
    }
}

#[test]
fn the_binary_answers_every_regression_with_one_line_and_exit_2() {
    // Inputs are fed to a real model; `inspect` reads them right after the model's signature.
    let model = fixture("conv_bn_legacy").join("model.onnx");
    for path in onnx_files() {
        let out = binary().arg("inspect").arg(&path).output().unwrap();
        assert_clean_exit_2(&path, &out);
    }
    for path in regression_files("npy") {
        let mut assignment = std::ffi::OsString::from("input=");
        assignment.push(&path);
        let out = binary()
            .arg("inspect")
            .arg(&model)
            .arg("--input")
            .arg(assignment)
            .output()
            .unwrap();
        assert_clean_exit_2(&path, &out);
    }
    for path in regression_files("npz") {
        let out = binary()
            .arg("inspect")
            .arg(&model)
            .arg("--inputs")
            .arg(&path)
            .output()
            .unwrap();
        assert_clean_exit_2(&path, &out);
    }
}
