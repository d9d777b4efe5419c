//! The serialized program turned into the text `program.cpp` runs: named values become
//! numbered slots, each node a `call` of one operator overload with its named arguments
//! encoded as value tokens, and every tensor a node returns gets a capture id, in execution
//! order after the user's inputs (the ids the metadata's `values` are listed by).
//!
//! Python arithmetic on symbolic sizes (dynamic shapes: `_operator.mul` of a `sym_size`)
//! becomes a `sym` block the interpreter computes as Python does. Other nodes that are not
//! operator overloads (`torch.ops.higher_order.cond`, Python functions) are refused with one
//! line naming the node's target: running their subgraphs, or Python, is not what this
//! reader does yet.

use super::graph::{input_spec, name_of, union, InputKind, Model, Node};
use super::outputs::leaf_names;
use anyhow::{anyhow, bail, Result};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// One captured value: a user input (`node` None) or a tensor a node returns.
pub struct Captured {
    pub name: String,
    pub node: Option<usize>,
    /// Capture ids of the tensors the node read.
    pub inputs: Vec<usize>,
}

/// What the interpreter runs and what the metadata describes.
pub struct Translation {
    pub text: String,
    /// Names of the stored tensors the program binds, by the `bind` lines' indices.
    pub constants: Vec<String>,
    pub captured: Vec<Captured>,
    /// The user's tensor inputs, in order.
    pub inputs: Vec<String>,
    /// Per output: the capture id of the value it is.
    pub outputs: Vec<Option<usize>>,
}

#[derive(Default)]
struct Builder {
    slots: HashMap<String, usize>,
    ids: HashMap<String, usize>,
    lines: String,
    out: Vec<Captured>,
    /// Per value made by a view op, the tensor whose storage it views (through views).
    base: HashMap<String, String>,
    /// Per base tensor, the capture ids of the in-place ops that wrote into it or a view of
    /// it (`buf[..] = x` is `slice` then `copy_`): a later reader of the base reads what
    /// they wrote, so they are among its producers. Without this a buffer written in place
    /// reads as computed from `zeros` alone: a constant, never compared, and out of the
    /// coverage count as well.
    writes: HashMap<String, Vec<usize>>,
    /// Views made only to be written through (`write_handles`): not captured.
    handles: HashSet<String>,
}

/// Ops whose result views their first argument's storage (as the TorchScript shim's
/// `InPlaceWrites` lists them).
const VIEWS: &[&str] = &[
    "aten::slice",
    "aten::select",
    "aten::view",
    "aten::reshape",
    "aten::narrow",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::permute",
    "aten::transpose",
    "aten::t",
    "aten::expand",
    "aten::expand_as",
    "aten::view_as",
    "aten::reshape_as",
    "aten::as_strided",
    "aten::diagonal",
    "aten::unflatten",
    "aten::flatten",
    "aten::detach",
    "aten::alias",
    "aten::unfold",
    "aten::movedim",
    "aten::swapaxes",
    "aten::contiguous",
    "aten::numpy_T",
    "aten::mT",
    "aten::real",
    "aten::imag",
];

impl Builder {
    /// The tensor whose storage `name` is, through views.
    fn base_of<'a>(&'a self, name: &'a str) -> &'a str {
        self.base.get(name).map_or(name, String::as_str)
    }
}

impl Builder {
    fn slot(&mut self, name: &str) -> usize {
        let next = self.slots.len();
        *self.slots.entry(name.to_string()).or_insert(next)
    }

    fn known(&self, name: &str) -> Result<usize> {
        self.slots
            .get(name)
            .copied()
            .ok_or_else(|| anyhow!("the program reads `{name}` before anything computes it"))
    }

    fn capture(&mut self, name: &str, node: Option<usize>, inputs: Vec<usize>) -> usize {
        let id = self.out.len();
        self.ids.insert(name.to_string(), id);
        self.out.push(Captured {
            name: name.to_string(),
            node,
            inputs,
        });
        id
    }
}

