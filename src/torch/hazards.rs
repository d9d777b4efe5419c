//! What makes a loadable TorchScript graph unfit to compare as saved: a trace recorded on a GPU
//! (its constants put tensors on `cuda:N`, and align-check runs TorchScript on the CPU) and a
//! trace recorded in training mode (batch statistics, random dropout). Both are read from the
//! graph the shim inlined (or the exported program's nodes), never from file names.

use super::meta::{GraphMeta, GraphSite};

/// The fix for both: record the trace again, on the CPU and in eval mode.
pub const RETRACE: &str =
    "model.cpu().eval(); torch.jit.trace(model, example_inputs).save(\"model.pt\")";

/// The same fix for an exported program.
const REEXPORT: &str = "model.cpu().eval(); torch.export.save(torch.export.export(model, \
                        example_inputs), \"model.pt2\")";

/// How the reference was recorded, and the fix, in words for its kind of file.
fn recorded(meta: &GraphMeta) -> (&'static str, &'static str, &'static str) {
    if meta.exported {
        ("the exported program was exported", "export", REEXPORT)
    } else {
        ("the TorchScript model was traced", "trace", RETRACE)
    }
}

/// Why the graph cannot run on the CPU, when a constant puts a tensor on a GPU.
pub fn needs_cuda(meta: &GraphMeta) -> Option<String> {
    let first = meta.cuda_ops.first()?;
    let (_, verb, fix) = recorded(meta);
    Some(format!(
        "it was recorded on a GPU: {} puts a tensor on {}{}, but align-check runs the PyTorch \
         reference on the CPU{}; {verb} it on the CPU: {fix}",
        first.describe(),
        first.device,
        more(&meta.cuda_ops),
        if tch::Cuda::is_available() {
            ""
        } else {
            " (and this machine has no CUDA device)"
        },
    ))
}

/// What in the graph is fixed in training mode, when anything is: one line naming the ops.
pub fn training_mode(meta: &GraphMeta) -> Option<String> {
    let first = meta.training_ops.first()?;
    let effect = |site: &GraphSite| {
        if site.op.contains("batch_norm") {
            "normalises with the batch's statistics instead of the running ones"
        } else {
            "drops values at random"
        }
    };
    let (what, verb, fix) = recorded(meta);
    Some(format!(
        "{what} in training mode: {} {}{}; {verb} it after model.eval(): {fix}",
        first.describe(),
        effect(first),
        more(&meta.training_ops),
    ))
}

fn more(sites: &[GraphSite]) -> String {
    match sites.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more op(s))", n - 1),
    }
}
