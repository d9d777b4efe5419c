//! The ONNX Runtime session settings a user ships, as align-check is told them: the graph
//! optimisation level (`--production LEVEL`, `--ort-optimization` for the capture itself),
//! the intra-op threads and the session config entries (`--ort-config KEY=VALUE`), and
//! whether a production-only difference fails the check.
//!
//! Kept free of ort types so that the check, the bisection and the reports are tested
//! without a runtime; `onnx::runtime` turns a level into ONNX Runtime's own.

use serde::Serialize;
use std::fmt;

/// ONNX Runtime's graph optimisation levels, lowest first (`GraphOptimizationLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptLevel {
    Disable,
    Basic,
    Extended,
    All,
}

impl OptLevel {
    pub const ALL: [OptLevel; 4] = [
        OptLevel::Disable,
        OptLevel::Basic,
        OptLevel::Extended,
        OptLevel::All,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OptLevel::Disable => "disable",
            OptLevel::Basic => "basic",
            OptLevel::Extended => "extended",
            OptLevel::All => "all",
        }
    }

    /// The name of the level in ONNX Runtime's Python API, for the workaround a report gives.
    pub fn python_name(self) -> &'static str {
        match self {
            OptLevel::Disable => "ORT_DISABLE_ALL",
            OptLevel::Basic => "ORT_ENABLE_BASIC",
            OptLevel::Extended => "ORT_ENABLE_EXTENDED",
            OptLevel::All => "ORT_ENABLE_ALL",
        }
    }

    /// `disable|basic|extended|all`, as the flags and the configuration file spell them.
    pub fn parse(text: &str) -> Result<OptLevel, String> {
        OptLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == text.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                format!("unknown ONNX Runtime optimisation level `{text}`: use disable, basic, extended or all")
            })
    }
}

impl fmt::Display for OptLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ONNX Runtime's session config key that names optimisers to skip (`;`-separated).
pub const DISABLE_OPTIMIZERS_KEY: &str = "optimization.disable_specified_optimizers";

/// The production session: how the user's application builds its ONNX Runtime session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProductionSettings {
    pub level: OptLevel,
    /// Intra-op threads (the check's `--threads` unless `--production-threads` says).
    pub threads: usize,
    /// Session config entries, in the order given.
    pub config: Vec<(String, String)>,
    /// Whether a difference that only the production session shows fails the check.
    pub gate: bool,
}

impl ProductionSettings {
    /// The config entries with `extra` optimisers added to those the user already disables:
    /// what a bisection session and the suggested workaround run with.
    pub fn config_disabling(&self, extra: &[&str]) -> Vec<(String, String)> {
        let mut config = self.config.clone();
        if extra.is_empty() {
            return config;
        }
        let added = extra.join(";");
        match config.iter_mut().find(|(k, _)| k == DISABLE_OPTIMIZERS_KEY) {
            Some((_, v)) if !v.trim().is_empty() => *v = format!("{v};{added}"),
            Some((_, v)) => *v = added,
            None => config.push((DISABLE_OPTIMIZERS_KEY.to_string(), added)),
        }
        config
    }
}

/// `KEY=VALUE` of `--ort-config`: the key must be non-empty; the value may be.
pub fn parse_config_entry(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!(
            "`{text}` is not KEY=VALUE (an ONNX Runtime session config entry, such as optimization.enable_gelu_approximation=1)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_in_any_case_and_refuse_others() {
        assert_eq!(OptLevel::parse("ALL"), Ok(OptLevel::All));
        assert_eq!(OptLevel::parse("disable"), Ok(OptLevel::Disable));
        let e = OptLevel::parse("max").unwrap_err();
        assert!(e.contains("`max`") && e.contains("extended"), "{e}");
        assert!(OptLevel::Basic < OptLevel::Extended);
    }

    #[test]
    fn disabled_optimizers_join_those_the_user_gave() {
        let mut s = ProductionSettings {
            level: OptLevel::All,
            threads: 1,
            config: vec![("a".into(), "1".into())],
            gate: true,
        };
        assert_eq!(
            s.config_disabling(&["X", "Y"]),
            [
                ("a".to_string(), "1".to_string()),
                (DISABLE_OPTIMIZERS_KEY.to_string(), "X;Y".to_string())
            ]
        );
        s.config = vec![(DISABLE_OPTIMIZERS_KEY.into(), "Z".into())];
        assert_eq!(s.config_disabling(&["X"])[0].1, "Z;X");
        assert_eq!(s.config_disabling(&[]), s.config);
    }

    #[test]
    fn config_entries_need_a_key() {
        assert_eq!(
            parse_config_entry("k=v=w"),
            Ok(("k".to_string(), "v=w".to_string()))
        );
        assert!(parse_config_entry("=1").is_err());
        assert!(parse_config_entry("novalue").is_err());
    }
}
