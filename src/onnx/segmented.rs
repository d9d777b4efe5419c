//! Bounded capture as consecutive graph segments. Under a memory budget the ONNX side fetches
//! its values in groups, in execution order (`capture::OnnxRunner`); rather than run the whole
//! graph once per group (N groups, N forward passes), group k runs only the segment of the
//! graph that computes it, fed from the cut: the values earlier groups fetched that the
//! segment reads, taken back from the capture's keeper (the spill file under a budget). Each
//! node then runs about once over all groups, so the whole capture costs about one forward.
//!
//! The results are bit for bit those of one run: every node of a segment reads exactly the
//! tensor it would have read in the whole graph (the fed value is ONNX Runtime's own, moved
//! without conversion). A value the capture could not keep (a sequence, say) is not a cut:
//! the segment recomputes it from further back. Half-precision models are the exception, in
//! bounded mode before segments as now: where ONNX Runtime's CPU kernels lack float16 it
//! computes in float32, and whether a consumer reads that float32 or the rounded float16
//! depends on which values are graph outputs, so their last bits can differ from one run of
//! everything. A group runs the whole graph as before when
//! its cut would exceed its share of the budget, when it holds a value no node of the main
//! graph computes (a graph input or weight passed through to an output), or when ONNX Runtime
//! refuses the segment; the caller says why under `-v`.

use super::model::OnnxModel;
use super::runtime;
use super::segment::{cut_observable, Cut, Weights};
use super::session_run::{ort_input, run_values, Fetched, RunOutputs};
use super::signature::{onnx_from_dtype, InputSpec};
use crate::capture::tensor::HostTensor;
use prost::Message;
use std::borrow::Cow;
use std::path::Path;

/// Of the bytes one group's run may hold, the share of the values it fetches; the other
/// share is for the cut values it is fed, so that a segment holds no more than a whole-graph
/// run of a group twice the size did.
pub fn fetch_share(group_bytes: u64) -> u64 {
    (group_bytes / 2).max(1)
}

/// The most bytes of cut values a group fetching at most `group_bytes` may be fed.
pub fn feed_share(group_bytes: u64) -> u64 {
    group_bytes - fetch_share(group_bytes)
}

/// What one segment run needs besides the model it is cut from.
pub struct SegmentRun<'a> {
    /// The capture's instrumented model, weights in external data (`weights.rs`).
    pub model: &'a mut OnnxModel,
    pub specs: &'a [InputSpec],
    /// The graph inputs, in `specs` order.
    pub feed: &'a [&'a HostTensor],
    /// What earlier groups fetched: the cut values come from here.
    pub fetched: &'a Fetched,
    /// The most bytes of cut values the segment may be fed.
    pub feed_allowance: u64,
    pub threads: usize,
    pub custom_ops: Option<&'a Path>,
}

/// Runs the segment that computes `group`; `Err` says why the group must run the whole graph
/// instead (nothing has been fetched then).
pub fn run(r: SegmentRun<'_>, group: &[String]) -> Result<RunOutputs, String> {
    // Every value kept so far is a cut: the segment stops walking back at the first one.
    let cuts: Vec<Cut> = r
        .fetched
        .iter()
        .filter_map(|(name, v)| {
            let (dtype, shape, _) = v.as_ref().ok()?;
            Some(Cut {
                name: name.clone(),
                elem_type: onnx_from_dtype(*dtype),
                shape: shape.clone(),
            })
        })
        .collect();
    let segment = cut_observable(&mut r.model.proto, &cuts, group, Weights::Copy)
        .map_err(|e| format!("the graph cannot be cut there: {e}"))?;
    let fed_bytes: u64 = cuts
        .iter()
        .filter(|c| segment.inputs.contains(&c.name))
        .map(|c| {
            let dtype = r.fetched[&c.name].as_ref().map(|t| t.0).expect("a cut");
            (c.shape.iter().product::<usize>() * dtype.size_bytes()) as u64
        })
        .sum();
    if fed_bytes > r.feed_allowance {
        return Err(format!(
            "its cut holds {} of earlier values, more than the {} a segment may be fed",
            crate::capture::memory::show_bytes(fed_bytes),
            crate::capture::memory::show_bytes(r.feed_allowance)
        ));
    }
    let bytes = segment.model.encode_to_vec();
    let model = OnnxModel {
        path: r.model.path.clone(),
        proto: segment.model,
        external_data_dir: r.model.external_data_dir.clone(),
    };
    let mut session = runtime::session(&model, &bytes, r.threads, r.custom_ops)
        .map_err(|e| format!("ONNX Runtime refused the segment: {e}"))?;
    drop(bytes);
    // Each host copy (read back from the spill file under a budget) is freed as soon as its
    // ort copy exists.
    let mut names = Vec::with_capacity(segment.inputs.len());
    let mut values = Vec::with_capacity(segment.inputs.len());
    for name in &segment.inputs {
        let tensor: Cow<'_, HostTensor> = match r.specs.iter().position(|s| &s.name == name) {
            Some(i) => Cow::Borrowed(r.feed[i]),
            None => match r.fetched.get(name) {
                Some(Ok((_, _, stored))) => stored.data().map_err(|e| e.to_string())?,
                _ => return Err(format!("internal error: no value for segment input {name}")),
            },
        };
        values.push(ort_input(&model.path, name, &tensor).map_err(|e| e.to_string())?);
        names.push(name.as_str());
    }
    run_values(&mut session, &model.path, &names, values)
        .map_err(|e| format!("the segment did not run: {e}"))
}
