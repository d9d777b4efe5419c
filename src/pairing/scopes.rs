//! Module-call keys: which call of which module produced each value, on either side.
//!
//! Both sides name a module by its dotted path, but a module called twice (`self.relu` in a
//! ResNet block) needs the call told apart. TorchScript does not number calls, so a call is a
//! maximal run of consecutive values inside that module, and a leaf module's op coming again
//! starts its next call. The legacy ONNX exporter numbers calls in the name (`relu_1` is the
//! second call of `relu`); such suffixes are stripped when the TorchScript side knows the
//! stem, and one raw name under one parent call stays one call even when its nodes are
//! interleaved with another branch's.

use super::legacy_names::legacy_number;
use super::ops::in_runtime_domain;
use crate::capture::{CapturedValue, ScopeLevel};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The chain of (module path, call index) from the outermost scope inwards, rendered as one
/// string such as `layer1#0/layer1.0#0/layer1.0.relu#1`. Empty for top-level values.
pub type GroupKey = String;

/// Paths of every module that appears in a scope on this side.
pub fn known_paths(values: &[CapturedValue]) -> HashSet<String> {
    values
        .iter()
        .flat_map(|v| v.scope.iter().map(|l| l.path.clone()))
        .collect()
}

/// Paths of modules that have child modules among the captured scopes.
pub fn parent_paths(values: &[CapturedValue]) -> HashSet<String> {
    values
        .iter()
        .flat_map(|v| {
            let n = v.scope.len();
            v.scope
                .iter()
                .take(n.saturating_sub(1))
                .map(|l| l.path.clone())
        })
        .collect()
}

