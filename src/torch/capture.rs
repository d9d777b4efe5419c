//! Loading a TorchScript file (or a torch.export archive, see `exported`) and turning one
//! instrumented run into a `Capture`.
//!
//! Files are checked before libtorch sees them (missing, empty, not a zip, an ONNX model
//! passed in the wrong slot) so that the common mistakes get a precise message; whatever
//! libtorch itself rejects comes back from the shim as an error, never an abort.

use super::args::EncodedArgs;
use super::convert::{to_host, with_bytes};
use super::ffi::{ModulePlan, RunTensors};
use super::meta::{GraphMeta, InputMeta, ModuleTree, ValueMeta};
use super::{archive, errors, exported, hazards};
use crate::capture::fx_node::FxNode;
use crate::capture::sniff::{sniff, FileKind};
use crate::capture::store::{Keep, Stored};
use crate::capture::tensor::{DType, HostTensor};
use crate::capture::{
    display_location, Capture, CapturedValue, ScopeLevel, Side, Uncapturable, ValueRole,
};
use crate::signature::types::ArgValue;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub type InputInfo = InputMeta;

/// What the graph says about a value before any run: no dtype or shape yet.
pub struct StaticValue {
    pub op: String,
    pub scope: Vec<ScopeLevel>,
    pub source: Option<String>,
}

/// A loaded TorchScript module, ready to run plainly or instrumented.
pub struct TorchModel {
    pub path: PathBuf,
    plan: ModulePlan,
    meta: GraphMeta,
    /// The module path of every value in `meta.values`, resolved once against the tree.
    scopes: Vec<Vec<ScopeLevel>>,
}

/// Rejects files that cannot be TorchScript archives before libtorch reads them, saying what
/// they are instead where that is known (a `torch.save` checkpoint, a `torch.export` archive).
fn check_file(path: &Path) -> Result<()> {
    let mut head = [0u8; 16];
    let mut file = std::fs::File::open(path).map_err(|e| anyhow!("cannot open it: {e}"))?;
    let n =
        std::io::Read::read(&mut file, &mut head).map_err(|e| anyhow!("cannot read it: {e}"))?;
    if let Some(why) = archive::explain_legacy(&head[..n]) {
        bail!(why);
    }
    match sniff(&head[..n]) {
        FileKind::Zip => match archive::explain_zip(path) {
            Some(why) => bail!(why),
            None => Ok(()),
        },
        FileKind::Empty => bail!("the file is empty"),
        FileKind::OnnxLike => bail!(
            "this looks like an ONNX model, not a TorchScript archive (the TorchScript file comes first)"
        ),
        FileKind::Other | FileKind::Pickle => {
            bail!("not a TorchScript archive (expected the zip file that torch.jit.save writes)")
        }
    }
}

impl TorchModel {
    /// Loads a TorchScript archive, or a torch.export archive (`.pt2`), whose program runs
    /// through the interpreter for exported programs with the same capture.
    pub fn load(path: &Path) -> Result<TorchModel> {
        let (plan, meta) = if exported::is_archive(path) {
            let context = || format!("exported program {}", path.display());
            exported::load(path)
                .map_err(|e| errors::load_error(&e.to_string()))
                .with_context(context)?
        } else {
            Self::load_script(path)?
        };
        Self::with_meta(path, plan, meta)
    }

    fn load_script(path: &Path) -> Result<(ModulePlan, GraphMeta)> {
        let context = || format!("TorchScript model {}", path.display());
        check_file(path).with_context(context)?;
        let plan = ModulePlan::load(path)
            .map_err(|e| errors::load_error(&e.to_string()))
            .with_context(context)?;
        let meta: GraphMeta = serde_json::from_str(&plan.meta_json())
            .context("the TorchScript shim returned unreadable metadata")
            .with_context(context)?;
        Ok((plan, meta))
    }

