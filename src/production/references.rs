//! What the production session is compared against, kept from each sample of the check
//! before its captures are dropped: the ONNX inputs exactly as fed, and for each paired graph
//! output PyTorch's value and the unoptimised ONNX Runtime session's value.

use crate::capture::tensor::{DType, HostTensor};
use crate::capture::{Capture, ValueRole};
use crate::compare::precision;
use crate::pairing::Pairing;
use anyhow::Result;

/// One graph output of one sample, as both sides of the check computed it.
#[derive(Debug, Clone)]
pub struct ReferenceOutput {
    /// The ONNX graph output's name, which the production session returns it under.
    pub name: String,
    pub torch: HostTensor,
    pub unoptimised: HostTensor,
    /// The precision the pair is judged in (the lowest either side computed it in).
    pub precision: DType,
}

#[derive(Debug, Clone)]
pub struct ReferenceSample {
    pub inputs: Vec<(String, HostTensor)>,
    pub outputs: Vec<ReferenceOutput>,
}

impl ReferenceSample {
    /// The sample's ONNX inputs and paired outputs, in the pairing's output order (the
    /// report's).
    pub fn from_captures(
        torch: &Capture,
        onnx: &Capture,
        pairing: &Pairing,
    ) -> Result<ReferenceSample> {
        let mut inputs = Vec::new();
        for v in &onnx.values {
            if let ValueRole::Input(_) = v.role {
                inputs.push((v.name.clone(), v.data()?.into_owned()));
            }
        }
        // The precision each output was computed in, as the check judges it: a float16 model
        // that casts back to float32 at its outputs is held to the float16 tolerance.
        let (torch_precision, onnx_precision) = (
            precision::computed_precision(torch),
            precision::computed_precision(onnx),
        );
        let mut outputs = Vec::with_capacity(pairing.outputs.len());
        for pair in &pairing.outputs {
            let (t, o) = (&torch.values[pair.torch], &onnx.values[pair.onnx]);
            outputs.push(ReferenceOutput {
                name: o.name.clone(),
                torch: t.data()?.into_owned(),
                unoptimised: o.data()?.into_owned(),
                precision: precision::lower(torch_precision[pair.torch], onnx_precision[pair.onnx]),
            });
        }
        Ok(ReferenceSample { inputs, outputs })
    }
}
