//! The training-mode check: a model traced or exported in training mode (BatchNorm using the
//! batch's statistics, dropout zeroing at random) cannot match its twin, and comparing it sends
//! the user hunting a convolution bug that does not exist. Such a pair is refused with the fix
//! before anything runs, unless `--allow-training-mode` asks to compare it anyway; the report
//! then carries what runs in training mode.

use anyhow::{bail, Result};

/// What each side's graph runs in training mode (one line each, from
/// `TorchModel::training_mode` and `onnx::training::training_mode`): an error naming it and
/// the fix, or, when `allow` is set, the lines to put in the report.
pub fn judge(findings: [Option<String>; 2], allow: bool) -> Result<Vec<String>> {
    let findings: Vec<String> = findings.into_iter().flatten().collect();
    if findings.is_empty() || allow {
        return Ok(findings);
    }
    bail!(
        "{} (pass --allow-training-mode to compare in training mode anyway)",
        findings.join("; and ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_mode_is_refused_unless_allowed() {
        let torch = Some("the TorchScript model was traced in training mode: bn".to_string());
        let refused = judge([torch.clone(), None], false).unwrap_err().to_string();
        assert!(
            refused.contains("traced in training mode")
                && refused.contains("--allow-training-mode")
        );
        assert_eq!(judge([torch, None], true).unwrap().len(), 1);
        assert!(judge([None, None], false).unwrap().is_empty());
    }
}
