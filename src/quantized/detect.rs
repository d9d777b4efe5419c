//! Whether an ONNX model is quantised, in which format and integer type, and which float
//! node `quantize_static` would name for each value a check pairs.
//!
//! - QDQ (`quantize_static`, QuantFormat.QDQ): QuantizeLinear/DequantizeLinear pairs around
//!   float ops; a paired value is often a DequantizeLinear output, whose node to exclude is
//!   the float op that produced what it quantised (DQ <- Q <- op).
//! - QOperator: integer ops (QLinearConv, QLinearMatMul, com.microsoft's QLinearAdd, QGemm,
//!   ..., ConvInteger, MatMulInteger): the ops `onnx::dequantize` knows the output scale of.
//! - dynamic (`quantize_dynamic`): DynamicQuantizeLinear feeding integer MatMul/Conv.

use crate::onnx::dequantize::declares_output_quantization;
use crate::onnx::model::OnnxModel;
use crate::onnx::proto::tensor_proto::DataType;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Qdq,
    Qoperator,
    Dynamic,
}

impl Format {
    pub fn label(self) -> &'static str {
        match self {
            Format::Qdq => "QDQ",
            Format::Qoperator => "QOperator",
            Format::Dynamic => "dynamic",
        }
    }
}

/// What a quantised model is, as found in its graph.
#[derive(Debug, Clone, Serialize)]
pub struct Quantization {
    pub format: Format,
    /// The integer types of its quantised tensors (`int8`, `uint8`, ...), sorted.
    pub integer_types: Vec<String>,
    /// Quantise/dequantise or integer nodes counted.
    pub quantized_nodes: usize,
    /// ONNX node name -> the float node `nodes_to_exclude` names for it.
    #[serde(skip)]
    pub exclude_name: HashMap<String, String>,
}

/// Integer ops whose output is not declared quantised: accumulators scaled afterwards.
const INTEGER_OPS: [&str; 2] = ["ConvInteger", "MatMulInteger"];

fn is_qoperator(op_type: &str) -> bool {
    declares_output_quantization(op_type) && op_type != "DynamicQuantizeLinear"
        || INTEGER_OPS.contains(&op_type)
}

/// The model's quantisation, `None` for a float model.
pub fn detect(model: &OnnxModel) -> Option<Quantization> {
    let graph = model.graph();
    let count = |is: &dyn Fn(&str) -> bool| graph.node.iter().filter(|n| is(n.op_type())).count();
    let dynamic = count(&|op| op == "DynamicQuantizeLinear");
    let qoperator = count(&is_qoperator);
    let qdq = count(&|op| matches!(op, "QuantizeLinear" | "DequantizeLinear"));
    let (format, quantized_nodes) = if dynamic > 0 {
        (Format::Dynamic, dynamic + qoperator)
    } else if qoperator > 0 {
        (Format::Qoperator, qoperator + qdq)
    } else if qdq > 0 {
        (Format::Qdq, qdq)
    } else {
        return None;
    };
    Some(Quantization {
        format,
        integer_types: integer_types(model),
        quantized_nodes,
        exclude_name: exclude_names(model),
    })
}

/// The element types of the zero points (and integer weights) the graph stores.
fn integer_types(model: &OnnxModel) -> Vec<String> {
    let mut types: Vec<String> = model
        .graph()
        .initializer
        .iter()
        .filter_map(|t| match DataType::try_from(t.data_type?).ok()? {
            DataType::Int8 => Some("int8"),
            DataType::Uint8 => Some("uint8"),
            DataType::Int16 => Some("int16"),
            DataType::Uint16 => Some("uint16"),
            DataType::Int4 => Some("int4"),
            DataType::Uint4 => Some("uint4"),
            _ => None,
        })
        .map(str::to_string)
        .collect();
    types.sort();
    types.dedup();
    types
}

/// For every node, the float node a `nodes_to_exclude` list names: itself, or for a
/// DequantizeLinear of an activation, the op whose output was quantised.
fn exclude_names(model: &OnnxModel) -> HashMap<String, String> {
    let graph = model.graph();
    let producer: HashMap<&str, &crate::onnx::proto::NodeProto> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();
    let mut names = HashMap::new();
    for node in &graph.node {
        let mut current = node;
        // DQ <- Q <- op: at most two hops back through the quantiser pair.
        for _ in 0..2 {
            if !matches!(current.op_type(), "DequantizeLinear" | "QuantizeLinear") {
                break;
            }
            match current.input.first().and_then(|i| producer.get(i.as_str())) {
                Some(p) => current = p,
                None => break,
            }
        }
        if !matches!(current.op_type(), "DequantizeLinear" | "QuantizeLinear") {
            names.insert(node.name().to_string(), current.name().to_string());
        }
    }
    names
}
