//! The loading step that makes data-steered control flow observable: when the ONNX graph
//! keeps an `If` or `Loop` that constants do not steer, one run of the unmodified graph per
//! input sample measures the conditions and trip counts (`onnx::probe`), and the
//! instrumented session is built again with the branches that ran inlined and the
//! iterations that ran unrolled. Costs nothing for a graph without such control flow.

use crate::app::onnx_loading::{LoadedOnnx, OnnxSettings};
use crate::app::progress::Progress;
use crate::inputs::samples::Sample;
use crate::inputs::torch_args;
use crate::onnx;
use crate::onnx::capture::OnnxRunner;
use anyhow::Result;

/// `loaded` with its runner rebuilt for the control flow `samples` steer, where any is kept.
pub fn steer(
    settings: &OnnxSettings,
    loaded: LoadedOnnx,
    samples: &[Sample],
    progress: &Progress,
) -> Result<LoadedOnnx> {
    if loaded.runner.kept_control_flow == 0 || samples.is_empty() {
        return Ok(loaded);
    }
    progress.stage("measuring the conditions and trip counts the inputs steer");
    let model = onnx::model::load(&settings.path)?;
    let inputs: Vec<_> = samples
        .iter()
        .map(|s| torch_args::onnx_inputs(&s.inputs))
        .collect();
    let runtime = (settings.threads, settings.custom_ops.as_deref());
    let steering = onnx::probe::measure(&model, &inputs, runtime)?;
    if steering.is_empty() {
        return Ok(loaded);
    }
    // The first session goes before the second is built: one copy of the weights at a time.
    let LoadedOnnx {
        runner,
        specs,
        quantization,
        training_mode,
        seconds,
    } = loaded;
    drop(runner);
    Ok(LoadedOnnx {
        runner: OnnxRunner::steered(model, runtime, settings.per_group, steering)?,
        specs,
        quantization,
        training_mode,
        seconds,
    })
}
