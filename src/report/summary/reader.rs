//! Reads one JSON report for `align-check summary`, through the documented JSON contract
//! (README, "The JSON report") and nothing else: the few keys a summary row needs, each in a
//! small serde struct of its own, so that a report which gained keys since (or was written
//! by a newer align-check of the same `schema_version`) still reads.
//!
//! A file either is a report (its `schema_version` says so and is one this build reads), is
//! some other JSON (no `schema_version`: a folder of CI artifacts may hold repro bundles or
//! Model Explorer overlays), or is an error: not JSON, a newer schema, or a report that lacks
//! a documented key. Only the caller knows whether "other JSON" is fine, so it is a value
//! here, not an error.

use crate::outcome::SCHEMA_VERSION;
use anyhow::{anyhow, Result};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// The keys of one report a summary row is made of.
#[derive(Debug, Clone, Deserialize)]
pub struct ModelReport {
    pub verdict: Verdict,
    /// One sentence per failed gate (the failed gates' `detail`s).
    pub gate_failures: Vec<String>,
    /// Every gate the run was held to. Read leniently: the failed gates' text is in
    /// `gate_failures` either way, this only adds their names.
    #[serde(default)]
    pub gates: Vec<Gate>,
    pub first_divergence: Option<Divergence>,
    /// Present when layers failed but none fails in isolation; only its presence matters.
    #[serde(default)]
    pub accumulated_drift: Option<serde::de::IgnoredAny>,
    pub layers: Vec<Layer>,
    pub coverage: Coverage,
    pub timing: Timing,
    pub torch_model: FileInfo,
    pub onnx_model: FileInfo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Gate {
    pub name: String,
    pub passed: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Divergence {
    pub module: String,
    pub onnx_op: String,
    /// `null` in the JSON when not finite.
    pub rel_to_range: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Layer {
    pub module: String,
    pub onnx_op: String,
    /// `null` in the JSON when not finite.
    pub rel_to_range: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Coverage {
    pub torch_ratio: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Timing {
    pub total_s: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FileInfo {
    pub path: String,
}

impl ModelReport {
    /// The names of the gates that failed, in the order they were applied.
    pub fn failed_gates(&self) -> Vec<&str> {
        self.gates
            .iter()
            .filter(|g| !g.passed)
            .map(|g| g.name.as_str())
            .collect()
    }
}

/// What a JSON file turned out to be.
#[derive(Debug)]
pub enum Read {
    Report(Box<ModelReport>),
    /// Valid JSON without `schema_version`: not something align-check wrote as a report.
    NotAReport,
}

/// Reads the file at `path`.
pub fn read(path: &Path) -> Result<Read> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("{}: cannot read it: {e}", path.display()))?;
    parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Reads the text of one file; errors say what is wrong without naming the file.
pub fn parse(text: &str) -> Result<Read> {
    // One parse into a tree: the version must be checked before the keys are (a newer
    // schema may have renamed them), and reports can be megabytes.
    let json: Value = serde_json::from_str(text)
        .map_err(|e| anyhow!("not an align-check JSON report: it is not JSON ({e})"))?;
    let Some(version) = json.get("schema_version") else {
        return Ok(Read::NotAReport);
    };
    match version.as_u64() {
        Some(v) if v > u64::from(SCHEMA_VERSION) => Err(anyhow!(
            "written by a newer align-check (schema_version {v}; this one reads up to \
             {SCHEMA_VERSION}): summarise it with that version"
        )),
        Some(v) if v >= 1 => serde_json::from_value(json)
            .map(|r| Read::Report(Box::new(r)))
            .map_err(|e| {
                anyhow!("not a complete align-check JSON report (schema_version {v}): {e}")
            }),
        _ => Err(anyhow!(
            "not an align-check JSON report: schema_version is {version}, not a version number"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest report the contract allows, with `extra` keys spliced in at the top.
    fn report(extra: &str) -> String {
        format!(
            r#"{{ {extra}
              "verdict": "fail",
              "gate_failures": ["layer conv1 exceeds its tolerance"],
              "gates": [{{"name": "layers", "passed": false, "detail": "x"}},
                        {{"name": "outputs", "passed": true, "detail": "y"}},
                        {{"name": "coverage", "passed": false, "detail": "z"}}],
              "first_divergence": {{"module": "conv1", "onnx_op": "Conv", "rel_to_range": null,
                                    "module_type": "Conv2d", "layer_index": 0}},
              "layers": [{{"module": "conv1", "onnx_op": "Conv", "rel_to_range": 0.5, "pass": false}}],
              "coverage": {{"torch_ratio": 0.75, "onnx_ratio": 1.0}},
              "timing": {{"total_s": 1.5, "load_s": 0.1}},
              "torch_model": {{"path": "m/a.pt", "sha256": "00"}},
              "onnx_model": {{"path": "m/a.onnx"}} }}"#
        )
    }

    fn parsed(text: &str) -> ModelReport {
        match parse(text).unwrap() {
            Read::Report(r) => *r,
            Read::NotAReport => panic!("read as not a report"),
        }
    }

    #[test]
    fn reads_the_keys_a_row_needs_and_ignores_the_rest() {
        let r = parsed(&report(
            r#""schema_version": 1, "a_key_from_the_future": [1, 2],"#,
        ));
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.failed_gates(), ["layers", "coverage"]);
        assert_eq!(r.gate_failures, ["layer conv1 exceeds its tolerance"]);
        let d = r.first_divergence.as_ref().unwrap();
        assert_eq!((d.module.as_str(), d.onnx_op.as_str()), ("conv1", "Conv"));
        assert_eq!(d.rel_to_range, None, "null is a non-finite error");
        assert_eq!(r.layers[0].rel_to_range, Some(0.5));
        assert_eq!(r.coverage.torch_ratio, 0.75);
        assert_eq!(r.timing.total_s, 1.5);
        assert_eq!(r.torch_model.path, "m/a.pt");
        assert!(r.accumulated_drift.is_none());
    }

    #[test]
    fn a_newer_schema_is_refused_with_both_versions() {
        let newer = SCHEMA_VERSION + 1;
        let err = parse(&report(&format!(r#""schema_version": {newer},"#)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("newer align-check"), "{err}");
        assert!(
            err.contains(&format!("schema_version {newer}"))
                && err.contains(&format!("up to {SCHEMA_VERSION}")),
            "{err}"
        );
    }

    #[test]
    fn a_report_missing_a_documented_key_names_it() {
        let text = report(r#""schema_version": 1,"#).replace(r#""timing""#, r#""timings""#);
        let err = parse(&text).unwrap_err().to_string();
        assert!(
            err.contains("not a complete") && err.contains("timing"),
            "{err}"
        );
    }

    #[test]
    fn other_json_is_not_a_report_and_broken_json_is_an_error() {
        assert!(matches!(
            parse(r#"{"layer": "fc", "tolerance": {}}"#).unwrap(),
            Read::NotAReport
        ));
        let truncated = &report(r#""schema_version": 1,"#)[..120];
        let err = parse(truncated).unwrap_err().to_string();
        assert!(err.contains("not JSON"), "{err}");
        for bad in ["0", "\"1\"", "-1", "1.5"] {
            let err = parse(&report(&format!(r#""schema_version": {bad},"#)))
                .unwrap_err()
                .to_string();
            assert!(err.contains("not a version number"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_report_without_gates_still_reads() {
        // `gates` is read leniently; the failure text comes from `gate_failures`.
        let text = report(r#""schema_version": 1,"#).replace(r#""gates""#, r#""old_gates""#);
        let r = parsed(&text);
        assert!(r.failed_gates().is_empty());
        assert_eq!(r.gate_failures.len(), 1);
    }

    #[test]
    fn a_verdict_outside_the_contract_is_an_error() {
        let text = report(r#""schema_version": 1,"#).replace(r#""fail""#, r#""maybe""#);
        assert!(parse(&text).is_err());
    }
}
