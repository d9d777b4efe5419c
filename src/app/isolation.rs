//! The isolation run: ONNX Runtime computes every paired layer again, each from PyTorch's
//! values of what it reads, and each result is compared with PyTorch's value of the layer.
//!
//! It runs when a layer or an output fails (or always with `--isolate`): a clean pass costs
//! nothing. The ONNX file is read again (the capture session took over its weights), cut at
//! every fed value (`onnx::segment`) and run once, or once per group of layers under a memory
//! budget, each group's model holding only the nodes and weights its layers need. Isolation
//! explains a failure; it never causes one. If it cannot run, the check goes on with the
//! origins judged as before and the report says why.

use crate::capture::memory::MemoryPlan;
use crate::capture::tensor::{DType, HostTensor};
use crate::capture::{Capture, CapturedValue, ValueRole};
use crate::cli::config::CheckConfig;
use crate::compare::evaluate::{judged_stats, origins_of, Evaluation};
use crate::compare::isolation::{self, FedValue, Plan};
use crate::compare::stats::ErrorStats;
use crate::compare::tied_selection;
use crate::compare::tolerance::{Tolerance, TolerancePolicy};
use crate::compare::{rounding, segment_ops};
use crate::onnx::convert::from_ort;
use crate::onnx::segment::{self, Cut, Weights};
use crate::onnx::session_run::{ort_input, run_values, RunOutputs};
use crate::onnx::signature::onnx_from_dtype;
use crate::onnx::steering::Steering;
use crate::onnx::{runtime, OnnxModel};
use crate::outcome::{Isolated, IsolationReport, LayerResult};
use anyhow::{anyhow, Result};
use prost::Message;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// Why isolation runs on this evaluation, or `None` when it does not.
pub fn reason(always: bool, eval: &Evaluation) -> Option<String> {
    if always {
        return Some("--isolate".to_string());
    }
    let failing_layers = eval.layers.iter().filter(|l| l.fails()).count();
    let failing_outputs = eval.outputs.iter().filter(|o| !o.cmp.pass).count();
    // A doubtful pair is confirmed or not by its isolated error (`isolation::apply`), so it
    // is a reason too: otherwise a clean model would show it as a possible wrong pair.
    let doubtful = eval.layers.iter().filter(|l| l.unconfirmed).count();
    if failing_layers + failing_outputs > 0 {
        Some(format!(
            "{failing_layers} layer(s) and {failing_outputs} output(s) exceed their tolerance"
        ))
    } else {
        (doubtful > 0).then(|| format!("{doubtful} unconfirmed pair(s) to confirm"))
    }
}

/// Runs isolation when `reason` says so and records each layer's isolated error and origin
/// in `eval`, whose divergence origins are then judged from them.
pub fn judge_origins(
    cfg: &CheckConfig,
    (memory, steering): (&MemoryPlan, &Steering),
    torch: &Capture,
    onnx: &Capture,
    eval: &mut Evaluation,
) -> Option<IsolationReport> {
    let reason = reason(cfg.isolate, eval)?;
    let plan = isolation::plan(torch, onnx, &eval.layers);
    let mut report = IsolationReport {
        reason,
        fed_values: plan.fed.len(),
        isolated_layers: 0,
        runs: 0,
        error: None,
    };
    match isolate(cfg, (memory, steering), &plan, torch, onnx, &eval.layers) {
        Ok((mut isolated, runs)) => {
            tied_selection::pass_tied_selections(&eval.layers, onnx, &mut isolated);
            report.isolated_layers = isolated.iter().flatten().count();
            report.runs = runs;
            isolation::apply(&mut eval.layers, isolated, &cfg.policy.outputs);
            eval.flips = crate::compare::discrete::flips(&eval.layers, torch);
            eval.origins = origins_of(&eval.layers);
        }
        Err(e) => report.error = Some(format!("{e:#}")),
    }
    Some(report)
}

