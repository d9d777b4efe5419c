//! From pairs to judged layers: statistics per pair, tolerance per layer, and the first
//! divergence.
//!
//! Statistics of different pairs are independent, so they run in parallel. The first
//! divergence is the earliest failing layer none of whose upstream layers fail: a layer that
//! fails only because it inherits an upstream error is not an origin. Parallel branches can
//! hold several origins; all are returned in execution order.

use crate::capture::tensor::DType;
use crate::capture::tensor::HostTensor;
use crate::capture::{Capture, CapturedValue};
use crate::compare::details::{layer_detail, LayerDetail};
use crate::compare::discrete::DiscreteFlip;
use crate::compare::judged::{Cause, Comparison, Divergence, LayerResult, OutputResult};
use crate::compare::precision;
use crate::compare::small_values::{self, SmallValues};
use crate::compare::stats::{compare, ErrorStats};
use crate::compare::tolerance::{Tolerance, TolerancePolicy};
use crate::pairing::{Pair, Pairing};
use anyhow::{anyhow, Result};
use rayon::prelude::*;

/// What a pair is judged as: a layer, by the per-layer tolerance (the rule that finds where an
/// export goes wrong), or a graph output, by the outputs' own rule (what the user's
/// application sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Layer,
    Output,
}

/// One pair's comparison, judged by the tolerance of `precision`: the lower of the precisions
/// the two values were computed in (see `precision.rs`).
fn comparison(
    t: &CapturedValue,
    o: &CapturedValue,
    (precision, as_what): (DType, Judged),
    policy: &TolerancePolicy,
) -> Result<Comparison> {
    // Under a memory budget this is read back from the spill file, one pair at a time.
    let test = o.data()?;
    let context = |e| anyhow!("comparing {} with {}: {e}", t.name, o.name);
    let as_layer = judged_stats(t, &o.node, &test, precision, policy).map_err(context)?;
    let (stats, pass_as_layer) = match as_what {
        Judged::Layer => {
            let pass = as_layer.pass;
            (as_layer, pass)
        }
        Judged::Output => (
            output_stats(t, &test, precision, policy).map_err(context)?,
            as_layer.pass,
        ),
    };
    Ok(Comparison {
        shape: t.shape.clone(),
        dtype: t.dtype.name().to_string(),
        onnx_dtype: o.dtype.name().to_string(),
        precision: precision.name().to_string(),
        samples: 1,
        worst_sample: 0,
        p95_rel_to_range: stats.rel_to_range,
        pass_as_layer,
        stats,
    })
}

/// The statistics of `test` (computed by ONNX node `onnx_node`) against the TorchScript
/// value `t`, judged by the tolerance of `precision` for that layer. Both the accumulated and
/// the isolated error of a layer are this.
pub fn judged_stats(
    t: &CapturedValue,
    onnx_node: &str,
    test: &HostTensor,
    precision: DType,
    policy: &TolerancePolicy,
) -> Result<ErrorStats> {
    let tol = policy.for_layer(t.module_path(), onnx_node, precision);
    let mut stats = stats_under(t, test, tol)?;
    match &policy.quantized {
        Some(rule) => rule.judge_layer(&mut stats),
        None => small_values::apply_strict(&mut stats, policy.strict_small),
    }
    Ok(stats)
}

/// The statistics of a graph output, judged by the outputs' own rule.
fn output_stats(
    t: &CapturedValue,
    test: &HostTensor,
    precision: DType,
    policy: &TolerancePolicy,
) -> Result<ErrorStats> {
    let mut stats = stats_under(t, test, policy.for_output(precision))?;
    policy.outputs.judge(&mut stats);
    if let Some(rule) = &policy.quantized {
        rule.judge_output(&mut stats);
    }
    Ok(stats)
}

/// The statistics of `test` against the TorchScript value `t` under `tol`.
fn stats_under(t: &CapturedValue, test: &HostTensor, tol: Tolerance) -> Result<ErrorStats> {
    let reference = t.data()?;
    let reference: &HostTensor = &reference;
    // Pairing accepts shapes that differ only by unit dims ([1, 8] against [8]); the
    // elements are then the same in the same order, so compare them in the reference's shape.
    let reshaped;
    let test: &HostTensor = if test.shape != reference.shape && test.numel() == reference.numel() {
        reshaped = HostTensor::new(reference.shape.clone(), test.data.clone());
        &reshaped
    } else {
        test
    };
    compare(reference, test, tol).map_err(|e| anyhow!("{e}"))
}