pub fn translate(model: &Model) -> Result<Translation> {
    let graph = &model.graph_module.graph;
    let signature = &model.graph_module.signature;
    let mut b = Builder::default();
    let mut constants = Vec::new();
    let mut inputs = Vec::new();
    let mut body = String::new();
    for (k, spec) in signature.input_specs.iter().enumerate() {
        let (name, kind) = input_spec(spec);
        match kind {
            InputKind::Stored(stored) => {
                let slot = b.slot(&name);
                writeln!(body, "bind {slot} {}", constants.len())?;
                constants.push(stored);
            }
            InputKind::User(Ok(_)) => {
                let slot = b.slot(&name);
                let id = b.capture(&name, None, Vec::new());
                writeln!(body, "input {slot} {id}")?;
                inputs.push(name);
            }
            InputKind::User(Err(kind)) => bail!(
                "its input {k} is passed as {kind}, not a tensor: this reader takes tensor inputs only"
            ),
            InputKind::Other(kind) => {
                bail!("its input {k} is a {kind}, which this reader does not run")
            }
        }
    }
    let kept = output_names(&signature.output_specs)?;
    let last_use = last_uses(&graph.nodes);
    b.handles = write_handles(&graph.nodes);
    for (k, node) in graph.nodes.iter().enumerate() {
        b.lines.clear();
        call(&mut b, k, node)?;
        for (name, _) in last_use
            .iter()
            .filter(|(n, &last)| last == k && !kept.iter().any(|o| o == *n))
        {
            if let Some(slot) = b.slots.get(*name) {
                writeln!(b.lines, "rel {slot}")?;
            }
        }
        body.push_str(&b.lines);
        body.push_str("end\n");
    }
    let mut outputs = Vec::new();
    let leaves = leaf_names(root_out_spec(model), kept.len());
    for (name, leaf) in kept.iter().zip(&leaves) {
        writeln!(body, "out {} {}", b.known(name)?, hex(leaf))?;
        outputs.push(b.ids.get(name.as_str()).copied());
    }
    let text = format!("slots {}\n{body}", b.slots.len());
    Ok(Translation {
        text,
        constants,
        captured: b.out,
        inputs,
        outputs,
    })
}

/// The pytree spec of what the root module returns.
fn root_out_spec(model: &Model) -> &str {
    model
        .graph_module
        .module_call_graph
        .iter()
        .find(|c| c.fqn.is_empty())
        .and_then(|c| c.signature.as_ref())
        .map_or("", |s| s.out_spec.as_str())
}

/// The names of the tensors the program returns to the user, in order.
fn output_names(specs: &[Value]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for spec in specs {
        let Some(("user_output", payload)) = union(spec) else {
            continue;
        };
        match union(payload.get("arg").unwrap_or(&Value::Null)) {
            Some(("as_tensor", t)) => out.push(name_of(t).unwrap_or_default().to_string()),
            Some(("as_none", _)) => {}
            other => bail!(
                "it returns a {}, not a tensor: this reader compares tensor outputs only",
                other.map(|(k, _)| k).unwrap_or("value")
            ),
        }
    }
    Ok(out)
}

/// Per value name, the index of the last node that reads it (graph outputs are never
/// released: they are read after the last node).
fn last_uses(nodes: &[Node]) -> HashMap<&str, usize> {
    let mut last = HashMap::new();
    for (k, node) in nodes.iter().enumerate() {
        for input in &node.inputs {
            names_in(&input.arg, &mut |name| {
                last.insert(name, k);
            });
        }
    }
    last
}

