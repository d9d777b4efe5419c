//! The two runtimes behind `capture::Runner`, each with the glue that is its own: TorchScript
//! gets its `forward` arguments in argument order and in its parameters' dtype, fails with a
//! message that names a placeholder argument if one was used, and drops arguments ONNX does
//! not take from its capture; ONNX Runtime gets the inputs its graph declares, in groups
//! under a memory budget.

use crate::capture::runner::Runner;
use crate::capture::store::Keep;
use crate::capture::{Capture, Side};
use crate::inputs::{torch_args, ResolvedInput};
use crate::onnx::capture::OnnxRunner;
use crate::torch::TorchModel;
use anyhow::Result;

impl Runner for TorchModel {
    fn side(&self) -> Side {
        Side::Torch
    }

    fn capture(
        &mut self,
        inputs: &[ResolvedInput],
        keep: &Keep,
        _group_bytes: Option<u64>,
    ) -> Result<Capture> {
        let tensors = torch_args::forward_inputs(self.inputs(), inputs, self.parameter_dtype())?;
        let capture = TorchModel::capture(self, &tensors, keep)
            .map_err(|e| torch_args::explain_run_error(e, inputs))?;
        torch_args::drop_torch_only(capture, self.inputs(), inputs)
    }
}

impl Runner for OnnxRunner {
    fn side(&self) -> Side {
        Side::Onnx
    }

    fn capture(
        &mut self,
        inputs: &[ResolvedInput],
        keep: &Keep,
        group_bytes: Option<u64>,
    ) -> Result<Capture> {
        OnnxRunner::capture(self, &torch_args::onnx_inputs(inputs), keep, group_bytes)
    }

    fn runs_last_capture(&self) -> usize {
        self.runs_last_capture
    }
}
