//! The ONNX model's signature: which inputs the user must feed (with element type and shape,
//! fixed or symbolic) and which outputs it names.
//!
//! Inputs are made once from this signature and fed identically to both runtimes, so the
//! element types are mapped onto the tool's `DType` here, and an input the tool cannot feed is
//! reported by name before anything runs. Graph inputs that are also initializers are weights
//! (old exporters list them with `keep_initializers_as_inputs`), not user inputs.

use super::model::OnnxModel;
use super::proto;
use crate::capture::tensor::DType;
use anyhow::{bail, Result};
use std::collections::HashSet;

/// One dimension of an input shape as the model declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(usize),
    /// A named dynamic dimension (`batch`); `""` when the model gives neither value nor name.
    Symbolic(String),
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbolic(s) if s.is_empty() => f.write_str("?"),
            Dim::Symbolic(s) => f.write_str(s),
        }
    }
}

/// A user input of the ONNX graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<Dim>,
}

/// The user inputs of the main graph, in declaration order.
pub fn inputs(model: &OnnxModel) -> Result<Vec<InputSpec>> {
    let graph = model.graph();
    let weights: HashSet<&str> = graph
        .initializer
        .iter()
        .map(|t| t.name())
        .chain(
            graph
                .sparse_initializer
                .iter()
                .filter_map(|s| s.values.as_ref().map(|v| v.name())),
        )
        .collect();
    let mut specs = Vec::new();
    for vi in graph.input.iter().filter(|i| !weights.contains(i.name())) {
        // Shown in errors only; escaped because names from the file may hold newlines.
        let name = vi.name().escape_debug();
        let tensor = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(proto::type_proto::Value::TensorType(t)) => t,
            Some(other) => bail!(
                "ONNX input `{name}` of {} is a {}, not a tensor; only tensor inputs are supported",
                model.path.display(),
                value_kind(other)
            ),
            None => bail!(
                "ONNX input `{name}` of {} declares no type",
                model.path.display()
            ),
        };
        let elem = tensor.elem_type();
        let Some(dtype) = dtype_from_onnx(elem) else {
            bail!(
                "ONNX input `{name}` of {} has element type {}, which align-check cannot feed \
                 (supported: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, bool)",
                model.path.display(),
                onnx_type_name(elem)
            );
        };
        let dims = tensor
            .shape
            .as_ref()
            .map(|s| s.dim.iter().map(dim_of).collect())
            .unwrap_or_default();
        specs.push(InputSpec {
            name: vi.name().to_string(),
            dtype,
            dims,
        });
    }
    Ok(specs)
}

/// Names of the main graph's outputs, in declaration order.
pub fn output_names(model: &OnnxModel) -> Vec<String> {
    model
        .graph()
        .output
        .iter()
        .map(|o| o.name().to_string())
        .collect()
}

fn dim_of(d: &proto::tensor_shape_proto::Dimension) -> Dim {
    use proto::tensor_shape_proto::dimension::Value;
    match &d.value {
        // 0 and negative values are how some tools write "unknown".
        Some(Value::DimValue(v)) if *v > 0 => Dim::Fixed(*v as usize),
        Some(Value::DimParam(p)) => Dim::Symbolic(p.clone()),
        _ => Dim::Symbolic(String::new()),
    }
}

/// The tool's element type for an ONNX `TensorProto.DataType` value, if it has one.
pub fn dtype_from_onnx(elem_type: i32) -> Option<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| onnx_from_dtype(d) == elem_type)
}

/// The ONNX element type for one of the tool's types.
pub fn onnx_from_dtype(dtype: DType) -> i32 {
    use proto::tensor_proto::DataType as T;
    (match dtype {
        DType::F32 => T::Float,
        DType::F16 => T::Float16,
        DType::Bf16 => T::Bfloat16,
        DType::F64 => T::Double,
        DType::I8 => T::Int8,
        DType::I16 => T::Int16,
        DType::I32 => T::Int32,
        DType::I64 => T::Int64,
        DType::U8 => T::Uint8,
        DType::Bool => T::Bool,
    }) as i32
}