/// Views made only to be written through (`out[..., :4] = boxes` slices `out` for
/// `copy_`): what one holds is the buffer before the write (zeros, or whatever
/// `torch.empty` left), which no ONNX value computes, since ONNX writes functionally. Such a
/// view is not captured (the write's result is), as the TorchScript shim's
/// `is_write_handle` leaves it out: a view each of whose uses is the written argument of an
/// in-place op, or the input of another such view.
fn write_handles(nodes: &[Node]) -> HashSet<String> {
    let op = |n: &Node| operator(&n.target).map(|(op, _)| op).unwrap_or_default();
    let mut uses: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (k, node) in nodes.iter().enumerate() {
        for (i, input) in node.inputs.iter().enumerate() {
            names_in(&input.arg, &mut |name| {
                uses.entry(name).or_default().push((k, i))
            });
        }
    }
    let mut handles = HashSet::new();
    // Uses come after definitions: from the last node back, a view's readers are settled.
    for node in nodes
        .iter()
        .rev()
        .filter(|n| VIEWS.contains(&op(n).as_str()))
    {
        for out in &node.outputs {
            let Some(("as_tensor", t)) = union(out) else {
                continue;
            };
            let name = name_of(t).unwrap_or_default();
            let written = |&(k, i): &(usize, usize)| {
                let reader = &nodes[k];
                let reader_op = op(reader);
                let first = i == 0;
                (first && reader_op.ends_with('_') && !reader_op.ends_with("__"))
                    || (first && VIEWS.contains(&reader_op.as_str()) && {
                        let outs: Vec<&str> = (reader.outputs.iter())
                            .filter_map(|o| union(o).and_then(|(_, t)| name_of(t)))
                            .collect();
                        !outs.is_empty() && outs.iter().all(|o| handles.contains(*o))
                    })
            };
            if uses
                .get(name)
                .is_some_and(|u| !u.is_empty() && u.iter().all(written))
            {
                handles.insert(name.to_string());
            }
        }
    }
    handles
}

/// Every value name an argument refers to (tensors, symbolic sizes).
pub(super) fn names_in<'a>(arg: &'a Value, found: &mut dyn FnMut(&'a str)) {
    match arg {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("name" | "as_name", Value::String(s)) => found(s),
                    _ => names_in(v, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| names_in(v, found)),
        _ => {}
    }
}

/// `torch.ops.aten.conv2d.default` as (`aten::conv2d`, `default`); a refusal naming any
/// other target.
pub fn operator(target: &str) -> Result<(String, String)> {
    if let Some(op) = target.strip_prefix("torch.ops.higher_order.") {
        bail!(
            "it calls the higher-order op `{op}` (torch.{op}), whose subgraphs this reader does \
             not run yet: compare a trace (torch.jit.trace/script) of the module instead"
        );
    }
    let unsupported = || {
        anyhow!(
            "it calls `{target}`, which is not an operator overload this reader can run \
             (a Python function the program calls): compare a trace (torch.jit.trace) of the \
             module instead"
        )
    };
    let rest = target.strip_prefix("torch.ops.").ok_or_else(unsupported)?;
    let mut parts = rest.splitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(ns), Some(name), Some(overload)) => Ok((format!("{ns}::{name}"), overload.into())),
        _ => Err(unsupported()),
    }
}

/// Python arithmetic on symbolic sizes that dynamic shapes put in a program
/// (`x.shape[0] * 2`): the interpreter computes it as Python would (`run_sym` there).
const SYMBOLIC: &[&str] = &[
    "_operator.add",
    "_operator.sub",
    "_operator.mul",
    "_operator.floordiv",
    "_operator.mod",
    "_operator.truediv",
    "_operator.pow",
    "_operator.neg",
    "_operator.eq",
    "_operator.ne",
    "_operator.lt",
    "_operator.le",
    "_operator.gt",
    "_operator.ge",
    "_operator.and_",
    "_operator.or_",
    "math.ceil",
    "math.floor",
    "math.trunc",
    "torch.sym_max",
    "torch.sym_min",
    "torch.sym_float",
    "torch.sym_int",
    "torch.sym_not",
];

