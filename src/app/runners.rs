//! The two runtimes behind `runner::Runner`, each with the glue that is its own: TorchScript
//! gets its `forward` arguments (tensors, numbers, containers) in argument order and its
//! tensors in its parameters' dtype, and fails with a message that names a placeholder
//! argument if one was used; ONNX Runtime gets the inputs its graph declares, in groups
//! under a memory budget. Which graph inputs then pair is `signature::boundary`'s business.

use super::runner::Runner;
use crate::capture::store::Keep;
use crate::capture::{Capture, Side};
use crate::inputs::samples::Sample;
use crate::inputs::torch_args;
use crate::onnx::capture::OnnxRunner;
use crate::torch::TorchModel;
use anyhow::Result;

impl Runner for TorchModel {
    fn side(&self) -> Side {
        Side::Torch
    }

    fn capture(
        &mut self,
        sample: &Sample,
        keep: &Keep,
        _group_bytes: Option<u64>,
    ) -> Result<Capture> {
        let args = torch_args::in_module_dtype(&sample.torch, self.parameter_dtype());
        TorchModel::capture_args(self, &args, keep)
            .map_err(|e| torch_args::explain_run_error(e, &sample.placeholders))
    }
}

impl Runner for OnnxRunner {
    fn side(&self) -> Side {
        Side::Onnx
    }

    fn capture(
        &mut self,
        sample: &Sample,
        keep: &Keep,
        group_bytes: Option<u64>,
    ) -> Result<Capture> {
        OnnxRunner::capture(
            self,
            &torch_args::onnx_inputs(&sample.inputs),
            keep,
            group_bytes,
        )
    }

    fn runs_last_capture(&self) -> usize {
        self.runs_last_capture
    }
}
