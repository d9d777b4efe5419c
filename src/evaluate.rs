//! From pairs to judged layers: statistics per pair, tolerance per layer, and the first
//! divergence.
//!
//! Statistics of different pairs are independent, so they run in parallel. The first
//! divergence is the earliest failing layer none of whose upstream layers fail: a layer that
//! fails only because it inherits an upstream error is not an origin. Parallel branches can
//! hold several origins; all are returned in execution order.

use crate::capture::{Capture, CapturedValue};
use crate::outcome::{Comparison, Divergence, LayerResult, OutputResult};
use crate::pairing::Pairing;
use crate::stats::{compare, ErrorStats};
use crate::tensor::HostTensor;
use crate::tolerance::TolerancePolicy;
use anyhow::{anyhow, Result};
use rayon::prelude::*;

fn tensor_of(v: &CapturedValue) -> Result<&HostTensor> {
    v.tensor
        .as_ref()
        .ok_or_else(|| anyhow!("value {} was not kept in memory", v.name))
}

fn comparison(
    t: &CapturedValue,
    o: &CapturedValue,
    policy: &TolerancePolicy,
) -> Result<Comparison> {
    let tol = policy.for_layer(t.module_path(), &o.node, t.dtype);
    let (reference, test) = (tensor_of(t)?, tensor_of(o)?);
    // Pairing accepts shapes that differ only by unit dims ([1, 8] against [8]); the
    // elements are then the same in the same order, so compare them in the reference's shape.
    let reshaped;
    let test = if test.shape != reference.shape && test.numel() == reference.numel() {
        reshaped = HostTensor::new(reference.shape.clone(), test.data.clone());
        &reshaped
    } else {
        test
    };
    let stats: ErrorStats = compare(reference, test, tol)
        .map_err(|e| anyhow!("comparing {} with {}: {e}", t.name, o.name))?;
    Ok(Comparison {
        shape: t.shape.clone(),
        dtype: t.dtype.name().to_string(),
        onnx_dtype: o.dtype.name().to_string(),
        max_abs: stats.max_abs,
        max_abs_index: stats.max_abs_index.clone(),
        mean_abs: stats.mean_abs,
        rmse: stats.rmse,
        max_rel: stats.max_rel,
        rel_to_range: stats.rel_to_range,
        cosine: stats.cosine,
        snr_db: stats.snr_db,
        mismatch_ratio: stats.mismatch_ratio,
        nan_torch: stats.nan_ref,
        nan_onnx: stats.nan_test,
        inf_torch: stats.inf_ref,
        inf_onnx: stats.inf_test,
        atol: tol.atol,
        rtol: tol.rtol,
        pass: stats.passes(),
        histogram: stats.histogram.bins.clone(),
        stats,
    })
}

pub struct Evaluation {
    pub layers: Vec<LayerResult>,
    pub outputs: Vec<OutputResult>,
    pub origins: Vec<Divergence>,
}

pub fn evaluate(
    torch: &Capture,
    onnx: &Capture,
    pairing: &Pairing,
    policy: &TolerancePolicy,
) -> Result<Evaluation> {
    let (tv, ov) = (&torch.values, &onnx.values);
    let layer_cmps: Vec<Comparison> = pairing
        .layers
        .par_iter()
        .map(|p| comparison(&tv[p.torch], &ov[p.onnx], policy))
        .collect::<Result<_>>()?;
    let output_cmps: Vec<Comparison> = pairing
        .outputs
        .par_iter()
        .map(|p| comparison(&tv[p.torch], &ov[p.onnx], policy))
        .collect::<Result<_>>()?;

    // A torch value is tainted when some failing layer lies upstream of it.
    let mut failing = vec![false; tv.len()];
    for (p, c) in pairing.layers.iter().zip(&layer_cmps) {
        failing[p.torch] = !c.pass;
    }
    let mut tainted = vec![false; tv.len()];
    for v in tv {
        tainted[v.id] = v
            .inputs
            .iter()
            .any(|&u| u < v.id && (failing[u] || tainted[u]));
    }

    let mut layers = Vec::with_capacity(layer_cmps.len());
    for (index, (p, cmp)) in pairing.layers.iter().zip(layer_cmps).enumerate() {
        let (t, o) = (&tv[p.torch], &ov[p.onnx]);
        layers.push(LayerResult {
            index,
            module: t.module_path().to_string(),
            module_type: t.module_class().to_string(),
            torch_op: t.op.clone(),
            torch_value: t.name.clone(),
            onnx_node: o.node.clone(),
            onnx_op: o.op.clone(),
            onnx_value: o.name.clone(),
            paired_by: p.paired_by.as_str().to_string(),
            fused: p
                .fused
                .iter()
                .map(|&f| tv[f].module_path().to_string())
                .collect(),
            source: t.source.clone(),
            upstream_failed: tainted[p.torch],
            cmp,
            torch_id: p.torch,
            onnx_id: p.onnx,
        });
    }
    let origins = layers
        .iter()
        .filter(|l| !l.cmp.pass && !l.upstream_failed)
        .map(divergence_of)
        .collect();
    let outputs = pairing
        .outputs
        .iter()
        .zip(output_cmps)
        .enumerate()
        .map(|(position, (p, cmp))| OutputResult {
            name: ov[p.onnx].name.clone(),
            position,
            cmp,
        })
        .collect();
    Ok(Evaluation {
        layers,
        outputs,
        origins,
    })
}

pub fn divergence_of(l: &LayerResult) -> Divergence {
    Divergence {
        module: l.module.clone(),
        module_type: l.module_type.clone(),
        onnx_node: l.onnx_node.clone(),
        onnx_op: l.onnx_op.clone(),
        torch_op: l.torch_op.clone(),
        source: l.source.clone(),
        layer_index: l.index,
        rel_to_range: l.cmp.rel_to_range,
        max_abs: l.cmp.max_abs,
    }
}
