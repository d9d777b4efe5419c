//! `--repro DIR`: a bundle that reproduces one layer's difference without align-check, ready
//! to attach to a bug report for the exporter or ONNX Runtime.
//!
//! The layer is the first divergence, or the one `--repro-layer` names (an index into the
//! report's layers, a module path, or an ONNX node name). Its model is the layer's isolated
//! segment (`onnx::segment`): the nodes that compute it from PyTorch's values of everything
//! paired upstream, with only their weights. The bundle holds that model, the values it reads
//! (`inputs.npz`), PyTorch's value of the layer (`expected.npz`), `repro.py` (a copy of
//! scripts/repro_bundle.py, which needs only numpy and onnxruntime), `repro.json` (what the
//! script reads: output, tolerance, session settings, what align-check measured) and a README
//! with the versions and commands. The segment is run once here too, so the figures the
//! bundle states are the ones its own files give.

use crate::app::isolation::{cuts, layer_stats, run_segment, Feeds};
use crate::capture::tensor::{format_shape, DType, HostTensor};
use crate::capture::{Capture, ValueRole};
use crate::cli::config::CheckConfig;
use crate::compare::isolation;
use crate::compare::stats::ErrorStats;
use crate::inputs::npz_writer::write_npz;
use crate::onnx::convert::from_ort;
use crate::onnx::segment;
use crate::onnx::steering::Steering;
use crate::outcome::{Isolated, LayerResult, ReproReport};
use crate::text::{fmt_num, module_label};
use anyhow::{anyhow, bail, Context, Result};
use prost::Message;
use serde_json::json;
use std::path::Path;

/// What `--repro` says when no layer was named and none diverges (tested word for word).
pub const NOTHING_TO_REPRODUCE: &str =
    "--repro: no layer diverges, so there is nothing to reproduce (name one with --repro-layer)";

/// The script every bundle carries, kept with the project's other Python in scripts/.
const REPRO_SCRIPT: &str = include_str!("../../scripts/repro_bundle.py");

/// Writes the bundle for the chosen layer into `dir` (created when missing). `Ok(None)` when
/// no layer was named and none diverges: there is nothing to reproduce.
pub fn write(
    (cfg, steering): (&CheckConfig, &Steering),
    dir: &Path,
    layers: &[LayerResult],
    torch: &Capture,
    onnx: &Capture,
) -> Result<Option<ReproReport>> {
    let index = match &cfg.repro_layer {
        Some(selector) => select(selector, layers)?,
        None => match layers.iter().position(LayerResult::is_origin) {
            Some(i) => i,
            None => return Ok(None),
        },
    };
    let layer = &layers[index];
    let value = &onnx.values[layer.onnx_id];
    if value.role != ValueRole::Intermediate {
        bail!(
            "--repro: layer {index} ({}) is a graph input or output of the ONNX model itself; \
             a repro bundle is made for a value a node computes",
            module_label(&layer.module)
        );
    }
    let plan = isolation::plan(torch, onnx, layers);
    let mut model = crate::onnx::model::load(&cfg.onnx_path)?;
    let mut seg = segment::cut(
        &mut model.proto,
        (&cuts(&plan), steering),
        std::slice::from_ref(&value.name),
        segment::Weights::Move,
    )?;
    if let Some(weights_dir) = &model.external_data_dir {
        crate::onnx::weights::inline_external(&mut seg.model, weights_dir)?;
    }
    // The bytes measured here are the bundle's model.onnx.
    let bytes = seg.model.encode_to_vec();
    let feeds = Feeds::new(&plan, torch, onnx);
    let stats = measure(cfg, &model, (&bytes, &seg), &feeds, layer, torch)?;
    let isolated = Isolated {
        max_abs: stats.max_abs,
        rel_to_range: stats.rel_to_range,
        pass: stats.pass,
        snr_db: Some(stats.snr_db),
        rounding_floor: None,
        tied: false,
        nonfinite_mismatch: stats.nonfinite_mismatch,
    };
    let bundle = Bundle {
        cfg,
        dir,
        layer,
        seg: &seg,
        model_bytes: &bytes,
        stats: &stats,
    };
    let bytes = bundle.write_files(&feeds, torch, &isolated)?;
    Ok(Some(ReproReport {
        dir: dir.display().to_string(),
        layer_index: index,
        module: layer.module.clone(),
        onnx_node: layer.onnx_node.clone(),
        nodes: seg.model.graph.as_ref().map_or(0, |g| g.node.len()),
        bytes,
        isolated,
    }))
}