/// Maps an ONNX scope path onto the TorchScript module it names, undoing the legacy
/// exporter's `_N` call suffixes (`layer1.0.relu_1` becomes `layer1.0.relu`) and its
/// index-only names of ModuleList items (`1` becomes `blocks.1` when that is the only match).
fn normalise(path: &str, torch_paths: &HashSet<String>) -> String {
    if torch_paths.contains(path) {
        return path.to_string();
    }
    let mut out = String::new();
    for segment in path.split('.') {
        let joined = |s: &str| {
            if out.is_empty() {
                s.to_string()
            } else {
                format!("{out}.{s}")
            }
        };
        let direct = joined(segment);
        let stem = segment
            .rsplit_once('_')
            .filter(|(_, n)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(|(stem, _)| joined(stem));
        out = match stem {
            Some(s) if !torch_paths.contains(&direct) && torch_paths.contains(&s) => s,
            _ => direct,
        };
    }
    if torch_paths.contains(&out) {
        return out;
    }
    // The legacy exporter names a scripted ModuleList's items by their index alone (`0` for
    // `blocks.0`): the one TorchScript path that ends with the whole ONNX path.
    let suffix = format!(".{out}");
    let mut ending = torch_paths.iter().filter(|p| p.ends_with(&suffix));
    match (ending.next(), ending.next()) {
        (Some(only), None) => only.clone(),
        _ => missing_inner_level(&out, torch_paths).unwrap_or(out),
    }
}

/// A module reached through a method other than `forward` (a relative-position module whose
/// `get_bias()` runs `self.mlp`) gets no scope level of its own from the legacy exporter, so
/// the ONNX paths below it lack the one segment TorchScript's keep (`attn.mlp.fc1` for
/// `attn.rel_pos.mlp.fc1`): the one TorchScript path that, with one inner segment left out,
/// is the ONNX path. None when no path or several do.
fn missing_inner_level(path: &str, torch_paths: &HashSet<String>) -> Option<String> {
    let wanted: Vec<&str> = path.split('.').collect();
    let n = wanted.len();
    let mut found = torch_paths.iter().filter(|p| {
        let segments: Vec<&str> = p.split('.').collect();
        segments.len() == n + 1
            && (1..n)
                .any(|gap| segments[..gap] == wanted[..gap] && segments[gap + 1..] == wanted[gap..])
    });
    match (found.next(), found.next()) {
        (Some(only), None) => Some(only.clone()),
        _ => None,
    }
}

/// Assigns each value its module-call key. `skip` marks values (bookkeeping) that neither get
/// a key nor interrupt a run. With `torch_paths`, scope paths are first normalised onto them.
pub fn assign_keys(
    values: &[CapturedValue],
    skip: &dyn Fn(&CapturedValue) -> bool,
    torch_paths: Option<&HashSet<String>>,
) -> Vec<Option<GroupKey>> {
    let mut calls = CallCounter {
        parents: parent_paths(values),
        ..CallCounter::default()
    };
    let mut keys = Vec::with_capacity(values.len());
    let mut unknown: Vec<usize> = Vec::new();
    // Normalising a path the TorchScript side lacks scans its paths: once per raw path.
    let mut normalised: HashMap<String, String> = HashMap::new();
    for v in values {
        if skip(v) {
            keys.push(None);
            continue;
        }
        if !v.scope_recorded {
            // Neither a key of its own nor a break in the run around it; it joins the call
            // it feeds (an optimiser's Split feeds the attention that unpacks it). ONNX
            // Runtime's fused ops join none: they span modules by design (a Linear's bias,
            // the residual Add and the LayerNorm in one SkipLayerNormalization), and the
            // dataflow places them (`fused_nodes`).
            if !in_runtime_domain(&v.op) {
                unknown.push(keys.len());
            }
            keys.push(None);
            continue;
        }
        keys.push(Some(
            calls.key_of(v, &levels(v, torch_paths, &mut normalised)),
        ));
    }
    // A value of no recorded scope joins the call of its earliest consumer that has one: the
    // call it feeds. One whose consumers have none (an optimiser's MatMul feeding its fused
    // LayerNorm) joins no call: the dataflow places it, like the fused node, rather than the
    // call that merely ran before it. Latest first: a value's consumers come after it, so
    // theirs are settled.
    let consumers = super::consumers_of(values);
    for &i in unknown.iter().rev() {
        keys[i] = consumers[i]
            .iter()
            .filter(|&&c| keys[c].is_some())
            .min()
            .and_then(|&c| keys[c].clone());
    }
    keys
}

/// A value's scope levels that name modules, each with its path normalised onto the
/// TorchScript side's paths.
fn levels<'v>(
    v: &'v CapturedValue,
    torch_paths: Option<&HashSet<String>>,
    normalised: &mut HashMap<String, String>,
) -> Vec<(&'v ScopeLevel, String)> {
    let depth = v.scope.len();
    v.scope
        .iter()
        .enumerate()
        .filter_map(|(i, l)| match torch_paths {
            Some(known) => {
                if !normalised.contains_key(&l.path) {
                    normalised.insert(l.path.clone(), normalise(&l.path, known));
                }
                let norm = &normalised[&l.path];
                // An outer level TorchScript never saw called is a container that is
                // iterated, not called (`for block in self.h:`); the dynamo exporter lists
                // it, libtorch's call stack does not. It would only split keys.
                (i + 1 == depth || known.contains(norm)).then(|| (l, norm.clone()))
            }
            None => Some((l, l.path.clone())),
        })
        .collect()
}

/// Numbers module calls as values come, in execution order.
///
/// The legacy exporter names every call of a module apart (`relu`, `relu_1`), so one raw
/// path under one parent call is one call even when a graph tool interleaved its nodes with
/// another branch's. Dynamo scopes repeat the path; only runs tell calls apart there. A leaf
/// module's call runs each op once outside a run, so its op coming again starts its next
/// call, and the next call of every module around it that the run left (an unrolled loop
/// repeats `/body/conv/Conv` as `Conv_1`).
#[derive(Default)]
struct CallCounter {
    parents: HashSet<String>,
    /// Calls so far per normalised module path.
    counters: HashMap<String, usize>,
    /// (raw path, call) of the previous keyed value, per depth.
    prev: Vec<(String, usize)>,
    /// (parent key, raw path) -> latest call index, for legacy-named nodes.
    legacy_calls: HashMap<(String, String), usize>,
    /// (parent key, module path) -> the module's call count when that parent call began.
    legacy_base: HashMap<(String, String), usize>,
    /// Innermost raw path -> the ops its latest call ran.
    leaf_ops: HashMap<String, HashSet<String>>,
    /// Innermost raw path -> the values of its latest call, and the first of them.
    leaf_values: HashMap<String, (usize, HashSet<usize>)>,
    /// Innermost raw path -> per run of legacy node names, the highest number its latest
    /// call holds (`node_names::legacy_number`).
    leaf_numbers: HashMap<String, HashMap<String, usize>>,
}

