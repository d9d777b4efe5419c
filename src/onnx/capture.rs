//! The ONNX side's instrumented run: expose every node output, run through ONNX Runtime and
//! describe each value for pairing.
//!
//! The capture lists, in order: the graph inputs, every node output in execution order, then
//! the graph outputs (as their own values pointing at the node output they repeat, so that
//! inputs and outputs pair by position). Anything the run cannot hand back as a tensor of a
//! supported type is listed as uncapturable with the reason, never dropped silently.
//!
//! An [`OnnxRunner`] serves every input sample. Without a memory budget it builds one session
//! exposing every value and fetches them all in one run. With a budget the values are fetched
//! in groups whose estimated size fits it, each group from a session that exposes only that
//! group: ONNX Runtime holds every graph output of a run until the run ends, fetched or not.
//! Those sessions are built from the graph's structure with the weights moved to a temporary
//! external-data file (`weights.rs`), so building one does not copy the weights again. Each
//! group runs only the segment of the graph that computes it, fed from the values earlier
//! groups fetched (`segmented.rs`), so that the groups together cost about one forward. Each
//! value is kept as the caller's [`Keep`] says the moment it is converted.
//! `run_plain` runs the unmodified model with the same session options; tests use it to prove
//! that instrumenting the model does not change its answer.