/// The layer's error as the bundle's own model gives it: one run of the segment here, so that
/// what the bundle states is what its files reproduce.
fn measure(
    cfg: &CheckConfig,
    model: &crate::onnx::OnnxModel,
    (bytes, seg): (&[u8], &segment::Segment),
    feeds: &Feeds,
    layer: &LayerResult,
    torch: &Capture,
) -> Result<ErrorStats> {
    let mut results = run_segment(cfg, model, bytes, &seg.inputs, feeds)?;
    let output = &seg.outputs[0];
    let test = results
        .remove(output)
        .ok_or_else(|| anyhow!("ONNX Runtime did not return `{output}`"))
        .and_then(|v| from_ort(&v))?;
    drop(results);
    layer_stats(layer, torch, &test, &cfg.policy)
}

/// The bundle's files for one measured layer.
struct Bundle<'a> {
    cfg: &'a CheckConfig,
    dir: &'a Path,
    layer: &'a LayerResult,
    seg: &'a segment::Segment,
    /// The serialised segment, as measured.
    model_bytes: &'a [u8],
    stats: &'a ErrorStats,
}

/// Every file of a bundle.
const FILES: [&str; 6] = [
    "model.onnx",
    "inputs.npz",
    "expected.npz",
    "repro.json",
    "repro.py",
    "README.md",
];

impl Bundle<'_> {
    /// Writes every file; returns their total size in bytes.
    fn write_files(&self, feeds: &Feeds, torch: &Capture, isolated: &Isolated) -> Result<u64> {
        std::fs::create_dir_all(self.dir)
            .with_context(|| format!("--repro: cannot create {}", self.dir.display()))?;
        let file = |name: &str| self.dir.join(name);
        write_file(&file("model.onnx"), self.model_bytes)?;
        let inputs = feeds.for_inputs(&self.seg.inputs)?;
        let named: Vec<(&str, &HostTensor)> =
            inputs.iter().map(|(n, t)| (*n, t.as_ref())).collect();
        write_npz(&file("inputs.npz"), &named).context("--repro: inputs.npz")?;
        let expected = torch.values[self.layer.torch_id].data()?;
        // NumPy has no bfloat16: PyTorch's value is compared in float64 anyway.
        let expected = match expected.dtype() {
            DType::Bf16 => std::borrow::Cow::Owned(
                expected
                    .cast_float(DType::F32)
                    .expect("bfloat16 casts to float32"),
            ),
            _ => expected,
        };
        write_npz(&file("expected.npz"), &[("expected", &expected)])
            .context("--repro: expected.npz")?;
        let env = crate::app::runtimes::environment(self.cfg.runtime.threads);
        write_file(
            &file("repro.json"),
            serde_json::to_string_pretty(&self.config(&env))?.as_bytes(),
        )?;
        write_file(&file("repro.py"), REPRO_SCRIPT.as_bytes())?;
        let nodes = self.seg.model.graph.as_ref().map_or(0, |g| g.node.len());
        let readme = readme(self.cfg, self.layer, isolated, &named, nodes, &env);
        write_file(&file("README.md"), readme.as_bytes())?;
        Ok(FILES
            .iter()
            .filter_map(|f| std::fs::metadata(file(f)).ok())
            .map(|m| m.len())
            .sum())
    }

    /// `repro.json`: what repro.py reads, and what align-check measured.
    fn config(&self, env: &crate::outcome::Environment) -> serde_json::Value {
        let (layer, stats, runtime) = (self.layer, self.stats, &self.cfg.runtime);
        json!({
            "layer": module_label(&layer.module),
            "layer_index": layer.index,
            "onnx_node": layer.onnx_node,
            "onnx_op": layer.onnx_op,
            "output": self.seg.outputs[0],
            "inputs": self.seg.inputs,
            "tolerance": {"atol": stats.tol.atol, "rtol": stats.tol.rtol, "precision": layer.cmp.precision},
            "threads": runtime.threads,
            "custom_ops_library": runtime.ort_custom_ops.as_ref().map(|p| {
                std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()).display().to_string()
            }),
            "align_check": {"max_abs": stats.max_abs, "rel_to_range": stats.rel_to_range, "pass": stats.pass},
            "versions": {"align_check": env.align_check, "libtorch": env.libtorch, "onnxruntime": env.onnxruntime},
        })
    }
}

