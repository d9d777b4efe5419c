//! Pairing TorchScript values with ONNX values: the heart of the tool.
//!
//! Names never line up across the two sides, so pairing works from structure. Graph inputs
//! and outputs pair by position (`pair_boundary`); then the passes of `passes::PASSES` run
//! in their order over one shared `state::PairState`, each pair recording the pass that
//! made it (`paired_by` in the reports) and whether structure alone placed it. Values
//! choose only between structurally plausible candidates and repair crossed pairs; they
//! never pair across scopes because their numbers happen to be close. Every value left
//! over gets a reason (`finish`).

mod align;
mod chains;
mod clearly_closest;
mod collapsed_children;
mod common_root;
mod computed_constants;
mod constant_calls;
mod context;
mod crossed_chains;
mod export_order;
mod finish;
mod fused_into_holder;
mod fused_nodes;
mod input_reach;
mod lanes;
mod legacy_names;
mod merged_copies;
mod module_computation;
mod nearest_producers;
mod node_names;
pub mod ops;
mod parent_calls;
mod passes;
mod permuted_axes;
mod rearranged;
pub mod reason;
mod relaid;
mod repeated_calls;
mod scale_factors;
mod scope_steps;
mod scoped;
mod scopes;
mod shared_instances;
mod sibling_outputs;
mod state;
mod taken_part;
mod trace;
mod uncalled_levels;
mod unused_values;
mod value_memo;
mod wide_scan;
mod wiring;

use crate::capture::tensor::{format_shape, HostTensor, TensorData};
use crate::capture::{Capture, CapturedValue, ValueRole};
use anyhow::{bail, Result};
use context::PairCx;
use lanes::{for_each_lane, max_of, LANES};
use ops::{compatible, is_bookkeeping, vanishes_in_onnx, Family};
pub use reason::{ScaleFactor, UnpairedReason};
use scopes::GroupKey;
use serde::Serialize;
use state::PairState;
pub use state::POSITION;
use std::collections::BTreeMap;
pub use value_memo::ReadBack;

/// Below this relative distance two values agree: the same computation up to rounding (even
/// float16's); above it they are different data. The passes that judge a pair by its values
/// share it.
const AGREES: f64 = 1e-2;

/// The relative distance float32 rounding of one op stays under.
const ROUNDING: f64 = 1e-5;

