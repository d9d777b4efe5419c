//! Which tolerance each layer is judged by: named, dtype-aware defaults, the global
//! `--atol`/`--rtol` from the command line, and per-layer overrides by glob
//! (`GLOB=ATOL[,RTOL]`), resolved once into a `TolerancePolicy` that later stages query per
//! layer. One tolerance and what it allows one element are `bound`'s.

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::capture::tensor::DType;
use crate::compare::bound::DEFAULT_TOLERANCES;
pub use crate::compare::bound::{ElementBound, Tolerance};
use crate::compare::output_tolerance::OutputTolerance;
use crate::compare::tolerance_rule::ToleranceRule;

/// Checks one tolerance field: a negative, NaN or infinite value would make the element bound
/// meaningless (`inf * 0` is NaN, which fails every comparison).
fn check_field(name: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("{name} must be a finite number >= 0, got {value}"))
    }
}

/// A per-layer tolerance: layers whose module path or ONNX node name matches `pattern` use
/// `tol` instead of the default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Override {
    pub pattern: String,
    pub tol: Tolerance,
}

/// Parses `GLOB=ATOL[,RTOL]` as typed on the command line, e.g. `layer4.*=1e-3` or
/// `/head/*=1e-3,1e-2`. An omitted RTOL is 0: the override then states a purely absolute bound
/// (still scaled by the tensor's magnitude, see `stats::compare`).
///
/// The split is at the last `=`, so a glob may contain `=`; the value part has no `=` and its
/// `,` separates ATOL from RTOL, so a glob may also use `{a,b}` alternation.
pub fn parse_override(s: &str) -> Result<Override, String> {
    let (pattern, values) = s.rsplit_once('=').ok_or_else(|| {
        format!(
            "tolerance override `{s}` has no `=`; expected GLOB=ATOL[,RTOL], e.g. layer4.*=1e-3"
        )
    })?;
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return Err(format!(
            "tolerance override `{s}` has an empty glob; expected GLOB=ATOL[,RTOL]"
        ));
    }
    let mut fields = values.split(',').map(str::trim);
    let atol_text = fields.next().unwrap_or("");
    let rtol_text = fields.next();
    if fields.next().is_some() {
        return Err(format!(
            "tolerance override `{s}` has more than two numbers after `=`; expected GLOB=ATOL[,RTOL]"
        ));
    }
    let number = |name: &str, text: &str| -> Result<f64, String> {
        if text.is_empty() {
            return Err(format!("tolerance override `{s}` is missing {name}"));
        }
        let value: f64 = text
            .parse()
            .map_err(|_| format!("tolerance override `{s}`: {name} `{text}` is not a number"))?;
        check_field(name, value).map_err(|e| format!("tolerance override `{s}`: {e}"))
    };
    let atol = number("ATOL", atol_text)?;
    let rtol = match rtol_text {
        Some(text) => number("RTOL", text)?,
        None => 0.0,
    };
    Ok(Override {
        pattern: pattern.to_string(),
        tol: Tolerance { atol, rtol },
    })
}

/// The resolved tolerance configuration of one run: built once from the command line, then
/// asked per layer.
#[derive(Debug, Clone)]
pub struct TolerancePolicy {
    atol: Option<f64>,
    rtol: Option<f64>,
    overrides: Vec<Override>,
    /// One compiled matcher per override, same order.
    matchers: Vec<GlobMatcher>,
    /// The graph outputs' own rule (`--output-atol`, `--output-rtol`, `--output-rel-to-range`).
    pub outputs: OutputTolerance,
    /// `--strict-small`: a layer whose values all lie below the absolute tolerance is failed
    /// when its error is large against its range, instead of only warned about.
    pub strict_small: bool,
    /// Set for a quantised ONNX model: layers and outputs pass by SQNR (`quantized::rule`).
    pub quantized: Option<crate::compare::sqnr_rule::SqnrRule>,
}

impl Default for TolerancePolicy {
    /// Dtype defaults only, no overrides.
    fn default() -> Self {
        TolerancePolicy {
            atol: None,
            rtol: None,
            overrides: Vec::new(),
            matchers: Vec::new(),
            outputs: OutputTolerance::default(),
            strict_small: false,
            quantized: None,
        }
    }
}

