//! TorchScript argument types as forward's schema writes them (`int`, `Optional[Tensor]`,
//! `Dict[str, Tensor]`), and the values align-check builds for them.
//!
//! ONNX inputs are always tensors; TorchScript arguments need not be. A scalar argument is
//! given the one element of its ONNX input's tensor (or of a 0-d array, or `--arg
//! NAME=VALUE`), a container the tensors of the ONNX inputs its elements map to. The values
//! stay host-side here; `torch::args` encodes them for the shim.

use crate::capture::tensor::{DType, HostTensor};
use anyhow::{bail, Result};

/// A forward argument's type, parsed from the schema's annotation string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgType {
    Tensor,
    Int,
    Float,
    Bool,
    Str,
    Optional(Box<ArgType>),
    List(Box<ArgType>),
    Tuple(Vec<ArgType>),
    /// `Dict[str, V]` (Hugging Face style keyword inputs); the key type is always `str`.
    Dict(Box<ArgType>),
    /// Anything else (a class, a union): shown, never built.
    Other(String),
}

/// Splits `A, B[C, D], E` at the top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

impl ArgType {
    pub fn parse(annotation: &str) -> ArgType {
        let a = annotation.trim();
        let generic = |prefix: &str| {
            a.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('['))
                .and_then(|r| r.strip_suffix(']'))
        };
        match a {
            "Tensor" => return ArgType::Tensor,
            "int" => return ArgType::Int,
            "float" => return ArgType::Float,
            "bool" => return ArgType::Bool,
            "str" => return ArgType::Str,
            _ => {}
        }
        if let Some(inner) = generic("Optional") {
            return ArgType::Optional(Box::new(ArgType::parse(inner)));
        }
        if let Some(inner) = generic("List") {
            return ArgType::List(Box::new(ArgType::parse(inner)));
        }
        if let Some(inner) = generic("Tuple") {
            return ArgType::Tuple(split_top(inner).into_iter().map(ArgType::parse).collect());
        }
        if let Some(inner) = generic("Dict") {
            if let [key, value] = split_top(inner)[..] {
                if key == "str" {
                    return ArgType::Dict(Box::new(ArgType::parse(value)));
                }
            }
        }
        ArgType::Other(a.to_string())
    }

    /// `int`, `float`, `bool` (also inside `Optional`): one number, from a one-element array.
    pub fn scalar(&self) -> Option<&ArgType> {
        match self {
            ArgType::Int | ArgType::Float | ArgType::Bool => Some(self),
            ArgType::Optional(inner) => inner.scalar(),
            _ => None,
        }
    }

    /// Whether the argument holds its tensors in elements (a tuple, list or dict).
    pub fn is_container(&self) -> bool {
        match self {
            ArgType::List(_) | ArgType::Tuple(_) | ArgType::Dict(_) => true,
            ArgType::Optional(inner) => inner.is_container(),
            _ => false,
        }
    }

    pub fn is_optional(&self) -> bool {
        matches!(self, ArgType::Optional(_))
    }
}

/// A value for one forward argument, in the shapes TorchScript accepts.
#[derive(Debug, Clone)]
pub enum ArgValue {
    Tensor(HostTensor),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    /// The schema's own default value.
    Default,
    Tuple(Vec<ArgValue>),
    List(Vec<ArgValue>),
    Dict(Vec<(String, ArgValue)>),
}

impl ArgValue {
    /// A value of scalar or string type from `--arg NAME=VALUE`.
    pub fn parse(ty: &ArgType, text: &str, name: &str) -> Result<ArgValue> {
        let bad = |what: &str| anyhow::anyhow!("--arg {name}={text}: {name} is {what}");
        Ok(match ty {
            ArgType::Optional(_) if text == "None" => ArgValue::None,
            ArgType::Optional(inner) => ArgValue::parse(inner, text, name)?,
            ArgType::Int => ArgValue::Int(text.parse().map_err(|_| bad("an int"))?),
            ArgType::Float => ArgValue::Float(text.parse().map_err(|_| bad("a float"))?),
            ArgType::Bool => ArgValue::Bool(match text {
                "true" | "True" | "1" => true,
                "false" | "False" | "0" => false,
                _ => return Err(bad("a bool (true or false)")),
            }),
            ArgType::Str => ArgValue::Str(text.to_string()),
            ArgType::Tensor => bail!("--arg {name}={text}: {name} is a Tensor; give its data with --input {name}=FILE.npy"),
            other => bail!("--arg {name}={text}: {name} is {}, which --arg cannot spell; give its tensors by mapping its elements to ONNX inputs (--map {name}.KEY=INPUT)", describe(other)),
        })
    }