/// The layer `selector` names: an index into the report's layers, else a module path (its
/// first failing layer, else its last, which is the module's output), else an ONNX node name.
fn select(selector: &str, layers: &[LayerResult]) -> Result<usize> {
    if let Ok(index) = selector.parse::<usize>() {
        if index < layers.len() {
            return Ok(index);
        }
        bail!(
            "--repro-layer {index}: the report has layers 0 to {}",
            layers.len().saturating_sub(1)
        );
    }
    let of_module: Vec<&LayerResult> = layers.iter().filter(|l| l.module == selector).collect();
    if let Some(l) = of_module.iter().find(|l| l.fails()).or(of_module.last()) {
        return Ok(l.index);
    }
    if let Some(l) = layers.iter().find(|l| l.onnx_node == selector) {
        return Ok(l.index);
    }
    bail!(
        "--repro-layer {selector}: no layer has that index, module path or ONNX node name \
         (the report's `layers` list them)"
    )
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("--repro: cannot write {}", path.display()))
}

/// The bundle's README: what differs, with which versions, and how to run it.
fn readme(
    cfg: &CheckConfig,
    layer: &LayerResult,
    isolated: &Isolated,
    inputs: &[(&str, &HostTensor)],
    nodes: usize,
    env: &crate::outcome::Environment,
) -> String {
    let name = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let listed: Vec<String> = inputs
        .iter()
        .map(|(n, t)| format!("  - `{n}`: {} {}", t.dtype(), format_shape(&t.shape)))
        .collect();
    let verdict = if isolated.pass { "within" } else { "beyond" };
    format!(
        "# ONNX Runtime differs from PyTorch at `{module}`\n\n\
         Found by align-check {ac} comparing `{pt}` (TorchScript, libtorch {lt}) with `{ox}` \
         (ONNX Runtime {ort}).\n\n\
         Layer {index}: ONNX node `{node}` ({op}), {shape} {dtype}. Fed PyTorch's values for \
         everything it reads, ONNX Runtime's value differs from PyTorch's by at most {max_abs} \
         ({rel} of the largest |value|), {verdict} the tolerance atol {atol}, rtol {rtol} \
         ({precision}).\n\n\
         ## Files\n\n\
         - `model.onnx`: the {nodes} node(s) that compute the layer, with their weights only; \
         its graph inputs are the values below\n\
         - `inputs.npz`: PyTorch's values of those inputs:\n{listed}\n\
         - `expected.npz`: PyTorch's value of the layer (`expected`)\n\
         - `repro.py`: runs `model.onnx` with onnxruntime and compares (needs numpy and \
         onnxruntime only)\n\
         - `repro.json`: what `repro.py` reads, and what align-check measured\n\n\
         ## Run\n\n\
         ```\n\
         pip install numpy onnxruntime=={ort}\n\
         python repro.py\n\
         ```\n\n\
         It prints `max_abs` and `rel_to_range` and exits 1 when some element is beyond the \
         tolerance.\n",
        module = module_label(&layer.module),
        ac = env.align_check,
        pt = name(&cfg.torch_path),
        lt = env.libtorch,
        ox = name(&cfg.onnx_path),
        ort = env.onnxruntime,
        index = layer.index,
        node = layer.onnx_node,
        op = layer.onnx_op,
        shape = format_shape(&layer.cmp.shape),
        dtype = layer.cmp.dtype,
        max_abs = fmt_num(isolated.max_abs),
        rel = fmt_num(isolated.rel_to_range),
        atol = fmt_num(layer.cmp.tol.atol),
        rtol = fmt_num(layer.cmp.tol.rtol),
        precision = layer.cmp.precision,
        listed = listed.join("\n"),
    )
}
