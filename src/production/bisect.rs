//! Which ONNX Runtime optimiser changes the outputs, found by bisection: first the lowest
//! level at which the production session differs, then, among the transformers that level
//! adds (`transformers`), the first whose enabling makes it differ.
//!
//! The search is over prefixes, not single passes, because passes build on each other:
//! GeluApproximation only rewrites the Gelu node GeluFusionL2 made, so disabling either
//! restores the outputs, yet only the approximation changes a value. Enabling the level's
//! passes in ONNX Runtime's order up to and including the one found differs, and up to the one
//! before it agrees: that pass is where the values change. The result is then verified by
//! disabling that pass alone at the user's level, the workaround the report suggests.
//! A rule-based transformer found that way holds many rewrites, most of them exact (an
//! Identity removed); the same prefix search over its rules (`rules_of`), which ONNX Runtime
//! disables by name too, names the rule, so the workaround keeps the others.
//!
//! `probe(level, disabled)` builds a session at `level` with `disabled` transformers turned
//! off (besides the user's own settings), runs it and says whether its outputs differ; the
//! search never touches ONNX Runtime itself, so it is tested with a scripted probe.

use super::settings::OptLevel;
use super::transformers::{added_at, rules_of};
use anyhow::Result;
use serde::Serialize;

/// What the bisection found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// One transformer, added at `level`, changes the outputs; `verified`: disabling it
    /// alone at the user's level makes the outputs agree again.
    Pass {
        name: String,
        level: OptLevel,
        verified: bool,
    },
    /// The outputs differ even with graph optimisation disabled: the session config entries
    /// or the thread count change them, no optimiser does.
    NotAnOptimiser,
    /// The outputs first differ at `level`, but still do with every transformer it adds
    /// disabled (one ONNX Runtime did not list, or several acting together).
    Unresolved { level: OptLevel },
}

/// Sessions the search built, with the finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Bisection {
    pub finding: Finding,
    pub sessions: usize,
}

/// Finds the responsible transformer for outputs that differ at `production` (known) and
/// agree in the unoptimised capture session (known).
pub fn bisect(
    production: OptLevel,
    mut probe: impl FnMut(OptLevel, &[&str]) -> Result<bool>,
) -> Result<Bisection> {
    let mut sessions = 0;
    let mut differs = |level: OptLevel, disabled: &[&str]| {
        sessions += 1;
        probe(level, disabled)
    };
    if differs(OptLevel::Disable, &[])? {
        return Ok(Bisection {
            finding: Finding::NotAnOptimiser,
            sessions,
        });
    }
    // The lowest level that differs; the production level itself is known to.
    let mut level = production;
    for candidate in [OptLevel::Basic, OptLevel::Extended, OptLevel::All] {
        if candidate >= production {
            break;
        }
        if differs(candidate, &[])? {
            level = candidate;
            break;
        }
    }
    let passes = added_at(level);
    if passes.is_empty() || differs(level, &passes)? {
        return Ok(Bisection {
            finding: Finding::Unresolved { level },
            sessions,
        });
    }
    let mut name = passes[first_that_differs(&passes, |off| differs(level, off))?];
    // A rule-based transformer's rules, searched the same way, when disabling all of them
    // (the transformer still running) restores the outputs; otherwise the transformer.
    let rules = rules_of(name);
    if !rules.is_empty() && !differs(level, rules)? {
        name = rules[first_that_differs(rules, |off| differs(level, off))?];
    }
    let verified = !differs(production, &[name])?;
    Ok(Bisection {
        finding: Finding::Pass {
            name: name.to_string(),
            level,
            verified,
        },
        sessions,
    })
}

/// The first of `passes` whose enabling, with every one before it, makes the outputs differ,
/// given that enabling all of them differs and none agrees; `differs_without(off)` runs with
/// the passes `off` disabled.
fn first_that_differs(
    passes: &[&str],
    mut differs_without: impl FnMut(&[&str]) -> Result<bool>,
) -> Result<usize> {
    let (mut lo, mut hi) = (0, passes.len() - 1);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if differs_without(&passes[mid + 1..])? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted runtime: the outputs differ when `culprit` runs, which needs `needs` to
    /// run first (a fusion that makes the node the culprit rewrites).
    fn runtime(
        culprit: &'static str,
        needs: Option<&'static str>,
    ) -> impl FnMut(OptLevel, &[&str]) -> Result<bool> {
        move |level, disabled| {
            let runs = |name: &str| {
                let at = crate::production::transformers::TRANSFORMERS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, l)| *l)
                    .expect("listed");
                at <= level && !disabled.contains(&name)
            };
            Ok(runs(culprit) && needs.is_none_or(runs))
        }
    }

    #[test]
    fn the_pass_that_changes_values_is_named_not_the_one_it_builds_on() {
        let b = bisect(
            OptLevel::All,
            runtime("GeluApproximation", Some("GeluFusionL2")),
        )
        .unwrap();
        assert_eq!(
            b.finding,
            Finding::Pass {
                name: "GeluApproximation".into(),
                level: OptLevel::Extended,
                verified: true
            }
        );
        // disable, basic, extended, all of extended's passes off, log2 steps, the check.
        assert!(b.sessions <= 11, "{}", b.sessions);
    }

    #[test]
    fn every_listed_pass_can_be_found() {
        for &(name, at) in crate::production::transformers::TRANSFORMERS {
            let b = bisect(OptLevel::All, runtime(name, None)).unwrap();
            match b.finding {
                Finding::Pass {
                    name: found,
                    level,
                    verified,
                } => {
                    assert_eq!((found.as_str(), verified), (name, true));
                    assert!(level <= at);
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_rule_of_a_rule_based_transformer_is_named_by_its_own_name() {
        // A zero Pad folded into a MaxPool (which pads with -inf): one rule of the basic
        // level's rule-based transformer; disabling it alone restores the outputs.
        let probe = |level: OptLevel, disabled: &[&str]| {
            Ok(level >= OptLevel::Basic
                && !disabled.contains(&"Level1_RuleBasedTransformer")
                && !disabled.contains(&"Pad_Fusion"))
        };
        let b = bisect(OptLevel::All, probe).unwrap();
        assert_eq!(
            b.finding,
            Finding::Pass {
                name: "Pad_Fusion".into(),
                level: OptLevel::Basic,
                verified: true
            }
        );
        // A change the rule names do not explain keeps the transformer's name.
        let b = bisect(OptLevel::All, runtime("Level1_RuleBasedTransformer", None)).unwrap();
        assert!(
            matches!(&b.finding, Finding::Pass { name, .. } if name == "Level1_RuleBasedTransformer")
        );
    }

    #[test]
    fn a_difference_without_optimisation_is_not_blamed_on_a_pass() {
        let b = bisect(OptLevel::All, |_, _| Ok(true)).unwrap();
        assert_eq!(b.finding, Finding::NotAnOptimiser);
        assert_eq!(b.sessions, 1);
    }

    #[test]
    fn a_difference_no_listed_pass_explains_is_unresolved() {
        let b = bisect(OptLevel::Extended, |level, _| {
            Ok(level >= OptLevel::Extended)
        })
        .unwrap();
        assert_eq!(
            b.finding,
            Finding::Unresolved {
                level: OptLevel::Extended
            }
        );
    }
}
