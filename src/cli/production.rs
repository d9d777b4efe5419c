//! The production-session options: the raw flags (`ProductionArgs`), the configuration
//! file's `[production]` section, and the resolved `ProductionSettings` (with the capture's
//! own optimisation level), flag first, then the file, then the default.
//!
//! The default production session is ONNX Runtime's own default, `all`, with the check's
//! thread count and no config entries: what a plain `InferenceSession(path)` ships. The
//! capture stays at `disable` unless `--ort-optimization` says otherwise, because every
//! intermediate value must survive to be compared.

use crate::production::settings::{parse_config_entry, OptLevel, ProductionSettings};
use anyhow::{anyhow, Result};
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Args)]
pub struct ProductionArgs {
    /// ONNX Runtime graph optimisation level of the per-layer capture: disable (every value
    /// survives to be compared), basic, extended or all (fused values are then not
    /// compared) [default: disable]
    #[arg(long, value_name = "LEVEL", value_parser = parse_level, help_heading = "Production")]
    pub ort_optimization: Option<OptLevel>,

    /// After the per-layer check, run the model once more as it ships, at ONNX Runtime
    /// optimisation level LEVEL (disable, basic, extended, all), and compare its outputs with
    /// PyTorch's and the unoptimised run's; `off` skips it. When only this session differs,
    /// the optimiser responsible is found by bisection [default: all, ONNX Runtime's own]
    #[arg(long, value_name = "LEVEL|off", help_heading = "Production")]
    pub production: Option<String>,

    /// Intra-op threads of the production session [default: --threads]
    #[arg(long, value_name = "N", help_heading = "Production")]
    pub production_threads: Option<usize>,

    /// ONNX Runtime session config entry of the production session, as the application sets
    /// it (optimization.enable_gelu_approximation=1). Repeatable
    #[arg(long = "ort-config", value_name = "KEY=VALUE", value_parser = parse_config_entry, help_heading = "Production")]
    pub ort_config: Vec<(String, String)>,

    /// Report a production-only difference without failing the check (it fails by default:
    /// it is what the application computes)
    #[arg(long, help_heading = "Production")]
    pub no_production_gate: bool,
}

fn parse_level(text: &str) -> Result<OptLevel, String> {
    OptLevel::parse(text)
}

/// `[production]` of align-check.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProductionSection {
    /// `--production`: a level or `"off"`.
    pub level: Option<String>,
    /// `--production-threads`.
    pub threads: Option<usize>,
    /// `--ort-config`, as a table of key = "value".
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// `false` is `--no-production-gate`.
    pub gate: Option<bool>,
    /// `--ort-optimization` (the capture's level).
    pub capture_level: Option<String>,
}

/// The capture's optimisation level.
pub fn capture_level(args: &ProductionArgs, file: &ProductionSection) -> Result<OptLevel> {
    match (args.ort_optimization, &file.capture_level) {
        (Some(level), _) => Ok(level),
        (None, Some(text)) => {
            OptLevel::parse(text).map_err(|e| anyhow!("config [production] capture_level: {e}"))
        }
        (None, None) => Ok(OptLevel::Disable),
    }
}

/// The production session to compare, `None` when it is switched off.
pub fn settings(
    args: &ProductionArgs,
    file: &ProductionSection,
    check_threads: usize,
) -> Result<Option<ProductionSettings>> {
    let level = match (&args.production, &file.level) {
        (Some(text), _) => parse_production(text).map_err(|e| anyhow!("--production: {e}"))?,
        (None, Some(text)) => {
            parse_production(text).map_err(|e| anyhow!("config [production] level: {e}"))?
        }
        (None, None) => Some(OptLevel::All),
    };
    let Some(level) = level else {
        return Ok(None);
    };
    // Command-line entries replace the file's entry of the same key.
    let mut config = args.ort_config.clone();
    for (key, value) in &file.config {
        if !config.iter().any(|(k, _)| k == key) {
            config.push((key.clone(), value.clone()));
        }
    }
    Ok(Some(ProductionSettings {
        level,
        threads: args
            .production_threads
            .or(file.threads)
            .unwrap_or(check_threads),
        config,
        gate: !args.no_production_gate && file.gate.unwrap_or(true),
    }))
}

/// A level, or `off` (`None`).
fn parse_production(text: &str) -> Result<Option<OptLevel>, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    OptLevel::parse(text).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ProductionArgs {
        ProductionArgs {
            ort_optimization: None,
            production: None,
            production_threads: None,
            ort_config: Vec::new(),
            no_production_gate: false,
        }
    }

    #[test]
    fn the_default_is_onnx_runtimes_own_session_gated() {
        let s = settings(&args(), &ProductionSection::default(), 4)
            .unwrap()
            .unwrap();
        assert_eq!((s.level, s.threads, s.gate), (OptLevel::All, 4, true));
        assert!(s.config.is_empty());
        assert_eq!(
            capture_level(&args(), &ProductionSection::default()).unwrap(),
            OptLevel::Disable
        );
    }

    #[test]
    fn flags_win_over_the_file_and_off_switches_it_off() {
        let file: ProductionSection = toml::from_str(
            "level = \"basic\"\nthreads = 2\ngate = false\ncapture_level = \"extended\"\n[config]\na = \"1\"\nb = \"2\"\n",
        )
        .unwrap();
        let mut a = args();
        a.ort_config = vec![("a".into(), "9".into())];
        let s = settings(&a, &file, 4).unwrap().unwrap();
        assert_eq!((s.level, s.threads, s.gate), (OptLevel::Basic, 2, false));
        assert_eq!(
            s.config,
            [("a".into(), "9".into()), ("b".into(), "2".into())]
        );
        assert_eq!(capture_level(&a, &file).unwrap(), OptLevel::Extended);
        a.production = Some("off".into());
        assert!(settings(&a, &file, 4).unwrap().is_none());
        a.production = Some("fast".into());
        let e = settings(&a, &file, 4).unwrap_err().to_string();
        assert!(e.starts_with("--production: unknown"), "{e}");
    }
}
