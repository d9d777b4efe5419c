//! The one place a tolerance rule becomes its label: `default float32`, `override layer4.*`,
//! `outputs float16`, `outputs, relative to range`. The HTML and the JSON report
//! (`tolerances[].applies_to`, docs/json.md) both show it; the HTML decides which rules to
//! fold away from the `compare::tolerance_rule::ToleranceRule` value, never from this text.

use crate::compare::tolerance_rule::ToleranceRule;
use serde::{Serialize, Serializer};
use std::fmt;

impl fmt::Display for ToleranceRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToleranceRule::Default(dtype) => write!(f, "default {}", dtype.name()),
            ToleranceRule::Override(glob) => write!(f, "override {glob}"),
            ToleranceRule::Outputs(dtype) => write!(f, "outputs {}", dtype.name()),
            ToleranceRule::OutputsRelativeToRange => f.write_str("outputs, relative to range"),
        }
    }
}

/// The JSON report holds the label, as it always has.
impl Serialize for ToleranceRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;

    #[test]
    fn each_rule_reads_as_the_label_the_json_has_always_held() {
        let cases = [
            (ToleranceRule::Default(DType::F32), "default float32"),
            (
                ToleranceRule::Override("layer4.*".into()),
                "override layer4.*",
            ),
            (ToleranceRule::Outputs(DType::F16), "outputs float16"),
            (
                ToleranceRule::OutputsRelativeToRange,
                "outputs, relative to range",
            ),
        ];
        for (rule, label) in cases {
            assert_eq!(rule.to_string(), label);
            assert_eq!(serde_json::to_value(&rule).unwrap(), label);
        }
    }
}