/// The comparisons of every pair on one input sample.
pub struct Comparisons {
    pub layers: Vec<Comparison>,
    pub outputs: Vec<Comparison>,
}

/// Every pair's comparison. `parallel` compares several pairs at once; under a memory
/// budget pairs go one at a time (each one's statistics are still computed in parallel
/// chunks), since every pair in flight brings two tensors back from disk. The results are
/// the same either way.
pub fn compare_pairs(
    torch: &Capture,
    onnx: &Capture,
    pairing: &Pairing,
    policy: &TolerancePolicy,
    parallel: bool,
) -> Result<Comparisons> {
    let (tv, ov) = (&torch.values, &onnx.values);
    let (torch_precision, onnx_precision) = (
        precision::computed_precision(torch),
        precision::computed_precision(onnx),
    );
    let run = |pairs: &[crate::pairing::Pair], as_what: Judged| -> Result<Vec<Comparison>> {
        let pairs = pairs.iter().map(|p| (p, as_what));
        let one = |(p, as_what): (&crate::pairing::Pair, Judged)| {
            let lower = precision::lower(torch_precision[p.torch], onnx_precision[p.onnx]);
            comparison(&tv[p.torch], &ov[p.onnx], (lower, as_what), policy)
        };
        if parallel {
            pairs.collect::<Vec<_>>().into_par_iter().map(one).collect()
        } else {
            pairs.map(one).collect()
        }
    };
    Ok(Comparisons {
        layers: run(&pairing.layers, Judged::Layer)?,
        outputs: run(&pairing.outputs, Judged::Output)?,
    })
}

/// How bad one sample's comparisons are overall: failing pairs first, then the largest error.
pub fn badness(c: &Comparisons) -> (usize, f64) {
    let all = c.layers.iter().chain(&c.outputs);
    let failing = all.clone().filter(|x| !x.pass).count();
    let worst = all.map(|x| x.rel_to_range).fold(0.0, f64::max);
    (failing, worst)
}

/// Worst case per pair across input samples, plus the spread of the error.
pub struct SampleAggregate {
    worst: Comparisons,
    history: Vec<Vec<f64>>,
}

fn is_worse(candidate: &Comparison, current: &Comparison) -> bool {
    match (candidate.pass, current.pass) {
        (false, true) => true,
        (true, false) => false,
        _ => candidate
            .rel_to_range
            .total_cmp(&current.rel_to_range)
            .is_gt(),
    }
}

impl SampleAggregate {
    pub fn new(first: Comparisons) -> Self {
        let history = first
            .layers
            .iter()
            .chain(&first.outputs)
            .map(|c| vec![c.rel_to_range])
            .collect();
        SampleAggregate {
            worst: first,
            history,
        }
    }

    pub fn add(&mut self, next: Comparisons, sample: usize) {
        let slots = self
            .worst
            .layers
            .iter_mut()
            .chain(self.worst.outputs.iter_mut());
        let incoming = next.layers.into_iter().chain(next.outputs);
        for ((slot, mut c), history) in slots.zip(incoming).zip(&mut self.history) {
            history.push(c.rel_to_range);
            if is_worse(&c, slot) {
                c.worst_sample = sample;
                *slot = c;
            }
        }
    }

    pub fn finish(mut self) -> Comparisons {
        let slots = self
            .worst
            .layers
            .iter_mut()
            .chain(self.worst.outputs.iter_mut());
        for (slot, mut history) in slots.zip(self.history) {
            history.sort_by(f64::total_cmp);
            let rank = ((history.len() as f64) * 0.95).ceil() as usize;
            slot.samples = history.len();
            slot.p95_rel_to_range = history[rank.clamp(1, history.len()) - 1];
        }
        self.worst
    }
}

pub struct Evaluation {
    pub layers: Vec<LayerResult>,
    pub outputs: Vec<OutputResult>,
    pub origins: Vec<Divergence>,
    /// Layers that pass only because their values lie below the absolute tolerance.
    pub small_values: Vec<SmallValues>,
    /// Discrete results that differ only because of their inputs (filled by isolation).
    pub flips: Vec<DiscreteFlip>,
}

