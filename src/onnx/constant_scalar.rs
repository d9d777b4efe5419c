//! Reading a scalar that the graph fixes before it runs: a Loop's trip count and condition, an
//! If's condition, when they come from a `Constant` node or an initializer, possibly through
//! `Identity` and `Cast`. Control flow whose steering values are known this way can be
//! rewritten into plain nodes (`control_flow`); anything computed from the data cannot.

use super::proto;
use proto::tensor_proto::DataType;

/// How deep a chain of Identity/Cast nodes is followed before giving up.
const MAX_CHAIN: usize = 16;

/// The names one graph defines, looked up innermost first: a Loop body's own nodes, then the
/// graph around it (a body reads the trip count's constant from outside).
pub struct Scope<'a> {
    pub nodes: &'a [proto::NodeProto],
    pub initializers: &'a [proto::TensorProto],
    pub outer: Option<&'a Scope<'a>>,
}

impl Scope<'_> {
    /// The value of `name` as an integer (booleans are 0 and 1), when the graph fixes it to
    /// a single element; `None` when it is computed at run time or not a one-element
    /// integer, boolean or whole-number float tensor.
    pub fn scalar(&self, name: &str) -> Option<i64> {
        self.scalar_at(name, 0)
    }

    fn scalar_at(&self, name: &str, depth: usize) -> Option<i64> {
        if name.is_empty() || depth > MAX_CHAIN {
            return None;
        }
        if let Some(node) = self
            .nodes
            .iter()
            .find(|n| n.output.iter().any(|o| o == name))
        {
            return match (node.domain(), node.op_type()) {
                ("" | "ai.onnx", "Constant") => constant_node_value(node),
                ("" | "ai.onnx", "Identity") => self.scalar_at(node.input.first()?, depth + 1),
                ("" | "ai.onnx", "Cast") => {
                    let v = self.scalar_at(node.input.first()?, depth + 1)?;
                    let to = node.attribute.iter().find(|a| a.name() == "to")?.i?;
                    Some(if to == DataType::Bool as i64 {
                        i64::from(v != 0)
                    } else {
                        v
                    })
                }
                _ => None,
            };
        }
        if let Some(t) = self.initializers.iter().find(|t| t.name() == name) {
            return tensor_scalar(t);
        }
        self.outer?.scalar_at(name, depth + 1)
    }
}

/// A Constant node's one-element value (`value` tensor or `value_int`).
fn constant_node_value(node: &proto::NodeProto) -> Option<i64> {
    node.attribute.iter().find_map(|a| match a.name() {
        "value" => tensor_scalar(a.t.as_ref()?),
        "value_int" => a.i,
        _ => None,
    })
}

/// The single element of `t` as an integer, stored either way the format allows.
pub fn tensor_scalar(t: &proto::TensorProto) -> Option<i64> {
    if t.dims.iter().product::<i64>() != 1 {
        return None;
    }
    let raw = t.raw_data.as_deref().filter(|r| !r.is_empty());
    let dtype = DataType::try_from(t.data_type()).ok()?;
    match dtype {
        DataType::Int64 => match raw {
            Some(r) => Some(i64::from_le_bytes(r.get(..8)?.try_into().ok()?)),
            None => t.int64_data.first().copied(),
        },
        DataType::Int32 => match raw {
            Some(r) => Some(i64::from(i32::from_le_bytes(r.get(..4)?.try_into().ok()?))),
            None => t.int32_data.first().map(|&v| i64::from(v)),
        },
        DataType::Bool | DataType::Uint8 | DataType::Int8 => match raw {
            Some(r) => r.first().map(|&b| i64::from(b)),
            None => t.int32_data.first().map(|&v| i64::from(v)),
        },
        DataType::Float => {
            let f = match raw {
                Some(r) => f32::from_le_bytes(r.get(..4)?.try_into().ok()?),
                None => *t.float_data.first()?,
            };
            (f.fract() == 0.0 && f.abs() < 1e15).then_some(f as i64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int64(name: &str, v: i64) -> proto::TensorProto {
        proto::TensorProto {
            name: Some(name.into()),
            data_type: Some(DataType::Int64 as i32),
            raw_data: Some(v.to_le_bytes().to_vec().into()),
            ..Default::default()
        }
    }

    fn node(op: &str, inputs: &[&str], out: &str) -> proto::NodeProto {
        proto::NodeProto {
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.into()],
            ..Default::default()
        }
    }

    #[test]
    fn constants_initializers_and_chains_resolve() {
        let mut constant = node("Constant", &[], "two");
        constant.attribute.push(proto::AttributeProto {
            name: Some("value".into()),
            t: Some(int64("", 2)),
            ..Default::default()
        });
        let mut cast = node("Cast", &["two"], "flag");
        cast.attribute.push(proto::AttributeProto {
            name: Some("to".into()),
            i: Some(DataType::Bool as i64),
            ..Default::default()
        });
        let nodes = vec![
            constant,
            node("Identity", &["two"], "same"),
            cast,
            node("Shape", &["x"], "dynamic"),
        ];
        let inits = vec![int64("seven", 7)];
        let scope = Scope {
            nodes: &nodes,
            initializers: &inits,
            outer: None,
        };
        assert_eq!(scope.scalar("two"), Some(2));
        assert_eq!(scope.scalar("same"), Some(2));
        assert_eq!(scope.scalar("flag"), Some(1));
        assert_eq!(scope.scalar("seven"), Some(7));
        assert_eq!(scope.scalar("dynamic"), None);
        assert_eq!(scope.scalar("x"), None);
        let inner = Scope {
            nodes: &[],
            initializers: &[],
            outer: Some(&scope),
        };
        assert_eq!(
            inner.scalar("same"),
            Some(2),
            "a body reads its outer scope"
        );
    }

    #[test]
    fn only_single_elements_are_scalars() {
        let mut t = int64("v", 3);
        t.dims = vec![1];
        assert_eq!(tensor_scalar(&t), Some(3));
        t.dims = vec![2];
        assert_eq!(tensor_scalar(&t), None);
        let b = proto::TensorProto {
            data_type: Some(DataType::Bool as i32),
            int32_data: vec![1],
            ..Default::default()
        };
        assert_eq!(tensor_scalar(&b), Some(1));
    }
}
