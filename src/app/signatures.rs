//! `inspect MODEL.pt --onnx MODEL.onnx`: both signatures side by side, with the mapping a
//! check would use (which ONNX input each TorchScript argument takes, and how it was
//! decided), so that a pair exported by different tools can be understood before it is run.

use crate::onnx::signature::InputSpec;
use crate::signature::mapping::{LinkedBy, Mapping, STATE_PREFIX};
use crate::torch::InputInfo;
use std::fmt::Write;

fn dims(spec: &InputSpec) -> String {
    let d: Vec<String> = spec.dims.iter().map(|d| d.to_string()).collect();
    if d.is_empty() {
        "scalar".to_string()
    } else {
        d.join("x")
    }
}

/// TorchScript's side of a slot: `x: Tensor`, `rate: int = 1`, `inputs.input_ids` (an
/// element), `self.state (module state)`.
fn torch_side(slot: &str, infos: &[InputInfo]) -> String {
    if slot.starts_with(STATE_PREFIX) {
        return format!("{slot} (module state)");
    }
    let arg = infos
        .iter()
        .find(|i| crate::signature::types::argument_name(&i.name) == slot);
    match arg {
        Some(i) => {
            let default = i
                .default
                .as_ref()
                .map(|d| format!(" = {d}"))
                .unwrap_or_default();
            format!("{slot}: {}{default}", i.type_name)
        }
        None => slot.to_string(),
    }
}

/// The two signatures and the mapping, one row per slot or ONNX input, plus the outputs.
pub fn side_by_side(
    infos: &[InputInfo],
    specs: &[InputSpec],
    outputs: &[String],
    mapping: &Mapping,
) -> String {
    let onnx_side = |name: &str| match specs.iter().find(|s| s.name == name) {
        Some(s) => format!("{name}: {} {}", s.dtype, dims(s)),
        None => name.to_string(),
    };
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for l in &mapping.links {
        let by = match l.by {
            LinkedBy::Map => "by --map",
            LinkedBy::Name => "by name",
            LinkedBy::Position => "by position",
        };
        rows.push((
            torch_side(&l.slot, infos),
            onnx_side(&l.onnx),
            by.to_string(),
        ));
    }
    for o in &mapping.onnx_only {
        rows.push((
            "-".to_string(),
            onnx_side(o),
            "ONNX only: zero-filled unless given".to_string(),
        ));
    }
    for t in &mapping.torch_only {
        rows.push((
            torch_side(t, infos),
            "-".to_string(),
            "PyTorch only: --input, --arg, its default or a placeholder".to_string(),
        ));
    }
    let width = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(19);
    let onnx_width = rows
        .iter()
        .map(|r| r.1.chars().count())
        .max()
        .unwrap_or(0)
        .max(11);
    let mut out = String::from("signatures (the mapping a check uses; --map changes it):\n");
    let _ = writeln!(
        out,
        "  {:width$}    {:onnx_width$}  how",
        "PyTorch forward", "ONNX inputs"
    );
    for (t, o, how) in rows {
        let _ = writeln!(out, "  {t:width$} ←  {o:onnx_width$}  {how}");
    }
    let _ = writeln!(out, "  ONNX outputs: {}", outputs.join(", "));
    out
}