/// One node as a `call` block (a `sym` block for symbolic-size arithmetic), without its
/// `end`, capturing its tensor results.
fn call(b: &mut Builder, k: usize, node: &Node) -> Result<()> {
    let symbolic = SYMBOLIC.contains(&node.target.as_str());
    let (op, overload) = if symbolic {
        (node.target.clone(), String::new())
    } else {
        operator(&node.target)?
    };
    let mut read = Vec::new();
    let mut args = String::new();
    for input in &node.inputs {
        let value = encode(b, &input.arg, &mut read)
            .map_err(|e| anyhow!("{op}.{overload} argument `{}`: {e}", input.name))?;
        if symbolic {
            writeln!(args, "{value}")?;
        } else {
            writeln!(args, "{} {value}", hex(&input.name))?;
        }
    }
    let producers = producers_of(b, &read);
    let first_read = node.inputs.first().and_then(|i| {
        let mut names = Vec::new();
        names_in(&i.arg, &mut |n| names.push(n));
        names.first().map(|n| b.base_of(n).to_string())
    });
    let mut made = Vec::new();
    let mut ret = String::from("ret");
    let mut captures = String::new();
    for output in &node.outputs {
        let mut bind = |b: &mut Builder, name: &str, tensor: bool| -> Result<String> {
            let slot = b.slot(name);
            if tensor && !b.handles.contains(name) {
                let id = b.capture(name, Some(k), producers.clone());
                writeln!(captures, "cap {slot} {id}")?;
                made.push((name.to_string(), Some(id)));
            } else if tensor {
                made.push((name.to_string(), None));
            }
            Ok(format!(" o{slot}"))
        };
        match union(output) {
            Some(("as_tensor", t)) => ret += &bind(b, name_of(t).unwrap_or_default(), true)?,
            Some(("as_tensors", Value::Array(items))) => {
                ret += &format!(" L{}", items.len());
                for t in items {
                    ret += &bind(b, name_of(t).unwrap_or_default(), true)?;
                }
            }
            Some(("as_sym_int" | "as_sym_float" | "as_sym_bool", s)) => match s.get("as_name") {
                Some(Value::String(name)) => ret += &bind(b, name, false)?,
                _ => ret += " x",
            },
            Some((kind, _)) if kind.starts_with("as_") => ret += " x",
            _ => bail!("{op}.{overload} has an output this reader cannot read"),
        }
    }
    note_aliasing(b, &op, first_read, &made);
    let head = if symbolic {
        format!("sym {op} {}\n", node.inputs.len())
    } else {
        format!("call {op} {overload} {}\n", node.inputs.len())
    };
    b.lines = format!("{head}{args}{ret}\n{captures}");
    Ok(())
}

/// The capture ids a node computes from: what it reads, and what in-place ops wrote into
/// those tensors before.
fn producers_of(b: &Builder, read: &[String]) -> Vec<usize> {
    let written = read
        .iter()
        .flat_map(|n| (b.writes.get(b.base_of(n))).into_iter().flatten().copied());
    let mut producers: Vec<usize> = (read.iter().filter_map(|n| b.ids.get(n).copied()))
        .chain(written.collect::<Vec<_>>())
        .fold(Vec::new(), |mut acc, id| {
            if !acc.contains(&id) {
                acc.push(id);
            }
            acc
        });
    // An in-place op on a view made only for it (`dropout_` on a `flatten`, which is then
    // not captured) reads that view's base: without it the op, and everything computed
    // from it, would seem to come from nothing.
    if producers.is_empty() {
        producers.extend(
            (read.iter())
                .filter(|n| b.handles.contains(n.as_str()))
                .filter_map(|n| b.ids.get(b.base_of(n)).copied()),
        );
        producers.dedup();
    }
    producers
}

