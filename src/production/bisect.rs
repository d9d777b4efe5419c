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
//!
//! `probe(level, disabled)` builds a session at `level` with `disabled` transformers turned
//! off (besides the user's own settings), runs it and says whether its outputs differ; the
//! search never touches ONNX Runtime itself, so it is tested with a scripted probe.

use super::settings::OptLevel;
use super::transformers::added_at;
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
    // Enabling passes[..=hi] differs, enabling none agrees.
    let (mut lo, mut hi) = (0, passes.len() - 1);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if differs(level, &passes[mid + 1..])? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let name = passes[lo];
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