#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub torch: usize,
    pub onnx: usize,
    /// The pass that placed it (`passes::PASSES`), so a reader can trust or doubt it;
    /// `position` for the graph inputs and outputs, paired before the passes.
    pub paired_by: &'static str,
    /// TorchScript values compared as part of this pair (the conv of a fused conv+bn).
    pub fused: Vec<usize>,
    /// False when the ONNX value is not computed from the ONNX twins of the values the
    /// TorchScript one is computed from, and no value that is could be found: the pair may
    /// be wrong, and its failure alone proves nothing.
    pub follows_dataflow: bool,
    /// Whether structure alone placed it (one plausible ONNX value). A failing pair that
    /// the values chose among several is doubted when nothing downstream repeats the
    /// failure; a certain one is not (`compare::evaluate`).
    pub certain: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unpaired {
    pub side: crate::capture::Side,
    pub id: usize,
    pub name: String,
    pub op: String,
    pub module: String,
    pub reason: UnpairedReason,
    /// Whether it still counts as covered (fused into a compared value, vanishes in eval).
    pub accounted: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Coverage {
    pub torch_layers_total: usize,
    pub torch_layers_paired: usize,
    pub onnx_nodes_total: usize,
    pub onnx_nodes_paired: usize,
}

impl Coverage {
    pub fn torch_ratio(&self) -> f64 {
        ratio(self.torch_layers_paired, self.torch_layers_total)
    }
    pub fn onnx_ratio(&self) -> f64 {
        ratio(self.onnx_nodes_paired, self.onnx_nodes_total)
    }
}

/// `a` of `b`; 0 of 0 is 0: a model none of whose values was compared is never covered,
/// whatever made the count empty.
fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[derive(Debug, Clone, Default)]
pub struct Pairing {
    pub inputs: Vec<Pair>,
    /// Layer pairs in TorchScript execution order.
    pub layers: Vec<Pair>,
    pub outputs: Vec<Pair>,
    pub unpaired: Vec<Unpaired>,
    pub coverage: Coverage,
}

/// Below this share of paired TorchScript layers the two files are not treated as one
/// network: the report would compare almost nothing and look clean.
pub const MIN_PLAUSIBLE_COVERAGE: f64 = 0.2;

pub fn pair(torch: &Capture, onnx: &Capture) -> Result<Pairing> {
    pair_reading(torch, onnx, ReadBack::Parallel)
}

/// `pair`, its value checks reading values back from the spill file as `read_back` allows.
pub fn pair_reading(torch: &Capture, onnx: &Capture, read_back: ReadBack) -> Result<Pairing> {
    let mut p = Pairing::default();
    pair_boundary(torch, onnx, &mut p)?;
    let boundary = p.inputs.iter().chain(&p.outputs).cloned().collect();
    let cx = PairCx::new(torch, onnx, boundary, read_back);
    let mut state = PairState::new(cx.boundary.iter().map(|b| b.onnx));
    passes::run_passes(&cx, &mut state);
    Pairer {
        cx: &cx,
        state: &mut state,
    }
    .finish(&mut p);
    if p.coverage.torch_layers_total >= 3 && p.coverage.torch_ratio() < MIN_PLAUSIBLE_COVERAGE {
        bail!(
            "the two models do not look like the same network: only {} of {} PyTorch layers \
             found an ONNX counterpart (run `align-check inspect` on each file to compare them)",
            p.coverage.torch_layers_paired,
            p.coverage.torch_layers_total
        );
    }
    Ok(p)
}

/// Graph inputs and outputs pair by position; a count, shape or dtype mismatch of the
/// outputs means the files do not describe the same function and the run cannot go on.
/// Inputs pair by their number: `signature::boundary` numbers the inputs both models were
/// given alike and an input only one of them was given (state, a differently prepared
/// array) apart, so that it has no counterpart.
fn pair_boundary(torch: &Capture, onnx: &Capture, p: &mut Pairing) -> Result<()> {
    let (ti, oi) = (torch.inputs(), onnx.inputs());
    for t in &ti {
        let Some(o) = oi.iter().find(|o| o.role == t.role) else {
            continue;
        };
        p.inputs.push(Pair {
            torch: t.id,
            onnx: o.id,
            paired_by: POSITION,
            fused: vec![],
            follows_dataflow: true,
            certain: true,
        });
    }
    let (to, oo) = (torch.outputs(), onnx.outputs());
    if to.len() != oo.len() {
        bail!(
            "the models return different outputs: PyTorch returns {} tensor(s), ONNX has {} output(s) ({})",
            to.len(),
            oo.len(),
            oo.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    for (n, (t, o)) in to.iter().zip(&oo).enumerate() {
        if t.shape.iter().product::<usize>() != o.shape.iter().product::<usize>() {
            bail!(
                "output {n} differs in shape: PyTorch {} vs ONNX '{}' {}; the models do not compute the same thing",
                format_shape(&t.shape),
                o.name,
                format_shape(&o.shape)
            );
        }
        p.outputs.push(Pair {
            torch: t.id,
            onnx: o.id,
            paired_by: POSITION,
            fused: vec![],
            follows_dataflow: true,
            certain: true,
        });
    }
    Ok(())
}

/// Whether two values can hold the same tensor in the same element order: the same dims once
/// unit dims are dropped (`[1, 8]` against `[8]` is a squeeze), or the same element count and
/// last dim (`[2, 8, 32]` against `[16, 32]`: a simplifier that fused a Linear into a Gemm
/// leaves its leading dims merged). Both must also hold the same kind of number: a TopK's
/// values and its indices have one shape, and a float never holds what an index holds.
fn same_shape(a: &CapturedValue, b: &CapturedValue) -> bool {
    if a.dtype.is_float() != b.dtype.is_float() {
        return false;
    }
    if a.shape == b.shape {
        return true;
    }
    let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    let numel = |s: &[usize]| s.iter().product::<usize>();
    // Only the flattened 2-D form: a same-rank tensor with the same last dim is as likely a
    // transpose of it (`[2, 8, 2, 16]` against `[2, 2, 8, 16]`).
    let flattened = |x: &[usize], y: &[usize]| x.len() == 2 && y.len() > 2 && x.last() == y.last();
    squeeze(&a.shape) == squeeze(&b.shape)
        || (numel(&a.shape) == numel(&b.shape)
            && (flattened(&a.shape, &b.shape) || flattened(&b.shape, &a.shape)))
}

/// Largest |a - b| over the largest |b|: the quick measure fusion uses to choose.
fn relative_distance(a: &HostTensor, b: &HostTensor) -> f64 {
    if a.numel() != b.numel() {
        return f64::INFINITY;
    }
    // float32 is nearly every case: scanned wide, without a type dispatch per element.
    let (worst, range) = match (&a.data, &b.data) {
        (TensorData::F32(x), TensorData::F32(y)) => {
            let e = wide_scan::apart(x, y);
            if e.not_finite {
                return f64::INFINITY;
            }
            (f64::from(e.max_apart), f64::from(e.max_y))
        }
        _ => {
            let (mut worst, mut range, mut nan) = ([0.0f64; LANES], [0.0f64; LANES], false);
            for_each_lane(0, a.numel(), |lane, i| {
                let (x, y) = (a.data.get_f64(i), b.data.get_f64(i));
                let d = (x - y).abs();
                worst[lane] = worst[lane].max(d);
                range[lane] = range[lane].max(y.abs());
                nan |= d.is_nan();
            });
            if nan {
                return f64::INFINITY;
            }
            (max_of(worst), max_of(range))
        }
    };
    if range == 0.0 {
        worst
    } else {
        worst / range
    }
}

/// For each value, the values computed directly from it.
fn consumers_of(values: &[CapturedValue]) -> Vec<Vec<usize>> {
    let mut consumers = vec![Vec::new(); values.len()];
    for v in values {
        for &u in v.inputs.iter().filter(|&&u| u < values.len() && u != v.id) {
            consumers[u].push(v.id);
        }
    }
    consumers
}

/// Per value, whether no graph input reaches it other than through its shape (it is computed
/// from weights, constants and sizes only). Producers come before their consumers in
/// execution order. An element unpacked from a tuple built in the graph is judged by what
/// that element was computed from (`Capture::element_inputs`).
fn constant_values(side: &Capture) -> Vec<bool> {
    let values = &side.values;
    let mut constant = vec![false; values.len()];
    for v in values {
        let inputs = side.element_inputs.get(&v.id).unwrap_or(&v.inputs);
        constant[v.id] = v.role == ValueRole::Intermediate
            && (ops::reads_only_shape(&v.op) || inputs.iter().all(|&u| u < v.id && constant[u]));
    }
    constant
}

/// ONNX values of a module call and of everything nested in it, in execution order. A
/// TorchScript module that is a leaf may still hold ONNX sub-scopes: a scripted loop body is
/// unrolled by the exporter into `/body/conv/Conv`, `/body/conv/Conv_1`, ...
fn subtree(onnx_groups: &BTreeMap<GroupKey, Vec<usize>>, key: &str) -> Vec<usize> {
    let prefix = format!("{key}/");
    let mut ids: Vec<usize> = onnx_groups
        .range(key.to_string()..)
        .take_while(|(k, _)| k.as_str() == key || k.starts_with(&prefix))
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    ids.sort_unstable();
    ids
}

fn is_layer_candidate(v: &CapturedValue) -> bool {
    v.role == ValueRole::Intermediate && !is_bookkeeping(v)
}

/// The view a pass works through: the read-only context and the shared state.
struct Pairer<'a> {
    cx: &'a PairCx<'a>,
    state: &'a mut PairState,
}

impl<'a> Pairer<'a> {
    /// The ONNX twin of TorchScript value `t`: its layer pair, or its graph input's.
    fn twin(&self, t: usize) -> Option<usize> {
        self.state.twin(t).or_else(|| {
            self.cx
                .boundary
                .iter()
                .find(|p| p.torch == t)
                .map(|p| p.onnx)
        })
    }

    /// The values of a torch group that stand for it: the module's output for a leaf module
    /// call, every functional op for a scope with child modules or the top level.
    fn representatives(&self, key: &str, t_ids: &[usize]) -> Vec<usize> {
        let comparable: Vec<usize> = t_ids
            .iter()
            .copied()
            .filter(|&id| !vanishes_in_onnx(&self.cx.torch.values[id].op))
            .filter(|&id| !self.state.is_identity(id))
            .collect();
        if self.cx.is_leaf_group(key) {
            comparable.last().copied().into_iter().collect()
        } else {
            comparable
        }
    }

    /// The representatives still without a twin or an accounted reason, in execution
    /// order. A module's output stands for the module's computation, whose kind is that of
    /// its last op that is not a layout op (GPT-2's Conv1D returns a view of its `addmm`).
    fn open_representatives(&self) -> Vec<fused_nodes::Open> {
        let tv = &self.cx.torch.values;
        let mut open: Vec<fused_nodes::Open> = self
            .cx
            .torch_groups
            .iter()
            .flat_map(|(k, ids)| {
                let leaf = self.cx.is_leaf_group(k);
                let computing = ids
                    .iter()
                    .rev()
                    .find(|&&id| !ops::torch_families(&tv[id].op).contains(Family::Layout))
                    .copied();
                self.representatives(k, ids)
                    .into_iter()
                    .map(move |id| fused_nodes::Open {
                        id,
                        module_output: leaf,
                        kind_of: if leaf { computing.unwrap_or(id) } else { id },
                    })
            })
            .filter(|v| !self.state.is_paired(v.id) && !self.state.accounted(v.id))
            .collect();
        open.sort_unstable_by_key(|v| v.id);
        open
    }
}

#[cfg(test)]
mod tests;
