//! Which rule of the tolerance policy a listed tolerance is, as a value: the per-layer
//! default of a dtype, a user's override, or one of the outputs' own rules.
//!
//! The reports list every rule in force; the HTML shows the defaults only of the dtypes the
//! run compared, which it decides by matching `Default`'s dtype, not by reading a label. The
//! label a reader sees is written in one place, `report::tolerance_rules`.

use crate::capture::tensor::DType;

#[derive(Debug, Clone, PartialEq)]
pub enum ToleranceRule {
    /// The per-layer default of a dtype, with `--atol`/`--rtol` applied.
    Default(DType),
    /// A per-layer override, by its glob.
    Override(String),
    /// The outputs' own tolerance of a dtype.
    Outputs(DType),
    /// `--output-rel-to-range`: outputs judged by their error relative to their range.
    OutputsRelativeToRange,
}