/// `FLOAT16`, `STRING`, ... or the raw number for values newer than our schema.
pub fn onnx_type_name(elem_type: i32) -> String {
    match proto::tensor_proto::DataType::try_from(elem_type) {
        Ok(t) => t.as_str_name().to_string(),
        Err(_) => format!("data type {elem_type}"),
    }
}

fn value_kind(v: &proto::type_proto::Value) -> &'static str {
    use proto::type_proto::Value;
    match v {
        Value::TensorType(_) => "tensor",
        Value::SequenceType(_) => "sequence",
        Value::MapType(_) => "map",
        Value::OptionalType(_) => "optional",
        Value::SparseTensorType(_) => "sparse tensor",
        Value::OpaqueType(_) => "opaque value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::tensor_shape_proto::{dimension::Value as DV, Dimension};

    fn dim(v: Option<DV>) -> Dimension {
        Dimension {
            value: v,
            ..Default::default()
        }
    }

    fn input(name: &str, elem: i32, dims: Vec<Dimension>) -> proto::ValueInfoProto {
        proto::ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(proto::TypeProto {
                value: Some(proto::type_proto::Value::TensorType(
                    proto::type_proto::Tensor {
                        elem_type: Some(elem),
                        shape: Some(proto::TensorShapeProto { dim: dims }),
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn model(inputs: Vec<proto::ValueInfoProto>, inits: &[&str]) -> OnnxModel {
        let graph = proto::GraphProto {
            input: inputs,
            initializer: inits
                .iter()
                .map(|n| proto::TensorProto {
                    name: Some(n.to_string()),
                    ..Default::default()
                })
                .collect(),
            output: vec![proto::ValueInfoProto {
                name: Some("out".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        OnnxModel::from_proto(
            "m.onnx",
            proto::ModelProto {
                graph: Some(graph),
                ..Default::default()
            },
        )
    }

    #[test]
    fn reads_dims_types_and_skips_initializers() {
        let m = model(
            vec![
                input(
                    "x",
                    1,
                    vec![
                        dim(Some(DV::DimParam("batch".into()))),
                        dim(Some(DV::DimValue(3))),
                        dim(None),
                        dim(Some(DV::DimValue(0))),
                        dim(Some(DV::DimValue(-1))),
                    ],
                ),
                input("w", 1, vec![]),
                input("mask", 9, vec![dim(Some(DV::DimValue(4)))]),
            ],
            &["w"],
        );
        let specs = inputs(&m).unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name, "x");
        assert_eq!(specs[0].dtype, DType::F32);
        assert_eq!(
            specs[0].dims,
            vec![
                Dim::Symbolic("batch".into()),
                Dim::Fixed(3),
                Dim::Symbolic(String::new()),
                Dim::Symbolic(String::new()),
                Dim::Symbolic(String::new()),
            ]
        );
        assert_eq!(specs[1].dtype, DType::Bool);
        assert_eq!(output_names(&m), vec!["out".to_string()]);
    }

    #[test]
    fn unsupported_input_types_are_named() {
        let m = model(vec![input("tokens", 8, vec![])], &[]);
        let e = inputs(&m).unwrap_err().to_string();
        assert!(e.contains("`tokens`") && e.contains("STRING"), "{e}");
        let mut seq = input("s", 1, vec![]);
        seq.r#type.as_mut().unwrap().value = Some(proto::type_proto::Value::SequenceType(
            Box::new(proto::type_proto::Sequence { elem_type: None }),
        ));
        let e = inputs(&model(vec![seq], &[])).unwrap_err().to_string();
        assert!(e.contains("`s`") && e.contains("sequence"), "{e}");
    }

    #[test]
    fn dtype_mapping_round_trips() {
        for d in DType::ALL {
            assert_eq!(dtype_from_onnx(onnx_from_dtype(d)), Some(d));
        }
        assert_eq!(dtype_from_onnx(4), None); // uint16
        assert_eq!(onnx_type_name(10), "FLOAT16");
        assert_eq!(onnx_type_name(999), "data type 999");
    }
}
