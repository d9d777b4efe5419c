//! The files a new user passes by mistake as the TorchScript model (issue: first contact), each
//! made by `scripts/make_first_contact_fixtures.py` from one tiny network together with its
//! correct ONNX export: the run stops with exit 2 and one line that says what the file is and
//! the command that makes the TorchScript file, never libtorch's "checkpoint is corrupted".

mod common;

use common::{binary, fixture, stderr_of};

/// Runs align-check on two files of the fixture folder: exit code, stdout, stderr.
fn run_pair(torch_file: &str, onnx_file: &str) -> (i32, String, String) {
    let dir = fixture("first_contact");
    for file in [torch_file, onnx_file] {
        assert!(
            dir.join(file).exists(),
            "{} is missing: run .venv/bin/python scripts/make_first_contact_fixtures.py",
            dir.join(file).display()
        );
    }
    let out = binary()
        .arg(dir.join(torch_file))
        .arg(dir.join(onnx_file))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout, stderr_of(&out))
}

/// Runs align-check with `file` as the TorchScript model and the fixture's good ONNX model.
fn run(file: &str) -> (i32, String) {
    let (code, _, stderr) = run_pair(file, "model.onnx");
    (code, stderr)
}

#[test]
fn the_good_pair_passes() {
    let (code, _, stderr) = run_pair("model.pt", "model.onnx");
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn files_from_different_checkpoints_are_called_that() {
    let (code, stdout, stderr) = run_pair("model.pt", "other_weights.onnx");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stdout.contains("the weights differ from the start") && stdout.contains("same checkpoint"),
        "{stdout}"
    );
    // A single wrong op is not mistaken for it, further in or at the very first layer (a
    // LayerNorm epsilon changed at the first layer fails every layer after it too).
    for fault in ["fault_conv_weight", "fault_layernorm_eps"] {
        let (code, report, _) = common::check_fixture(fault, &[]);
        assert_eq!(code, 1);
        let gates = report["gate_failures"].to_string();
        assert!(!gates.contains("differ from the start"), "{fault}: {gates}");
    }
}

#[test]
fn onnx_moved_without_its_external_data_names_the_missing_file() {
    let (code, _, stderr) = run_pair("model.pt", "moved_external.onnx");
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("external data file 'moved_external.onnx.data'"),
        "{stderr}"
    );
    assert!(stderr.contains("looked for "), "{stderr}");
    assert!(!stderr.contains("tensorprotoutils"), "{stderr}");
}

#[test]
fn torch_save_and_torch_export_files_are_named_with_their_fix() {
    let cases = [
        ("state_dict.pth", "torch.save checkpoint of a state_dict"),
        (
            "legacy_state_dict.pth",
            "torch.save checkpoint in the legacy (pre-zip) format",
        ),
        (
            "module.pth",
            "torch.save checkpoint of a whole pickled module",
        ),
        ("exported.pt2", "torch.export archive"),
    ];
    for (file, what) in cases {
        let (code, stderr) = run(file);
        assert_eq!(code, 2, "{file}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{file}: {stderr}");
        assert!(stderr.contains(what), "{file}: {stderr}");
        assert!(stderr.contains("torch.jit.trace(model"), "{file}: {stderr}");
        assert!(!stderr.contains("corrupted"), "{file}: {stderr}");
        assert!(!stderr.contains("panicked"), "{file}: {stderr}");
    }
}