    /// A scalar argument's value from a one-element array (a 0-d array in an .npz, or the
    /// ONNX input's tensor it maps to).
    pub fn from_array(ty: &ArgType, t: &HostTensor, name: &str) -> Result<ArgValue> {
        if t.numel() != 1 {
            bail!(
                "argument '{name}' is {}, but its array has {} elements (give a 0-d array)",
                describe(ty),
                t.numel()
            );
        }
        let x = t.data.get_f64(0);
        let integral = t.dtype().is_integer() || t.dtype() == DType::Bool;
        Ok(match ty.scalar() {
            Some(ArgType::Int) if integral => ArgValue::Int(x as i64),
            Some(ArgType::Float) => ArgValue::Float(x),
            Some(ArgType::Bool) if integral => ArgValue::Bool(x != 0.0),
            _ => bail!(
                "argument '{name}' is {}, but its array holds {}",
                describe(ty),
                t.dtype()
            ),
        })
    }

    /// How reports show a non-tensor value.
    pub fn describe(&self) -> String {
        match self {
            ArgValue::Tensor(t) => format!(
                "{} {}",
                t.dtype(),
                crate::capture::tensor::format_shape(&t.shape)
            ),
            ArgValue::Int(v) => v.to_string(),
            ArgValue::Float(v) => v.to_string(),
            ArgValue::Bool(v) => v.to_string(),
            ArgValue::Str(v) => format!("{v:?}"),
            ArgValue::None => "None".to_string(),
            ArgValue::Default => "its default".to_string(),
            ArgValue::Tuple(v) | ArgValue::List(v) => format!("{} element(s)", v.len()),
            ArgValue::Dict(v) => format!(
                "{{{}}}",
                v.iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// `an int`, `a Dict[str, Tensor]`: a type in a sentence.
pub fn describe(ty: &ArgType) -> String {
    match ty {
        ArgType::Tensor => "a Tensor".to_string(),
        ArgType::Int => "an int".to_string(),
        ArgType::Float => "a float".to_string(),
        ArgType::Bool => "a bool".to_string(),
        ArgType::Str => "a str".to_string(),
        ArgType::Optional(inner) => format!("an Optional of {}", describe(inner)),
        ArgType::List(_) => "a list".to_string(),
        ArgType::Tuple(_) => "a tuple".to_string(),
        ArgType::Dict(_) => "a dict".to_string(),
        ArgType::Other(s) => format!("of type {s}"),
    }
}

/// A Python argument name as TorchScript's graph spells it, without the `.N` suffix it adds
/// to keep SSA names unique (`x.1` is argument `x`).
pub fn argument_name(debug_name: &str) -> &str {
    match debug_name.rsplit_once('.') {
        Some((base, n)) if !base.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => base,
        _ => debug_name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_names_lose_the_ssa_suffix_only() {
        assert_eq!(argument_name("x.1"), "x");
        assert_eq!(argument_name("mask"), "mask");
        assert_eq!(argument_name("a.b"), "a.b");
        assert_eq!(argument_name(".1"), ".1");
    }
    use crate::capture::tensor::TensorData;

    #[test]
    fn schema_annotations_parse_into_nested_types() {
        assert_eq!(ArgType::parse("int"), ArgType::Int);
        assert_eq!(
            ArgType::parse("Optional[Tensor]"),
            ArgType::Optional(Box::new(ArgType::Tensor))
        );
        assert_eq!(
            ArgType::parse("Dict[str, Tensor]"),
            ArgType::Dict(Box::new(ArgType::Tensor))
        );
        assert_eq!(
            ArgType::parse("Tuple[Tensor, List[Tensor]]"),
            ArgType::Tuple(vec![
                ArgType::Tensor,
                ArgType::List(Box::new(ArgType::Tensor))
            ])
        );
        assert_eq!(
            ArgType::parse("Dict[int, Tensor]"),
            ArgType::Other("Dict[int, Tensor]".into())
        );
        assert!(ArgType::parse("Optional[Dict[str, Tensor]]").is_container());
        assert_eq!(
            ArgType::parse("Optional[int]").scalar(),
            Some(&ArgType::Int)
        );
    }

    #[test]
    fn scalars_come_from_text_or_one_element_arrays_of_a_fitting_kind() {
        assert!(matches!(
            ArgValue::parse(&ArgType::Int, "3", "rate").unwrap(),
            ArgValue::Int(3)
        ));
        let e = ArgValue::parse(&ArgType::Int, "1.5", "rate").unwrap_err();
        assert!(e.to_string().contains("rate is an int"), "{e}");
        let opt = ArgType::Optional(Box::new(ArgType::Float));
        assert!(matches!(
            ArgValue::parse(&opt, "None", "t").unwrap(),
            ArgValue::None
        ));
        let zero_d = HostTensor::new(vec![], TensorData::I64(vec![4]));
        assert!(matches!(
            ArgValue::from_array(&ArgType::Int, &zero_d, "rate").unwrap(),
            ArgValue::Int(4)
        ));
        let float = HostTensor::new(vec![1], TensorData::F32(vec![0.5]));
        let e = ArgValue::from_array(&ArgType::Int, &float, "rate").unwrap_err();
        assert!(e.to_string().contains("holds float32"), "{e}");
        let many = HostTensor::new(vec![2], TensorData::I64(vec![1, 2]));
        assert!(ArgValue::from_array(&ArgType::Int, &many, "rate").is_err());
    }
}
