//! Loading a TorchScript file and turning one instrumented run into a `Capture`.
//!
//! Files are checked before libtorch sees them (missing, empty, not a zip, an ONNX model
//! passed in the wrong slot) so that the common mistakes get a precise message; whatever
//! libtorch itself rejects comes back from the shim as an error, never an abort.

use super::convert::{from_host, to_host};
use super::ffi::ModulePlan;
use super::meta::{parse_hierarchy, GraphMeta, InputMeta};
use crate::capture::{Capture, CapturedValue, ScopeLevel, Side, Uncapturable, ValueRole};
use crate::sniff::{sniff, FileKind};
use crate::store::{Keep, Stored};
use crate::tensor::{DType, HostTensor};
use anyhow::{anyhow, bail, Context, Result};
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
}

/// Rejects files that cannot be TorchScript archives before libtorch reads them.
fn check_file(path: &Path) -> Result<()> {
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(path).map_err(|e| anyhow!("cannot open it: {e}"))?;
    let n =
        std::io::Read::read(&mut file, &mut head).map_err(|e| anyhow!("cannot read it: {e}"))?;
    match sniff(&head[..n]) {
        FileKind::Zip => Ok(()),
        FileKind::Empty => bail!("the file is empty"),
        FileKind::OnnxLike => bail!(
            "this looks like an ONNX model, not a TorchScript archive (the TorchScript file comes first)"
        ),
        FileKind::Other => {
            bail!("not a TorchScript archive (expected the zip file that torch.jit.save writes)")
        }
    }
}

impl TorchModel {
    pub fn load(path: &Path) -> Result<TorchModel> {
        let context = || format!("TorchScript model {}", path.display());
        check_file(path).with_context(context)?;
        let plan = ModulePlan::load(path)
            .map_err(|e| anyhow!("{}", explain_load_error(&first_line(&e.to_string()))))
            .with_context(context)?;
        let meta: GraphMeta = serde_json::from_str(&plan.meta_json())
            .context("the TorchScript shim returned unreadable metadata")
            .with_context(context)?;
        Ok(TorchModel {
            path: path.to_path_buf(),
            plan,
            meta,
        })
    }

    /// The `forward` arguments after `self`, with their TorchScript types.
    pub fn inputs(&self) -> &[InputInfo] {
        &self.meta.inputs
    }

