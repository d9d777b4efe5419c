//! The parts of `torch.export`'s serialization schema (`torch/_export/serde/schema.py`) the
//! reader uses: the graph's nodes with their targets, named arguments, outputs and metadata,
//! and the signature that says which placeholders are weights and which are the user's
//! inputs. Arguments stay JSON values (`{"as_tensor": {"name": "x"}}`): the schema has some
//! thirty kinds, and `translate` names the one it cannot run instead of failing to parse.

use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

/// The major schema version this reader was written against (torch 2.13 writes 8.20); a
/// newer major version may have changed what the fields mean.
pub const SCHEMA_MAJOR: u64 = 8;

#[derive(Debug, Deserialize)]
pub struct Model {
    pub graph_module: GraphModule,
    #[serde(default)]
    pub schema_version: Option<SchemaVersion>,
    #[serde(default)]
    pub torch_version: String,
    /// Each dynamic dimension's symbol (`s77`) with its `min_val` and `max_val` (`null`:
    /// unbounded).
    #[serde(default)]
    pub range_constraints: HashMap<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct SchemaVersion {
    pub major: u64,
    pub minor: u64,
}

#[derive(Debug, Deserialize)]
pub struct GraphModule {
    pub graph: Graph,
    pub signature: Signature,
    #[serde(default)]
    pub module_call_graph: Vec<ModuleCall>,
}

#[derive(Debug, Deserialize)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// Each named tensor's metadata (`sizes`: `{"as_int": 4}` or `{"as_expr": ...}` each).
    #[serde(default)]
    pub tensor_values: HashMap<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct Node {
    /// `torch.ops.aten.conv2d.default`, `torch.ops.higher_order.cond`, `_operator.mul`.
    pub target: String,
    pub inputs: Vec<NamedArgument>,
    pub outputs: Vec<Value>,
    #[serde(default)]
    pub metadata: HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
pub struct NamedArgument {
    pub name: String,
    pub arg: Value,
}

#[derive(Debug, Deserialize)]
pub struct Signature {
    /// One single-key object per placeholder, in order: `parameter`, `buffer`,
    /// `tensor_constant`, `user_input`, `custom_obj`, `token`, `constant_input`.
    pub input_specs: Vec<Value>,
    /// `user_output`, `buffer_mutation`, `user_input_mutation`, `loss_output`, `token`, ...
    pub output_specs: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub struct ModuleCall {
    pub fqn: String,
    #[serde(default)]
    pub signature: Option<CallSignature>,
}

#[derive(Debug, Deserialize)]
pub struct CallSignature {
    /// The pytree spec of what the module returns, as JSON text (`[1, {"type": ...}]`).
    #[serde(default)]
    pub out_spec: String,
    /// The pytree spec of the `(args, kwargs)` it takes, alike.
    #[serde(default)]
    pub in_spec: String,
}

/// The one key of a union-typed JSON object and its payload.
pub fn union(value: &Value) -> Option<(&str, &Value)> {
    let object = value.as_object()?;
    let (key, payload) = object.iter().next()?;
    Some((key.as_str(), payload))
}

/// The name an `as_tensor`-like payload (`{"name": "x"}`) carries.
pub fn name_of(payload: &Value) -> Option<&str> {
    payload.get("name")?.as_str()
}

/// What one placeholder of the signature is.
#[derive(Debug, Clone, PartialEq)]
pub enum InputKind {
    /// A parameter, buffer or tensor constant, by the name the archive stores it under.
    Stored(String),
    /// The user's argument; `None` when it is not a tensor (its argument kind then).
    User(Result<String, String>),
    /// Anything else (custom objects, tokens, constant inputs): its spec kind.
    Other(String),
}

/// The placeholder name and kind of one input spec.
pub fn input_spec(spec: &Value) -> (String, InputKind) {
    let Some((kind, payload)) = union(spec) else {
        return (String::new(), InputKind::Other("unreadable".into()));
    };
    let arg = payload.get("arg").cloned().unwrap_or(Value::Null);
    let stored = |field: &str| {
        payload
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = name_of(&arg).unwrap_or_default().to_string();
    match kind {
        "parameter" => (name, stored_or_other(stored("parameter_name"), kind)),
        "buffer" => (name, stored_or_other(stored("buffer_name"), kind)),
        "tensor_constant" => (name, stored_or_other(stored("tensor_constant_name"), kind)),
        "user_input" => match union(&arg) {
            Some(("as_tensor", t)) => (
                name_of(t).unwrap_or_default().to_string(),
                InputKind::User(Ok(name_of(t).unwrap_or_default().to_string())),
            ),
            Some((other, _)) => (String::new(), InputKind::User(Err(other.to_string()))),
            None => (String::new(), InputKind::User(Err("unreadable".into()))),
        },
        other => (name, InputKind::Other(other.to_string())),
    }
}

fn stored_or_other(stored: Option<String>, kind: &str) -> InputKind {
    stored.map_or_else(|| InputKind::Other(kind.to_string()), InputKind::Stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_specs_say_what_each_placeholder_is() {
        let p = json!({"parameter": {"arg": {"name": "p_w"}, "parameter_name": "conv.weight"}});
        assert_eq!(
            input_spec(&p),
            ("p_w".into(), InputKind::Stored("conv.weight".into()))
        );
        let u = json!({"user_input": {"arg": {"as_tensor": {"name": "x"}}}});
        assert_eq!(
            input_spec(&u),
            ("x".into(), InputKind::User(Ok("x".into())))
        );
        let i = json!({"user_input": {"arg": {"as_int": 3}}});
        assert_eq!(input_spec(&i).1, InputKind::User(Err("as_int".into())));
        let t = json!({"token": {"arg": {"name": "token"}}});
        assert_eq!(input_spec(&t).1, InputKind::Other("token".into()));
    }
}
