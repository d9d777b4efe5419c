//! Stage 2, capture: what one side's instrumented run produced, every captured value in
//! execution order (this file), with the host tensors they hold (`tensor`), where those wait
//! until compared (`store`), the memory budget that decides it (`memory`), and telling model
//! files apart by their first bytes (`sniff`). The runtimes that fill these types are `torch`
//! and `onnx`, both behind the one shape of `app::runner`.
//!
//! Both runners (TorchScript through the C++ shim, ONNX through ort) fill the same types, so
//! pairing, statistics and reports are written once and tested on synthetic captures. A value
//! carries the structural facts pairing needs (op, module scope, call index, producers) and
//! the data itself; values that exist but cannot be captured (inside an `if` or loop body of a
//! scripted model) are listed with a reason instead of being dropped silently.

pub mod available_memory;
pub mod fx_node;
pub mod location;
pub mod memory;
pub mod module_aliases;
pub mod sniff;
pub mod store;
pub mod tensor;

pub use location::display_location;

use crate::capture::store::Stored;
use crate::capture::tensor::{DType, HostTensor};
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

/// Which runtime a capture came from. TorchScript is always the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Torch,
    Onnx,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::Torch => "TorchScript",
            Side::Onnx => "ONNX",
        }
    }

    /// The runtime that computes this side, as progress messages name it.
    pub fn runtime(self) -> &'static str {
        match self {
            Side::Torch => "TorchScript",
            Side::Onnx => "ONNX Runtime",
        }
    }
}

/// The role a value plays in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueRole {
    /// Graph input number `n` (user inputs only; weights are not values).
    Input(usize),
    /// Produced by a node inside the graph.
    Intermediate,
    /// Graph output number `n` (also produced by a node).
    Output(usize),
}

/// One module level of a scope, outermost first: `layer1` of class `Sequential`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeLevel {
    /// Full dotted path of this module from the root, e.g. `layer1.0.conv1`.
    pub path: String,
    /// Python class name where the format records it (`Conv2d`), else empty.
    pub class: String,
}

/// A captured value and everything known about where it came from.
#[derive(Debug, Clone)]
pub struct CapturedValue {
    /// Position in execution order on its side.
    pub id: usize,
    /// Side-local value name (TorchScript debug name like `input.3`, ONNX tensor name).
    pub name: String,
    /// Producing op: `aten::_convolution`, `Conv`; `input` for graph inputs.
    pub op: String,
    /// ONNX node name (`/layer1/layer1.0/conv1/Conv`); empty on the TorchScript side.
    pub node: String,
    /// Module scope of the producing node, outermost first; empty for top-level ops.
    pub scope: Vec<ScopeLevel>,
    /// Whether the format recorded where the producing node came from. False for nodes a
    /// graph optimiser added without any scope record (the dynamo exporter's `Split` or
    /// `Transpose` rewrites, a simplifier's fused nodes): their empty scope means
    /// "unknown", not "top level".
    pub scope_recorded: bool,
    /// Python source location (`model.py:42`) where the format records it.
    pub source: Option<String>,
    /// The whole Python stack that produced the value, outermost first (`file:line`), where
    /// the format records it; `source` is its innermost frame outside PyTorch.
    pub source_stack: Vec<String>,
    pub role: ValueRole,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Ids of the captured values this one was computed from (direct producers only).
    pub inputs: Vec<usize>,
    /// The data, in memory or spilled to disk under a memory budget; `None` when the run
    /// that described the value did not fetch it.
    pub tensor: Option<Stored>,
}

impl CapturedValue {
    /// Dotted module path of the innermost scope, `""` at top level.
    pub fn module_path(&self) -> &str {
        self.scope.last().map(|s| s.path.as_str()).unwrap_or("")
    }