use super::convert::from_ort;
use super::expose::{expose_steered, ExposedValue};
use super::model::OnnxModel;
use super::runtime;
use super::segmented;
use super::session_run::{run, Fetched, RunOutputs};
use super::signature::{self, Dim, InputSpec};
use super::steering::Steering;
use crate::capture::fx_node::FxNode;
use crate::capture::store::Keep;
use crate::capture::tensor::{format_shape, HostTensor};
use crate::capture::{Capture, CapturedValue, Side, Uncapturable, ValueRole};
use anyhow::{anyhow, bail, Context, Result};
use ort::session::Session;
use ort::value::ValueType;
use prost::Message;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Runs the instrumented `model` once on `inputs` (exactly the signature's inputs, by name)
/// and returns every value it computed, in memory.
pub fn capture(
    model: &OnnxModel,
    inputs: &[(String, HostTensor)],
    threads: usize,
    custom_ops: Option<&Path>,
) -> Result<Capture> {
    OnnxRunner::new(model, threads, custom_ops)?.capture(inputs, &Keep::Memory, None)
}

/// How one group's run may hold its bytes under a memory budget.
#[derive(Debug, Clone, Copy)]
pub struct GroupSplit {
    /// Estimated bytes of the values one run fetches.
    pub fetch: u64,
    /// Bytes of earlier values a segment may be fed (more runs the whole graph instead).
    pub feed: u64,
}

/// How the runner gets its sessions.
enum Sessions {
    /// One session exposing every value (no budget).
    All(Session),
    /// A session per group of values, built on demand from `model`: the instrumented graph
    /// with its weights in `_weights` (a temporary folder) or in the user's own external
    /// data files.
    PerGroup {
        model: Box<OnnxModel>,
        n_original_outputs: usize,
        _weights: Option<tempfile::TempDir>,
        /// Bytes of weights each group session loads.
        weight_bytes: u64,
    },
}

/// An instrumented model, ready to capture any number of input samples.
pub struct OnnxRunner {
    path: PathBuf,
    specs: Vec<InputSpec>,
    output_names: Vec<String>,
    exposed: Vec<ExposedValue>,
    uncapturable: Vec<Uncapturable>,
    sessions: Sessions,
    threads: usize,
    custom_ops: Option<PathBuf>,
    /// Bytes of each fetchable value where ONNX Runtime's inferred type fixes them.
    estimates: HashMap<String, u64>,
    /// ONNX Runtime runs the last capture took (more than one under a memory budget).
    pub runs_last_capture: usize,
    /// Of those, the groups that ran the whole graph instead of a segment.
    pub whole_graph_runs_last_capture: usize,
    /// `-v`: say on stderr why a group runs the whole graph instead of a segment.
    pub verbose: bool,
    /// Control-flow nodes left in the graph it runs (their values stay inside).
    pub kept_control_flow: usize,
    /// The conditions and trip counts it was built with; isolation cuts the same graph.
    pub steering: Steering,
}

impl OnnxRunner {
    /// The signature of the model as saved (read before the graph was instrumented).
    pub fn signature(&self) -> Signature {
        Signature {
            path: self.path.clone(),
            specs: self.specs.clone(),
            output_names: self.output_names.clone(),
        }
    }

    pub fn new(model: &OnnxModel, threads: usize, custom_ops: Option<&Path>) -> Result<Self> {
        Self::from_model(model.clone(), threads, custom_ops, false)
    }

    /// Builds the session from `model`, releasing each copy of the weights as soon as the
    /// next one exists: the file's bytes (which the decoded weights slice, `owned_tensors`)
    /// after the instrumented model is serialised, those bytes after ONNX Runtime has built
    /// its session. A large model is then never held more than about twice at once.
    ///
    /// `per_group` prepares for fetching values in groups under a memory budget.
    pub fn from_model(
        model: OnnxModel,
        threads: usize,
        custom_ops: Option<&Path>,
        per_group: bool,
    ) -> Result<Self> {
        Self::steered(model, (threads, custom_ops), per_group, Steering::default())
    }

    /// [`from_model`](Self::from_model) with the control flow `steering` (measured on the
    /// check's inputs, `probe`) made observable too.
    pub fn steered(
        mut model: OnnxModel,
        (threads, custom_ops): (usize, Option<&Path>),
        per_group: bool,
        steering: Steering,
    ) -> Result<Self> {
        let specs = signature::inputs(&model)?;
        let output_names = signature::output_names(&model);
        // Before the weights move out: a loop's trip count may be an initializer.
        let kept = super::control_flow::make_observable(&mut model.proto, &steering);
        // The weights move into the instrumented copy instead of being cloned with it.
        let weights = take_initializers(&mut model.proto);
        let mut exposed = expose_steered(&model.proto, &steering)
            .map_err(|e| anyhow!("ONNX model {}: {e}", model.path.display()))?;
        if let Some(graph) = exposed.model.graph.as_mut() {
            graph.initializer = weights;
        }
        // A quantised operator's integer output is captured as the float it stands for.
        super::dequantize::make_observable(&mut exposed.model, output_names.len());
        let mut weights_dir = None;
        let mut weight_bytes = 0;
        if per_group && model.external_data_dir.is_none() {
            let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
            weight_bytes = super::weights::externalize(&mut exposed.model, dir.path())?;
            weights_dir = Some(dir);
        }
        let bytes = exposed.model.encode_to_vec();
        // Without groups only the serialised bytes need the weights from here on (with
        // groups the initializers point into the weights file and must stay).
        if !per_group {
            drop(take_initializers(&mut exposed.model));
        }
        let instrumented = OnnxModel {
            path: model.path.clone(),
            proto: exposed.model,
            external_data_dir: weights_dir
                .as_ref()
                .map(|d| d.path().to_path_buf())
                .or_else(|| model.external_data_dir.clone()),
        };
        let session = runtime::session(&instrumented, &bytes, threads, custom_ops)?;
        drop(bytes);
        // ONNX Runtime's inferred types give the size of most values before any run.
        let estimates = session
            .outputs()
            .iter()
            .filter_map(|o| Some((o.name().to_string(), estimated_bytes(o.dtype())?)))
            .collect();
        let sessions = if per_group {
            drop(session);
            Sessions::PerGroup {
                model: Box::new(instrumented),
                n_original_outputs: output_names.len(),
                _weights: weights_dir,
                weight_bytes,
            }
        } else {
            Sessions::All(session)
        };
        Ok(OnnxRunner {
            path: model.path.clone(),
            specs,
            output_names,
            exposed: exposed.values,
            uncapturable: exposed.uncapturable,
            sessions,
            threads,
            custom_ops: custom_ops.map(Path::to_path_buf),
            estimates,
            runs_last_capture: 0,
            whole_graph_runs_last_capture: 0,
            verbose: false,
            kept_control_flow: kept.len(),
            steering,
        })
    }

    /// A session that exposes only the original outputs and `group`; `None` when the
    /// runner has one session for everything.
    fn group_session(&self, group: &[String]) -> Result<Option<Session>> {
        let Sessions::PerGroup {
            model,
            n_original_outputs,
            ..
        } = &self.sessions
        else {
            return Ok(None);
        };
        let mut proto = model.proto.clone();
        if let Some(graph) = proto.graph.as_mut() {
            let mut outputs: Vec<_> = graph.output.drain(..).collect();
            let rest = outputs.split_off((*n_original_outputs).min(outputs.len()));
            let wanted: HashSet<&str> = group.iter().map(String::as_str).collect();
            outputs.extend(rest.into_iter().filter(|o| wanted.contains(o.name())));
            graph.output = outputs;
        }
        let bytes = proto.encode_to_vec();
        drop(proto);
        runtime::session(model, &bytes, self.threads, self.custom_ops.as_deref()).map(Some)
    }

    /// Every value a capture fetches: exposed node outputs, then graph outputs that no node
    /// computes (a graph input passed through, an initializer).
    fn fetch_list(&self) -> Vec<String> {
        let mut names: Vec<String> = self.exposed.iter().map(|v| v.name.clone()).collect();
        let known: HashSet<&str> = self.exposed.iter().map(|v| v.name.as_str()).collect();
        let extra: Vec<String> = self
            .output_names
            .iter()
            .filter(|n| !known.contains(n.as_str()))
            .cloned()
            .collect();
        names.extend(extra);
        names
    }

    /// Splits the fetch list into groups of at most `budget` estimated bytes (a value larger
    /// than the budget goes alone). Values whose size ONNX Runtime could not infer count as
    /// the largest known one, so that a group errs on the small side.
    fn groups(&self, names: Vec<String>, budget: Option<u64>) -> Vec<Vec<String>> {
        let Some(budget) = budget else {
            return vec![names];
        };
        let fallback = self.estimates.values().copied().max().unwrap_or(1 << 20);
        let mut groups: Vec<Vec<String>> = Vec::new();
        let mut current: Vec<String> = Vec::new();
        let mut used = 0u64;
        for name in names {
            let size = self.estimates.get(&name).copied().unwrap_or(fallback);
            if !current.is_empty() && used + size > budget {
                groups.push(std::mem::take(&mut current));
                used = 0;
            }
            used += size;
            current.push(name);
        }
        if !current.is_empty() {
            groups.push(current);
        }
        groups
    }

    /// Memory a group session adds while it exists (its weights), which loading did not
    /// leave resident; 0 with one session for everything, which is already loaded.
    pub fn group_session_bytes(&self) -> u64 {
        match &self.sessions {
            Sessions::PerGroup { weight_bytes, .. } => *weight_bytes,
            Sessions::All(_) => 0,
        }
    }

    /// Estimated bytes of every value one capture fetches; a value whose size ONNX
    /// Runtime could not infer counts as the largest known one.
    pub fn capture_estimate(&self) -> u64 {
        let fallback = self.largest_estimate();
        self.fetch_list()
            .iter()
            .map(|n| self.estimates.get(n).copied().unwrap_or(fallback))
            .sum()
    }

    /// Largest single value ONNX Runtime's inferred types promise (0 when none is known).
    pub fn largest_estimate(&self) -> u64 {
        self.estimates.values().copied().max().unwrap_or(0)
    }

    /// Runs the instrumented model on `inputs` and returns every value, each kept as `keep`
    /// says. A runner prepared for groups fetches values in groups whose run holds about
    /// `group_bytes` (half fetched, half fed from the cut); one with a single session
    /// fetches everything in one run.
    pub fn capture(
        &mut self,
        inputs: &[(String, HostTensor)],
        keep: &Keep,
        group_bytes: Option<u64>,
    ) -> Result<Capture> {
        let split = group_bytes.map(|b| GroupSplit {
            fetch: segmented::fetch_share(b),
            feed: segmented::feed_share(b),
        });
        self.capture_split(inputs, keep, split)
    }

    /// [`Self::capture`] with the group's bytes split as given between the values a run
    /// fetches and the cut values it is fed.
    pub fn capture_split(
        &mut self,
        inputs: &[(String, HostTensor)],
        keep: &Keep,
        split: Option<GroupSplit>,
    ) -> Result<Capture> {
        let feed = match_inputs(&self.path, &self.specs, inputs)?;
        let mut fetched = self.fetch(&feed, keep, split)?;
        let mut described = Described {
            values: Vec::new(),
            uncapturable: self.uncapturable.clone(),
            ids: HashMap::new(),
        };
        self.describe_inputs(&feed, keep, &mut described)?;
        self.describe_node_outputs(&mut fetched, &mut described)?;
        self.describe_graph_outputs(&mut fetched, &mut described);
        let fx_nodes = self.fx_nodes(&described);
        Ok(Capture {
            side: Side::Onnx,
            values: described.values,
            uncapturable: described.uncapturable,
            element_inputs: Default::default(),
            fx_nodes,
            module_aliases: Default::default(),
            control_flow: false,
        })
    }

    /// Per captured node output, the torch.export node its ONNX node came from.
    fn fx_nodes(&self, d: &Described) -> BTreeMap<usize, FxNode> {
        self.exposed
            .iter()
            .filter_map(|ev| Some((*d.ids.get(&ev.name)?, ev.fx_node.clone()?)))
            .collect()
    }

    /// Every value of the fetch list, by name, from one run or one run per group; a value
    /// the run could not hand back holds the reason.
    fn fetch(
        &mut self,
        feed: &[&HostTensor],
        keep: &Keep,
        split: Option<GroupSplit>,
    ) -> Result<Fetched> {
        let split = match self.sessions {
            Sessions::All(_) => None,
            Sessions::PerGroup { .. } => split,
        };
        let groups = self.groups(self.fetch_list(), split.map(|s| s.fetch));
        self.runs_last_capture = groups.len();
        self.whole_graph_runs_last_capture = 0;
        let mut fetched: Fetched = HashMap::new();
        for (k, group) in groups.iter().enumerate() {
            let segment = match &mut self.sessions {
                Sessions::PerGroup { model, .. } => Some(segmented::run(
                    segmented::SegmentRun {
                        model,
                        specs: &self.specs,
                        feed,
                        fetched: &fetched,
                        feed_allowance: split.map_or(0, |s| s.feed),
                        threads: self.threads,
                        custom_ops: self.custom_ops.as_deref(),
                    },
                    group,
                )),
                Sessions::All(_) => None,
            };
            let mut results = match segment {
                Some(Ok(results)) => results,
                segment => {
                    if let Some(Err(why)) = segment {
                        self.whole_graph_runs_last_capture += 1;
                        if self.verbose {
                            eprintln!(
                                "align-check: ONNX group {} of {} runs the whole graph instead of a segment: {why}",
                                k + 1,
                                groups.len()
                            );
                        }
                    }
                    self.run_whole(group, feed)?
                }
            };
            for name in group {
                // Taking the ort value out of the map frees it as soon as it is converted.
                let taken = match results.remove(name) {
                    None => Err(anyhow!(
                        "ONNX Runtime did not return it (an optional output the node did not produce)"
                    )),
                    Some(v) => from_ort(&v).and_then(|t| {
                        let (dtype, shape) = (t.dtype(), t.shape.clone());
                        Ok((dtype, shape, keep.keep(t)?))
                    }),
                };
                fetched.insert(name.clone(), taken);
            }
        }
        if self.verbose && matches!(self.sessions, Sessions::PerGroup { .. }) {
            eprintln!(
                "align-check: ONNX values fetched in {} run(s): {} graph segment(s) fed from the previous cut, {} whole-graph run(s)",
                groups.len(),
                groups.len() - self.whole_graph_runs_last_capture,
                self.whole_graph_runs_last_capture
            );
        }
        Ok(fetched)
    }

    /// One run of the whole graph for `group`: the single session, or under a budget one
    /// built to expose only the group (dropped, with what it allocated, after the run).
    fn run_whole(&mut self, group: &[String], feed: &[&HostTensor]) -> Result<RunOutputs> {
        let mut own = self.group_session(group)?;
        let session = match (&mut own, &mut self.sessions) {
            (Some(s), _) => s,
            (None, Sessions::All(s)) => s,
            (None, Sessions::PerGroup { .. }) => {
                bail!("internal error: no session for a group")
            }
        };
        run(session, &self.path, &self.specs, feed)
    }

    /// The graph inputs, first in the capture, as they were fed.
    fn describe_inputs(&self, feed: &[&HostTensor], keep: &Keep, d: &mut Described) -> Result<()> {
        for (i, (spec, tensor)) in self.specs.iter().zip(feed).enumerate() {
            d.ids.insert(spec.name.clone(), d.values.len());
            d.values.push(CapturedValue {
                id: d.values.len(),
                name: spec.name.clone(),
                op: "input".to_string(),
                node: String::new(),
                scope: Vec::new(),
                scope_recorded: true,
                source: None,
                source_stack: Vec::new(),
                role: ValueRole::Input(i),
                dtype: tensor.dtype(),
                shape: tensor.shape.clone(),
                inputs: Vec::new(),
                tensor: Some(keep.keep((*tensor).clone())?),
            });
        }
        Ok(())
    }

    /// Every exposed node output in execution order, with its producers among the values
    /// described before it; one the run could not hand back is listed as uncapturable.
    fn describe_node_outputs(&self, fetched: &mut Fetched, d: &mut Described) -> Result<()> {
        for ev in &self.exposed {
            let module = ev.scope.last().map(|l| l.path.clone()).unwrap_or_default();
            let (dtype, shape, stored) = match fetched.remove(&ev.name) {
                Some(Ok(t)) => t,
                Some(Err(e)) => {
                    d.uncapturable.push(Uncapturable {
                        name: ev.name.clone(),
                        op: ev.op_type.clone(),
                        module,
                        reason: e.to_string(),
                        subgraph: None,
                    });
                    continue;
                }
                None => bail!("internal error: {} was not fetched", ev.name),
            };
            let id = d.values.len();
            d.values.push(CapturedValue {
                id,
                name: ev.name.clone(),
                op: ev.op_type.clone(),
                node: ev.node_name.clone(),
                scope: ev.scope.clone(),
                scope_recorded: ev.scope_recorded,
                source: ev.source.clone(),
                source_stack: ev.source_stack.clone(),
                role: ValueRole::Intermediate,
                dtype,
                shape,
                // Weights and constants folded into initializers are not values: skipped.
                inputs: ev
                    .input_names
                    .iter()
                    .filter_map(|n| d.ids.get(n).copied())
                    .collect(),
                tensor: Some(stored),
            });
            d.ids.insert(ev.name.clone(), id);
        }
        Ok(())
    }

    /// The graph outputs, last, each pointing at the node output it repeats (or holding its
    /// own data when no node computes it: a graph input passed through, an initializer).
    fn describe_graph_outputs(&self, fetched: &mut Fetched, d: &mut Described) {
        for (k, name) in self.output_names.iter().enumerate() {
            let (dtype, shape, stored, inputs) = if let Some(&src) = d.ids.get(name) {
                let v = &d.values[src];
                let stored = v.tensor.clone().expect("captured values hold data");
                (v.dtype, v.shape.clone(), stored, vec![src])
            } else if d.uncapturable.iter().any(|u| &u.name == name) {
                // Its node output is already listed with the reason (a sequence, say).
                continue;
            } else {
                match fetched.remove(name) {
                    Some(Ok((dtype, shape, stored))) => (dtype, shape, stored, Vec::new()),
                    other => {
                        let reason = match other {
                            Some(Err(e)) => e.to_string(),
                            _ => "ONNX Runtime did not return it".to_string(),
                        };
                        d.uncapturable.push(Uncapturable {
                            name: name.clone(),
                            op: "output".to_string(),
                            module: String::new(),
                            reason: format!("graph output {k}: {reason}"),
                            subgraph: None,
                        });
                        continue;
                    }
                }
            };
            d.values.push(CapturedValue {
                id: d.values.len(),
                name: name.clone(),
                op: "output".to_string(),
                node: String::new(),
                scope: Vec::new(),
                scope_recorded: true,
                source: None,
                source_stack: Vec::new(),
                role: ValueRole::Output(k),
                dtype,
                shape,
                inputs,
                tensor: Some(stored),
            });
        }
    }
}

/// A capture being described, value by value.
struct Described {
    values: Vec<CapturedValue>,
    uncapturable: Vec<Uncapturable>,
    /// Tensor name -> id of the captured value holding it.
    ids: HashMap<String, usize>,
}

/// Takes the initializers (with their data) out of `model`, leaving copies that carry only
/// name, type and shape: the structure every later step reads.
fn take_initializers(model: &mut super::proto::ModelProto) -> Vec<super::proto::TensorProto> {
    let Some(graph) = model.graph.as_mut() else {
        return Vec::new();
    };
    let weights = std::mem::take(&mut graph.initializer);
    graph.initializer = weights
        .iter()
        .map(|t| super::proto::TensorProto {
            name: t.name.clone(),
            dims: t.dims.clone(),
            data_type: t.data_type,
            ..Default::default()
        })
        .collect();
    weights
}

/// Bytes of a tensor type whose every dimension ONNX Runtime inferred.
fn estimated_bytes(t: &ValueType) -> Option<u64> {
    let ValueType::Tensor { ty, shape, .. } = t else {
        return None;
    };
    if shape.iter().any(|&d| d < 0) {
        return None;
    }
    let numel: i64 = shape.iter().product();
    let elem = ty.byte_size(1).unwrap_or(8) as u64;
    Some(numel.max(0) as u64 * elem)
}

/// Runs the unmodified `model` (same session options as [`capture`]) and returns its graph
/// outputs in declaration order.
pub fn run_plain(
    model: &OnnxModel,
    inputs: &[(String, HostTensor)],
    threads: usize,
    custom_ops: Option<&Path>,
) -> Result<Vec<(String, HostTensor)>> {
    let bytes = model.proto.encode_to_vec();
    let mut session = runtime::session(model, &bytes, threads, custom_ops)?;
    outputs_of(&mut session, model, inputs)
}

/// Runs `session`, built over the unmodified `model` with whatever options, on `inputs` and
/// returns the graph outputs in declaration order.
pub fn outputs_of(
    session: &mut Session,
    model: &OnnxModel,
    inputs: &[(String, HostTensor)],
) -> Result<Vec<(String, HostTensor)>> {
    let shipped = Signature {
        path: model.path.clone(),
        specs: signature::inputs(model)?,
        output_names: signature::output_names(model),
    };
    shipped.outputs(session, inputs)
}

/// What running a model's graph outputs needs to know of it: its file (named in
/// messages), its inputs and its outputs' names.
#[derive(Clone)]
pub struct Signature {
    pub path: PathBuf,
    pub specs: Vec<InputSpec>,
    pub output_names: Vec<String>,
}

impl Signature {
    /// The graph outputs `session` computes from `inputs`, in the model's output order.
    pub fn outputs(
        &self,
        session: &mut Session,
        inputs: &[(String, HostTensor)],
    ) -> Result<Vec<(String, HostTensor)>> {
        let shown = self.path.display();
        let feed = match_inputs(&self.path, &self.specs, inputs)?;
        let mut results = run(session, &self.path, &self.specs, &feed)?;
        self.output_names
            .iter()
            .map(|name| {
                let v = results.remove(name).ok_or_else(|| {
                    anyhow!("ONNX Runtime returned no value for output `{name}` of {shown}")
                })?;
                let t = from_ort(&v).map_err(|e| anyhow!("output `{name}` of {shown}: {e}"))?;
                Ok((name.clone(), t))
            })
            .collect()
    }
}

/// The given inputs in signature order, after checking names, element types and fixed
/// dimensions so that mistakes are reported by input name rather than by ONNX Runtime.
fn match_inputs<'a>(
    path: &Path,
    specs: &[InputSpec],
    given: &'a [(String, HostTensor)],
) -> Result<Vec<&'a HostTensor>> {
    let shown = path.display();
    let expected = || {
        specs
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (i, (name, _)) in given.iter().enumerate() {
        if !specs.iter().any(|s| &s.name == name) {
            bail!(
                "`{name}` is not an input of the ONNX model {shown} (its inputs: {})",
                expected()
            );
        }
        if given[..i].iter().any(|(n, _)| n == name) {
            bail!("input `{name}` of the ONNX model {shown} is given twice");
        }
    }
    specs
        .iter()
        .map(|spec| {
            let Some((_, t)) = given.iter().find(|(n, _)| n == &spec.name) else {
                bail!(
                    "the ONNX model {shown} needs input `{}`, which was not given",
                    spec.name
                );
            };
            if t.dtype() != spec.dtype {
                bail!(
                    "input `{}` of the ONNX model {shown} is {}, but {} was given",
                    spec.name,
                    spec.dtype,
                    t.dtype()
                );
            }
            let fits = spec.dims.len() == t.shape.len()
                && spec.dims.iter().zip(&t.shape).all(|(d, &n)| match d {
                    Dim::Fixed(f) => *f == n,
                    Dim::Symbolic(_) => true,
                });
            // A model that declares no shape at all accepts any.
            if !fits && !spec.dims.is_empty() {
                let declared: Vec<String> = spec.dims.iter().map(Dim::to_string).collect();
                bail!(
                    "input `{}` of the ONNX model {shown} has shape {}, but {} was given",
                    spec.name,
                    declared.join("x"),
                    format_shape(&t.shape)
                );
            }
            Ok(t)
        })
        .collect()
}