    fn to_torch_inputs(&self, inputs: &[HostTensor]) -> Result<Vec<tch::Tensor>> {
        if inputs.len() != self.meta.inputs.len() {
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
                inputs.len()
            );
        }
        inputs.iter().map(from_host).collect()
    }

    /// The captured values as the graph describes them, without running it.
    pub fn static_values(&self) -> Vec<StaticValue> {
        self.meta
            .values
            .iter()
            .map(|v| StaticValue {
                op: v.op.clone(),
                scope: parse_hierarchy(&v.hierarchy),
                source: (!v.source.is_empty()).then(|| v.source.clone()),
            })
            .collect()
    }

    /// Runs the module's own `forward`, uninstrumented, and returns its flattened outputs.
    pub fn forward(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>> {
        let tensors = self.to_torch_inputs(inputs)?;
        let run = self.plan.forward(&tensors).map_err(|e| {
            anyhow!(
                "running {}: {}",
                self.path.display(),
                first_line(&e.to_string())
            )
        })?;
        run.outputs.iter().map(to_host).collect()
    }

    /// Runs the instrumented graph and returns every captured value, each kept as `keep`
    /// says the moment it is computed.
    pub fn capture(&self, inputs: &[HostTensor], keep: &Keep) -> Result<Capture> {
        let tensors = self.to_torch_inputs(inputs)?;
        let n_values = self.meta.values.len();
        let mut kept: Vec<Option<(DType, Vec<usize>, Stored)>> = vec![None; n_values];
        let mut receive = |id: usize, tensor: tch::Tensor| -> Result<()> {
            let meta =
                self.meta.values.get(id).ok_or_else(|| {
                    anyhow!("the TorchScript shim observed an unknown value {id}")
                })?;
            let host = to_host(&tensor).with_context(|| format!("value {}", meta.name))?;
            drop(tensor);
            kept[id] = Some((host.dtype(), host.shape.clone(), keep.keep(host)?));
            Ok(())
        };
        let run = self.plan.capture(&tensors, &mut receive).map_err(|e| {
            anyhow!(
                "running {}: {}",
                self.path.display(),
                first_line(&e.to_string())
            )
        })?;
        let mut values = Vec::with_capacity(n_values + run.outputs.len());
        let mut n_inputs = 0;
        for (id, (meta, slot)) in self.meta.values.iter().zip(kept).enumerate() {
            let Some((dtype, shape, stored)) = slot else {
                bail!(
                    "the TorchScript run did not produce value {} ({})",
                    meta.name,
                    meta.op
                );
            };
            let role = if meta.op == "input" {
                n_inputs += 1;
                ValueRole::Input(n_inputs - 1)
            } else {
                ValueRole::Intermediate
            };
            values.push(CapturedValue {
                id,
                name: meta.name.clone(),
                op: meta.op.clone(),
                node: String::new(),
                scope: parse_hierarchy(&meta.hierarchy),
                source: (!meta.source.is_empty()).then(|| meta.source.clone()),
                role,
                dtype,
                shape,
                inputs: meta.inputs.clone(),
                tensor: Some(stored),
            });
        }
        // The outputs point at their producers only when the shim could see every leaf.
        let producers_known = self.meta.outputs.len() == run.outputs.len();
        for (n, tensor) in run.outputs.iter().enumerate() {
            let host = to_host(tensor).with_context(|| format!("output {n}"))?;
            let producer = if producers_known {
                self.meta.outputs[n]
            } else {
                None
            };
            values.push(CapturedValue {
                id: values.len(),
                name: format!("output{n}"),
                op: "output".to_string(),
                node: String::new(),
                scope: Vec::new(),
                source: None,
                role: ValueRole::Output(n),
                dtype: host.dtype(),
                shape: host.shape.clone(),
                inputs: producer.into_iter().collect(),
                tensor: Some(keep.keep(host)?),
            });
        }
        let uncapturable = self
            .meta
            .uncapturable
            .iter()
            .map(|u| Uncapturable {
                name: u.name.clone(),
                op: u.op.clone(),
                module: parse_hierarchy(&u.hierarchy)
                    .last()
                    .map(|l| l.path.clone())
                    .unwrap_or_default(),
                reason: u.reason.clone(),
            })
            .collect();
        Ok(Capture {
            side: Side::Torch,
            values,
            uncapturable,
        })
    }
}

/// libtorch reports a damaged or foreign zip in the words of its archive reader, and a custom
/// op whose library was not loaded as an unknown builtin; say what it means first (and what
/// to pass) and keep its detail after.
fn explain_load_error(message: &str) -> String {
    let detail = match message.find("] ") {
        Some(i) if message.starts_with("[enforce fail") => {
            message[i + 2..].trim_start_matches(". ")
        }
        _ => message,
    };
    if message.contains("PytorchStreamReader") || message.contains("inline_container") {
        format!("not a readable TorchScript archive (damaged, or not written by torch.jit.save): {detail}")
    } else if let Some(op) = unknown_builtin_op(message) {
        format!(
            "it calls the operator `{op}`, which is not registered: if it is a custom op, pass \
             --torch-ops LIB with the library that registers it (TORCH_LIBRARY) \
             (libtorch said: {detail})"
        )
    } else {
        detail.to_string()
    }
}

/// The op of libtorch's "Unknown builtin op: my_ops::my_add." (a model calling an op that no
/// loaded library registered).
fn unknown_builtin_op(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("Unknown builtin op: ")?;
    let op = rest.split_whitespace().next()?.trim_end_matches('.');
    (!op.is_empty()).then_some(op)
}

/// libtorch messages can run to many lines (source excerpts, traces); a report needs one.
fn first_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown error")
        .to_string()
}