/// How many layers get element-level detail: every divergence origin, then the layers with
/// the largest error relative to range until this many are chosen (origins beyond it are
/// all kept).
const DETAILED_LAYERS: usize = 6;

/// Judges the (possibly aggregated) comparisons: layer results in execution order, which
/// layers inherit an upstream failure, and the divergence origins.
pub fn judge(torch: &Capture, onnx: &Capture, pairing: &Pairing, cmps: Comparisons) -> Evaluation {
    let (tv, ov) = (&torch.values, &onnx.values);
    let witnesses = Witnesses::new(tv, pairing, &cmps);
    let unconfirmed = unconfirmed_layers(&witnesses, ov, pairing, &cmps);
    // A torch value is tainted when some failing layer lies upstream of it.
    let mut failing = vec![false; tv.len()];
    for ((p, c), doubt) in pairing.layers.iter().zip(&cmps.layers).zip(&unconfirmed) {
        failing[p.torch] = !c.pass && !doubt;
    }
    let mut tainted = vec![false; tv.len()];
    for v in tv {
        tainted[v.id] = v
            .inputs
            .iter()
            .any(|&u| u < v.id && (failing[u] || tainted[u]));
    }

    let mut layers = Vec::with_capacity(cmps.layers.len());
    for (index, (p, cmp)) in pairing.layers.iter().zip(cmps.layers).enumerate() {
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
            paired_by: p.paired_by.to_string(),
            fused: p
                .fused
                .iter()
                .map(|&f| tv[f].module_path().to_string())
                .collect(),
            source: t.source.clone().or_else(|| o.source.clone()),
            source_stack: if t.source_stack.is_empty() {
                o.source_stack.clone()
            } else {
                t.source_stack.clone()
            },
            upstream_failed: tainted[p.torch],
            unconfirmed: unconfirmed[index],
            // Off the dataflow, the pair's ONNX value is not computed from its producers'
            // twins: structure, which no fault changes, shows it wrong.
            refuted: unconfirmed[index]
                && (!p.follows_dataflow || witnesses.none_carries(p.torch, cmp.max_abs)),
            cmp,
            isolated: None,
            origin: None,
            torch_id: p.torch,
            onnx_id: p.onnx,
        });
    }
    let origins = origins_of(&layers);
    let small_values = small_values_of(&layers);
    let outputs = pairing
        .outputs
        .iter()
        .zip(cmps.outputs)
        .enumerate()
        .map(|(position, (p, cmp))| OutputResult {
            name: ov[p.onnx].name.clone(),
            position,
            cmp,
            rounding: None,
        })
        .collect();
    Evaluation {
        layers,
        outputs,
        origins,
        small_values,
        flips: Vec::new(),
    }
}

/// The layers that pass only because their values lie below the absolute tolerance.
fn small_values_of(layers: &[LayerResult]) -> Vec<SmallValues> {
    layers
        .iter()
        .filter(|l| small_values::passes_only_by_atol(&l.cmp))
        .map(|l| SmallValues {
            layer_index: l.index,
            module: l.module.clone(),
            onnx_node: l.onnx_node.clone(),
            rel_to_range: l.cmp.rel_to_range,
            max_value: l.cmp.ref_max_abs,
            atol: l.cmp.tol.atol,
        })
        .collect()
}

