//! One tolerance as a value: an absolute and a relative part, the dtype defaults, and what
//! it allows each element of a tensor (`Tolerance::bound_for`, `ElementBound`), the one
//! definition the statistics and the charts both use. Which tolerance a layer gets is
//! `tolerance::TolerancePolicy`'s business, and the graph outputs' own rule
//! `output_tolerance`'s; both build on this file, which builds on neither.

use serde::{Deserialize, Serialize};

use crate::capture::tensor::DType;

/// An absolute and a relative tolerance. An element passes when
/// `|t - r| <= atol * max(1, max|ref|) + rtol * |r|` (see `bound_for`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

/// Default tolerance per element type, the one place these numbers live.
///
/// Calibrated on the fixture zoo (clean exports stay well inside them, planted faults land well
/// outside); the README holds the same table and must be updated with it. They will be
/// recalibrated as the zoo grows, so nothing else may hard-code them. Integer and bool tensors
/// are compared exactly: a runtime that changes an index or a mask is wrong, not imprecise.
pub(crate) const DEFAULT_TOLERANCES: [(DType, Tolerance); 10] = [
    (
        DType::F32,
        Tolerance {
            atol: 1e-5,
            rtol: 1e-4,
        },
    ),
    (
        DType::F64,
        Tolerance {
            atol: 1e-5,
            rtol: 1e-4,
        },
    ),
    (
        DType::F16,
        Tolerance {
            atol: 1e-2,
            rtol: 1e-2,
        },
    ),
    (
        DType::Bf16,
        Tolerance {
            atol: 5e-2,
            rtol: 5e-2,
        },
    ),
    (DType::I8, Tolerance::EXACT),
    (DType::I16, Tolerance::EXACT),
    (DType::I32, Tolerance::EXACT),
    (DType::I64, Tolerance::EXACT),
    (DType::U8, Tolerance::EXACT),
    (DType::Bool, Tolerance::EXACT),
];

impl Tolerance {
    /// No difference allowed at all.
    pub const EXACT: Tolerance = Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };

    /// The default tolerance for values of `dtype` (see `DEFAULT_TOLERANCES`).
    pub fn default_for(dtype: DType) -> Tolerance {
        DEFAULT_TOLERANCES
            .iter()
            .find(|(d, _)| *d == dtype)
            .map(|(_, tol)| *tol)
            // Unreachable while the table lists every DType (a test checks it); exact is the
            // safe answer for a type nobody calibrated.
            .unwrap_or(Tolerance::EXACT)
    }

    /// What this tolerance allows the elements of a tensor whose reference has the largest
    /// finite magnitude `ref_max_abs`: `|t - r| <= atol * max(1, ref_max_abs) + rtol * |r|`.
    ///
    /// The absolute part grows with the tensor's magnitude once that exceeds 1, so deep
    /// layers with large activations (where a float's spacing is larger) are not held to a
    /// tighter standard than shallow ones, while near-zero elements of a large-valued tensor
    /// are not failed for rounding noise that is small against the tensor's range.
    pub fn bound_for(&self, ref_max_abs: f64) -> ElementBound {
        ElementBound {
            atol_scaled: self.atol * ref_max_abs.max(1.0),
            rtol: self.rtol,
        }
    }
}

/// A tolerance applied to one tensor (`Tolerance::bound_for`): the largest `|t - r|` each
/// element may have. Computed once per tensor; `at` is the per-element part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElementBound {
    /// `atol * max(1, max|ref|)`: the bound of an element whose reference is 0.
    pub atol_scaled: f64,
    pub rtol: f64,
}

impl ElementBound {
    /// The largest `|t - r|` allowed where the reference's magnitude is `ref_abs` (`|r|`).
    #[inline(always)]
    pub fn at(&self, ref_abs: f64) -> f64 {
        self.atol_scaled + self.rtol * ref_abs
    }

    /// Whether `t` is within the bound of reference value `r`.
    #[inline(always)]
    pub fn accepts(&self, r: f64, t: f64) -> bool {
        (t - r).abs() <= self.at(r.abs())
    }
}
