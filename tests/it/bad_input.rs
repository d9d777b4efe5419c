//! Bad files end with exit code 2 and one line naming the file and what is wrong: never a
//! panic, never a C++ abort, never a stack trace.

use crate::common::npz::{write_npz, NpyArray};
use crate::common::{binary, fixture, stderr_of};
use std::path::Path;

fn run_check(pt: &Path, onnx: &Path) -> (i32, String) {
    let out = binary().arg(pt).arg(onnx).output().unwrap();
    (out.status.code().unwrap_or(-1), stderr_of(&out))
}

fn assert_one_line_error(code: i32, stderr: &str, must_mention: &[&str]) {
    assert_eq!(code, 2, "exit code; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr}");
    for m in must_mention {
        assert!(lines[0].contains(m), "'{m}' not in: {}", lines[0]);
    }
    for bad in [
        "panicked",
        "RUST_BACKTRACE",
        "frame #",
        "Exception raised from",
    ] {
        assert!(!stderr.contains(bad), "'{bad}' in: {stderr}");
    }
}

#[test]
fn bad_model_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good_pt = fixture("conv_bn_legacy").join("model.pt");
    let good_onnx = fixture("conv_bn_legacy").join("model.onnx");
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let random = dir.path().join("random.bin");
    std::fs::write(
        &random,
        (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let truncated_onnx = dir.path().join("truncated.onnx");
    let bytes = std::fs::read(&good_onnx).unwrap();
    std::fs::write(&truncated_onnx, &bytes[..bytes.len() / 2]).unwrap();
    let truncated_pt = dir.path().join("truncated.pt");
    let bytes = std::fs::read(&good_pt).unwrap();
    std::fs::write(&truncated_pt, &bytes[..bytes.len() / 2]).unwrap();
    let other_zip = dir.path().join("other.pt");
    {
        let f = std::fs::File::create(&other_zip).unwrap();
        let mut zip = zip::ZipWriter::new(f);
        zip.start_file("hello.txt", zip::write::FileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut zip, b"not a model").unwrap();
        zip.finish().unwrap();
    }
    let missing = dir.path().join("missing.pt");

    let cases: Vec<(&str, &Path, &Path, Vec<&str>)> = vec![
        ("missing .pt", &missing, &good_onnx, vec!["missing.pt"]),
        ("empty .pt", &empty, &good_onnx, vec!["empty.bin", "empty"]),
        ("empty .onnx", &good_pt, &empty, vec!["empty.bin", "empty"]),
        ("random .pt", &random, &good_onnx, vec!["random.bin"]),
        ("random .onnx", &good_pt, &random, vec!["random.bin"]),
        (
            "truncated .onnx",
            &good_pt,
            &truncated_onnx,
            vec!["truncated.onnx"],
        ),
        (
            "truncated .pt",
            &truncated_pt,
            &good_onnx,
            vec!["truncated.pt"],
        ),
        (
            "zip that is not TorchScript",
            &other_zip,
            &good_onnx,
            vec!["other.pt"],
        ),
        (
            "swapped order",
            &good_onnx,
            &good_pt,
            vec!["model.pt", "TorchScript archive"],
        ),
    ];
    for (what, pt, onnx, mention) in cases {
        let (code, stderr) = run_check(pt, onnx);
        eprintln!("{what}: {stderr}");
        assert_one_line_error(code, &stderr, &mention);
    }
}

#[test]
fn with_both_files_bad_the_onnx_error_comes_first() {
    // The ONNX side loads on its own thread while the TorchScript side loads; the error a
    // user sees must not depend on which thread fails first: the ONNX side is loaded first
    // when the two load in turn, so its error is the one reported.
    let dir = tempfile::tempdir().unwrap();
    let bad_pt = dir.path().join("broken.pt");
    std::fs::write(&bad_pt, b"not a model at all").unwrap();
    let good_onnx = fixture("conv_bn_legacy").join("model.onnx");
    let truncated_onnx = dir.path().join("truncated.onnx");
    let bytes = std::fs::read(&good_onnx).unwrap();
    std::fs::write(&truncated_onnx, &bytes[..bytes.len() / 2]).unwrap();
    for _ in 0..3 {
        let (code, stderr) = run_check(&bad_pt, &truncated_onnx);
        assert_one_line_error(code, &stderr, &["truncated.onnx"]);
        assert!(!stderr.contains("broken.pt"), "{stderr}");
    }
    // The TorchScript side's error when only it is bad.
    let (code, stderr) = run_check(&bad_pt, &good_onnx);
    assert_one_line_error(code, &stderr, &["broken.pt"]);
}

#[test]
fn models_of_different_networks_are_refused() {
    let (code, stderr) = run_check(
        &fixture("attention_legacy").join("model.pt"),
        &fixture("conv_bn_legacy").join("model.onnx"),
    );
    assert_one_line_error(code, &stderr, &[]);
}

#[test]
fn unresolved_dynamic_dimension_names_it() {
    let dir = fixture("multi_io_legacy");
    let out = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_one_line_error(
        out.status.code().unwrap_or(-1),
        &stderr,
        &["--shape", "batch"],
    );
}

#[test]
fn report_path_equal_to_a_model_is_refused() {
    let dir = fixture("conv_bn_legacy");
    let out = binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .arg("--json")
        .arg(dir.join("model.onnx"))
        .output()
        .unwrap();
    assert_one_line_error(
        out.status.code().unwrap_or(-1),
        &stderr_of(&out),
        &["refusing"],
    );
}

#[test]
fn bad_input_archives_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture("conv_bn_legacy");
    type Array<'a> = (&'a str, &'a str, &'a [usize]);
    let cases: Vec<(&str, Vec<Array>, Vec<&str>)> = vec![
        (
            "missing input",
            vec![("other", "<f4", &[1, 3, 32, 32])],
            vec!["other"],
        ),
        (
            "wrong dtype",
            vec![("input", "<f8", &[1, 3, 32, 32])],
            vec!["float64", "float32"],
        ),
        (
            "wrong shape",
            vec![("input", "<f4", &[1, 3, 16, 16])],
            vec!["1x3x16x16", "1x3x32x32"],
        ),
        ("no arrays", vec![], vec!["no array 'input'"]),
    ];
    for (what, arrays, mention) in cases {
        let npz = dir.path().join(format!("{}.npz", what.replace(' ', "_")));
        let arrays: Vec<NpyArray> = arrays
            .into_iter()
            .map(|(name, descr, shape)| NpyArray {
                name,
                descr,
                shape,
                // Zeros of the element's size (`<f4`: 4 bytes).
                element: vec![0; descr[2..].parse().unwrap()],
            })
            .collect();
        write_npz(&npz, &arrays);
        let out = binary()
            .arg(fx.join("model.pt"))
            .arg(fx.join("model.onnx"))
            .arg("--inputs")
            .arg(&npz)
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        eprintln!("{what}: {stderr}");
        assert_one_line_error(out.status.code().unwrap_or(-1), &stderr, &mention);
    }
}