/// Records what a node's results alias: a view's results view its first argument's base; an
/// in-place op (`copy_`, `add_`: a name ending in one `_`) wrote its result into its first
/// argument's base.
fn note_aliasing(
    b: &mut Builder,
    op: &str,
    first_read: Option<String>,
    made: &[(String, Option<usize>)],
) {
    let Some(base) = first_read else {
        return;
    };
    if VIEWS.contains(&op) {
        for (name, _) in made {
            b.base.insert(name.clone(), base.clone());
        }
    } else if op.ends_with('_') && !op.ends_with("__") {
        let writers = b.writes.entry(base.clone()).or_default();
        writers.extend(made.iter().filter_map(|(_, id)| *id));
        // The op's result is the written tensor itself.
        for (name, _) in made {
            b.base.insert(name.clone(), base.clone());
        }
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|c| format!("{c:02x}")).collect()
}

/// One argument as a value token of `program.cpp` (see `parse_expr` there), noting the names
/// of the values it reads.
fn encode(b: &Builder, arg: &Value, read: &mut Vec<String>) -> Result<String> {
    let (kind, v) = union(arg).ok_or_else(|| anyhow!("an unreadable argument"))?;
    let mut slot = |name: &str| -> Result<String> {
        read.push(name.to_string());
        Ok(format!("t{}", b.known(name)?))
    };
    let list = |tag: &str, items: Vec<String>| format!("L{tag}{} {}", items.len(), items.join(" "));
    let items = || v.as_array().cloned().unwrap_or_default();
    Ok(match kind {
        "as_none" => "n".into(),
        "as_tensor" => slot(name_of(v).unwrap_or_default())?,
        "as_tensors" => {
            let names: Vec<String> = items()
                .iter()
                .map(|t| slot(name_of(t).unwrap_or_default()))
                .collect::<Result<_>>()?;
            list("t", names)
        }
        "as_optional_tensor" => optional(v, &mut slot)?,
        "as_optional_tensors" => {
            let tokens: Vec<String> = items()
                .iter()
                .map(|t| optional(t, &mut slot))
                .collect::<Result<_>>()?;
            list("o", tokens)
        }
        "as_int" => format!("i{}", v.as_i64().ok_or_else(|| anyhow!("not an int"))?),
        "as_ints" => list("i", ints(&items())?),
        "as_float" => float(v)?,
        "as_floats" => list("f", items().iter().map(float).collect::<Result<_>>()?),
        "as_bool" => format!("b{}", u8::from(v.as_bool() == Some(true))),
        "as_bools" => list(
            "b",
            items()
                .iter()
                .map(|x| format!("b{}", u8::from(x.as_bool() == Some(true))))
                .collect(),
        ),
        "as_string" => format!("s{}", hex(v.as_str().unwrap_or_default())),
        "as_strings" => list(
            "s",
            items()
                .iter()
                .map(|s| format!("s{}", hex(s.as_str().unwrap_or_default())))
                .collect(),
        ),
        "as_sym_int" | "as_sym_float" | "as_sym_bool" => sym(v, &mut slot)?,
        "as_sym_ints" => {
            let tokens: Vec<String> = items()
                .iter()
                .map(|s| sym(s, &mut slot))
                .collect::<Result<_>>()?;
            list("i", tokens)
        }
        "as_scalar_type" => format!("i{}", scalar_type(v.as_i64().unwrap_or(0))?),
        "as_layout" => format!("i{}", layout(v.as_i64().unwrap_or(0))?),
        "as_memory_format" => format!("i{}", memory_format(v.as_i64().unwrap_or(0))?),
        "as_device" => format!("v{}", hex(&device(v))),
        other => bail!("its kind {other} is not one this reader runs"),
    })
}

fn optional(v: &Value, slot: &mut dyn FnMut(&str) -> Result<String>) -> Result<String> {
    match union(v) {
        Some(("as_tensor", t)) => slot(name_of(t).unwrap_or_default()),
        _ => Ok("n".into()),
    }
}

fn sym(v: &Value, slot: &mut dyn FnMut(&str) -> Result<String>) -> Result<String> {
    match union(v) {
        Some(("as_name", Value::String(name))) => slot(name),
        Some(("as_int", n)) => Ok(format!("i{}", n.as_i64().unwrap_or(0))),
        Some(("as_float", x)) => float(x),
        Some(("as_bool", x)) => Ok(format!("b{}", u8::from(x.as_bool() == Some(true)))),
        _ => bail!("an unreadable symbolic value"),
    }
}