/// Every layer's isolated error (`None` where its value could not be computed or compared)
/// and the number of ONNX Runtime runs it took.
fn isolate(
    cfg: &CheckConfig,
    (memory, steering): (&MemoryPlan, &Steering),
    plan: &Plan,
    torch: &Capture,
    onnx: &Capture,
    layers: &[LayerResult],
) -> Result<(Vec<Option<Isolated>>, usize)> {
    let mut model = crate::onnx::model::load(&cfg.onnx_path)?;
    let cuts = cuts(plan);
    let feeds = Feeds::new(plan, torch, onnx);
    let fed: HashSet<&str> = plan.fed.iter().map(|f| f.onnx_name.as_str()).collect();
    let mut layers_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in layers.iter().enumerate() {
        layers_of
            .entry(onnx.values[l.onnx_id].name.as_str())
            .or_default()
            .push(i);
    }
    let size_of = |name: &String| {
        onnx.values.iter().find(|v| &v.name == name).map_or(0, |v| {
            v.shape.iter().product::<usize>() as u64 * v.dtype.size_bytes() as u64
        })
    };
    // A group's fed values are about as large as its fetched ones (each layer reads the one
    // before it), and both are held during its run: half the budget each.
    let groups = groups(&plan.fetch, size_of, memory.group_bytes.map(|b| b / 2));
    // One group takes the weights it needs out of the model instead of copying them.
    let weights = if groups.len() == 1 {
        Weights::Move
    } else {
        Weights::Copy
    };
    let mut isolated: Vec<Option<Isolated>> = vec![None; layers.len()];
    let mut runs = 0;
    for group in &groups {
        let seg = segment::cut(&mut model.proto, (&cuts, steering), group, weights)?;
        let bytes = seg.model.encode_to_vec();
        drop(seg.model);
        let results = run_segment(cfg, &model, &bytes, &seg.inputs, &feeds)?;
        runs += 1;
        let tests = fetched_tensors(group, &seg.outputs, results);
        let by = Judging {
            layers,
            layers_of: &layers_of,
            torch,
            policy: &cfg.policy,
        };
        let judged = by.judge(&tests, memory.compare_in_parallel());
        let failing = by.failing(&tests, &judged);
        // Only a failure in isolation costs a second run: its rounding floor.
        let responses = if failing.is_empty() {
            HashMap::new()
        } else {
            runs += 1;
            let again = run_segment(cfg, &model, &bytes, &seg.inputs, &feeds.perturbed())?;
            let again = fetched_tensors(group, &seg.outputs, again);
            rounding_responses(&tests, &again, &failing)
        };
        drop(bytes);
        for (i, mut iso) in judged {
            if let (Some(x), Some(&response)) = (
                iso.as_mut(),
                responses.get(onnx.values[layers[i].onnx_id].name.as_str()),
            ) {
                let ops = segment_ops::float_ops(onnx, &fed, layers[i].onnx_id);
                x.rounding_floor = Some(rounding::floor_factor(ops) * response);
                // A non-finite value where PyTorch has a finite one (a float16 overflow) is
                // never rounding: the floor is measured over the finite elements only.
                x.pass = x.pass
                    || (x.nonfinite_mismatch == 0
                        && rounding::within_floor(x.rel_to_range, response, ops));
            }
            isolated[i] = iso;
        }
    }
    Ok((isolated, runs))
}

/// What judging one segment run's fetched values needs: the layers, which of them each
/// ONNX value is, PyTorch's capture and the tolerances.
struct Judging<'a> {
    layers: &'a [LayerResult],
    layers_of: &'a HashMap<&'a str, Vec<usize>>,
    torch: &'a Capture,
    policy: &'a TolerancePolicy,
}

