//! Reading an `.onnx` file for what its graph says, not for its weights: the model is
//! decoded without its initializers' data, which such a caller never reads.
//!
//! The production session's failures are explained from the model as saved (which op has no
//! kernel, which custom op lacks its library), and its located-layer session reads the
//! signature of a model with more outputs. Decoded whole, every initializer's data is copied
//! once more only to be thrown away, and clearing the initializers afterwards also forgot
//! which graph inputs are weights (`keep_initializers_as_inputs=True` exports). Here an
//! initializer decodes to its name, type, dims and data location only; protobuf skips the
//! rest of its bytes without copying them. Nodes are decoded whole (a `Constant` node's
//! tensor is small, and its external data is looked for as `model::load` looks for it).

use super::model::{check_external_files, read, OnnxModel};
use super::proto;
use anyhow::{bail, Result};
use prost::Message;
use std::path::Path;

/// `model::load` with the initializers decoded without their data: the model keeps its
/// graph's nodes, inputs, outputs and the initializers' names, types, dims and data
/// locations.
pub fn load(path: &Path) -> Result<OnnxModel> {
    let bytes = read(path)?;
    let light = match ModelHeader::decode(bytes.as_slice()) {
        Ok(m) => m,
        Err(e) => bail!(
            "ONNX model {}: not a valid ONNX protobuf ({e})",
            path.display()
        ),
    };
    let model = OnnxModel::from_proto(path, light.into_model());
    if model.proto.graph.is_none() {
        bail!(
            "ONNX model {}: not an ONNX model (the protobuf has no graph)",
            path.display()
        );
    }
    check_external_files(&model)?;
    Ok(model)
}

/// Drops the data of `graph`'s initializers, keeping what `load` keeps of them.
pub fn drop_weight_data(graph: &mut proto::GraphProto) {
    for t in &mut graph.initializer {
        *t = header_of(t);
    }
    for s in &mut graph.sparse_initializer {
        s.values = s.values.as_ref().map(header_of);
        s.indices = None;
    }
}

/// A tensor's name, type, dims and data location, without its data.
fn header_of(t: &proto::TensorProto) -> proto::TensorProto {
    TensorHeader {
        dims: t.dims.clone(),
        data_type: t.data_type,
        name: t.name.clone(),
        external_data: t.external_data.clone(),
        data_location: t.data_location,
    }
    .into_tensor()
}

/// `ModelProto` with only the fields a session's caller reads (the tags are onnx.proto's).
#[derive(Clone, PartialEq, Message)]
struct ModelHeader {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphHeader>,
    #[prost(message, repeated, tag = "8")]
    opset_import: Vec<proto::OperatorSetIdProto>,
}

/// `GraphProto` whose initializers are `TensorHeader`s.
#[derive(Clone, PartialEq, Message)]
struct GraphHeader {
    #[prost(message, repeated, tag = "1")]
    node: Vec<proto::NodeProto>,
    #[prost(string, optional, tag = "2")]
    name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    initializer: Vec<TensorHeader>,
    #[prost(message, repeated, tag = "11")]
    input: Vec<proto::ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    output: Vec<proto::ValueInfoProto>,
    #[prost(message, repeated, tag = "15")]
    sparse_initializer: Vec<SparseHeader>,
}

/// `TensorProto` without its data fields.
#[derive(Clone, PartialEq, Message)]
struct TensorHeader {
    #[prost(int64, repeated, tag = "1")]
    dims: Vec<i64>,
    #[prost(int32, optional, tag = "2")]
    data_type: Option<i32>,
    #[prost(string, optional, tag = "8")]
    name: Option<String>,
    #[prost(message, repeated, tag = "13")]
    external_data: Vec<proto::StringStringEntryProto>,
    #[prost(int32, optional, tag = "14")]
    data_location: Option<i32>,
}

/// `SparseTensorProto` whose values are a `TensorHeader`.
#[derive(Clone, PartialEq, Message)]
struct SparseHeader {
    #[prost(message, optional, tag = "1")]
    values: Option<TensorHeader>,
    #[prost(int64, repeated, tag = "3")]
    dims: Vec<i64>,
}

impl TensorHeader {
    fn into_tensor(self) -> proto::TensorProto {
        proto::TensorProto {
            dims: self.dims,
            data_type: self.data_type,
            name: self.name,
            external_data: self.external_data,
            data_location: self.data_location,
            ..Default::default()
        }
    }
}

impl ModelHeader {
    fn into_model(self) -> proto::ModelProto {
        let graph = self.graph.map(|g| proto::GraphProto {
            node: g.node,
            name: g.name,
            initializer: g
                .initializer
                .into_iter()
                .map(TensorHeader::into_tensor)
                .collect(),
            input: g.input,
            output: g.output,
            sparse_initializer: g
                .sparse_initializer
                .into_iter()
                .map(|s| proto::SparseTensorProto {
                    values: s.values.map(TensorHeader::into_tensor),
                    dims: s.dims,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        proto::ModelProto {
            graph,
            opset_import: self.opset_import,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_keeps_its_signature_and_initializer_names_but_no_weights() {
        let weight = proto::TensorProto {
            name: Some("w".into()),
            dims: vec![2, 3],
            data_type: Some(1),
            raw_data: Some(vec![7; 24].into()),
            ..Default::default()
        };
        // A float32 tensor of shape [2, 3].
        let value = |name: &str| {
            use proto::tensor_shape_proto::{dimension::Value, Dimension};
            let dim = |d| Dimension {
                value: Some(Value::DimValue(d)),
                ..Default::default()
            };
            let tensor = proto::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(proto::TensorShapeProto {
                    dim: vec![dim(2), dim(3)],
                }),
            };
            proto::ValueInfoProto {
                name: Some(name.into()),
                r#type: Some(proto::TypeProto {
                    value: Some(proto::type_proto::Value::TensorType(tensor)),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        let full = proto::ModelProto {
            graph: Some(proto::GraphProto {
                node: vec![proto::NodeProto {
                    op_type: Some("MatMul".into()),
                    input: vec!["x".into(), "w".into()],
                    output: vec!["y".into()],
                    ..Default::default()
                }],
                initializer: vec![weight],
                input: vec![value("x"), value("w")],
                output: vec![value("y")],
                ..Default::default()
            }),
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, full.encode_to_vec()).unwrap();
        let model = load(&path).unwrap();
        let graph = model.proto.graph.as_ref().unwrap();
        assert_eq!(graph.initializer[0].name(), "w");
        assert_eq!(graph.initializer[0].dims, vec![2, 3]);
        assert!(graph.initializer[0].raw_data.is_none());
        assert_eq!(graph.node, full.graph.as_ref().unwrap().node);
        // A weight listed among the graph inputs is still known as a weight.
        let specs = crate::onnx::signature::inputs(&model).unwrap();
        assert_eq!(
            specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["x"]
        );
        assert_eq!(crate::onnx::signature::output_names(&model), ["y"]);
        assert!(model.external_data_dir.is_none());
        // Dropping the data of a decoded graph leaves the same graph.
        let mut dropped = full.graph.clone().unwrap();
        drop_weight_data(&mut dropped);
        assert_eq!(Some(&dropped), model.proto.graph.as_ref());
        // Not a model at all: one line that names the file.
        std::fs::write(&path, b"\xff\xff\xff").unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.starts_with("ONNX model ") && e.contains("m.onnx"), "{e}");
    }
}