fn ints(items: &[Value]) -> Result<Vec<String>> {
    items
        .iter()
        .map(|x| {
            Ok(format!(
                "i{}",
                x.as_i64().ok_or_else(|| anyhow!("not an int"))?
            ))
        })
        .collect()
}

/// A float token; the serializer writes non-finite floats as strings.
fn float(v: &Value) -> Result<String> {
    let x = match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| anyhow!("not a float"))?,
        Value::String(s) if s.contains("nf") => {
            if s.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        Value::String(s) if s.eq_ignore_ascii_case("nan") => f64::NAN,
        _ => bail!("not a float"),
    };
    Ok(format!("f{x:?}"))
}

/// The schema's `ScalarType` number as c10's.
fn scalar_type(serialized: i64) -> Result<i64> {
    Ok(match serialized {
        1..=12 => serialized - 1,
        // BFLOAT16 comes after c10's quantized types.
        13 => 15,
        _ => bail!("element type {serialized} is not one this reader runs"),
    })
}

fn layout(serialized: i64) -> Result<i64> {
    match serialized {
        7 => Ok(0),
        1 => Ok(1),
        _ => bail!("layout {serialized} is not strided"),
    }
}

fn memory_format(serialized: i64) -> Result<i64> {
    match serialized {
        1 => Ok(0),
        4 => Ok(1),
        2 => Ok(2),
        3 => Ok(3),
        _ => bail!("memory format {serialized} is unknown"),
    }
}

