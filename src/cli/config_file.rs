//! The project configuration file, `align-check.toml` (or `--config PATH`): everything the
//! command line holds, so a CI job can keep its check in the repository.
//!
//! Relative paths are relative to the file's own folder, so the check means the same thing
//! from any working directory. Unknown keys are errors naming the key: a misspelt tolerance
//! must not silently fall back to the default.

use crate::report::{self, Format, FORMATS};
use anyhow::{anyhow, Result};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file looked for in the working directory when `--config` is not given.
pub const DEFAULT_NAME: &str = "align-check.toml";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub torch_model: Option<PathBuf>,
    pub onnx_model: Option<PathBuf>,
    #[serde(default)]
    pub inputs: InputsSection,
    #[serde(default)]
    pub tolerances: TolerancesSection,
    #[serde(default)]
    pub gate: GateSection,
    #[serde(default)]
    pub diagnosis: DiagnosisSection,
    #[serde(default)]
    pub reports: ReportsSection,
    #[serde(default)]
    pub runtime: RuntimeSection,
    #[serde(default)]
    pub production: crate::cli::production::ProductionSection,
    #[serde(default)]
    pub quantized: crate::cli::quantized::QuantizedSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsSection {
    pub seed: Option<u64>,
    pub samples: Option<usize>,
    /// An .npz file or a folder of them.
    pub archive: Option<PathBuf>,
    #[serde(default)]
    pub files: BTreeMap<String, PathBuf>,
    /// Input name to shape string (`1x3x224x224`).
    #[serde(default)]
    pub shapes: BTreeMap<String, String>,
    /// `--map`: TorchScript argument to the ONNX input it takes.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    /// `--arg`: non-tensor TorchScript argument to its value.
    #[serde(default)]
    pub args: BTreeMap<String, toml::Value>,
    /// `--torch-inputs` and `--onnx-inputs`.
    pub torch_archive: Option<PathBuf>,
    pub onnx_archive: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TolerancesSection {
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// The graph outputs' own rule (`--output-atol`, `--output-rtol`, `--output-rel-to-range`).
    pub output_atol: Option<f64>,
    pub output_rtol: Option<f64>,
    pub output_rel_to_range: Option<f64>,
    /// `--strict-small`.
    pub strict_small: Option<bool>,
    /// `[[tolerances.override]]` tables, in order: the first match wins.
    #[serde(default, rename = "override")]
    pub overrides: Vec<OverrideEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideEntry {
    pub pattern: String,
    pub atol: f64,
    #[serde(default)]
    pub rtol: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSection {
    pub min_coverage: Option<f64>,
    pub baseline: Option<PathBuf>,
    pub max_growth: Option<f64>,
    pub exit_zero: Option<bool>,
    pub allow_training_mode: Option<bool>,
}

/// `[diagnosis]`: the analyses beyond the comparison itself.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnosisSection {
    /// `--isolate`.
    pub isolate: Option<bool>,
    /// `--repro DIR`.
    pub repro: Option<PathBuf>,
    /// `--repro-layer LAYER`.
    pub repro_layer: Option<String>,
}

/// `[reports]`: a path per format, keyed by the format's key in `report::FORMATS` (`json`,
/// `model_explorer`), in the file's order. An unknown key is an error that lists the known
/// ones.
#[derive(Debug, Default)]
pub struct ReportsSection {
    pub paths: Vec<(&'static Format, PathBuf)>,
}

impl ReportsSection {
    /// The path the file gives for `format`, if any.
    pub fn path(&self, format: &Format) -> Option<&PathBuf> {
        self.paths
            .iter()
            .find(|(f, _)| f.key == format.key)
            .map(|(_, p)| p)
    }
}

impl<'de> Deserialize<'de> for ReportsSection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = ReportsSection;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table of report paths")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReportsSection, A::Error> {
                let mut section = ReportsSection::default();
                while let Some(key) = map.next_key::<String>()? {
                    let format = report::format_named(&key).ok_or_else(|| {
                        let known: Vec<String> =
                            FORMATS.iter().map(|f| format!("`{}`", f.key)).collect();
                        de::Error::custom(format!(
                            "unknown field `{key}`, expected one of {}",
                            known.join(", ")
                        ))
                    })?;
                    section.paths.push((format, map.next_value()?));
                }
                Ok(section)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSection {
    pub threads: Option<usize>,
    pub ort_lib: Option<PathBuf>,
    pub ort_custom_ops: Option<PathBuf>,
    #[serde(default)]
    pub torch_ops: Vec<PathBuf>,
    /// `--max-memory`, as a size string (`"4G"`).
    pub max_memory: Option<String>,
}

/// Reads `explicit`, or `align-check.toml` in the working directory when it exists.
pub fn load(explicit: Option<&Path>) -> Result<Option<FileConfig>> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let default = PathBuf::from(DEFAULT_NAME);
            if !default.is_file() {
                return Ok(None);
            }
            default
        }
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow!("cannot read config {}: {e}", path.display()))?;
    let mut config: FileConfig = toml::from_str(&text).map_err(|e| {
        let message = e.message().trim().to_string();
        anyhow!("config {}: {message}", path.display())
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    config.make_relative_to(&base);
    Ok(Some(config))
}

impl FileConfig {
    fn make_relative_to(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        let fix_opt = |p: &mut Option<PathBuf>| {
            if let Some(p) = p {
                fix(p);
            }
        };
        fix_opt(&mut self.torch_model);
        fix_opt(&mut self.onnx_model);
        fix_opt(&mut self.inputs.archive);
        fix_opt(&mut self.inputs.torch_archive);
        fix_opt(&mut self.inputs.onnx_archive);
        fix_opt(&mut self.diagnosis.repro);
        self.inputs.files.values_mut().for_each(fix);
        fix_opt(&mut self.gate.baseline);
        self.reports.paths.iter_mut().for_each(|(_, p)| fix(p));
        fix_opt(&mut self.runtime.ort_lib);
        fix_opt(&mut self.runtime.ort_custom_ops);
        self.runtime.torch_ops.iter_mut().for_each(fix);
        fix_opt(&mut self.quantized.float_onnx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FileConfig, String> {
        toml::from_str::<FileConfig>(text).map_err(|e| e.message().to_string())
    }

    #[test]
    fn full_file_parses() {
        let c = parse(
            r#"
            torch_model = "m.pt"
            onnx_model = "m.onnx"
            [inputs]
            seed = 3
            samples = 4
            shapes = { images = "1x3x64x64" }
            [tolerances]
            atol = 1e-5
            [[tolerances.override]]
            pattern = "head.*"
            atol = 1e-3
            rtol = 1e-2
            [gate]
            min_coverage = 0.95
            max_growth = 3.0
            [reports]
            json = "out/report.json"
            [runtime]
            threads = 2
            "#,
        )
        .unwrap();
        assert_eq!(c.inputs.seed, Some(3));
        assert_eq!(c.tolerances.overrides[0].pattern, "head.*");
        assert_eq!(c.gate.min_coverage, Some(0.95));
        assert_eq!(c.runtime.threads, Some(2));
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let err = parse("[tolerances]\natoll = 1e-3\n").unwrap_err();
        assert!(err.contains("atoll"), "{err}");
        let err = parse("torch_modle = \"x\"\n").unwrap_err();
        assert!(err.contains("torch_modle"), "{err}");
    }

    #[test]
    fn every_report_format_has_a_key() {
        let c = parse("[reports]\nmodel_explorer = \"nodes.json\"\nmarkdown = \"s.md\"\n").unwrap();
        let keys: Vec<&str> = c.reports.paths.iter().map(|(f, _)| f.key).collect();
        assert_eq!(keys, ["model_explorer", "markdown"]);
        let err = parse("[reports]\njsn = \"x\"\n").unwrap_err();
        assert!(
            err.contains("unknown field `jsn`, expected one of `json`, `html`"),
            "{err}"
        );
    }

    #[test]
    fn paths_are_relative_to_the_file() {
        let mut c = parse(
            "torch_model = \"m.pt\"\n[reports]\njson = \"/abs/r.json\"\n\
             [quantized]\nfloat_onnx = \"float.onnx\"\n",
        )
        .unwrap();
        c.make_relative_to(Path::new("/ci/models"));
        assert_eq!(c.torch_model.unwrap(), PathBuf::from("/ci/models/m.pt"));
        assert_eq!(
            c.quantized.float_onnx,
            Some(PathBuf::from("/ci/models/float.onnx"))
        );
        assert_eq!(
            c.reports.path(&report::json::FORMAT),
            Some(&PathBuf::from("/abs/r.json"))
        );
    }
}