/// Writes conv_bn_legacy's ONNX model after `edit` to `dir/name`.
fn edited_onnx(
    dir: &Path,
    name: &str,
    edit: impl FnOnce(&mut align_check::onnx::proto::ModelProto),
) -> std::path::PathBuf {
    use prost::Message;
    let bytes = std::fs::read(fixture("conv_bn_legacy").join("model.onnx")).unwrap();
    let mut model = align_check::onnx::proto::ModelProto::decode(bytes.as_slice()).unwrap();
    edit(&mut model);
    let path = dir.join(name);
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn malformed_onnx_graphs_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pt = fixture("conv_bn_legacy").join("model.pt");
    // The first node reads the last node's output: a cycle through the whole graph.
    let cycle = edited_onnx(dir.path(), "cycle.onnx", |m| {
        let g = m.graph.as_mut().unwrap();
        let last = g.node.last().unwrap().output[0].clone();
        g.node[0].input[0] = last;
    });
    // The second node reads a value nothing produces.
    let dangling = edited_onnx(dir.path(), "dangling.onnx", |m| {
        m.graph.as_mut().unwrap().node[1].input[0] = "no_such_value".to_string();
    });
    let opset99 = edited_onnx(dir.path(), "opset99.onnx", |m| {
        for o in &mut m.opset_import {
            if matches!(o.domain(), "" | "ai.onnx") {
                o.version = Some(99);
            }
        }
    });
    let cases: Vec<(&str, &Path, Vec<&str>)> = vec![
        ("graph cycle", &cycle, vec!["cycle.onnx"]),
        (
            "dangling value",
            &dangling,
            vec!["dangling.onnx", "no_such_value"],
        ),
        (
            "unknown opset",
            &opset99,
            vec!["opset99.onnx", "opset 99", "supports"],
        ),
    ];
    for (what, onnx, mention) in cases {
        let (code, stderr) = run_check(&pt, onnx);
        eprintln!("{what}: {stderr}");
        assert_one_line_error(code, &stderr, &mention);
    }
}
