//! The production session against real models and ONNX Runtime (fixtures written by
//! scripts/make_production_fixtures.py, whose expected.json records what ONNX Runtime itself
//! measured): a difference only the shipped session shows is found, fails the check, and
//! its pass is named with a workaround that works; a clean model agrees at every level.

use crate::common::{self, check_fixture};
use serde_json::Value;
use std::process::Output;

const APPROXIMATION: &str = "optimization.enable_gelu_approximation=1";

fn stdout_of_check(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &common::stderr_of(output)
}

fn production(report: &Value) -> &Value {
    &report["production"]
}

fn gate<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["gates"]
        .as_array()?
        .iter()
        .find(|g| g["name"] == name)
}

#[test]
fn a_production_only_difference_names_the_pass_and_fails_the_check() {
    let (code, report, output) = check_fixture(
        "production/gelu_head",
        &["--ort-config", APPROXIMATION, "--production", "all"],
    );
    let p = production(&report);
    assert_eq!(code, 1, "{}", stdout_of_check(&output));
    assert_eq!(p["status"], "production_only", "{p}");
    // The per-layer check itself passes: the difference is the shipped session's alone.
    assert_eq!(gate(&report, "layers").unwrap()["passed"], true);
    assert_eq!(gate(&report, "outputs").unwrap()["passed"], true);
    assert_eq!(gate(&report, "production").unwrap()["passed"], false);
    assert_eq!(p["finding"]["kind"], "pass", "{p}");
    assert_eq!(p["finding"]["name"], "GeluApproximation", "{p}");
    assert_eq!(p["finding"]["level"], "extended", "{p}");
    assert_eq!(p["finding"]["verified"], true, "{p}");
    // As much as ONNX Runtime measured in Python (4.79e-4 abs): the tanh approximation.
    let y = &p["outputs"][0];
    let max_abs = y["vs_torch"]["max_abs"].as_f64().unwrap();
    assert!((2e-4..1e-3).contains(&max_abs), "{y}");
    assert_eq!(y["unoptimised_passes"], true);
    let flag = p["workaround"]["flag"].as_str().unwrap();
    assert_eq!(
        flag,
        "--ort-config optimization.disable_specified_optimizers=GeluApproximation"
    );
    let text = stdout_of_check(&output);
    assert!(
        text.contains("ONNX Runtime's GeluApproximation (extended level) changes output `y`"),
        "{text}"
    );
    // The approximation replaces the first GELU: the first paired layer it changes, measured
    // with the paired layers exposed in sessions with and without the pass (ONNX Runtime in
    // Python: 2.46e-4 max abs at /act1/Mul_1, nothing before it).
    let layer = &p["layer"];
    assert_eq!(layer["kind"], "layer", "{p}");
    assert_eq!(layer["module"], "act1", "{p}");
    assert_eq!(layer["onnx_node"], "/act1/Mul_1", "{p}");
    let changed = layer["max_abs"].as_f64().unwrap();
    assert!((1e-4..1e-3).contains(&changed), "{layer}");
    assert!(
        text.contains("the first paired layer it changes is #2 act1 (/act1/Mul_1)"),
        "{text}"
    );

    // The suggested line really is a workaround.
    let entry = flag.strip_prefix("--ort-config ").unwrap();
    let (code, report, output) = check_fixture(
        "production/gelu_head",
        &["--ort-config", APPROXIMATION, "--ort-config", entry],
    );
    assert_eq!(code, 0, "{}", stdout_of_check(&output));
    assert_eq!(production(&report)["status"], "agrees");
}

#[test]
fn the_gate_can_be_opted_out_of_and_the_session_switched_off() {
    let (code, report, output) = check_fixture(
        "production/gelu_head",
        &["--ort-config", APPROXIMATION, "--no-production-gate"],
    );
    assert_eq!(code, 0, "{}", stdout_of_check(&output));
    assert_eq!(production(&report)["status"], "production_only");
    assert!(stdout_of_check(&output).contains("not gated: --no-production-gate"));

    let (code, report, _) = check_fixture(
        "production/gelu_head",
        &["--ort-config", APPROXIMATION, "--production", "off"],
    );
    assert_eq!(code, 0);
    assert!(production(&report).is_null());
    assert!(gate(&report, "production").is_none());
}

#[test]
fn clean_models_agree_at_every_level_in_one_session() {
    for fixture in ["production/clean_cnn", "production/gelu_head"] {
        for level in ["disable", "basic", "extended", "all"] {
            let (code, report, output) = check_fixture(fixture, &["--production", level]);
            let p = production(&report);
            assert_eq!(code, 0, "{fixture} {level}: {}", stdout_of_check(&output));
            assert_eq!(p["status"], "agrees", "{fixture} {level}: {p}");
            assert_eq!(p["level"], level);
            // Agreement costs one ONNX Runtime session: no bisection.
            assert_eq!(p["sessions"], 1, "{fixture} {level}: {p}");
            assert!(p["finding"].is_null());
            let text = stdout_of_check(&output);
            assert!(
                text.contains(&format!("production session (ONNX Runtime {level}, ")),
                "{text}"
            );
            assert!(text.contains("): agrees"), "{text}");
        }
    }
}