    fn with_meta(path: &Path, plan: ModulePlan, mut meta: GraphMeta) -> Result<TorchModel> {
        let context = || format!("model {}", path.display());
        if let Some(why) = hazards::needs_cuda(&meta) {
            return Err(anyhow!(why)).with_context(context);
        }
        if !meta.exported {
            // TorchScript names a shared instance's calls by its first attribute itself; a
            // dynamo export names them by the attribute read, and is read through these.
            let classes: std::collections::HashMap<&str, &str> = (meta.modules.iter())
                .map(|m| (m.path.as_str(), m.class.as_str()))
                .collect();
            let state = meta.state.iter().map(|(n, p)| (n.as_str(), p.as_str()));
            meta.module_aliases =
                super::shared_attributes::from_state(state, |path| classes.get(path).copied());
        }
        let tree = ModuleTree::new(&meta.modules);
        // Values of one module call share their frames: resolve each distinct stack once.
        type Frames<'m> = (&'m str, &'m [String]);
        let mut resolved: std::collections::HashMap<Frames, Vec<ScopeLevel>> =
            std::collections::HashMap::new();
        let scopes = meta
            .values
            .iter()
            .map(|v| {
                resolved
                    .entry((v.hierarchy.as_str(), v.type_paths.as_slice()))
                    .or_insert_with(|| tree.scope(&v.hierarchy, &v.type_paths))
                    .clone()
            })
            .collect();
        Ok(TorchModel {
            path: path.to_path_buf(),
            plan,
            meta,
            scopes,
        })
    }

    /// What in the graph is fixed in training mode (one line), if anything is.
    pub fn training_mode(&self) -> Option<String> {
        hazards::training_mode(&self.meta)
    }

    /// The floating-point type the module's parameters are in, when it has any.
    pub fn parameter_dtype(&self) -> Option<DType> {
        match self.meta.parameter_dtype.as_str() {
            "Half" => Some(DType::F16),
            "BFloat16" => Some(DType::Bf16),
            "Float" => Some(DType::F32),
            "Double" => Some(DType::F64),
            _ => None,
        }
    }

    /// Whether the archive's root module was saved with `training` set.
    pub fn saved_training(&self) -> bool {
        self.meta.saved_training
    }

    /// The `forward` arguments after `self`, with their TorchScript types.
    pub fn inputs(&self) -> &[InputInfo] {
        &self.meta.inputs
    }

    /// The tensors each container argument's elements are read from in the graph, as
    /// (graph argument name, key): where its tensors enter the graph.
    pub fn element_reads(&self) -> Vec<(String, String)> {
        self.meta
            .values
            .iter()
            .filter(|v| !v.element_of.is_empty())
            .map(|v| (v.element_of.clone(), v.element_key.clone()))
            .collect()
    }

    /// Whether the model is a torch.export archive (`.pt2`) rather than TorchScript.
    pub fn is_exported(&self) -> bool {
        exported::is_archive(&self.path)
    }

    /// A `.pt2` archive's own sample inputs, in argument order, with where they were read
    /// from (`model.pt2:data/sample_inputs/model.pt`); `None` for TorchScript and for an
    /// archive that stores none.
    pub fn sample_inputs(&self) -> Option<Result<(String, Vec<HostTensor>)>> {
        if !self.is_exported() {
            return None;
        }
        let found = exported::sample_inputs(&self.path)
            .with_context(|| format!("exported program {}", self.path.display()));
        found
            .map(|f| f.map(|(entry, t)| (format!("{}:{entry}", self.path.display()), t)))
            .transpose()
    }

    /// Refuses, in one line, tensor arguments whose shapes an exported program's range
    /// constraints exclude (TorchScript records none: always fine).
    pub fn check_input_shapes(&self, args: &[ArgValue]) -> Result<()> {
        let shapes: Vec<Option<Vec<i64>>> = args
            .iter()
            .map(|a| match a {
                ArgValue::Tensor(t) => Some(t.shape.iter().map(|&d| d as i64).collect()),
                _ => None,
            })
            .collect();
        match exported::shape_refusal(&self.meta.input_dims, &shapes) {
            Some(why) => Err(anyhow!(why))
                .with_context(|| format!("exported program {}", self.path.display())),
            None => Ok(()),
        }
    }

    /// Module attributes `forward` assigns or writes in place (its internal state).
    pub fn state_writes(&self) -> &[String] {
        &self.meta.state_writes
    }

