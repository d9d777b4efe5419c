//! Pairing TorchScript values with ONNX values: the heart of the tool.
//!
//! Names never line up across the two sides, so pairing works from structure, in this order:
//! graph inputs and outputs by position; module calls by scope path and call index (legacy
//! and dynamo scopes are both normalised to dotted paths); inside a scope, ops by
//! order-preserving alignment of compatible ops with equal shapes; then fusion, where the
//! values themselves choose between the structurally plausible candidates (a legacy-exported
//! Conv carries the BatchNorm's output, not the conv's); last, every pair is checked against
//! the wiring of both graphs (`dataflow`). Values never pair across scopes because their
//! numbers happen to be close. Every pair records how it was made and every
//! value left over gets a reason.

mod align;
mod dataflow;
mod decomposition;
mod fused_nodes;
pub mod ops;
mod scopes;

use crate::capture::tensor::{format_shape, HostTensor, TensorData};
use crate::capture::{Capture, CapturedValue, ValueRole};
use anyhow::{bail, Result};
use ops::{compatible, is_bookkeeping, vanishes_in_onnx};
use scopes::{assign_keys, key_path, known_paths, parent_paths, GroupKey};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How a pair was made, so a reader can trust or doubt it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedBy {
    /// Graph input or output at the same position.
    Position,
    /// The output of a module call matched to the last ONNX value of the same call.
    ModuleOutput,
    /// Same scope, compatible op, same shape, same relative order.
    OpOrder,
    /// A module whose ONNX twin was fused into its producer's node (BatchNorm into Conv);
    /// the values chose the fused module's output over the producer's.
    Fusion,
    /// No scopes on the ONNX side: compatible ops aligned over the whole graph.
    GlobalOrder,
    /// Several ONNX values of a decomposition (a roll's Slice/Concat halves, GELU's partial
    /// products) had the op's kind and shape in the same place of the order; the values
    /// chose the one that completes the op.
    DecomposedOp,
    /// The value order placed the pair on an ONNX value not computed from its producers'
    /// twins (an optimiser sorted the graph again); the ONNX value of the same call, kind
    /// and shape that is computed from them was taken instead.
    Dataflow,
}

