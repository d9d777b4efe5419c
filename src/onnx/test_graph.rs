//! Graph pieces for the unit tests of the protobuf rewrites (exposing values, unrolling
//! control flow, dequantising): one way to write a node and a value, shared by all of them.

use super::proto;

/// A node NAME of type OP reading `inputs` and writing `outputs`.
pub fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> proto::NodeProto {
    proto::NodeProto {
        name: Some(name.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A value known by its name only.
pub fn vi(name: &str) -> proto::ValueInfoProto {
    proto::ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}