    fn encode(&self, args: &[ArgValue]) -> Result<EncodedArgs> {
        if args.len() != self.meta.inputs.len() {
            bail!(
                "{}: forward takes {} input(s) ({}), but {} were given",
                self.path.display(),
                self.meta.inputs.len(),
                self.meta
                    .inputs
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                args.len()
            );
        }
        EncodedArgs::new(args)
    }

    /// The captured values as the graph describes them, without running it.
    pub fn static_values(&self) -> Vec<StaticValue> {
        self.meta
            .values
            .iter()
            .zip(&self.scopes)
            .map(|(v, scope)| StaticValue {
                op: v.op.clone(),
                scope: scope.clone(),
                source: (!v.source.is_empty()).then(|| display_location(&v.source)),
            })
            .collect()
    }

    /// A failed run in one line: libtorch's innermost reason, where in the model's code, and
    /// the inputs it was given (a trace that fixed its example's sizes fails on others).
    fn run_error(&self, args: &[ArgValue], error: &anyhow::Error) -> anyhow::Error {
        let shapes: Vec<String> = self
            .meta
            .inputs
            .iter()
            .zip(args)
            .map(|(meta, a)| {
                // TorchScript's debug names carry a uniquing suffix: `x.1` is the user's `x`.
                let name = crate::signature::types::argument_name(&meta.name);
                match a {
                    ArgValue::Tensor(t) => {
                        format!("{name}={}", crate::capture::tensor::format_shape(&t.shape))
                    }
                    other => format!("{name}={}", other.describe()),
                }
            })
            .collect();
        anyhow!(
            "running {} on inputs {}: {}",
            self.path.display(),
            shapes.join(" "),
            errors::explain_run_error(&error.to_string())
        )
    }

