//! A model that calls an operator of a library the user already has installed
//! (`torchvision::roi_align`, fixture library_op_legacy from
//! scripts/make_library_op_fixture.py): align-check finds torchvision's library in an
//! installed Python environment (here the one scripts/bootstrap.sh made) and checks the pair
//! without `--torch-ops`, saying so under `-v`; where it finds none, the refusal asks for
//! `--torch-ops` in one line.

use crate::common::{check_fixture, stderr_of};

const FIXTURE: &str = "library_op_legacy";

#[test]
fn an_installed_library_is_found_and_loaded_without_being_asked() {
    let (code, report, output) = check_fixture(FIXTURE, &["-v"]);
    let stderr = stderr_of(&output);
    assert_eq!(code, 0, "stderr: {stderr}");
    assert_eq!(report["verdict"], "pass");
    assert!(
        stderr.contains("loading the operator library") && stderr.contains("torchvision"),
        "{stderr}"
    );
    // The op's layer is compared like any other.
    let layers = report["layers"].as_array().unwrap();
    assert!(
        layers.iter().any(|l| l["onnx_op"] == "RoiAlign"),
        "{layers:#?}"
    );
}

#[test]
fn without_a_library_to_find_the_refusal_asks_for_torch_ops() {
    let dir = crate::common::fixture(FIXTURE);
    let output = crate::common::binary()
        .arg(dir.join("model.pt"))
        .arg(dir.join("model.onnx"))
        .env("ALIGN_CHECK_OPS_RETRIED", "1")
        .output()
        .unwrap();
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("`torchvision::roi_align`") && stderr.contains("--torch-ops LIB"),
        "{stderr}"
    );
}