/// For each layer pair, whether its failure is unconfirmed: it exceeds its tolerance, yet
/// its ONNX value is not computed from its producers' twins (`Pair::follows_dataflow`), or
/// the nearest paired values computed from it (layers or outputs, looking through unpaired
/// values and pairs that break the dataflow) exist and all pass. A real fault propagates to
/// what is computed from it, if only weakly (two swapped channels still fail the very next
/// layer); a value paired with the wrong ONNX value (the partial result of a decomposition)
/// fails alone. Only the nearest
/// consumers are asked, so a real fault whose effect fades over several layers is confirmed
/// by the layer after it, and only the last layer it still shows at is left unconfirmed.
/// A pair structure alone placed (`Pair::certain`: one plausible ONNX value) is not doubted
/// for its consumers' agreeing: a fault that a saturating op downstream hides is real.
/// Nor is a pair whose error a consumer carries (`carried_on`): a consumer passes under a
/// loose tolerance (float16) or a larger range (a residual sum) while holding the very same
/// absolute error, which nothing upstream of it holds.
fn unconfirmed_layers(
    witnesses: &Witnesses,
    ov: &[CapturedValue],
    pairing: &Pairing,
    cmps: &Comparisons,
) -> Vec<bool> {
    use crate::pairing::POSITION;
    // A layer whose two values are a graph output pair (the last Linear of a head, paired by
    // its module and also returned by both models at the same position) is placed by the
    // signature, whatever the dataflow check could or could not trace upstream of it (a
    // producer inside an ONNX Loop it cannot follow): never doubtful.
    // Either side may capture an output as a value of its own that reads the one returned.
    let returns = |values: &[CapturedValue], output: usize, v: usize| {
        output == v || values[output].inputs == [v]
    };
    let is_output_pair = |p: &Pair| {
        (pairing.outputs.iter())
            .any(|b| returns(witnesses.tv, b.torch, p.torch) && returns(ov, b.onnx, p.onnx))
    };
    pairing
        .layers
        .iter()
        .zip(&cmps.layers)
        .map(|(p, c)| {
            !c.pass
                && p.paired_by != POSITION
                && !is_output_pair(p)
                && (!p.follows_dataflow
                    || (!p.certain
                        && witnesses.nearest_all_pass(p.torch)
                        && !witnesses.carried_on(p.torch, c.max_abs)))
        })
        .collect()
}

/// A consumer carries a doubtful pair's error when it holds at least this share of its
/// largest absolute error...
const CARRIED_SHARE: f64 = 0.5;

/// ...and this many times the largest absolute error of every witness upstream of either:
/// the error arose between them, where the doubtful value is, not before.
const ABOVE_UPSTREAM: f64 = 4.0;

/// A consumer holding less than this share of a doubtful pair's largest absolute error
/// shows none of it: float rounding, not a trace of the pair's error.
const TRACE_SHARE: f64 = 1e-3;

/// The values whose comparisons can witness for or against a doubtful pair, and the
/// dataflow between them.
struct Witnesses<'a> {
    tv: &'a [CapturedValue],
    /// Per TorchScript value: whether its witnessing pair passes, where it has one. An
    /// output witnesses by the per-layer rule: passing its own looser rule does not show
    /// that an error upstream faded.
    passes: Vec<Option<bool>>,
    /// Per TorchScript value: its witnessing pair's largest absolute error (0 for a graph
    /// input, which both models were given alike).
    error: Vec<Option<f64>>,
    consumers: Vec<Vec<usize>>,
}

