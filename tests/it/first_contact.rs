//! The files a new user passes by mistake as the TorchScript model (issue: first contact), each
//! made by `scripts/make_first_contact_fixtures.py` from one tiny network together with its
//! correct ONNX export: the run stops with exit 2 and one line that says what the file is and
//! the command that makes the TorchScript file, never libtorch's "checkpoint is corrupted".

use crate::common::{binary, fixture, stderr_of};

/// Runs align-check on two files of the fixture folder: exit code, stdout, stderr.
fn run_pair(torch_file: &str, onnx_file: &str) -> (i32, String, String) {
    run_with(torch_file, onnx_file, &[])
}

/// `run_pair` with more arguments after the two models.
fn run_with(torch_file: &str, onnx_file: &str, args: &[&str]) -> (i32, String, String) {
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
        .args(args)
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
        let (code, report, _) = crate::common::check_fixture(fault, &[]);
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
fn a_torch_export_archive_is_a_reference_of_its_own() {
    // The same module as model.onnx, saved by torch.export.save: it runs and the pair passes.
    let (code, stdout, stderr) = run_pair("exported.pt2", "model.onnx");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("PASS"), "{stdout}");
}

#[test]
fn torch_save_files_are_named_with_their_fix() {
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

/// A refusal: exit 2 and one line on stderr, without libtorch's or ONNX Runtime's internals.
fn assert_refused(what: &str, code: i32, stderr: &str) {
    assert_eq!(code, 2, "{what}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
    for internal in [
        "panicked",
        "TorchScript interpreter",
        "Exception raised from",
        ".cc:",
    ] {
        assert!(!stderr.contains(internal), "{what}: {stderr}");
    }
}

#[test]
fn models_in_training_mode_are_refused_with_the_fix() {
    let (code, _, stderr) = run_pair("bn.pt", "bn.onnx");
    assert_eq!(code, 0, "the eval-mode pair is clean: {stderr}");
    // BatchNorm without running statistics uses the batch's in eval mode too.
    let (code, _, stderr) = run_pair("batch_stats.pt", "batch_stats.onnx");
    assert_eq!(
        code, 0,
        "track_running_stats=False is not training mode: {stderr}"
    );

    let (code, _, stderr) = run_pair("train_mode.pt", "bn.onnx");
    assert_refused("train_mode.pt", code, &stderr);
    assert!(stderr.contains("traced in training mode"), "{stderr}");
    assert!(stderr.contains("bn (`aten::batch_norm`)"), "{stderr}");
    assert!(stderr.contains("model.eval()"), "{stderr}");
    assert!(stderr.contains("--allow-training-mode"), "{stderr}");

    let (code, _, stderr) = run_pair("bn.pt", "train_mode.onnx");
    assert_refused("train_mode.onnx", code, &stderr);
    assert!(stderr.contains("exported in training mode"), "{stderr}");
    assert!(stderr.contains("/bn/BatchNormalization"), "{stderr}");
    assert!(stderr.contains("TrainingMode.EVAL"), "{stderr}");
}

#[test]
fn allow_training_mode_compares_and_the_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let (markdown, html) = (
        dir.path().join("summary.md"),
        dir.path().join("report.html"),
    );
    let (code, stdout, stderr) = run_with(
        "train_mode.pt",
        "bn.onnx",
        &[
            "--allow-training-mode",
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            markdown.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert!(code == 0 || code == 1, "it ran: {stderr}");
    assert!(stdout.contains("training mode"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let notes = report["training_mode"].to_string();
    assert!(notes.contains("traced in training mode"), "{notes}");
    for file in [&markdown, &html] {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.contains("Compared in training mode as asked"),
            "{}",
            file.display()
        );
    }
}

#[test]
fn a_trace_made_on_a_gpu_names_the_op_and_device() {
    let (code, stderr) = run("cuda.pt");
    assert_refused("cuda.pt", code, &stderr);
    assert!(stderr.contains("recorded on a GPU"), "{stderr}");
    assert!(
        stderr.contains("`aten::zeros`") && stderr.contains("cuda:0"),
        "{stderr}"
    );
    assert!(stderr.contains("model.cpu().eval()"), "{stderr}");
}

#[test]
fn a_libtorch_run_error_keeps_the_innermost_reason() {
    let (code, _, stderr) = run_pair("batch1.pt", "batch2.onnx");
    assert_refused("batch1.pt", code, &stderr);
    assert!(stderr.contains("inputs x=2x2x2"), "{stderr}");
    assert!(
        stderr.contains("shape '[1, 4]' is invalid for input of size 8"),
        "{stderr}"
    );
    // The model's own line, relative to the checkout as in the reports.
    assert!(
        stderr.contains("(at scripts/make_first_contact_fixtures.py:"),
        "{stderr}"
    );
}

#[test]
fn versions_newer_than_the_runtimes_read_name_both_versions() {
    let (code, stderr) = run("newer_format.pt");
    assert_refused("newer_format.pt", code, &stderr);
    assert!(
        stderr.contains("file format version 99") && stderr.contains("up to 10"),
        "{stderr}"
    );
    for (file, file_version, runtime_version) in [
        ("newer_ir.onnx", "IR version 99", "IR versions up to "),
        ("newer_opset.onnx", "opset 99", "up to opset "),
    ] {
        let (code, _, stderr) = run_pair("model.pt", file);
        assert_refused(file, code, &stderr);
        assert!(stderr.contains(file_version), "{file}: {stderr}");
        assert!(stderr.contains(runtime_version), "{file}: {stderr}");
    }
}

#[test]
fn inspect_says_what_each_file_is() {
    let dir = fixture("first_contact");
    let inspect = |file: &str| {
        let out = binary()
            .arg("inspect")
            .arg(dir.join(file))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr_of(&out),
        )
    };
    let (code, stdout, stderr) = inspect("model.pt");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("file: TorchScript archive, file format version "),
        "{stdout}"
    );
    assert!(
        stdout.contains("root module saved in eval mode"),
        "{stdout}"
    );

    let (_, stdout, _) = inspect("train_mode.pt");
    assert!(stdout.contains("saved in training mode"), "{stdout}");
    assert!(stdout.contains("traced in training mode"), "{stdout}");

    let (code, stdout, stderr) = inspect("model.onnx");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("file: ONNX model, IR version 8, opset ai.onnx 17"),
        "{stdout}"
    );
    assert!(stdout.contains("producer: pytorch "), "{stdout}");
    assert!(stdout.contains("exporter: legacy"), "{stdout}");
    assert!(stdout.contains("external data: none"), "{stdout}");

    let (_, stdout, _) = inspect("train_mode.onnx");
    assert!(stdout.contains("exported in training mode"), "{stdout}");

    let (code, _, stderr) = inspect("legacy_state_dict.pth");
    assert_refused("inspect legacy_state_dict.pth", code, &stderr);
    assert!(stderr.contains("torch.save checkpoint"), "{stderr}");
}