impl PairedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            PairedBy::Position => "position",
            PairedBy::ModuleOutput => "module_output",
            PairedBy::OpOrder => "op_order",
            PairedBy::Fusion => "fusion",
            PairedBy::GlobalOrder => "global_order",
            PairedBy::DecomposedOp => "decomposed_op",
            PairedBy::Dataflow => "dataflow",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub torch: usize,
    pub onnx: usize,
    pub paired_by: PairedBy,
    /// TorchScript values compared as part of this pair (the conv of a fused conv+bn).
    pub fused: Vec<usize>,
    /// False when the ONNX value is not computed from the ONNX twins of the values the
    /// TorchScript one is computed from, and no value that is could be found: the pair may
    /// be wrong, and its failure alone proves nothing.
    pub follows_dataflow: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unpaired {
    pub side: crate::capture::Side,
    pub id: usize,
    pub name: String,
    pub op: String,
    pub module: String,
    pub reason: String,
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

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
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
    let mut p = Pairing::default();
    pair_boundary(torch, onnx, &mut p)?;
    Pairer::new(torch, onnx).run(&mut p);
    if p.coverage.torch_layers_total >= 3 && p.coverage.torch_ratio() < MIN_PLAUSIBLE_COVERAGE {
        bail!(
            "the two models do not look like the same network: only {} of {} TorchScript layers \
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
            paired_by: PairedBy::Position,
            fused: vec![],
            follows_dataflow: true,
        });
    }
    let (to, oo) = (torch.outputs(), onnx.outputs());
    if to.len() != oo.len() {
        bail!(
            "the models return different outputs: TorchScript returns {} tensor(s), ONNX has {} output(s) ({})",
            to.len(),
            oo.len(),
            oo.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    for (n, (t, o)) in to.iter().zip(&oo).enumerate() {
        if t.shape.iter().product::<usize>() != o.shape.iter().product::<usize>() {
            bail!(
                "output {n} differs in shape: TorchScript {} vs ONNX '{}' {}; the models do not compute the same thing",
                format_shape(&t.shape),
                o.name,
                format_shape(&o.shape)
            );
        }
        p.outputs.push(Pair {
            torch: t.id,
            onnx: o.id,
            paired_by: PairedBy::Position,
            fused: vec![],
            follows_dataflow: true,
        });
    }
    Ok(())
}

/// Whether two values can hold the same tensor in the same element order: the same dims once
/// unit dims are dropped (`[1, 8]` against `[8]` is a squeeze), or the same element count and
/// last dim (`[2, 8, 32]` against `[16, 32]`: a simplifier that fused a Linear into a Gemm
/// leaves its leading dims merged).
fn same_shape(a: &CapturedValue, b: &CapturedValue) -> bool {
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
    let (mut worst, mut range) = (0.0f64, 0.0f64);
    let mut add = |x: f64, y: f64| {
        let d = (x - y).abs();
        worst = worst.max(d);
        range = range.max(y.abs());
        !d.is_nan()
    };
    // float32 is nearly every case; reading it directly avoids a type dispatch per element.
    let all_finite = match (&a.data, &b.data) {
        (TensorData::F32(x), TensorData::F32(y)) => x
            .iter()
            .zip(y)
            .all(|(&x, &y)| add(f64::from(x), f64::from(y))),
        _ => (0..a.numel()).all(|i| add(a.data.get_f64(i), b.data.get_f64(i))),
    };
    if !all_finite {
        return f64::INFINITY;
    }
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
/// execution order.
fn constant_values(values: &[CapturedValue]) -> Vec<bool> {
    let mut constant = vec![false; values.len()];
    for v in values {
        constant[v.id] = v.role == ValueRole::Intermediate
            && (ops::reads_only_shape(&v.op) || v.inputs.iter().all(|&u| u < v.id && constant[u]));
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

struct Pairer<'a> {
    torch: &'a Capture,
    onnx: &'a Capture,
    torch_keys: Vec<Option<GroupKey>>,
    onnx_keys: Vec<Option<GroupKey>>,
    /// Modules with child modules: their groups hold functional ops, not a module output.
    torch_parents: HashSet<String>,
    onnx_has_scopes: bool,
    torch_to_onnx: HashMap<usize, (usize, PairedBy)>,
    onnx_paired: HashSet<usize>,
    torch_reason: HashMap<usize, (String, bool)>,
    fused_into: HashMap<usize, Vec<usize>>,
    /// ONNX values inside a compared module call: the first nodes of a decomposition, the
    /// unrolled iterations of a loop. Covered, though not compared themselves.
    onnx_absorbed: HashMap<usize, String>,
    /// TorchScript values whose pair breaks the dataflow (see `dataflow`).
    off_dataflow: HashSet<usize>,
}

fn is_layer_candidate(v: &CapturedValue) -> bool {
    v.role == ValueRole::Intermediate && !is_bookkeeping(v)
}

impl<'a> Pairer<'a> {
    fn new(torch: &'a Capture, onnx: &'a Capture) -> Self {
        let skip = |v: &CapturedValue| !is_layer_candidate(v);
        // What no model input reaches (position ids from an `arange`, an all-ones mask, a
        // detector's anchor grid) is folded into initializers by the exporters: it is
        // bookkeeping like shape arithmetic, and pairing it by order and shape could only
        // meet some unrelated ONNX value.
        let constant = constant_values(&torch.values);
        let torch_skip = |v: &CapturedValue| skip(v) || constant[v.id];
        let torch_paths = known_paths(&torch.values);
        let torch_keys = assign_keys(&torch.values, &torch_skip, None);
        let onnx_keys = assign_keys(&onnx.values, &skip, Some(&torch_paths));
        // Scopes that name no TorchScript module (a converter's placeholder such as
        // `_empty_nn_module_stack_from_metadata_hook`) are no scopes at all.
        let onnx_has_scopes = onnx_keys
            .iter()
            .flatten()
            .any(|k| torch_paths.contains(key_path(k)));
        Pairer {
            torch,
            onnx,
            torch_keys,
            onnx_keys,
            torch_parents: parent_paths(&torch.values),
            onnx_has_scopes,
            torch_to_onnx: HashMap::new(),
            onnx_paired: HashSet::new(),
            torch_reason: HashMap::new(),
            fused_into: HashMap::new(),
            onnx_absorbed: HashMap::new(),
            off_dataflow: HashSet::new(),
        }
    }

    fn groups(keys: &[Option<GroupKey>]) -> BTreeMap<GroupKey, Vec<usize>> {
        let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
        for (id, key) in keys.iter().enumerate() {
            if let Some(k) = key {
                groups.entry(k.clone()).or_default().push(id);
            }
        }
        groups
    }

    fn is_leaf_group(&self, key: &str) -> bool {
        !key.is_empty() && !self.torch_parents.contains(key_path(key))
    }

    fn add_pair(&mut self, t: usize, o: usize, by: PairedBy) {
        self.torch_to_onnx.insert(t, (o, by));
        self.onnx_paired.insert(o);
    }

    /// Whether TorchScript value `t` is left unpaired for a reason that still counts it as
    /// covered (fused, identity in eval mode, internal to a compared call).
    fn accounted(&self, t: usize) -> bool {
        self.torch_reason
            .get(&t)
            .is_some_and(|(_, accounted)| *accounted)
    }

    /// The TorchScript value paired with ONNX value `o`, if any.
    fn holder(&self, o: usize) -> Option<usize> {
        self.torch_to_onnx
            .iter()
            .find(|(_, &(held, _))| held == o)
            .map(|(&t, _)| t)
    }

    /// How far ONNX value `c` is from TorchScript value `t` (`relative_distance`); infinite
    /// when either is not at hand. Spilled data is read back for the two values, then dropped.
    fn distance(&self, t: usize, c: usize) -> f64 {
        match (self.torch.values[t].data(), self.onnx.values[c].data()) {
            (Ok(reference), Ok(test)) => relative_distance(&test, &reference),
            _ => f64::INFINITY,
        }
    }

    fn run(mut self, p: &mut Pairing) {
        for pair in p.inputs.iter().chain(&p.outputs) {
            self.onnx_paired.insert(pair.onnx);
        }
        let torch_groups = Self::groups(&self.torch_keys);
        let onnx_groups = Self::groups(&self.onnx_keys);
        if self.onnx_has_scopes {
            for (key, t_ids) in &torch_groups {
                let o_ids = if self.is_leaf_group(key) {
                    subtree(&onnx_groups, key)
                } else {
                    onnx_groups.get(key).cloned().unwrap_or_default()
                };
                if o_ids.is_empty() {
                    self.leave_group(key, t_ids);
                } else {
                    self.pair_group(key, t_ids, &o_ids);
                }
            }
            self.resolve_fusion(&torch_groups);
        } else {
            self.pair_globally(&torch_groups);
        }
        let boundary: Vec<Pair> = p.inputs.iter().chain(&p.outputs).cloned().collect();
        self.complete_decompositions();
        self.uncross_siblings(&boundary);
        self.repair_dataflow(&boundary);
        self.split_partial_linear();
        let open = self.open_representatives(&torch_groups);
        self.pair_scopeless(&boundary, &open);
        // A module call whose output the dataflow paired covers the values inside it.
        for (key, ids) in &torch_groups {
            let paired = ids.iter().any(|id| self.torch_to_onnx.contains_key(id));
            if self.is_leaf_group(key) && paired {
                self.explain_unpaired(key, ids, "");
            }
        }
        self.account_fused_into_consumers(&boundary, &open);
        self.finish(p, &torch_groups);
    }

    /// The values of a torch group that stand for it: the module's output for a leaf module
    /// call, every functional op for a scope with child modules or the top level.
    fn representatives(&self, key: &str, t_ids: &[usize]) -> Vec<usize> {
        let comparable: Vec<usize> = t_ids
            .iter()
            .copied()
            .filter(|&id| !vanishes_in_onnx(&self.torch.values[id].op))
            .collect();
        if self.is_leaf_group(key) {
            comparable.last().copied().into_iter().collect()
        } else {
            comparable
        }
    }

    /// The representatives still without a twin or an accounted reason, in execution
    /// order. A module's output stands for the module's computation, whose kind is that of
    /// its last op that is not a layout op (GPT-2's Conv1D returns a view of its `addmm`).
    fn open_representatives(
        &self,
        torch_groups: &BTreeMap<GroupKey, Vec<usize>>,
    ) -> Vec<fused_nodes::Open> {
        let tv = &self.torch.values;
        let mut open: Vec<fused_nodes::Open> = torch_groups
            .iter()
            .flat_map(|(k, ids)| {
                let leaf = self.is_leaf_group(k);
                let computing = ids
                    .iter()
                    .rev()
                    .find(|&&id| !ops::torch_families(&tv[id].op).contains(&"layout"))
                    .copied();
                self.representatives(k, ids)
                    .into_iter()
                    .map(move |id| fused_nodes::Open {
                        id,
                        module_output: leaf,
                        kind_of: if leaf { computing.unwrap_or(id) } else { id },
                    })
            })
            .filter(|v| !self.torch_to_onnx.contains_key(&v.id) && !self.accounted(v.id))
            .collect();
        open.sort_unstable_by_key(|v| v.id);
        open
    }

    fn pair_group(&mut self, key: &str, t_ids: &[usize], o_ids: &[usize]) {
        let reps = self.representatives(key, t_ids);
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        if self.is_leaf_group(key) {
            // A module's output is the last ONNX value of the same call with its shape.
            if let Some(&t) = reps.first() {
                if let Some(&o) = o_ids.iter().rev().find(|&&o| same_shape(&tv[t], &ov[o])) {
                    self.add_pair(t, o, PairedBy::ModuleOutput);
                    for &other in o_ids.iter().filter(|&&i| i != o) {
                        self.onnx_absorbed.insert(other, key_path(key).to_string());
                    }
                }
            }
        } else {
            for (t, o, by) in self.align_by_order(&reps, o_ids, PairedBy::OpOrder) {
                self.add_pair(t, o, by);
            }
        }
        let otherwise = format!(
            "no ONNX op of a compatible kind and shape in scope '{}'",
            key_path(key)
        );
        self.explain_unpaired(key, t_ids, &otherwise);
    }

    /// Gives every value of group `key` that found no ONNX twin its reason, and whether it
    /// still counts as covered; `otherwise` is the reason when nothing explains it.
    fn explain_unpaired(&mut self, key: &str, t_ids: &[usize], otherwise: &str) {
        let call_compared = t_ids.iter().any(|id| self.torch_to_onnx.contains_key(id));
        for &id in t_ids {
            if self.torch_to_onnx.contains_key(&id) {
                continue;
            }
            let op = &self.torch.values[id].op;
            let reason = if vanishes_in_onnx(op) {
                ("identity in eval mode; ONNX drops it".to_string(), true)
            } else if op == "prim::Loop" {
                // The body's values are observed per iteration and paired with the unrolled
                // ONNX nodes; the loop's result is the last iteration's value.
                (
                    "a loop's result is its last iteration's value, compared inside the loop"
                        .to_string(),
                    true,
                )
            } else if self.is_leaf_group(key) && call_compared {
                (format!("internal to module {}", key_path(key)), true)
            } else if ops::torch_families(op).contains(&"layout") {
                (
                    "layout op without an ONNX twin (the exporter merged or folded it); it computes nothing to compare".to_string(),
                    true,
                )
            } else {
                (otherwise.to_string(), false)
            };
            self.torch_reason.insert(id, reason);
        }
    }

    fn leave_group(&mut self, key: &str, t_ids: &[usize]) {
        let path = key_path(key);
        let nested = format!("{path}.");
        // The ONNX twin exists but sits inside an If branch or Loop body, where no value can
        // be a graph output: the control-flow node's result is compared instead.
        let in_subgraph = self
            .onnx
            .uncapturable
            .iter()
            .filter(|_| !path.is_empty())
            .find(|u| u.module == path || u.module.starts_with(&nested));
        for &id in t_ids {
            let op = &self.torch.values[id].op;
            let reason = if vanishes_in_onnx(op) {
                ("identity in eval mode; ONNX drops it".to_string(), true)
            } else if let Some(u) = in_subgraph {
                (
                    format!(
                        "its ONNX twin is inside a control-flow subgraph ({}); compared through that node's result",
                        u.reason.split(';').next().unwrap_or_default()
                    ),
                    true,
                )
            } else {
                (
                    format!("no ONNX node carries the scope '{}'", key_path(key)),
                    false,
                )
            };
            self.torch_reason.insert(id, reason);
        }
    }

    /// Pairs TorchScript values with ONNX values of compatible kind and shape, keeping the
    /// order of both. The alignment fixes each pair's place, not always its ONNX value: when
    /// several unpaired candidates fit between the neighbouring pairs (a decomposition whose
    /// partial results have the op's shape), the values choose the one that completes the
    /// op. Returns (torch id, onnx id, how).
    fn align_by_order(
        &self,
        reps: &[usize],
        o_ids: &[usize],
        by: PairedBy,
    ) -> Vec<(usize, usize, PairedBy)> {
        let (tv, ov) = (&self.torch.values, &self.onnx.values);
        let fits = |i: usize, j: usize| {
            let (t, o) = (&tv[reps[i]], &ov[o_ids[j]]);
            same_shape(t, o) && compatible(&t.op, &o.op)
        };
        let found = align::align(reps.len(), o_ids.len(), fits);
        let mut out = Vec::with_capacity(found.len());
        let mut lower = 0;
        for (k, &(i, j)) in found.iter().enumerate() {
            let upper = found.get(k + 1).map_or(o_ids.len(), |&(_, next)| next);
            let candidates: Vec<usize> = (lower..upper)
                .filter(|&c| c == j || (fits(i, c) && !self.onnx_paired.contains(&o_ids[c])))
                .collect();
            let chosen = if candidates.len() > 1 {
                self.closest(reps[i], &candidates, o_ids).unwrap_or(j)
            } else {
                j
            };
            let how = if chosen != j || candidates.len() > 1 {
                PairedBy::DecomposedOp
            } else {
                by
            };
            out.push((reps[i], o_ids[chosen], how));
            lower = chosen + 1;
        }
        out
    }

    /// The candidate (index into `o_ids`) whose value is closest to TorchScript value `t`,
    /// the later one on a tie; `None` when some data is not at hand.
    fn closest(&self, t: usize, candidates: &[usize], o_ids: &[usize]) -> Option<usize> {
        let reference = self.torch.values[t].data().ok()?;
        let mut best: Option<(f64, usize)> = None;
        for &c in candidates.iter().rev() {
            let test = self.onnx.values[o_ids[c]].data().ok()?;
            let d = relative_distance(&test, &reference);
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// Exporters fold a module into its neighbour (BatchNorm into the preceding Conv). The
    /// legacy exporter keeps the conv's scope, so the Conv node was paired with the conv's
    /// output although it computes the BatchNorm's; the dynamo exporter keeps the BatchNorm's
    /// scope and the conv has no node. Both are repaired here.
    fn resolve_fusion(&mut self, torch_groups: &BTreeMap<GroupKey, Vec<usize>>) {
        let tv = &self.torch.values;
        let ov = &self.onnx.values;
        // Output value of every leaf module call, in execution order.
        let mut module_outputs: Vec<(usize, String)> = torch_groups
            .iter()
            .filter(|(k, _)| self.is_leaf_group(k))
            .filter_map(|(k, ids)| {
                self.representatives(k, ids)
                    .first()
                    .map(|&id| (id, key_path(k).to_string()))
            })
            .collect();
        // A normalisation that is a functional op of a module with children (timm's
        // BatchNormAct2d calls F.batch_norm, then its own `act`) folds into the Conv too.
        module_outputs.extend(
            torch_groups
                .iter()
                .filter(|(k, _)| !self.is_leaf_group(k))
                .flat_map(|(k, ids)| ids.iter().map(move |&id| (id, key_path(k).to_string())))
                .filter(|&(id, _)| ops::folds_into_conv(&tv[id].op)),
        );
        module_outputs.sort();
        let output_of: HashMap<usize, String> = module_outputs.iter().cloned().collect();

        // Legacy: an unpaired module whose producer module is paired, and whose output the
        // producer's ONNX value matches better than the producer's own output.
        let mut changed = true;
        while changed {
            changed = false;
            for &(v, _) in &module_outputs {
                if self.torch_to_onnx.contains_key(&v) {
                    continue;
                }
                let Some(&u) = tv[v]
                    .inputs
                    .iter()
                    .find(|&&u| output_of.contains_key(&u) && self.torch_to_onnx.contains_key(&u))
                else {
                    continue;
                };
                let (o, _) = self.torch_to_onnx[&u];
                if !same_shape(&tv[v], &ov[o]) {
                    continue;
                }
                // Spilled data is read back for the three values involved, then dropped.
                let (Ok(x), Ok(tu), Ok(tvv)) = (ov[o].data(), tv[u].data(), tv[v].data()) else {
                    continue;
                };
                if relative_distance(&x, &tvv) < relative_distance(&x, &tu) {
                    self.torch_to_onnx.remove(&u);
                    self.torch_to_onnx.insert(v, (o, PairedBy::Fusion));
                    let mut fused = self.fused_into.remove(&u).unwrap_or_default();
                    fused.push(u);
                    self.fused_into.insert(v, fused);
                    self.torch_reason.remove(&v);
                    self.torch_reason.insert(
                        u,
                        (
                            format!(
                                "fused into ONNX node {} (compared after {})",
                                ov[o].node, output_of[&v]
                            ),
                            true,
                        ),
                    );
                    changed = true;
                }
            }
        }

        // Dynamo: an unpaired module whose consumer module is paired with a node of the
        // unpaired module's own kind (a Conv carrying the BatchNorm scope).
        for &(u, _) in &module_outputs {
            let already_fused = self.accounted(u);
            if self.torch_to_onnx.contains_key(&u) || already_fused {
                continue;
            }
            let consumer = module_outputs
                .iter()
                .find(|&&(v, _)| tv[v].inputs.contains(&u) && self.torch_to_onnx.contains_key(&v));
            if let Some(&(v, ref v_path)) = consumer {
                let (o, _) = self.torch_to_onnx[&v];
                let conv = ops::torch_families(&tv[u].op).contains(&"conv");
                if conv && compatible(&tv[u].op, &ov[o].op) {
                    self.fused_into.entry(v).or_default().push(u);
                    self.torch_to_onnx.insert(v, (o, PairedBy::Fusion));
                    self.torch_reason.insert(
                        u,
                        (
                            format!(
                                "fused into ONNX node {} (compared after {v_path})",
                                ov[o].node
                            ),
                            true,
                        ),
                    );
                }
            }
        }
    }

    /// Graphs without scopes (run through a simplifier) still keep op order: align every
    /// TorchScript layer output with the whole ONNX graph.
    fn pair_globally(&mut self, torch_groups: &BTreeMap<GroupKey, Vec<usize>>) {
        let mut reps: Vec<usize> = torch_groups
            .iter()
            .flat_map(|(k, ids)| self.representatives(k, ids))
            .collect();
        reps.sort();
        let onnx_ids: Vec<usize> = self
            .onnx
            .values
            .iter()
            .filter(|v| is_layer_candidate(v))
            .map(|v| v.id)
            .collect();
        for (t, o, by) in self.align_by_order(&reps, &onnx_ids, PairedBy::GlobalOrder) {
            self.add_pair(t, o, by);
        }
        for (key, ids) in torch_groups {
            self.explain_unpaired(
                key,
                ids,
                "the ONNX graph has no scopes and no compatible op in order",
            );
        }
    }

    fn finish(self, p: &mut Pairing, torch_groups: &BTreeMap<GroupKey, Vec<usize>>) {
        let tv = &self.torch.values;
        let ov = &self.onnx.values;

        let mut layers: Vec<Pair> = self
            .torch_to_onnx
            .iter()
            .map(|(&t, &(o, by))| Pair {
                torch: t,
                onnx: o,
                paired_by: by,
                fused: self.fused_into.get(&t).cloned().unwrap_or_default(),
                follows_dataflow: !self.off_dataflow.contains(&t),
            })
            .collect();
        layers.sort_by_key(|pair| pair.torch);
        let onnx_paired: HashSet<usize> = layers.iter().map(|l| l.onnx).collect();

        // Torch coverage: leaf module calls count once, functional ops each.
        let mut cov = Coverage::default();
        for (key, ids) in torch_groups {
            let counted: Vec<usize> = if self.is_leaf_group(key) {
                ids.last().copied().into_iter().collect()
            } else {
                ids.clone()
            };
            for id in counted {
                cov.torch_layers_total += 1;
                let covered = self.torch_to_onnx.contains_key(&id)
                    || self.accounted(id)
                    || (self.is_leaf_group(key)
                        && ids.iter().any(|i| self.torch_to_onnx.contains_key(i)));
                if covered {
                    cov.torch_layers_paired += 1;
                }
            }
        }
        let mut reasons: Vec<(&usize, &(String, bool))> = self.torch_reason.iter().collect();
        reasons.sort_by_key(|(id, _)| **id);
        for (&id, (reason, accounted)) in reasons {
            let v = &tv[id];
            p.unpaired.push(Unpaired {
                side: crate::capture::Side::Torch,
                id,
                name: v.name.clone(),
                op: v.op.clone(),
                module: v.module_path().to_string(),
                reason: reason.clone(),
                accounted: *accounted,
            });
        }

        // ONNX coverage: a node counts when its value is compared, or when it lies inside a
        // module call whose output is compared (the first nodes of a decomposition).
        for v in ov.iter().filter(|v| is_layer_candidate(v)) {
            cov.onnx_nodes_total += 1;
            let key = self.onnx_keys[v.id].as_ref();
            if onnx_paired.contains(&v.id)
                || self.onnx_paired.contains(&v.id)
                || self.onnx_absorbed.contains_key(&v.id)
            {
                cov.onnx_nodes_paired += 1;
                continue;
            }
            let reason = match key {
                Some(k) if !torch_groups.contains_key(k) && !k.is_empty() => format!(
                    "scope '{}' has no TorchScript module call to match",
                    key_path(k)
                ),
                Some(k) => format!(
                    "no TorchScript op of a compatible kind and shape in scope '{}'",
                    key_path(k)
                ),
                None => "not a layer".to_string(),
            };
            p.unpaired.push(Unpaired {
                side: crate::capture::Side::Onnx,
                id: v.id,
                name: v.name.clone(),
                op: v.op.clone(),
                module: v.module_path().to_string(),
                reason,
                accounted: false,
            });
        }
        p.layers = layers;
        p.coverage = cov;
    }
}

#[cfg(test)]
mod tests;