impl Judging<'_> {
    /// Each layer a fetched value is, with its isolated error (`None` where it could not be
    /// compared); in parallel when the memory plan allows it.
    fn judge(
        &self,
        tests: &[(&String, HostTensor)],
        parallel: bool,
    ) -> Vec<(usize, Option<Isolated>)> {
        let judge = |(asked, test): &(&String, HostTensor)| -> Vec<(usize, Option<Isolated>)> {
            let judged = |i: usize| {
                let stats = layer_stats(&self.layers[i], self.torch, test, self.policy).ok()?;
                Some(Isolated {
                    max_abs: stats.max_abs,
                    rel_to_range: stats.rel_to_range,
                    pass: stats.pass,
                    snr_db: Some(stats.snr_db),
                    rounding_floor: None,
                    tied: false,
                    nonfinite_mismatch: stats.nonfinite_mismatch,
                })
            };
            let of = self.layers_of.get(asked.as_str()).into_iter().flatten();
            of.map(|&i| (i, judged(i))).collect()
        };
        let judged: Vec<Vec<(usize, Option<Isolated>)>> = if parallel {
            tests.par_iter().map(judge).collect()
        } else {
            tests.iter().map(judge).collect()
        };
        judged.into_iter().flatten().collect()
    }

    /// The fetched values some layer of which fails in isolation.
    fn failing<'t>(
        &self,
        tests: &[(&'t String, HostTensor)],
        judged: &[(usize, Option<Isolated>)],
    ) -> Vec<&'t String> {
        let failing_layers: HashSet<usize> = judged
            .iter()
            .filter(|(_, iso)| iso.as_ref().is_some_and(|x| !x.pass))
            .map(|(i, _)| *i)
            .collect();
        tests
            .iter()
            .map(|(asked, _)| *asked)
            .filter(|asked| {
                let of = self.layers_of.get(asked.as_str()).into_iter().flatten();
                of.into_iter().any(|i| failing_layers.contains(i))
            })
            .collect()
    }
}

/// The fetched values of one segment run, each under the name the plan asked for. Converted
/// one by one (each ort value is freed once copied); a value ONNX Runtime does not hand back
/// as a tensor stays without an isolated error, as it stayed without an accumulated one.
fn fetched_tensors<'g>(
    group: &'g [String],
    fetched: &[String],
    mut results: RunOutputs,
) -> Vec<(&'g String, HostTensor)> {
    group
        .iter()
        .zip(fetched)
        .filter_map(|(asked, fetched)| {
            let test = results.remove(fetched).and_then(|v| from_ort(&v).ok())?;
            Some((asked, test))
        })
        .collect()
}

/// How far each of `failing`'s isolated values moved when its fed values were rounded once
/// more (`again`), relative to its range.
fn rounding_responses<'g>(
    tests: &[(&'g String, HostTensor)],
    again: &[(&'g String, HostTensor)],
    failing: &[&'g String],
) -> HashMap<&'g str, f64> {
    failing
        .iter()
        .filter_map(|name| {
            let first = &tests.iter().find(|(n, _)| n == name)?.1;
            let second = &again.iter().find(|(n, _)| n == name)?.1;
            let moved = crate::compare::stats::compare(first, second, Tolerance::EXACT).ok()?;
            Some((name.as_str(), moved.rel_to_range))
        })
        .collect()
}

/// One run of a segment of `model` (serialised in `bytes`, reading graph inputs `inputs`)
/// on its inputs from `feeds`, with the session options of the capture.
pub fn run_segment(
    cfg: &CheckConfig,
    model: &OnnxModel,
    bytes: &[u8],
    inputs: &[String],
    feeds: &Feeds,
) -> Result<RunOutputs> {
    // The whole model stands for the segment: its folder holds external weights, its ops
    // explain a session error.
    let mut session = runtime::session(
        model,
        bytes,
        cfg.runtime.threads,
        cfg.runtime.ort_custom_ops.as_deref(),
    )?;
    // Each host tensor (read back from the spill file under a budget) is freed as soon as
    // its ort copy exists.
    let mut names = Vec::with_capacity(inputs.len());
    let mut values = Vec::with_capacity(inputs.len());
    for name in inputs {
        let (_, tensor) = feeds
            .for_inputs(std::slice::from_ref(name))?
            .pop()
            .expect("one tensor per name");
        values.push(ort_input(&model.path, name, &tensor)?);
        names.push(name.as_str());
    }
    run_values(&mut session, &model.path, &names, values)
}

/// The plan's fed values as the cuts of a segment.
pub fn cuts(plan: &Plan) -> Vec<Cut> {
    plan.fed
        .iter()
        .map(|f| Cut {
            name: f.onnx_name.clone(),
            elem_type: onnx_from_dtype(f.dtype),
            shape: f.shape.clone(),
        })
        .collect()
}

/// Where a segment's inputs come from: a fed value is PyTorch's, an original graph input is
/// the one both sides were given.
pub struct Feeds<'a> {
    torch: &'a Capture,
    fed: HashMap<&'a str, &'a FedValue>,
    inputs: HashMap<&'a str, &'a CapturedValue>,
    /// Fed values moved by one rounding (`compare::rounding`), for the rounding floor.
    perturb: bool,
}

impl<'a> Feeds<'a> {
    pub fn new(plan: &'a Plan, torch: &'a Capture, onnx: &'a Capture) -> Self {
        Feeds {
            torch,
            fed: plan.fed.iter().map(|f| (f.onnx_name.as_str(), f)).collect(),
            inputs: onnx
                .values
                .iter()
                .filter(|v| matches!(v.role, ValueRole::Input(_)))
                .map(|v| (v.name.as_str(), v))
                .collect(),
            perturb: false,
        }
    }

    /// The same feeds with every fed value rounded once more.
    pub fn perturbed(&self) -> Feeds<'a> {
        Feeds {
            torch: self.torch,
            fed: self.fed.clone(),
            inputs: self.inputs.clone(),
            perturb: true,
        }
    }

    /// The tensor for each of `names` (a segment's inputs), in order.
    pub fn for_inputs<'n>(
        &self,
        names: &'n [String],
    ) -> Result<Vec<(&'n str, Cow<'a, HostTensor>)>> {
        names
            .iter()
            .map(|name| {
                let tensor = match (self.fed.get(name.as_str()), self.inputs.get(name.as_str())) {
                    (Some(f), _) if self.perturb => {
                        let exact = fed_tensor(&self.torch.values[f.torch_id], f)?;
                        Cow::Owned(rounding::perturbed(exact.as_ref()))
                    }
                    (Some(f), _) => fed_tensor(&self.torch.values[f.torch_id], f)?,
                    (None, Some(v)) => v.data()?,
                    (None, None) => {
                        return Err(anyhow!("it reads `{name}`, which neither side captured"))
                    }
                };
                Ok((name.as_str(), tensor))
            })
            .collect()
    }
}