    /// Runs the module's own `forward`, uninstrumented, on tensor arguments.
    pub fn forward(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>> {
        self.forward_args(&tensor_args(inputs))
    }

    /// Runs the module's own `forward`, uninstrumented, and returns its flattened outputs.
    pub fn forward_args(&self, args: &[ArgValue]) -> Result<Vec<HostTensor>> {
        let encoded = self.encode(args)?;
        let run = self
            .plan
            .forward(&encoded)
            .map_err(|e| self.run_error(args, &e))?;
        run.outputs.iter().map(to_host).collect()
    }

    /// Runs the module's own `forward` and returns its flattened outputs, each with its path in
    /// the returned value (the name its captured output value has).
    pub fn forward_named(&self, args: &[ArgValue]) -> Result<Vec<(String, HostTensor)>> {
        let encoded = self.encode(args)?;
        let run = self
            .plan
            .forward(&encoded)
            .map_err(|e| self.run_error(args, &e))?;
        let tensors: Vec<HostTensor> = run.outputs.iter().map(to_host).collect::<Result<_>>()?;
        Ok(run.names.into_iter().zip(tensors).collect())
    }

    /// Casts the module's floating-point parameters and buffers to float64 (for the rounding
    /// reference, `app::rounding_reference`); what it runs afterwards runs in float64.
    pub fn cast_to_float64(&mut self) -> Result<()> {
        self.plan.cast_to_float64()
    }

    /// `capture_args` on tensor arguments.
    pub fn capture(&self, inputs: &[HostTensor], keep: &Keep) -> Result<Capture> {
        self.capture_args(&tensor_args(inputs), keep)
    }

    /// Runs the instrumented graph and returns every captured value, each kept as `keep`
    /// says the moment it is computed. Values are listed in the order they were computed: a
    /// loop body's values once per iteration (`name@iter2`), an if branch's only when taken.
    pub fn capture_args(&self, args: &[ArgValue], keep: &Keep) -> Result<Capture> {
        let tensors = self.encode(args)?;
        let metas = &self.meta.values;
        let mut observed = Observed::new(metas.len());
        let mut receive = |id: usize, tensor: Option<tch::Tensor>| -> Result<()> {
            let meta = metas
                .get(id)
                .ok_or_else(|| anyhow!("the TorchScript shim observed an unknown value {id}"))?;
            let Some(tensor) = tensor else {
                observed.undefined[id] = true;
                return Ok(());
            };
            let context = || format!("value {}", meta.name);
            // A spilled value goes to the file straight from libtorch's memory; one held in
            // memory is copied out once, by `to_host`.
            let spilled = match keep {
                Keep::Memory => None,
                Keep::Spill { .. } => with_bytes(&tensor, |dtype, shape, bytes| {
                    let stored = keep.keep_raw(dtype, shape, bytes)?;
                    Ok(stored.map(|s| (dtype, shape.to_vec(), s)))
                })
                .with_context(context)?,
            };
            let (dtype, shape, stored) = match spilled {
                Some(spilled) => spilled,
                None => {
                    let host = to_host(&tensor).with_context(context)?;
                    (host.dtype(), host.shape.clone(), keep.keep(host)?)
                }
            };
            drop(tensor);
            observed.push((id, meta), dtype, shape, stored);
            Ok(())
        };
        let run = self
            .plan
            .capture(&tensors, &mut receive)
            .map_err(|e| self.run_error(args, &e))?;
        let Observed {
            values: firings,
            latest,
            undefined,
            ..
        } = observed;
        let mut values = Vec::with_capacity(firings.len() + run.outputs.len());
        let mut element_inputs = BTreeMap::new();
        let fx_nodes = fx_nodes(metas, &firings);
        for (id, mut firing) in firings.into_iter().enumerate() {
            if let Some(element) = firing.element_inputs.take() {
                element_inputs.insert(id, element);
            }
            values.push(self.intermediate(id, firing)?);
        }
        if let Some(missing) = metas
            .iter()
            .zip(&latest)
            .zip(&undefined)
            .find(|((m, latest), &undefined)| m.block.is_empty() && latest.is_none() && !undefined)
            .map(|(m, _)| m)
        {
            bail!(
                "the TorchScript run did not produce value {} ({})",
                missing.0.name,
                missing.0.op
            );
        }
        self.push_outputs(&run, &latest, keep, &mut values)?;
        let mut uncapturable = self.not_run(&latest, &undefined);
        uncapturable.extend(self.undefined(&undefined));
        Ok(Capture {
            side: Side::Torch,
            values,
            uncapturable,
            element_inputs,
            fx_nodes,
            module_aliases: self.meta.module_aliases.clone(),
            control_flow: metas.iter().any(|m| !m.block.is_empty()),
        })
    }

    /// One firing of an observe node as a captured value: its role (a graph input, a tensor
    /// read out of a container argument, or computed) and its name.
    fn intermediate(&self, id: usize, o: Firing) -> Result<CapturedValue> {
        let metas = &self.meta.values;
        let meta = &metas[o.meta];
        if meta.block.is_empty() && o.iteration > 0 {
            bail!("the TorchScript run produced value {} twice", meta.name);
        }
        // The metadata lists the tensor arguments first, in argument order; a tensor read
        // out of a container argument enters the graph there too, and is named by its
        // slot (`inputs.input_ids`) for the signature mapping.
        let element = !meta.element_of.is_empty();
        let role = if meta.op == "input" {
            ValueRole::Input(o.meta)
        } else if element {
            ValueRole::Input(metas.len() + o.meta)
        } else {
            ValueRole::Intermediate
        };
        let name = if element {
            let arg = crate::signature::types::argument_name(&meta.element_of);
            match meta.element_key.as_str() {
                "" => arg.to_string(),
                key => format!("{arg}.{key}"),
            }
        } else if meta.block == "loop" {
            format!("{}@iter{}", meta.name, o.iteration)
        } else {
            meta.name.clone()
        };
        Ok(CapturedValue {
            id,
            name,
            op: meta.op.clone(),
            node: String::new(),
            scope: self.scopes[o.meta].clone(),
            scope_recorded: true,
            source: (!meta.source.is_empty()).then(|| display_location(&meta.source)),
            source_stack: meta.stack.iter().map(|f| display_location(f)).collect(),
            role,
            dtype: o.dtype,
            shape: o.shape,
            inputs: o.inputs,
            tensor: Some(o.stored),
        })
    }

    /// Appends the run's graph outputs to `values`, each pointing at the value that
    /// produced it (`latest`: each graph value's latest firing).
    fn push_outputs(
        &self,
        run: &RunTensors,
        latest: &[Option<usize>],
        keep: &Keep,
        values: &mut Vec<CapturedValue>,
    ) -> Result<()> {
        // The outputs point at their producers only when the shim could see every leaf.
        let producers_known = self.meta.outputs.len() == run.outputs.len();
        for (n, tensor) in run.outputs.iter().enumerate() {
            let host = to_host(tensor).with_context(|| format!("output {n}"))?;
            let producer = if producers_known {
                self.meta.outputs[n].and_then(|m| latest[m])
            } else {
                None
            };
            values.push(CapturedValue {
                id: values.len(),
                // The leaf's path in the returned value, which outputs are matched by.
                name: run
                    .names
                    .get(n)
                    .cloned()
                    .unwrap_or_else(|| format!("output{n}")),
                op: "output".to_string(),
                node: String::new(),
                scope: Vec::new(),
                scope_recorded: true,
                source: None,
                source_stack: Vec::new(),
                role: ValueRole::Output(n),
                dtype: host.dtype(),
                shape: host.shape.clone(),
                inputs: producer.into_iter().collect(),
                tensor: Some(keep.keep(host)?),
            });
        }
        Ok(())
    }

    /// Values of an if branch not taken (or a loop that ran zero times): they exist in the
    /// graph but not in this run, and are listed, not silently dropped.
    fn not_run(&self, latest: &[Option<usize>], undefined: &[bool]) -> Vec<Uncapturable> {
        self.meta
            .values
            .iter()
            .zip(&self.scopes)
            .zip(latest)
            .zip(undefined)
            .filter(|(((m, _), latest), &undefined)| {
                !m.block.is_empty() && latest.is_none() && !undefined
            })
            .map(|(((m, scope), _), _)| Uncapturable {
                name: m.name.clone(),
                op: m.op.clone(),
                module: scope.last().map(|l| l.path.clone()).unwrap_or_default(),
                reason: format!(
                    "inside {} that did not run on this input",
                    if m.block == "loop" {
                        "a loop body"
                    } else {
                        "an if branch"
                    }
                ),
                subgraph: None,
            })
            .collect()
    }
}

impl TorchModel {
    /// Values that came out as undefined tensors: an optional result the op did not compute
    /// (the attention weights `nn.MultiheadAttention`'s fused fast path returns under
    /// `no_grad`). There is nothing to compare; they are listed, and nothing reads them.
    fn undefined(&self, undefined: &[bool]) -> Vec<Uncapturable> {
        self.meta
            .values
            .iter()
            .zip(&self.scopes)
            .zip(undefined)
            .filter(|(_, &undefined)| undefined)
            .map(|((m, scope), _)| Uncapturable {
                name: m.name.clone(),
                op: m.op.clone(),
                module: scope.last().map(|l| l.path.clone()).unwrap_or_default(),
                reason: "an undefined tensor: an optional result the op did not compute"
                    .to_string(),
                subgraph: None,
            })
            .collect()
    }
}

fn tensor_args(inputs: &[HostTensor]) -> Vec<ArgValue> {
    inputs.iter().cloned().map(ArgValue::Tensor).collect()
}

/// One firing of an observe node.
struct Firing {
    /// Index into the graph metadata's values.
    meta: usize,
    /// The loop iteration it fired in: how many times it had fired before, or the iteration
    /// of what it read in the loop when that is later (a branch not taken every iteration).
    iteration: usize,
    /// Whether it is computed in a loop body (`ValueMeta::block`).
    is_in_loop: bool,
    /// Producers, as positions in firing order.
    inputs: Vec<usize>,
    /// Producers of the tuple element it was unpacked from, where it was (`ValueMeta`).
    element_inputs: Option<Vec<usize>>,
    dtype: DType,
    shape: Vec<usize>,
    stored: Stored,
}

/// Per firing, the exported program's node that computed it (a `.pt2`'s values only).
fn fx_nodes(metas: &[ValueMeta], firings: &[Firing]) -> BTreeMap<usize, FxNode> {
    let node = |(id, f): (usize, &Firing)| Some((id, metas[f.meta].fx_node.clone()?));
    firings.iter().enumerate().filter_map(node).collect()
}

/// The observe nodes' firings in the order they happened, with each graph value's latest
/// firing: a value computed in a loop body reads its producers' firings of the same
/// iteration, and a value after the loop reads the last one.
struct Observed {
    values: Vec<Firing>,
    latest: Vec<Option<usize>>,
    fired: Vec<usize>,
    /// Per graph value: whether it came out as an undefined tensor.
    undefined: Vec<bool>,
}

impl Observed {
    fn new(n: usize) -> Observed {
        Observed {
            values: Vec::new(),
            latest: vec![None; n],
            fired: vec![0; n],
            undefined: vec![false; n],
        }
    }

