//! The float64 rounding reference: the TorchScript module loaded once more, cast to float64
//! and run on the worst sample's inputs, so that each failing output can be judged against
//! what float32 rounding alone does to it (`compare::rounding_reference`).
//!
//! It runs only where the per-layer check and isolation cannot decide: a float32 output
//! exceeds its tolerance and no layer introduces an error (the accumulated-drift case). The
//! fast path never pays for it. A module that cannot run in float64 (a traced constant that
//! forces float32 into a matmul, an op without a float64 kernel) leaves the outputs judged by
//! their tolerance alone, and the reports say why.

use std::time::Instant;

use crate::capture::tensor::DType;
use crate::capture::Capture;
use crate::compare::evaluate::Evaluation;
use crate::compare::isolation::drift;
use crate::compare::judged::OutputResult;
use crate::compare::output_tolerance::OutputTolerance;
use crate::compare::rounding_reference::{judge, RoundingRun};
use crate::pairing::Pairing;
use crate::signature::types::ArgValue;
use crate::torch::TorchModel;

/// Whether the outputs need the reference: some float32 or integer output fails its
/// tolerance and no layer is where an error starts.
pub fn needed(eval: &Evaluation) -> bool {
    drift(&eval.layers, &eval.outputs).is_some()
        && eval.outputs.iter().any(|o| !o.cmp.pass && judged_here(o))
}

/// Whether float64 says anything about an output: one computed in float32, or an integer
/// one (labels, indices) that float32 decisions chose. Float16 and bfloat16 outputs round
/// far more than float32 does, and their own tolerance is what judges them.
fn judged_here(o: &OutputResult) -> bool {
    DType::from_name(&o.cmp.precision).is_some_and(|d| d == DType::F32 || !d.is_float())
}

/// Runs the reference for `eval`'s failing float32 outputs: `args` are the worst sample's
/// TorchScript arguments and `torch` its capture, whose outputs are PyTorch's float32 values.
/// It decides the outputs' gate only under the default output tolerance (`outputs`).
pub fn apply(
    torch_path: &std::path::Path,
    (args, torch, pairing): (&[ArgValue], &Capture, &Pairing),
    eval: &mut Evaluation,
    outputs: &OutputTolerance,
) -> RoundingRun {
    let started = Instant::now();
    let decides = *outputs == OutputTolerance::default();
    let error = run(torch_path, (args, torch, pairing), eval, decides).err();
    RoundingRun {
        seconds: started.elapsed().as_secs_f64(),
        error: error.map(|e| format!("{e:#}")),
    }
}

fn run(
    torch_path: &std::path::Path,
    (args, torch, pairing): (&[ArgValue], &Capture, &Pairing),
    eval: &mut Evaluation,
    decides: bool,
) -> anyhow::Result<()> {
    let mut model = TorchModel::load(torch_path)?;
    model.cast_to_float64()?;
    let exact = model.forward_named(&args.iter().map(to_float64).collect::<Vec<_>>())?;
    for output in eval.outputs.iter_mut() {
        if output.cmp.pass || !judged_here(output) {
            continue;
        }
        let Some(pair) = pairing.outputs.get(output.position) else {
            continue;
        };
        let value = &torch.values[pair.torch];
        let Some((_, float64)) = exact.iter().find(|(name, _)| *name == value.name) else {
            continue;
        };
        let float32 = value.data()?;
        output.rounding = Some(judge(&output.cmp, (&float32, float64), decides));
    }
    Ok(())
}

/// A forward argument with its float32 tensors in float64 (integer tensors, token ids and
/// masks, stay as they are).
fn to_float64(v: &ArgValue) -> ArgValue {
    match v {
        ArgValue::Tensor(t) if t.dtype() == DType::F32 => {
            ArgValue::Tensor(t.cast_float(DType::F64).unwrap_or_else(|| t.clone()))
        }
        ArgValue::Tuple(e) => ArgValue::Tuple(e.iter().map(to_float64).collect()),
        ArgValue::List(e) => ArgValue::List(e.iter().map(to_float64).collect()),
        ArgValue::Dict(e) => {
            ArgValue::Dict(e.iter().map(|(k, x)| (k.clone(), to_float64(x))).collect())
        }
        other => other.clone(),
    }
}