    /// The value's data, read back from the spill file when it was spilled.
    pub fn data(&self) -> Result<Cow<'_, HostTensor>> {
        self.tensor
            .as_ref()
            .ok_or_else(|| anyhow!("value {} was not kept", self.name))?
            .data()
    }

    /// The first and the last `k` elements as f64 (`Stored::edges`): spilled values read
    /// back only those.
    pub fn edges(&self, k: usize) -> Result<Vec<f64>> {
        self.tensor
            .as_ref()
            .ok_or_else(|| anyhow!("value {} was not kept", self.name))?
            .edges(k)
    }

    /// The data when it is held in memory (always, without a memory budget).
    pub fn in_memory(&self) -> Option<&HostTensor> {
        self.tensor.as_ref().and_then(Stored::in_memory)
    }

    /// Class of the innermost module, `""` at top level or when unknown.
    pub fn module_class(&self) -> &str {
        self.scope.last().map(|s| s.class.as_str()).unwrap_or("")
    }
}

/// A value the graph computes but that the instrumented run cannot return.
#[derive(Debug, Clone, Serialize)]
pub struct Uncapturable {
    pub name: String,
    pub op: String,
    pub module: String,
    pub reason: String,
    /// Where a value computed inside a control-flow body lies (the `then_branch` subgraph of
    /// If node `x`); `None` for a value left out for another reason. Read as a value, so
    /// that no one parses `reason` back.
    pub subgraph: Option<String>,
}

/// One side's whole instrumented run.
#[derive(Debug, Clone)]
pub struct Capture {
    pub side: Side,
    pub values: Vec<CapturedValue>,
    pub uncapturable: Vec<Uncapturable>,
    /// Per value unpacked from a tuple or list built in the graph (TorchScript's
    /// `prim::TupleUnpack`), the values that element alone was computed from. Its `inputs`
    /// name everything packed beside it; what is constant and the pairing's dataflow checks
    /// read these instead (a size returned next to a tensor, `x, (H, W)`, is not computed
    /// from `x`; a query returned beside a value feeds only the query projection).
    pub element_inputs: BTreeMap<usize, Vec<usize>>,
    /// Whether values were computed inside control flow (a scripted loop's or if's block):
    /// their dataflow to the outputs runs through lists built across iterations, which the
    /// value inputs do not always record, so the outputs' ancestry is not complete.
    pub control_flow: bool,
    /// Per value, the torch.export node that computed it, where the format names one: every
    /// node of a `.pt2`, and the ONNX nodes the dynamo exporter marked with the node they
    /// came from (`fx_node`). Empty for TorchScript and for other exporters' ONNX.
    pub fx_nodes: BTreeMap<usize, fx_node::FxNode>,
    /// Reference side: the module paths a shared instance's later attributes are read as
    /// (`module_aliases`). Its own values already read so (TorchScript names them so itself,
    /// the `.pt2` reader rewrites them); the ONNX side is read so before pairing. Empty on
    /// the ONNX side and where no instance is shared.
    pub module_aliases: module_aliases::ModuleAliases,
}

impl Capture {
    /// Graph inputs in positional order.
    pub fn inputs(&self) -> Vec<&CapturedValue> {
        let mut v: Vec<_> = self
            .values
            .iter()
            .filter(|v| matches!(v.role, ValueRole::Input(_)))
            .collect();
        v.sort_by_key(|v| match v.role {
            ValueRole::Input(n) => n,
            _ => usize::MAX,
        });
        v
    }

    /// Graph outputs in positional order.
    pub fn outputs(&self) -> Vec<&CapturedValue> {
        let mut v: Vec<_> = self
            .values
            .iter()
            .filter(|v| matches!(v.role, ValueRole::Output(_)))
            .collect();
        v.sort_by_key(|v| match v.role {
            ValueRole::Output(n) => n,
            _ => usize::MAX,
        });
        v
    }

    /// Ids of the values some graph output is computed from (the outputs included); `None`
    /// when an output does not name the value that produced it (a run whose returned leaves
    /// the capture could not match to graph values), so that nothing is taken for unused
    /// only because the dataflow to the outputs is not known.
    pub fn reaching_outputs(&self) -> Option<HashSet<usize>> {
        let outputs = self.outputs();
        if outputs.is_empty() || outputs.iter().any(|v| v.inputs.is_empty()) {
            return None;
        }
        let mut seen = HashSet::new();
        let mut stack: Vec<usize> = outputs.iter().map(|v| v.id).collect();
        while let Some(id) = stack.pop() {
            if seen.insert(id) {
                stack.extend(self.values[id].inputs.iter().copied());
            }
        }
        Some(seen)
    }
}