    fn push(
        &mut self,
        (meta, value): (usize, &ValueMeta),
        dtype: DType,
        shape: Vec<usize>,
        stored: Stored,
    ) {
        // An if's result reads the branch that ran this time: a branch value that fired
        // before the if's previous result (the other branch, taken in an earlier iteration)
        // is not what it computed from.
        let since = match value.op.as_str() {
            "prim::If" => self.latest[meta].map_or(0, |last| last + 1),
            _ => 0,
        };
        let firings = |producers: &[usize]| -> Vec<usize> {
            producers
                .iter()
                .filter_map(|&p| self.latest[p])
                .filter(|&f| f >= since)
                .collect()
        };
        let inputs = firings(&value.inputs);
        let element_inputs = value.element_inputs.as_deref().map(firings);
        // A loop body's value is named by the loop's iteration (`@iterK`, as the ONNX
        // unroller names its copies), which a value in a branch that did not run every
        // iteration only learns from what it reads of this iteration.
        let in_loop = value.block == "loop";
        let iteration = inputs
            .iter()
            .filter(|&&f| in_loop && self.values[f].is_in_loop)
            .map(|&f| self.values[f].iteration)
            .fold(self.fired[meta], usize::max);
        // The next firing is a later iteration, so that names stay unique.
        self.fired[meta] = iteration + 1;
        self.latest[meta] = Some(self.values.len());
        self.values.push(Firing {
            meta,
            iteration,
            is_in_loop: in_loop,
            inputs,
            element_inputs,
            dtype,
            shape,
            stored,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(op: &str, block: &str, inputs: &[usize]) -> ValueMeta {
        serde_json::from_value(serde_json::json!({
            "name": op, "op": op, "hierarchy": "", "source": "", "block": block,
            "inputs": inputs,
        }))
        .unwrap()
    }

    /// A loop of three iterations whose body ends in an if taken as then, else, then: the
    /// branch values are named by the loop's iteration, and each if result reads the branch
    /// that ran in its own iteration, not the other branch's value from an earlier one.
    #[test]
    fn an_if_in_a_loop_reads_the_branch_of_its_own_iteration() {
        // 0: the body's value, 1: then-branch value, 2: else-branch value, 3: the if.
        let metas = [
            meta("aten::add", "loop", &[3]),
            meta("aten::mul", "loop", &[0]),
            meta("aten::sub", "loop", &[0]),
            meta("prim::If", "loop", &[0, 1, 2]),
        ];
        let mut observed = Observed::new(metas.len());
        let mut fire = |id: usize| {
            let stored = Stored::Memory(HostTensor::f32(vec![1], vec![0.0]));
            observed.push((id, &metas[id]), DType::F32, vec![1], stored);
        };
        for branch in [1, 2, 1] {
            fire(0);
            fire(branch);
            fire(3);
        }
        let named: Vec<(usize, usize)> = observed
            .values
            .iter()
            .map(|f| (f.meta, f.iteration))
            .collect();
        let expected = [
            (0, 0),
            (1, 0),
            (3, 0),
            (0, 1),
            (2, 1),
            (3, 1),
            (0, 2),
            (1, 2),
            (3, 2),
        ];
        assert_eq!(named, expected);
        // The last if (firing 8) reads this iteration's body value (6) and then-branch (7),
        // not the else-branch value of iteration 1 (4).
        assert_eq!(observed.values[8].inputs, vec![6, 7]);
    }
}