/// `cpu`, `cuda:0`.
pub fn device(v: &Value) -> String {
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("cpu");
    match v.get("index").and_then(Value::as_i64) {
        Some(i) => format!("{kind}:{i}"),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn targets_name_an_overload_or_are_refused_by_name() {
        assert_eq!(
            operator("torch.ops.aten.conv2d.default").unwrap(),
            ("aten::conv2d".into(), "default".into())
        );
        let cond = operator("torch.ops.higher_order.cond").unwrap_err();
        assert!(cond.to_string().contains("`cond`"), "{cond}");
        let print = operator("builtins.print").unwrap_err();
        assert!(print.to_string().contains("`builtins.print`"), "{print}");
    }

    #[test]
    fn scalar_types_map_to_c10() {
        assert_eq!(scalar_type(7).unwrap(), 6); // float32
        assert_eq!(scalar_type(5).unwrap(), 4); // int64
        assert_eq!(scalar_type(12).unwrap(), 11); // bool
        assert_eq!(scalar_type(13).unwrap(), 15); // bfloat16
        assert!(scalar_type(29).is_err());
    }

    #[test]
    fn arguments_encode_as_value_tokens() {
        let mut b = Builder::default();
        b.slot("x");
        let mut read = Vec::new();
        let mut enc = |v: Value| encode(&b, &v, &mut read).unwrap();
        assert_eq!(enc(json!({"as_tensor": {"name": "x"}})), "t0");
        assert_eq!(enc(json!({"as_ints": [1, 2]})), "Li2 i1 i2");
        assert_eq!(enc(json!({"as_float": 1e-5})), "f1e-5");
        assert_eq!(
            enc(json!({"as_optional_tensors": [{"as_none": true}, {"as_tensor": {"name": "x"}}]})),
            "Lo2 n t0"
        );
        assert_eq!(
            enc(json!({"as_device": {"type": "cpu", "index": null}})),
            "v637075"
        );
        assert_eq!(read, ["x", "x"]);
    }

    /// T5's attention mask value, `torch.finfo(float32).min`, as the archive's JSON holds
    /// it: read one ULP beyond float's range, libtorch refused to run the program
    /// (`aten::where.ScalarOther: value cannot be converted to type float without overflow`).
    #[test]
    fn floats_are_read_exactly_from_the_archive_text() {
        let b = Builder::default();
        let v: Value = serde_json::from_str(r#"{"as_float": -3.4028234663852886e+38}"#).unwrap();
        let token = encode(&b, &v, &mut Vec::new()).unwrap();
        assert_eq!(token, format!("f{:?}", -(f32::MAX as f64)));
    }

    /// A tensor argument's JSON, as the archive writes it.
    fn tensor(name: &str) -> String {
        format!(r#"{{"as_tensor": {{"name": "{name}"}}}}"#)
    }

    /// A named argument's JSON.
    fn arg(name: &str, value: String) -> String {
        format!(r#"{{"name": "{name}", "arg": {value}}}"#)
    }

    /// A call node of `torch.ops.aten.<target>` with one tensor output.
    fn call_of(target: &str, args: Vec<String>, out: &str) -> Node {
        let text = format!(
            r#"{{"target": "torch.ops.aten.{target}", "inputs": [{}], "outputs": [{}]}}"#,
            args.join(", "),
            tensor(out)
        );
        serde_json::from_str(&text).unwrap()
    }

    /// Translates `nodes` in order, as `translate` does after finding the write handles.
    fn translate_nodes(b: &mut Builder, nodes: &[Node]) {
        b.handles = write_handles(nodes);
        for (k, n) in nodes.iter().enumerate() {
            call(b, k, n).unwrap();
        }
    }

    /// `buf = zeros(..); buf[:, :2] = x; y = relu(buf)`: torch.export keeps the write as a
    /// `slice` of the buffer and a `copy_` into it. The `relu` reads what `copy_` wrote, so
    /// the write is among its producers; without it the relu read as computed from `zeros`
    /// alone, a constant nobody compares. The slice is only a handle to write through.
    #[test]
    fn a_reader_of_a_buffer_written_in_place_reads_the_write() {
        let mut b = Builder::default();
        b.slot("x");
        let x = b.capture("x", None, Vec::new());
        let nodes = [
            call_of("zeros.default", vec![], "buf"),
            call_of("slice.Tensor", vec![arg("self", tensor("buf"))], "view"),
            call_of(
                "copy_.default",
                vec![arg("self", tensor("view")), arg("src", tensor("x"))],
                "written",
            ),
            call_of("relu.default", vec![arg("self", tensor("buf"))], "y"),
        ];
        translate_nodes(&mut b, &nodes);
        let id = |name: &str| b.ids[name];
        assert!(
            !b.ids.contains_key("view"),
            "a view made only to be written through holds the buffer before the write"
        );
        assert_eq!(b.out[id("written")].inputs, [x]);
        assert_eq!(b.out[id("y")].inputs, [id("buf"), id("written")]);
    }

    /// `y = dropout_(flatten(x)); z = linear(y)`, as torchvision's classifiers export: the
    /// flatten is only a handle the in-place op writes through, so it is not captured, and
    /// the dropout read as computed from nothing, which cut the dataflow from the output to
    /// every layer above it.
    #[test]
    fn an_in_place_op_on_a_write_handle_reads_the_handles_base() {
        let mut b = Builder::default();
        b.slot("x");
        b.capture("x", None, Vec::new());
        let nodes = [
            call_of("relu.default", vec![arg("self", tensor("x"))], "pooled"),
            call_of(
                "flatten.using_ints",
                vec![arg("self", tensor("pooled"))],
                "flat",
            ),
            call_of(
                "dropout_.default",
                vec![arg("self", tensor("flat"))],
                "dropped",
            ),
            call_of("relu.default", vec![arg("self", tensor("dropped"))], "z"),
        ];
        translate_nodes(&mut b, &nodes);
        let id = |name: &str| b.ids[name];
        assert!(
            !b.ids.contains_key("flat"),
            "only a handle to write through"
        );
        assert_eq!(b.out[id("dropped")].inputs, [id("pooled")]);
        assert_eq!(b.out[id("z")].inputs, [id("dropped")]);
    }
}