impl<'a> Witnesses<'a> {
    fn new(tv: &'a [CapturedValue], pairing: &Pairing, cmps: &Comparisons) -> Self {
        let mut passes: Vec<Option<bool>> = vec![None; tv.len()];
        let mut error: Vec<Option<f64>> = vec![None; tv.len()];
        for p in &pairing.inputs {
            error[p.torch] = Some(0.0);
        }
        for (p, c) in pairing.layers.iter().zip(&cmps.layers) {
            if p.follows_dataflow {
                passes[p.torch] = Some(c.pass);
                error[p.torch] = Some(c.max_abs);
            }
        }
        for (p, c) in pairing.outputs.iter().zip(&cmps.outputs) {
            passes[p.torch] = Some(c.pass_as_layer);
            error[p.torch] = Some(c.max_abs);
        }
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); tv.len()];
        for v in tv {
            for &u in &v.inputs {
                if u < tv.len() && u != v.id {
                    consumers[u].push(v.id);
                }
            }
        }
        Witnesses {
            tv,
            passes,
            error,
            consumers,
        }
    }

    /// The nearest witnesses from `start` (exclusive) along `next`, looking through values
    /// that witness nothing and never past `stop`.
    fn nearest(&self, start: usize, stop: Option<usize>, downstream: bool) -> Vec<usize> {
        let next = |v: usize| -> &[usize] {
            if downstream {
                &self.consumers[v]
            } else {
                &self.tv[v].inputs
            }
        };
        let mut seen = vec![false; self.tv.len()];
        let mut stack: Vec<usize> = next(start).to_vec();
        let mut found = Vec::new();
        while let Some(v) = stack.pop() {
            if v >= self.tv.len() || Some(v) == stop || std::mem::replace(&mut seen[v], true) {
                continue;
            }
            if self.error[v].is_some() || self.passes[v].is_some() {
                found.push(v);
            } else {
                stack.extend(next(v));
            }
        }
        found
    }

    /// Whether the nearest witnesses computed from `start` exist and all pass.
    fn nearest_all_pass(&self, start: usize) -> bool {
        let nearest = self.nearest(start, None, true);
        let judged: Vec<bool> = nearest.iter().filter_map(|&v| self.passes[v]).collect();
        !judged.is_empty() && judged.iter().all(|&pass| pass)
    }

    /// Whether the nearest consumers of `start` show none of its error (`error`, the largest
    /// absolute one): each holds less than `TRACE_SHARE` of it, or no more than
    /// `ABOVE_UPSTREAM` times what the witnesses upstream of it (not through `start`) and of
    /// `start` hold. That is what a wrong pair looks like, and what a real fault that
    /// introduces error cannot produce unless something downstream discards it whole; a
    /// consumer that holds any trace of the error (a softmax over mis-scaled scores, however
    /// flattened) is evidence that the error is real.
    fn none_carries(&self, start: usize, error: f64) -> bool {
        let before_start = self.nearest(start, None, false);
        let upstream_of = |c: usize| -> f64 {
            let mut upstream = self.nearest(c, Some(start), false);
            upstream.extend(&before_start);
            upstream
                .iter()
                .filter_map(|&u| self.error[u])
                .fold(0.0, f64::max)
        };
        let consumers: Vec<usize> = self
            .nearest(start, None, true)
            .into_iter()
            .filter(|&c| self.error[c].is_some())
            .collect();
        !consumers.is_empty()
            && consumers.iter().all(|&c| {
                let held = self.error[c].unwrap_or(f64::NAN);
                // Written as comparisons that hold, so that a NaN error carries.
                held <= TRACE_SHARE * error || held <= ABOVE_UPSTREAM * upstream_of(c)
            })
    }

    /// Whether a nearest consumer of `start` of the same size carries its error (`error`,
    /// the largest absolute one): at least `CARRIED_SHARE` of it, and `ABOVE_UPSTREAM` times
    /// what every witness upstream of the two holds. A wrong pair's error is not in its
    /// consumers; a real fault's is, even where their tolerance lets it pass.
    fn carried_on(&self, start: usize, error: f64) -> bool {
        let size = |v: usize| self.tv[v].shape.iter().product::<usize>();
        let before_start = self.nearest(start, None, false);
        self.nearest(start, None, true).into_iter().any(|c| {
            let Some(carried) = self.error[c].filter(|_| size(c) == size(start)) else {
                return false;
            };
            let mut upstream = self.nearest(c, Some(start), false);
            upstream.extend(&before_start);
            carried >= CARRIED_SHARE * error
                && !upstream.is_empty()
                && upstream
                    .iter()
                    .all(|&u| self.error[u].is_some_and(|e| carried > ABOVE_UPSTREAM * e))
        })
    }
}

/// Element-level detail for the layers worth a close look, from one sample's captures.
pub fn details(
    layers: &[LayerResult],
    torch: &Capture,
    onnx: &Capture,
) -> Result<Vec<LayerDetail>> {
    select_details(layers)
        .into_par_iter()
        .map(|(i, why)| {
            let l = &layers[i];
            let (t, o) = (&torch.values[l.torch_id], &onnx.values[l.onnx_id]);
            Ok(layer_detail(i, why, &*t.data()?, &*o.data()?))
        })
        .collect()
}