impl CallCounter {
    fn key_of(&mut self, v: &CapturedValue, levels: &[(&ScopeLevel, String)]) -> GroupKey {
        let named_calls = v.node.starts_with('/');
        let innermost = levels
            .last()
            .map(|(l, _)| l.path.clone())
            .unwrap_or_default();
        // An op of the latest call that reads that call's values and nothing computed since
        // it began continues it, though another branch's nodes came in between: a graph tool
        // interleaved two norms (q_norm's second Mul after k_norm's first). A next call reads
        // what came after (an unrolled loop's next iteration reads the one before's result).
        let continues_own = self
            .leaf_values
            .get(&innermost)
            .is_some_and(|(start, own)| {
                v.inputs.iter().any(|i| own.contains(i))
                    && v.inputs.iter().all(|i| own.contains(i) || i < start)
            });
        let next_call = !self.parents.contains(&innermost)
            && !continues_own
            && !self.written_within_latest(&innermost, &v.node)
            && self
                .leaf_ops
                .get(&innermost)
                .is_some_and(|ops| ops.contains(&v.op));
        let mut current: Vec<(String, usize)> = Vec::with_capacity(levels.len());
        let mut continuing = true;
        let mut key = String::new();
        for (depth, (level, norm)) in levels.iter().enumerate() {
            let call = match self.prev.get(depth) {
                Some((raw, call)) if continuing && raw == &level.path => *call,
                _ => {
                    continuing = false;
                    let seen = (key.clone(), level.path.clone());
                    let known = self
                        .legacy_calls
                        .get(&seen)
                        .filter(|_| named_calls && !next_call);
                    match known {
                        Some(&call) => call,
                        None => {
                            if depth + 1 == levels.len() {
                                self.leaf_ops.remove(&innermost);
                                self.leaf_values.remove(&innermost);
                                self.leaf_numbers.remove(&innermost);
                            }
                            self.new_call(seen, norm, named_calls)
                        }
                    }
                }
            };
            current.push((level.path.clone(), call));
            if !key.is_empty() {
                key.push('/');
            }
            // Writing into a String cannot fail.
            let _ = write!(key, "{norm}#{call}");
        }
        self.remember_in_latest_call(v, innermost);
        self.prev = current;
        key
    }

    /// Records value `v` as part of the latest call of `innermost`: its id, its legacy
    /// node number, its op. Looked up before inserting, since nearly every value meets
    /// entries that exist (the keys and ops are cloned only for a new one).
    fn remember_in_latest_call(&mut self, v: &CapturedValue, innermost: String) {
        if let Some((run, number)) = legacy_number(&v.node) {
            let highest = self.leaf_numbers.entry(innermost.clone()).or_default();
            match highest.get_mut(run) {
                Some(at) => *at = (*at).max(number),
                None => {
                    highest.insert(run.to_string(), number);
                }
            }
        }
        match self.leaf_ops.get_mut(&innermost) {
            Some(ops) if ops.contains(&v.op) => {}
            Some(ops) => {
                ops.insert(v.op.clone());
            }
            None => {
                self.leaf_ops
                    .insert(innermost.clone(), HashSet::from([v.op.clone()]));
            }
        }
        match self.leaf_values.get_mut(&innermost) {
            Some((_, own)) => {
                own.insert(v.id);
            }
            None => {
                self.leaf_values
                    .insert(innermost, (v.id, HashSet::from([v.id])));
            }
        }
    }

    /// Whether legacy node name `node` numbers it before a node of its run in the latest call
    /// of `innermost`: the exporter wrote it before that one, so it belongs to that call, not
    /// to a next one, wherever a graph tool moved it (onnxslim sorts an attention's value
    /// projection, which reads only the memory, before the query and key projections).
    fn written_within_latest(&self, innermost: &str, node: &str) -> bool {
        let Some((run, number)) = legacy_number(node) else {
            return false;
        };
        self.leaf_numbers
            .get(innermost)
            .and_then(|runs| runs.get(run))
            .is_some_and(|&highest| number < highest)
    }