/// The statistics of `test` against layer `l`'s TorchScript value, in the precision and
/// tolerance the layer is judged by.
pub fn layer_stats(
    l: &LayerResult,
    torch: &Capture,
    test: &HostTensor,
    policy: &TolerancePolicy,
) -> Result<ErrorStats> {
    let t = &torch.values[l.torch_id];
    let precision = DType::from_name(&l.cmp.precision).unwrap_or(t.dtype);
    judged_stats(t, &l.onnx_node, test, precision, policy)
}

/// PyTorch's value as the ONNX value it replaces: in its element type and shape.
fn fed_tensor<'a>(t: &'a CapturedValue, f: &FedValue) -> Result<Cow<'a, HostTensor>> {
    let data = t.data()?;
    let cast = if data.dtype() == f.dtype {
        data
    } else {
        Cow::Owned(data.cast_float(f.dtype).ok_or_else(|| {
            anyhow!(
                "cannot feed {} value `{}` as {}",
                data.dtype(),
                t.name,
                f.dtype
            )
        })?)
    };
    Ok(if cast.shape == f.shape {
        cast
    } else {
        Cow::Owned(HostTensor::new(f.shape.clone(), cast.into_owned().data))
    })
}

/// The fetch list in groups of at most `budget` bytes of fetched values (a value larger than
/// the budget goes alone); one group without a budget.
fn groups(
    fetch: &[String],
    size_of: impl Fn(&String) -> u64,
    budget: Option<u64>,
) -> Vec<Vec<String>> {
    let Some(budget) = budget else {
        return vec![fetch.to_vec()];
    };
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut used = 0u64;
    for name in fetch {
        let size = size_of(name);
        match groups.last_mut() {
            Some(group) if used + size <= budget => group.push(name.clone()),
            _ => {
                groups.push(vec![name.clone()]);
                used = 0;
            }
        }
        used += size;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_fill_up_to_the_budget_and_a_large_value_goes_alone() {
        let names: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let size = |n: &String| if n == "c" { 100 } else { 4 };
        let g = groups(&names, size, Some(10));
        assert_eq!(g, [vec!["a", "b"], vec!["c"], vec!["d"]]);
        assert_eq!(groups(&names, size, None).len(), 1);
    }
}