/// The layers worth a close look: every divergence origin, then the ones with the largest
/// error relative to range, failing or not, up to `DETAILED_LAYERS` in all.
fn select_details(layers: &[LayerResult]) -> Vec<(usize, &'static str)> {
    let mut chosen: Vec<(usize, &'static str)> = Vec::new();
    let origins = layers.iter().filter(|l| l.is_origin());
    for (n, l) in origins.enumerate() {
        chosen.push((
            l.index,
            if n == 0 {
                "first divergence"
            } else {
                "divergence origin"
            },
        ));
    }
    let mut by_error: Vec<&LayerResult> = layers.iter().collect();
    by_error.sort_by(|a, b| b.cmp.rel_to_range.total_cmp(&a.cmp.rel_to_range));
    for l in by_error {
        if chosen.len() >= DETAILED_LAYERS {
            break;
        }
        if !chosen.iter().any(|(i, _)| *i == l.index) {
            chosen.push((l.index, "worst layer"));
        }
    }
    chosen
}

/// Every layer where an error starts, in execution order.
pub fn origins_of(layers: &[LayerResult]) -> Vec<Divergence> {
    layers
        .iter()
        .filter(|l| l.is_origin())
        .map(divergence_of)
        .collect()
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
        cause: overflow(l),
    }
}