    /// The index of a call of module `norm` that starts now; `seen` is (parent key, raw
    /// path). `relu_1` is the second call even when the first left no node (ONNX Runtime
    /// fused it into the Conv before it): the number counts from the calls of the module
    /// made before this parent call, not from the nodes seen.
    fn new_call(&mut self, seen: (String, String), norm: &str, named_calls: bool) -> usize {
        let counter = self.counters.entry(norm.to_string()).or_insert(0);
        let base = named_calls.then(|| {
            let parent = (seen.0.clone(), norm.to_string());
            *self.legacy_base.entry(parent).or_insert(*counter)
        });
        let call = match (base, legacy_suffix(&seen.1, norm)) {
            (Some(base), Some(n)) => base + n,
            // The name without a suffix is the first call, though a graph tool moved a node
            // of `relu_1` before it (ONNX Runtime hoists a mask's Where to the graph's top);
            // once that name was seen, its op coming again is a further call.
            (Some(base), None) if !self.legacy_calls.contains_key(&seen) => base,
            _ => *counter,
        };
        *counter = (*counter).max(call + 1);
        self.legacy_calls.insert(seen, call);
        call
    }
}

/// The call number in a legacy-exported scope name: `N` when the raw path's last segment is
/// the normalised one's plus `_N` (`layer1.0.relu_1` for `layer1.0.relu`).
fn legacy_suffix(raw: &str, norm: &str) -> Option<usize> {
    let raw_last = raw.rsplit('.').next()?;
    let norm_last = norm.rsplit('.').next()?;
    raw_last
        .strip_prefix(norm_last)?
        .strip_prefix('_')?
        .parse()
        .ok()
}