impl TolerancePolicy {
    /// Validates the CLI values and compiles the override globs.
    ///
    /// Globs match whole names; `*` also matches `.` and `/`, so `layer4.*` covers every module
    /// below `layer4` and `/head/*` every ONNX node under the `/head` scope.
    pub fn new(
        atol: Option<f64>,
        rtol: Option<f64>,
        overrides: Vec<Override>,
    ) -> Result<Self, String> {
        let atol = atol.map(|v| check_field("--atol", v)).transpose()?;
        let rtol = rtol.map(|v| check_field("--rtol", v)).transpose()?;
        let mut matchers = Vec::with_capacity(overrides.len());
        for o in &overrides {
            // Overrides built in code skip `parse_override`, so check their numbers here too.
            check_field("ATOL", o.tol.atol)
                .and_then(|_| check_field("RTOL", o.tol.rtol))
                .map_err(|e| format!("tolerance override `{}`: {e}", o.pattern))?;
            let glob = GlobBuilder::new(&o.pattern)
                .literal_separator(false)
                // Same meaning of `\` on every platform: an escape, never a path separator.
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("tolerance override glob `{}` is invalid: {e}", o.pattern))?;
            matchers.push(glob.compile_matcher());
        }
        Ok(TolerancePolicy {
            atol,
            rtol,
            overrides,
            matchers,
            outputs: OutputTolerance::default(),
            strict_small: false,
            quantized: None,
        })
    }

    /// The same policy with the outputs judged by `outputs` (validated) and, with
    /// `strict_small`, tiny-valued layers gated.
    pub fn with_output_rule(
        mut self,
        outputs: OutputTolerance,
        strict_small: bool,
    ) -> Result<Self, String> {
        self.outputs = outputs.validated()?;
        self.strict_small = strict_small;
        Ok(self)
    }

    /// The tolerance a graph output of `dtype` is held to.
    pub fn for_output(&self, dtype: DType) -> Tolerance {
        self.outputs.for_dtype(dtype)
    }

    /// The tolerance for one layer: the first override (in the order given) whose glob matches
    /// the module path or the ONNX node name wins; otherwise the dtype default, with each of
    /// `--atol`/`--rtol` that was given replacing its field.
    pub fn for_layer(&self, module_path: &str, onnx_node: &str, dtype: DType) -> Tolerance {
        match self.matching_override(module_path, onnx_node) {
            Some(o) => o.tol,
            None => self.base_for(dtype),
        }
    }

    /// Every rule in force, for reports: the effective default of each dtype (CLI values
    /// applied), then the overrides in the order they are tried.
    pub fn describe(&self) -> Vec<(ToleranceRule, Tolerance)> {
        DEFAULT_TOLERANCES
            .iter()
            .map(|(dtype, _)| (ToleranceRule::Default(*dtype), self.base_for(*dtype)))
            .chain(
                self.overrides
                    .iter()
                    .map(|o| (ToleranceRule::Override(o.pattern.clone()), o.tol)),
            )
            .chain(self.outputs.describe())
            .collect()
    }

    fn matching_override(&self, module_path: &str, onnx_node: &str) -> Option<&Override> {
        self.matchers
            .iter()
            .position(|m| m.is_match(module_path) || m.is_match(onnx_node))
            .map(|i| &self.overrides[i])
    }

    fn base_for(&self, dtype: DType) -> Tolerance {
        let default = Tolerance::default_for(dtype);
        Tolerance {
            atol: self.atol.unwrap_or(default.atol),
            rtol: self.rtol.unwrap_or(default.rtol),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_DTYPES: [DType; 10] = DType::ALL;

    fn tol(atol: f64, rtol: f64) -> Tolerance {
        Tolerance { atol, rtol }
    }

    #[test]
    fn defaults_per_dtype() {
        assert_eq!(Tolerance::default_for(DType::F32), tol(1e-5, 1e-4));
        assert_eq!(Tolerance::default_for(DType::F64), tol(1e-5, 1e-4));
        assert_eq!(Tolerance::default_for(DType::F16), tol(1e-2, 1e-2));
        assert_eq!(Tolerance::default_for(DType::Bf16), tol(5e-2, 5e-2));
        for d in DType::ALL.into_iter().filter(|d| !d.is_float()) {
            assert_eq!(Tolerance::default_for(d), Tolerance::EXACT, "{d}");
        }
    }

    #[test]
    fn default_table_lists_every_dtype_once() {
        for d in ALL_DTYPES {
            let n = DEFAULT_TOLERANCES.iter().filter(|(t, _)| *t == d).count();
            assert_eq!(n, 1, "{d} appears {n} times in DEFAULT_TOLERANCES");
        }
    }

    #[test]
    fn policy_without_options_uses_dtype_defaults() {
        let p = TolerancePolicy::new(None, None, vec![]).unwrap();
        for d in ALL_DTYPES {
            assert_eq!(
                p.for_layer("layer1.conv", "/layer1/conv/Conv", d),
                Tolerance::default_for(d)
            );
        }
        let d = TolerancePolicy::default();
        assert_eq!(
            d.for_layer("x", "y", DType::F16),
            Tolerance::default_for(DType::F16)
        );
    }

    #[test]
    fn cli_atol_and_rtol_replace_their_field_independently() {
        let p = TolerancePolicy::new(Some(1e-6), None, vec![]).unwrap();
        assert_eq!(p.for_layer("a", "b", DType::F32), tol(1e-6, 1e-4));
        assert_eq!(p.for_layer("a", "b", DType::F16), tol(1e-6, 1e-2));

        let p = TolerancePolicy::new(None, Some(0.5), vec![]).unwrap();
        assert_eq!(p.for_layer("a", "b", DType::F32), tol(1e-5, 0.5));
        // The CLI values apply to integer tensors too: the user asked for them explicitly.
        assert_eq!(p.for_layer("a", "b", DType::I64), tol(0.0, 0.5));

        let p = TolerancePolicy::new(Some(1.0), Some(2.0), vec![]).unwrap();
        assert_eq!(p.for_layer("a", "b", DType::Bf16), tol(1.0, 2.0));
    }

    #[test]
    fn bad_cli_values_are_rejected() {
        for (a, r) in [
            (Some(-1.0), None),
            (None, Some(f64::NAN)),
            (Some(f64::INFINITY), None),
        ] {
            let err = TolerancePolicy::new(a, r, vec![]).unwrap_err();
            assert!(err.contains("finite number >= 0"), "{err}");
        }
    }

    #[test]
    fn parse_override_forms() {
        assert_eq!(
            parse_override("layer4.*=1e-3").unwrap(),
            Override {
                pattern: "layer4.*".into(),
                tol: tol(1e-3, 0.0)
            }
        );
        assert_eq!(
            parse_override("/head/*=1e-3,1e-2").unwrap(),
            Override {
                pattern: "/head/*".into(),
                tol: tol(1e-3, 1e-2)
            }
        );
        // Whitespace is tolerated, and alternation commas stay in the glob.
        assert_eq!(
            parse_override(" {layer3,layer4}.* = 0.1 , 0.2 ").unwrap(),
            Override {
                pattern: "{layer3,layer4}.*".into(),
                tol: tol(0.1, 0.2)
            }
        );
        // Split at the last `=`.
        assert_eq!(parse_override("a=b=1").unwrap().pattern, "a=b");
    }

    #[test]
    fn parse_override_rejects_bad_input_with_clear_messages() {
        let cases = [
            ("layer4.*", "has no `=`"),
            ("=1e-3", "empty glob"),
            ("layer4.*=", "missing ATOL"),
            ("layer4.*=,1e-2", "missing ATOL"),
            ("layer4.*=1e-3,", "missing RTOL"),
            ("layer4.*=abc", "ATOL `abc` is not a number"),
            ("layer4.*=1e-3,x", "RTOL `x` is not a number"),
            ("layer4.*=1,2,3", "more than two numbers"),
            ("layer4.*=-1", "ATOL must be a finite number >= 0"),
            ("layer4.*=1,nan", "RTOL must be a finite number >= 0"),
            ("layer4.*=inf", "ATOL must be a finite number >= 0"),
        ];
        for (input, expected) in cases {
            let err = parse_override(input).unwrap_err();
            assert!(err.contains(expected), "`{input}` gave `{err}`");
            assert!(err.contains(input.trim()), "`{err}` should quote the input");
        }
    }

    #[test]
    fn override_matches_module_path_with_star_crossing_dots() {
        let p = TolerancePolicy::new(None, None, vec![parse_override("layer4.*=1e-3").unwrap()])
            .unwrap();
        assert_eq!(
            p.for_layer("layer4.0.conv1", "", DType::F32),
            tol(1e-3, 0.0)
        );
        assert_eq!(
            p.for_layer("layer4.1", "node_Conv_3", DType::F32),
            tol(1e-3, 0.0)
        );
        // Whole-name match: a prefix elsewhere does not count.
        assert_eq!(
            p.for_layer("backbone.layer4.0", "", DType::F32),
            Tolerance::default_for(DType::F32)
        );
        assert_eq!(
            p.for_layer("layer3.0", "", DType::F32),
            Tolerance::default_for(DType::F32)
        );
    }

    #[test]
    fn override_matches_onnx_node_name_with_star_crossing_slashes() {
        let p = TolerancePolicy::new(
            None,
            None,
            vec![parse_override("/head/*=1e-3,1e-2").unwrap()],
        )
        .unwrap();
        // Module path does not match, node name does.
        assert_eq!(
            p.for_layer("head.fc", "/head/fc/Gemm", DType::F16),
            tol(1e-3, 1e-2)
        );
        assert_eq!(
            p.for_layer("", "/head/block/0/Relu", DType::F32),
            tol(1e-3, 1e-2)
        );
        assert_eq!(
            p.for_layer("head.fc", "/neck/Conv", DType::F16),
            Tolerance::default_for(DType::F16)
        );
    }

    #[test]
    fn first_matching_override_wins_over_cli_values() {
        let overrides = vec![
            parse_override("layer4.0.*=1,1").unwrap(),
            parse_override("layer4.*=2,2").unwrap(),
            parse_override("*Conv=3,3").unwrap(),
        ];
        let p = TolerancePolicy::new(Some(9.0), Some(9.0), overrides).unwrap();
        assert_eq!(
            p.for_layer("layer4.0.conv1", "/x/Conv", DType::F32),
            tol(1.0, 1.0)
        );
        assert_eq!(
            p.for_layer("layer4.1.conv1", "/x/Conv", DType::F32),
            tol(2.0, 2.0)
        );
        assert_eq!(
            p.for_layer("layer1.conv1", "/x/Conv", DType::F32),
            tol(3.0, 3.0)
        );
        assert_eq!(
            p.for_layer("layer1.relu", "/x/Relu", DType::F32),
            tol(9.0, 9.0)
        );
        assert_eq!(p.for_layer("layer4.1.conv1", "", DType::F32), tol(2.0, 2.0));
        assert_eq!(p.for_layer("stem", "", DType::I32), tol(9.0, 9.0));
    }

    #[test]
    fn bad_glob_is_an_error_naming_it() {
        let err = TolerancePolicy::new(None, None, vec![parse_override("layer[4=1e-3").unwrap()])
            .unwrap_err();
        assert!(err.contains("`layer[4`"), "{err}");
        let err = TolerancePolicy::new(None, None, vec![parse_override("{a,b=1e-3").unwrap()])
            .unwrap_err();
        assert!(err.contains("`{a,b`"), "{err}");
    }

    #[test]
    fn overrides_built_in_code_are_validated() {
        let o = Override {
            pattern: "x".into(),
            tol: tol(-1.0, 0.0),
        };
        let err = TolerancePolicy::new(None, None, vec![o]).unwrap_err();
        assert!(err.contains("`x`") && err.contains("ATOL"), "{err}");
    }

    #[test]
    fn describe_lists_defaults_then_overrides() {
        let p = TolerancePolicy::new(
            Some(1e-5),
            None,
            vec![
                parse_override("layer4.*=1e-3").unwrap(),
                parse_override("/head/*=1e-3,1e-2").unwrap(),
            ],
        )
        .unwrap();
        let d = p.describe();
        let outputs = p.outputs.describe().len();
        assert_eq!(d.len(), DEFAULT_TOLERANCES.len() + 2 + outputs);
        // The outputs' own rules come last.
        assert!(d[d.len() - outputs..]
            .iter()
            .all(|(r, _)| matches!(r, ToleranceRule::Outputs(_))));
        let d = &d[..d.len() - outputs];
        assert!(d.contains(&(ToleranceRule::Default(DType::F32), tol(1e-5, 1e-4))));
        assert!(d.contains(&(ToleranceRule::Default(DType::F16), tol(1e-5, 1e-2))));
        assert!(d.contains(&(ToleranceRule::Default(DType::Bool), tol(1e-5, 0.0))));
        let over = |glob: &str| ToleranceRule::Override(glob.to_string());
        assert_eq!(d[d.len() - 2], (over("layer4.*"), tol(1e-3, 0.0)));
        assert_eq!(d[d.len() - 1], (over("/head/*"), tol(1e-3, 1e-2)));
    }
}
