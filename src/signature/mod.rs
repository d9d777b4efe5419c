//! How the two models' signatures meet, when they were exported by different tools: which
//! ONNX input each TorchScript argument takes (`mapping`), what non-tensor arguments are
//! given (`types`), which graph inputs and outputs then correspond (`boundary`), and what
//! the reports say about it (this file).
//!
//! Every report carries the mapping line (`x ← input, rate ← rate`) and one note per
//! asymmetry: an ONNX input zero-filled because no argument takes it, inputs fed
//! differently to each side, outputs one side lacks, a module that writes its own state.

pub mod accounting;
pub mod boundary;
pub mod mapping;
pub mod types;

use boundary::OneSidedOutput;
use mapping::{LinkedBy, Mapping};
use serde::Serialize;
use types::ArgValue;

/// One line of the input mapping: a TorchScript slot and the ONNX input it takes; one side
/// is `None` for an input that only one model has.
#[derive(Debug, Clone, Serialize)]
pub struct MappingEntry {
    pub torch: Option<String>,
    pub onnx: Option<String>,
    /// `map`, `name`, `position`, `onnx_only`, `torch_only`.
    pub by: String,
    /// What a non-tensor TorchScript argument was given (`2`, `None`, `its default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// What the reports say about the two signatures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SignatureReport {
    pub mapping: Vec<MappingEntry>,
    /// Graph outputs only one side has: listed, not compared.
    pub outputs_not_compared: Vec<OneSidedOutput>,
    /// Module attributes TorchScript's forward writes (its internal state).
    pub state_writes: Vec<String>,
    /// One sentence per asymmetry, for every report.
    pub notes: Vec<String>,
}

impl SignatureReport {
    /// The report for the mapping, the first sample's TorchScript arguments and the notes
    /// on its inputs (`inputs::signature_notes`), what the boundary left one-sided, and the
    /// module's state writes.
    pub fn new(
        mapping: &Mapping,
        arg_names: &[String],
        torch_args: &[ArgValue],
        input_notes: Vec<String>,
        outputs_not_compared: Vec<OneSidedOutput>,
        state_writes: Vec<String>,
    ) -> SignatureReport {
        let value_of = |slot: &str| {
            let k = arg_names.iter().position(|n| n == slot)?;
            match torch_args.get(k)? {
                ArgValue::Tensor(_) | ArgValue::Tuple(_) | ArgValue::List(_) => None,
                other => Some(other.describe()),
            }
        };
        let mut entries = Vec::new();
        for l in &mapping.links {
            entries.push(MappingEntry {
                torch: Some(l.slot.clone()),
                onnx: Some(l.onnx.clone()),
                by: match l.by {
                    LinkedBy::Map => "map",
                    LinkedBy::Name => "name",
                    LinkedBy::Position => "position",
                }
                .to_string(),
                value: value_of(&l.slot),
            });
        }
        for o in &mapping.onnx_only {
            entries.push(MappingEntry {
                torch: None,
                onnx: Some(o.clone()),
                by: "onnx_only".to_string(),
                value: None,
            });
        }
        for name in arg_names {
            let linked = mapping
                .links
                .iter()
                .any(|l| l.slot == *name || l.slot.starts_with(&format!("{name}.")));
            if !linked {
                entries.push(MappingEntry {
                    torch: Some(name.clone()),
                    onnx: None,
                    by: "torch_only".to_string(),
                    value: value_of(name),
                });
            }
        }
        let mut notes = Vec::new();
        notes.extend(input_notes);
        for o in &outputs_not_compared {
            notes.push(format!(
                "output '{}' exists only in the {} model ({}): not compared",
                o.name,
                o.side.label(),
                crate::capture::tensor::format_shape(&o.shape)
            ));
        }
        if !state_writes.is_empty() {
            notes.push(format!(
                "the PyTorch model's forward updates its own state ({}): each run starts from the state the module was loaded with",
                state_writes.join(", ")
            ));
        }
        SignatureReport {
            mapping: entries,
            outputs_not_compared,
            state_writes,
            notes,
        }
    }

    /// What every report says about the signatures, one line each: the mapping (when it is
    /// not plain positional), then the notes.
    pub fn lines(&self) -> Vec<String> {
        let mapping = self.mapping_line();
        let head = (!mapping.is_empty()).then(|| format!("inputs mapped: {mapping}"));
        head.into_iter().chain(self.notes.iter().cloned()).collect()
    }

    /// `x ← input, rate ← rate = 2, (ONNX only) state`: the mapping in one line,
    /// empty when every input is a plain tensor argument linked by position with nothing
    /// one-sided (one export of one network, where the line would say nothing).
    pub fn mapping_line(&self) -> String {
        let plain = self.mapping.iter().all(|e| {
            let element = e.torch.as_ref().is_some_and(|t| t.contains('.'));
            e.by == "position" && e.value.is_none() && !element
        });
        if plain {
            return String::new();
        }
        self.mapping
            .iter()
            .map(|e| {
                let value = e
                    .value
                    .as_ref()
                    .map(|v| format!(" = {v}"))
                    .unwrap_or_default();
                match (&e.torch, &e.onnx) {
                    (Some(t), Some(o)) => format!("{t} ← {o}{value}"),
                    (None, Some(o)) => format!("(ONNX only) {o}"),
                    (Some(t), None) => format!("{t} (PyTorch only){value}"),
                    (None, None) => String::new(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