/// The innermost module path of a key (`layer1.0.relu` for `layer1#0/.../layer1.0.relu#1`).
pub fn key_path(key: &str) -> &str {
    key.rsplit('/')
        .next()
        .and_then(|last| last.rsplit_once('#'))
        .map(|(path, _)| path)
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::{ScopeLevel, ValueRole};

    fn value(id: usize, paths: &[&str]) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: "aten::relu".into(),
            node: String::new(),
            scope: paths
                .iter()
                .map(|p| ScopeLevel {
                    path: p.to_string(),
                    class: String::new(),
                })
                .collect(),
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role: ValueRole::Intermediate,
            dtype: DType::F32,
            shape: vec![1],
            inputs: vec![],
            tensor: None,
        }
    }

    #[test]
    fn module_called_twice_gets_two_calls_on_torch_side() {
        let values = vec![
            value(0, &["b", "b.conv1"]),
            value(1, &["b", "b.relu"]),
            value(2, &["b", "b.conv2"]),
            value(3, &["b"]),
            value(4, &["b", "b.relu"]),
        ];
        let keys = assign_keys(&values, &|_| false, None);
        assert_eq!(keys[1].as_deref(), Some("b#0/b.relu#0"));
        assert_eq!(keys[3].as_deref(), Some("b#0"));
        assert_eq!(keys[4].as_deref(), Some("b#0/b.relu#1"));
    }

    #[test]
    fn legacy_suffix_maps_onto_torch_module_and_call() {
        let torch: HashSet<String> = ["b", "b.relu", "b.conv1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let values = vec![
            value(0, &["b", "b.relu"]),
            value(1, &["b", "b.relu_1"]),
            value(2, &["b", "b.conv1"]),
        ];
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[0].as_deref(), Some("b#0/b.relu#0"));
        assert_eq!(keys[1].as_deref(), Some("b#0/b.relu#1"));
        assert_eq!(key_path(keys[1].as_ref().unwrap()), "b.relu");
    }

    #[test]
    fn legacy_suffix_numbers_the_call_when_an_earlier_call_left_no_node() {
        let torch: HashSet<String> = ["b", "b.relu", "b.conv2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // `relu` (call 0) was fused into the Conv before it: only `relu_1` has a node.
        let mut values = vec![value(0, &["b", "b.conv2"]), value(1, &["b", "b.relu_1"])];
        for v in &mut values {
            v.node = format!("/{}/Op", v.scope[1].path);
        }
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[1].as_deref(), Some("b#0/b.relu#1"));
    }

    #[test]
    fn a_first_call_named_without_suffix_stays_first_when_a_later_call_comes_before_it() {
        let torch: HashSet<String> = ["l", "l.attention", "l.attention.key"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // ONNX Runtime hoisted both calls' mask Where to the top, the second call's first.
        let mut values = vec![
            value(0, &["l", "l.attention_1"]),
            value(1, &["l", "l.attention"]),
            value(2, &["l", "l.attention", "l.attention.key"]),
            value(3, &["l", "l.attention"]),
            value(4, &["l", "l.attention_1"]),
        ];
        for v in &mut values {
            v.node = format!("/{}/Op", v.scope.last().unwrap().path);
        }
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[0].as_deref(), Some("l#0/l.attention#1"));
        assert_eq!(keys[1].as_deref(), Some("l#0/l.attention#0"));
        assert_eq!(keys[3].as_deref(), Some("l#0/l.attention#0"));
        assert_eq!(keys[4].as_deref(), Some("l#0/l.attention#1"));
    }

    #[test]
    fn a_node_written_before_one_of_its_run_stays_in_that_call() {
        let torch: HashSet<String> = ["l", "l.attn"].iter().map(|s| s.to_string()).collect();
        // A tool sorted the value projection (`MatMul_2`, fused into a Gemm named after its
        // output) before the query and key projections and the layer's Add that feeds them.
        let nodes = [
            (&["l", "l.attn"][..], "/l/attn/MatMul_2_output_0"),
            (&["l"][..], "/l/Add"),
            (&["l", "l.attn"][..], "/l/attn/MatMul_output_0"),
            (&["l", "l.attn"][..], "/l/attn/MatMul_1_output_0"),
        ];
        let mut values: Vec<CapturedValue> = nodes
            .iter()
            .enumerate()
            .map(|(id, (paths, node))| {
                let mut v = value(id, paths);
                v.op = "Gemm".into();
                v.node = node.to_string();
                v
            })
            .collect();
        values[1].op = "Add".into();
        values[2].inputs = vec![1];
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[0].as_deref(), Some("l#0/l.attn#0"));
        assert_eq!(keys[2].as_deref(), Some("l#0/l.attn#0"));
        assert_eq!(keys[3].as_deref(), Some("l#0/l.attn#0"));
        // Numbered after it, the same op is the module's next call (an unrolled loop).
        values[2].node = "/l/attn/MatMul_3_output_0".into();
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[2].as_deref(), Some("l#0/l.attn#1"));
    }

    #[test]
    fn interleaved_legacy_calls_stay_one_call() {
        let torch: HashSet<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let mut values = vec![
            value(0, &["a"]),
            value(1, &["b"]),
            value(2, &["a"]),
            value(3, &["b"]),
            value(4, &["a"]),
        ];
        let ops = ["Sigmoid", "Conv", "Mul", "Relu", "Sigmoid"];
        for (v, op) in values.iter_mut().zip(ops) {
            v.node = format!("/{}/{op}", v.scope[0].path);
            v.op = op.to_string();
        }
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[0].as_deref(), Some("a#0"));
        assert_eq!(keys[2].as_deref(), Some("a#0"));
        // The op comes again in a leaf module: a new call (an unrolled loop's next iteration).
        assert_eq!(keys[3].as_deref(), Some("b#0"));
        assert_eq!(keys[4].as_deref(), Some("a#1"));
    }

    /// A simplifier interleaved two norms' nodes: q's second Mul comes after k's first, and
    /// reads only q's own values, so it is q's first call still.
    #[test]
    fn an_op_reading_only_its_own_call_continues_it_when_interleaved() {
        let torch: HashSet<String> = ["q", "k"].iter().map(|s| s.to_string()).collect();
        let mut values = vec![
            value(0, &["q"]),
            value(1, &["k"]),
            value(2, &["q"]),
            value(3, &["k"]),
        ];
        for (v, (op, inputs)) in values.iter_mut().zip([
            ("Mul", vec![]),
            ("Mul", vec![]),
            ("Mul", vec![0]),
            ("Mul", vec![1]),
        ]) {
            v.node = format!("/{}/{op}", v.scope[0].path);
            v.op = op.to_string();
            v.inputs = inputs;
        }
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[2].as_deref(), Some("q#0"));
        assert_eq!(keys[3].as_deref(), Some("k#0"));
        // Reading a value computed after the call began (another module's) starts the next.
        values[2].inputs = vec![0, 1];
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[2].as_deref(), Some("q#1"));
    }

    #[test]
    fn container_level_missing_on_the_onnx_side_is_found_by_suffix() {
        let torch: HashSet<String> = ["blocks.0", "blocks.1", "head.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(normalise("1", &torch), "blocks.1");
        // Two candidates: no guess.
        assert_eq!(normalise("0", &torch), "0");
    }

    #[test]
    fn an_inner_level_missing_on_the_onnx_side_is_found_when_one_path_fits() {
        let torch: HashSet<String> = [
            "blocks.0.attn",
            "blocks.0.attn.rel_pos.mlp",
            "blocks.0.attn.rel_pos.mlp.fc1",
            "blocks.0.mlp.fc1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            normalise("blocks.0.attn.mlp.fc1", &torch),
            "blocks.0.attn.rel_pos.mlp.fc1"
        );
        assert_eq!(
            normalise("blocks.0.attn.mlp", &torch),
            "blocks.0.attn.rel_pos.mlp"
        );
        // A path TorchScript has is never moved, and two fits are no guess.
        assert_eq!(normalise("blocks.0.mlp.fc1", &torch), "blocks.0.mlp.fc1");
        let two: HashSet<String> = ["a.x.b.c", "a.y.b.c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(normalise("a.b.c", &two), "a.b.c");
    }

    #[test]
    fn suffix_kept_when_it_is_a_real_module_name() {
        let torch: HashSet<String> = ["conv_1", "conv"].iter().map(|s| s.to_string()).collect();
        assert_eq!(normalise("conv_1", &torch), "conv_1");
    }

    #[test]
    fn containers_only_one_side_calls_do_not_split_keys() {
        let torch: HashSet<String> = ["h.0", "h.0.attn"].iter().map(|s| s.to_string()).collect();
        let values = vec![value(0, &["h", "h.0", "h.0.attn"]), value(1, &["h", "h.0"])];
        let keys = assign_keys(&values, &|_| false, Some(&torch));
        assert_eq!(keys[0].as_deref(), Some("h.0#0/h.0.attn#0"));
        assert_eq!(keys[1].as_deref(), Some("h.0#0"));
    }

    #[test]
    fn values_without_a_scope_record_join_the_call_they_feed() {
        let mut values = vec![
            value(0, &["a"]),
            value(1, &[]),
            value(2, &["a"]),
            value(3, &[]),
        ];
        values[1].scope_recorded = false;
        values[3].scope_recorded = false;
        values[1].inputs = vec![0];
        values[2].inputs = vec![1];
        values[3].inputs = vec![2];
        let keys = assign_keys(&values, &|_| false, None);
        assert_eq!(keys[0].as_deref(), Some("a#0"));
        assert_eq!(keys[1].as_deref(), Some("a#0"), "it feeds a's call");
        assert_eq!(keys[2].as_deref(), Some("a#0"));
        // It feeds no call: the call that ran before it is not its own.
        assert_eq!(keys[3], None);
    }

    /// An optimiser's MatMul of one block's MLP feeds only a fused norm (which joins no
    /// call), after another module's call ran: it joins neither.
    #[test]
    fn a_value_of_no_scope_joins_the_call_it_feeds_not_the_one_before_it() {
        let mut values = vec![
            value(0, &["attn"]),
            value(1, &[]),
            value(2, &[]),
            value(3, &["head"]),
        ];
        values[1].scope_recorded = false;
        values[2].scope_recorded = false;
        values[2].op = "com.microsoft::SkipLayerNormalization".into();
        values[1].inputs = vec![0];
        values[2].inputs = vec![1];
        values[3].inputs = vec![2];
        let keys = assign_keys(&values, &|_| false, None);
        assert_eq!(keys[1], None);
        assert_eq!(keys[2], None);
        assert_eq!(keys[3].as_deref(), Some("head#0"));
    }

    #[test]
    fn skipped_values_do_not_split_runs() {
        let values = vec![value(0, &["m"]), value(1, &[]), value(2, &["m"])];
        let keys = assign_keys(&values, &|v| v.id == 1, None);
        assert_eq!(keys[0], keys[2]);
        assert_eq!(keys[1], None);
    }
}