#[test]
fn a_capture_at_a_higher_level_still_checks() {
    // Fused values are not compared, the rest is: the outputs still pair and pass.
    let (code, report, output) =
        check_fixture("production/clean_cnn", &["--ort-optimization", "all"]);
    assert_eq!(code, 0, "{}", stdout_of_check(&output));
    assert_eq!(gate(&report, "outputs").unwrap()["passed"], true);
}

#[test]
fn bad_production_options_are_clear_errors() {
    for (args, expected) in [
        (
            vec!["--production", "fast"],
            "unknown ONNX Runtime optimisation level `fast`",
        ),
        (vec!["--ort-config", "novalue"], "is not KEY=VALUE"),
        (
            vec!["--ort-optimization", "max"],
            "unknown ONNX Runtime optimisation level",
        ),
    ] {
        let (code, _, output) = check_fixture("production/clean_cnn", &args);
        let stderr = common::stderr_of(&output);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

// Quantised models (fixtures written by scripts/make_quantized_fixtures.py, whose
// expected.json records the output SQNR ONNX Runtime measured and the effect of re-quantising
// with nodes left in float).

fn expected(fixture: &str) -> Value {
    let path = common::fixture(fixture).join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn clean_8bit_models_pass_by_their_own_tolerance_with_a_ranking() {
    for fixture in ["quantized/resnet_tiny_qdq", "quantized/cnn_qdq"] {
        let (code, report, output) = check_fixture(fixture, &[]);
        let q = &report["quantized"];
        assert_eq!(code, 0, "{fixture}: {}", stdout_of_check(&output));
        assert_eq!(q["format"], "qdq", "{fixture}");
        // Unsigned 8-bit throughout (scripts/make_quantized_fixtures.py: U8U8 gives the same
        // answer on x86 CPUs with and without VNNI).
        assert_eq!(
            q["integer_types"],
            serde_json::json!(["uint8"]),
            "{fixture}"
        );
        // The output SQNR is the one ONNX Runtime measured in Python on the same inputs.
        let measured = expected(fixture)["output_sqnr_db"].as_f64().unwrap();
        let sqnr = q["output_sqnr_db"].as_f64().unwrap();
        assert!(
            (sqnr - measured).abs() < 0.1,
            "{fixture}: {sqnr} vs {measured}"
        );
        // Every layer was measured in isolation and ranked, most error first.
        let ranking = q["ranking"].as_array().unwrap();
        assert!(ranking.len() >= 10, "{fixture}: {q}");
        let dbs: Vec<f64> = ranking
            .iter()
            .filter_map(|r| r["isolated_sqnr_db"].as_f64())
            .collect();
        assert!(dbs.windows(2).all(|w| w[0] <= w[1]), "{fixture}: {dbs:?}");
        assert!(dbs[0] > 33.0 && dbs[0] < 45.0, "{fixture}: {dbs:?}");
        assert_eq!(
            q["accumulated_sqnr"].as_array().unwrap().len(),
            report["layers"].as_array().unwrap().len()
        );
        assert!(q["nodes_to_exclude"].as_array().unwrap().is_empty());
        let text = stdout_of_check(&output);
        assert!(text.contains("quantised model (QDQ uint8"), "{text}");
    }
}

#[test]
fn an_int8_layer_that_loses_too_much_is_named_with_an_exclude_list() {
    let fixture = "quantized/cnn_outlier_qdq";
    let (code, report, output) = check_fixture(fixture, &[]);
    let q = &report["quantized"];
    assert_eq!(code, 1, "{}", stdout_of_check(&output));
    // The layer behind the outlier channel introduces the most error, and is the origin.
    assert_eq!(q["ranking"][0]["module"], "features.2.1", "{q}");
    assert_eq!(report["first_divergence"]["module"], "features.2.1");
    let exclude = q["nodes_to_exclude"].as_array().unwrap();
    assert_eq!(exclude[0], "/features/features.2/features.2.0/Conv", "{q}");
    // Checked by running the QDQ model with those nodes left in float (int8 weights kept).
    let verified = q["verified_output_sqnr_db"].as_f64().unwrap();
    assert!(verified >= 35.0, "{q}");
    assert!(stdout_of_check(&output)
        .contains("nodes_to_exclude=[\"/features/features.2/features.2.0/Conv\""));
    // quantize_static's own measurement (the fixture script's greedy search over every node,
    // re-quantising each time) arrives at the same list, and it passes the rule.
    let greedy = expected(fixture)["sensitivity"]["greedy"]
        .as_array()
        .unwrap()
        .clone();
    let last = greedy.last().unwrap();
    assert_eq!(
        &last["nodes_to_exclude"],
        &Value::Array(exclude.clone()),
        "{q}"
    );
    assert!(last["output_sqnr_db"].as_f64().unwrap() >= 35.0);

    // With the float model's weights for those nodes the check gets closer to re-quantising.
    let float = common::fixture(fixture).join("float.onnx");
    let (_, report, _) = check_fixture(fixture, &["--float-onnx", float.to_str().unwrap()]);
    let q = &report["quantized"];
    assert_eq!(q["verified_with_float_weights"], true, "{q}");
    assert!(
        q["verified_output_sqnr_db"].as_f64().unwrap() > verified,
        "{q}"
    );
    // The configuration file's key does the same.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("align-check.toml");
    std::fs::write(
        &config,
        format!("[quantized]\nfloat_onnx = {:?}\n", float.to_str().unwrap()),
    )
    .unwrap();
    let (_, report, _) = check_fixture(fixture, &["--config", config.to_str().unwrap()]);
    assert_eq!(
        report["quantized"]["verified_with_float_weights"], true,
        "{}",
        report["quantized"]
    );

    // The rule is the user's to set. (The production session is left out: this signed int8
    // model's fused QLinearConv kernels saturate on x86 CPUs without VNNI, which that gate
    // rightly reports there; it is not what this part checks.)
    let (code, report, _) = check_fixture(
        fixture,
        &[
            "--quant-layer-sqnr",
            "25",
            "--quant-output-sqnr",
            "30",
            "--production",
            "off",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(report["quantized"]["rule"]["output_db"], 30.0);
    assert!(report["quantized"]["nodes_to_exclude"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn qoperator_and_dynamic_models_are_dequantised_and_judged_like_qdq() {
    for (fixture, format, quantised_op) in [
        ("quantized/cnn_qoperator", "qoperator", "QLinearConv"),
        ("quantized/mlp_dynamic", "dynamic", "DynamicQuantizeLinear"),
    ] {
        let (code, report, output) = check_fixture(fixture, &[]);
        let q = &report["quantized"];
        // Before dequantising, the integer codes failed every quantised layer (exit 1).
        assert_eq!(code, 0, "{fixture}: {}", stdout_of_check(&output));
        assert_eq!(q["format"], format, "{fixture}");
        let sqnr = q["output_sqnr_db"].as_f64().unwrap();
        let measured = expected(fixture)["output_sqnr_db"].as_f64().unwrap();
        assert!(
            (sqnr - measured).abs() < 0.1,
            "{fixture}: {sqnr} vs {measured}"
        );
        assert!(common::coverage_ratio(&report) >= 0.95, "{fixture}");
        // The integer ops' outputs are compared as floats, by SQNR, like a QDQ model's.
        let layers = report["layers"].as_array().unwrap();
        let quantised: Vec<&Value> = layers
            .iter()
            .filter(|l| l["onnx_op"] == quantised_op)
            .collect();
        assert!(quantised.len() >= 2, "{fixture}: {layers:?}");
        for l in &quantised {
            assert_eq!(l["onnx_dtype"], "float32", "{fixture}: {l}");
            let db = l["snr_db"].as_f64().unwrap();
            assert!((25.0..60.0).contains(&db), "{fixture}: {l}");
            assert!(l["isolated"]["snr_db"].as_f64().unwrap() >= 33.0, "{l}");
        }
        // Every quantised layer is in the ranking, most error first.
        let ranking = q["ranking"].as_array().unwrap();
        let ranked_ops = ranking
            .iter()
            .filter(|r| quantised.iter().any(|l| l["onnx_node"] == r["onnx_node"]))
            .count();
        assert_eq!(ranked_ops, quantised.len(), "{fixture}: {q}");
        let dbs: Vec<f64> = ranking
            .iter()
            .filter_map(|r| r["isolated_sqnr_db"].as_f64())
            .collect();
        assert!(dbs.windows(2).all(|w| w[0] <= w[1]), "{fixture}: {dbs:?}");
    }
}

#[test]
fn a_qoperator_layer_that_loses_too_much_is_named_by_sqnr() {
    // The outlier CNN quantised to QLinearConv: as its QDQ twin, one layer's input scale is
    // set by the outlier channel, and the dequantised codes show where.
    let fixture = "quantized/cnn_outlier_qoperator";
    let (code, report, output) = check_fixture(fixture, &[]);
    let q = &report["quantized"];
    assert_eq!(code, 1, "{}", stdout_of_check(&output));
    assert_eq!(q["format"], "qoperator");
    let measured = expected(fixture)["output_sqnr_db"].as_f64().unwrap();
    assert!(
        (q["output_sqnr_db"].as_f64().unwrap() - measured).abs() < 0.1,
        "{q}"
    );
    assert!(measured < 35.0);
    assert!(common::coverage_ratio(&report) >= 0.95);
    assert_eq!(
        q["ranking"][0]["onnx_node"], "/features/features.2/features.2.0/Conv_quant",
        "{q}"
    );
    assert_eq!(
        report["first_divergence"]["module"], "features.2.2",
        "{report}"
    );
}

#[test]
fn float_models_are_not_judged_as_quantised() {
    let (_, report, _) = check_fixture("production/clean_cnn", &[]);
    assert!(report["quantized"].is_null());
}
