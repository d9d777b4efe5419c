//! What the reference side of a check is: a TorchScript module (`torch.jit.save`) or a
//! torch.export program (`.pt2`, `torch.export.save`). Every report names the reference by
//! what it is ("12/12 ExportedProgram layers"), so a reader of a `.pt2` check is never told
//! about a TorchScript module they do not have. The JSON keys that say `torch` stay as they
//! are (a public contract); `reference` says which kind it was.

use crate::capture::Side;
use serde::Serialize;

/// The two kinds of reference align-check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReferenceFormat {
    #[default]
    Torchscript,
    Pt2,
}

/// The reference as reports name it: JSON `reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Reference {
    pub format: ReferenceFormat,
    /// `TorchScript` or `ExportedProgram`: the word every report uses for the reference.
    pub name: &'static str,
}

impl Reference {
    pub fn new(format: ReferenceFormat) -> Reference {
        let name = match format {
            ReferenceFormat::Torchscript => "TorchScript",
            ReferenceFormat::Pt2 => "ExportedProgram",
        };
        Reference { format, name }
    }

    /// The reference's name, for reports built before one was recorded (`TorchScript`).
    pub fn name(&self) -> &'static str {
        if self.name.is_empty() {
            "TorchScript"
        } else {
            self.name
        }
    }

    /// How reports name one side of the check: the reference by its name, the other `ONNX`.
    pub fn side_label(&self, side: Side) -> &'static str {
        match side {
            Side::Torch => self.name(),
            Side::Onnx => Side::Onnx.label(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_has_its_name_and_json_spelling() {
        let pt2 = Reference::new(ReferenceFormat::Pt2);
        assert_eq!(pt2.name(), "ExportedProgram");
        assert_eq!(
            serde_json::to_value(pt2).unwrap(),
            serde_json::json!({"format": "pt2", "name": "ExportedProgram"})
        );
        assert_eq!(Reference::default().name(), "TorchScript");
        assert_eq!(
            Reference::new(ReferenceFormat::Torchscript).name(),
            "TorchScript"
        );
    }
}