/// A failing layer judged in a reduced precision whose reference values exceed that
/// precision's largest finite number: the other side clamped them or made them infinite.
fn overflow(l: &LayerResult) -> Option<Cause> {
    let dtype = DType::from_name(&l.cmp.precision)?;
    let limit = precision::max_finite(dtype)?;
    (!l.cmp.pass && l.cmp.ref_max_abs > limit).then(|| Cause::Overflow {
        precision: dtype.name().to_string(),
        module: l.module.clone(),
        max_reference: l.cmp.ref_max_abs,
        limit,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    //! The guard against doubtful pairs, on hand-built captures: a failure that nothing
    //! computed from it repeats is unconfirmed and not an origin; a real fault, even one
    //! whose effect fades before the outputs, is confirmed by the layer after it.

    use super::*;
    use crate::capture::store::Stored;
    use crate::capture::{Capture, CapturedValue, Side, ValueRole};
    use crate::pairing::POSITION;

    fn value(id: usize, role: ValueRole, inputs: &[usize], data: &[f32]) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: "aten::relu".into(),
            node: format!("/n{id}"),
            scope: vec![],
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role,
            dtype: crate::capture::tensor::DType::F32,
            shape: vec![data.len()],
            inputs: inputs.to_vec(),
            tensor: Some(Stored::Memory(HostTensor::f32(
                vec![data.len()],
                data.to_vec(),
            ))),
        }
    }

    /// A chain input -> a -> b -> c -> output on both sides; `onnx` gives the ONNX data of
    /// a, b and c (TorchScript holds 1, 2, 3 everywhere scaled by the position).
    fn chain(onnx: [&[f32]; 3]) -> (Capture, Capture, Pairing) {
        chain_of([&[1.0, 2.0], &[2.0, 4.0], &[3.0, 6.0]], onnx)
    }

    /// `chain` with TorchScript's data of a, b and c given too.
    fn chain_of(torch_data: [&[f32]; 3], onnx: [&[f32]; 3]) -> (Capture, Capture, Pairing) {
        let build = |side, data: [&[f32]; 3]| Capture {
            side,
            values: vec![
                value(0, ValueRole::Input(0), &[], &[1.0, 2.0]),
                value(1, ValueRole::Intermediate, &[0], data[0]),
                value(2, ValueRole::Intermediate, &[1], data[1]),
                value(3, ValueRole::Intermediate, &[2], data[2]),
                value(4, ValueRole::Output(0), &[3], data[2]),
            ],
            uncapturable: vec![],
            element_inputs: Default::default(),
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
        };
        let pair = |i, by| Pair {
            torch: i,
            onnx: i,
            paired_by: by,
            fused: vec![],
            follows_dataflow: true,
            // Chosen among several: the guard may doubt them (see `a_certain_pair_...`).
            certain: false,
        };
        let pairing = Pairing {
            inputs: vec![pair(0, POSITION)],
            layers: (1..4).map(|i| pair(i, "op_order")).collect(),
            outputs: vec![pair(4, POSITION)],
            ..Pairing::default()
        };
        (
            build(Side::Torch, torch_data),
            build(Side::Onnx, onnx),
            pairing,
        )
    }

    /// A passing layer at `index`, for tests of what is judged from layer results.
    pub(crate) fn layer_result(index: usize) -> LayerResult {
        let mut l = judged([&[1.0, 2.0], &[2.0, 4.0], &[3.0, 6.0]])
            .layers
            .remove(0);
        l.index = index;
        l
    }

    /// The TorchScript side of `chain`, for tests that walk its dataflow.
    pub(crate) fn chain_torch_capture() -> Capture {
        chain([&[1.0, 2.0], &[2.0, 4.0], &[3.0, 6.0]]).0
    }

    fn judged(onnx: [&[f32]; 3]) -> Evaluation {
        let (t, o, p) = chain(onnx);
        let cmps = compare_pairs(&t, &o, &p, &TolerancePolicy::default(), false).unwrap();
        judge(&t, &o, &p, cmps)
    }

    #[test]
    fn a_failure_nothing_downstream_repeats_is_unconfirmed() {
        // b is off by half its range, a and c agree: the signature of a wrong pair.
        let e = judged([&[1.0, 2.0], &[3.0, 4.0], &[3.0, 6.0]]);
        assert!(!e.layers[1].cmp.pass);
        assert!(e.layers[1].unconfirmed);
        assert!(!e.layers[1].fails());
        assert!(e.origins.is_empty());
        assert!(!e.layers[2].upstream_failed);
    }

    #[test]
    fn a_layer_that_is_also_a_graph_output_pair_is_never_doubtful() {
        // b and c are off and the dataflow check could trace neither (producers inside an
        // ONNX Loop): b is doubtful, c is not, for both models return c at output 0 (each
        // side's output value reads c).
        let (t, o, mut p) = chain([&[1.0, 2.0], &[3.0, 4.0], &[4.0, 6.0]]);
        p.layers[1].follows_dataflow = false;
        p.layers[2].follows_dataflow = false;
        let policy = TolerancePolicy::default();
        let e = judge(
            &t,
            &o,
            &p,
            compare_pairs(&t, &o, &p, &policy, false).unwrap(),
        );
        assert!(e.layers[1].unconfirmed && !e.layers[1].fails());
        assert!(!e.layers[2].unconfirmed && e.layers[2].fails());
    }

    #[test]
    fn only_consumers_that_hold_none_of_the_error_refute_a_doubtful_pair() {
        // b is 1.0 off. Its consumer c agreeing exactly refutes the pair; c holding a trace
        // of the error (0.05, within its own loose bound) is evidence the error is real.
        let policy = TolerancePolicy::new(Some(1e-2), Some(1e-2), Vec::new()).unwrap();
        let torch: [&[f32]; 3] = [&[1.0, 2.0], &[2.0, 4.0], &[3.0, 6.0]];
        for (c, refuted) in [([3.0f32, 6.0], true), ([3.05, 6.0], false)] {
            let (t, o, p) = chain_of(torch, [&[1.0, 2.0], &[3.0, 4.0], &c]);
            let e = judge(
                &t,
                &o,
                &p,
                compare_pairs(&t, &o, &p, &policy, false).unwrap(),
            );
            assert!(e.layers[1].unconfirmed, "{c:?}");
            assert_eq!(e.layers[1].refuted, refuted, "{c:?}");
        }
    }

    #[test]
    fn a_consumer_that_carries_the_error_under_a_looser_bound_confirms_it() {
        // A float16-like tolerance (1e-2 both parts). b is 0.5 off (its bound is 0.06); c,
        // a hundred times b's range, passes (its bound is 9), yet holds the same 0.5 that
        // a upstream does not: the error is b's, as a scaled projection's is after the
        // residual sum that follows it.
        let policy = TolerancePolicy::new(Some(1e-2), Some(1e-2), Vec::new()).unwrap();
        let torch: [&[f32]; 3] = [&[1.0, 2.0], &[2.0, 4.0], &[300.0, 600.0]];
        let (t, o, p) = chain_of(torch, [&[1.0, 2.0], &[2.5, 4.0], &[300.5, 600.0]]);
        let e = judge(
            &t,
            &o,
            &p,
            compare_pairs(&t, &o, &p, &policy, false).unwrap(),
        );
        assert!(e.layers[2].cmp.pass && !e.layers[1].cmp.pass);
        assert!(!e.layers[1].unconfirmed);
        assert_eq!(e.origins[0].layer_index, 1);
        // c without the error: b fails alone, the signature of a wrong pair.
        let (t, o, p) = chain_of(torch, [&[1.0, 2.0], &[2.5, 4.0], &[300.0, 600.0]]);
        let e = judge(
            &t,
            &o,
            &p,
            compare_pairs(&t, &o, &p, &policy, false).unwrap(),
        );
        assert!(e.layers[1].unconfirmed && e.origins.is_empty());
        // c's error already in a, upstream of b: not b's to own.
        let (t, o, p) = chain_of(torch, [&[1.0, 2.2], &[2.5, 4.0], &[300.5, 600.0]]);
        let e = judge(
            &t,
            &o,
            &p,
            compare_pairs(&t, &o, &p, &policy, false).unwrap(),
        );
        assert!(e.layers[1].unconfirmed);
    }

    #[test]
    fn a_certain_pair_is_not_doubted_because_its_consumers_agree() {
        // The same lone failure as above, but structure placed b's pair without a choice.
        let (t, o, mut p) = chain([&[1.0, 2.0], &[3.0, 4.0], &[3.0, 6.0]]);
        p.layers[1].certain = true;
        let cmps = compare_pairs(&t, &o, &p, &TolerancePolicy::default(), false).unwrap();
        let e = judge(&t, &o, &p, cmps);
        assert!(!e.layers[1].unconfirmed);
        assert!(e.layers[1].fails());
        assert_eq!(e.origins[0].layer_index, 1);
    }

    #[test]
    fn a_fault_that_fades_is_confirmed_where_it_starts() {
        // a is wrong, b still shows it, c (and the output) no longer do: the fault is real
        // and starts at a; only b, the last layer it shows at, is left unconfirmed.
        let e = judged([&[1.5, 2.0], &[2.5, 4.0], &[3.0, 6.0]]);
        assert!(e.layers[0].fails());
        assert!(e.layers[1].unconfirmed);
        assert_eq!(e.origins.len(), 1);
        assert_eq!(e.origins[0].layer_index, 0);
    }

    #[test]
    fn a_pair_off_the_dataflow_is_not_trusted_alone_nor_as_a_witness() {
        // b and c fail; c's pair breaks the dataflow. c is unconfirmed although its output
        // fails too, and b, whose only consumer is c, is not confirmed by it.
        // The ONNX output is not read from c's value here: were it, both models would return
        // c itself and the signature would place the pair.
        let not_returned = |o: &mut Capture| o.values[4].inputs.clear();
        let (t, mut o, mut p) = chain([&[1.0, 2.0], &[2.0, 5.0], &[3.0, 7.0]]);
        not_returned(&mut o);
        p.layers[2].follows_dataflow = false;
        let cmps = compare_pairs(&t, &o, &p, &TolerancePolicy::default(), false).unwrap();
        let e = judge(&t, &o, &p, cmps);
        assert!(e.layers[2].unconfirmed, "off the dataflow");
        // b's nearest trusted witness is the output, which fails: b stays confirmed.
        assert!(e.layers[1].fails());
        assert_eq!(e.origins[0].layer_index, 1);
        // With a passing output b would have no failing witness and be unconfirmed.
        let (t, mut o, mut p) = chain([&[1.0, 2.0], &[2.0, 5.0], &[3.0, 7.0]]);
        not_returned(&mut o);
        p.layers[2].follows_dataflow = false;
        o.values[4].tensor = Some(crate::capture::store::Stored::Memory(HostTensor::f32(
            vec![2],
            vec![3.0, 6.0],
        )));
        let cmps = compare_pairs(&t, &o, &p, &TolerancePolicy::default(), false).unwrap();
        let e = judge(&t, &o, &p, cmps);
        assert!(e.layers[1].unconfirmed && e.layers[2].unconfirmed);
        assert!(e.origins.is_empty());
    }

    #[test]
    fn a_fault_that_reaches_the_output_is_confirmed_all_the_way() {
        let e = judged([&[1.0, 2.0], &[2.0, 4.5], &[3.0, 6.5]]);
        assert!(e.layers[0].cmp.pass);
        assert!(e.layers[1].fails() && e.layers[2].fails());
        assert_eq!(e.origins[0].layer_index, 1);
        assert!(e.layers[2].upstream_failed);
    }
}
