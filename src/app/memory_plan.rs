//! How a check keeps its tensors: within `--max-memory` when given, and otherwise within
//! what the machine has free when capturing everything would not fit there, so that a large
//! model completes (in groups, each a segment of the graph fed from the one before) instead
//! of being killed for memory.

use crate::capture::available_memory::{automatic_budget, available_bytes};
use crate::capture::memory::{self, show_bytes, MemoryPlan};
use crate::cli::config::CheckConfig;
use crate::onnx::{self, capture::OnnxRunner};
use anyhow::{anyhow, Result};

/// What a run needs besides the captured values, in units of the largest value: the
/// runtime's working set around it and the two tensors of a compared pair.
const WORKING_VALUES: u64 = 4;

/// The memory plan, planned after loading against what loading left resident; `onnx` is
/// rebuilt to fetch its values in groups when a budget is chosen here.
pub fn plan(cfg: &CheckConfig, onnx: OnnxRunner) -> Result<(OnnxRunner, MemoryPlan)> {
    let (onnx, budget, chosen) = match cfg.runtime.max_memory {
        Some(budget) => (onnx, budget, None),
        None => {
            // Every value is held twice, TorchScript's and ONNX Runtime's.
            let capture = 2 * onnx.capture_estimate() + WORKING_VALUES * onnx.largest_estimate();
            let resident = memory::current_rss().unwrap_or(0);
            let free = available_bytes().unwrap_or(u64::MAX);
            let Some(budget) = automatic_budget(resident, capture, free) else {
                return Ok((onnx, MemoryPlan::unbounded()));
            };
            if !cfg.quiet {
                eprintln!(
                    "align-check: capturing every value takes about {}, more than this machine has free ({}): capturing within {} instead, in groups (slower; as --max-memory {} would). Pass --max-memory to choose the budget.",
                    show_bytes(capture),
                    show_bytes(free),
                    show_bytes(budget),
                    show_bytes(budget)
                );
            }
            (regroup(cfg, onnx)?, budget, Some(free))
        }
    };
    let plan = MemoryPlan::bounded(
        budget,
        memory::current_rss().unwrap_or(0) + onnx.group_session_bytes(),
        memory::peak_rss().unwrap_or(0),
        onnx.largest_estimate(),
    )
    .map_err(|e| match chosen {
        Some(free) => anyhow!(
            "not enough memory to check these models: this machine has {} free ({e})",
            show_bytes(free)
        ),
        None => e,
    })?;
    let mut onnx = onnx;
    // Under -v the runner says which groups could not run as a segment of the graph.
    onnx.verbose = cfg.verbose;
    Ok((onnx, plan))
}

/// The ONNX runner again, prepared for fetching values in groups: its single session is
/// dropped first, so that the two never hold the weights at once.
fn regroup(cfg: &CheckConfig, onnx: OnnxRunner) -> Result<OnnxRunner> {
    drop(onnx);
    memory::release_freed();
    let model = onnx::model::load(&cfg.onnx_path)?;
    OnnxRunner::from_model(
        model,
        cfg.runtime.threads,
        cfg.runtime.ort_custom_ops.as_deref(),
        true,
    )
}
