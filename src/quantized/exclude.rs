//! A QDQ model with some nodes left in float, as `quantize_static(..., nodes_to_exclude=...)`
//! would leave them, built from the quantised graph itself so that the exclude list can be
//! checked without re-quantising: each excluded node reads the float tensor its input
//! quantiser was given, clipped to the range the quantiser could represent
//! (`x -> Q -> DQ -> node` becomes `x -> Clip -> node`: quantize_static folds a ReLU into the
//! quantiser's range, so the raw `x` may still hold the negatives it removed), and, when the
//! float model
//! it was quantised from is given, its float weights (matched by node name and input
//! position; otherwise the dequantised int8 weights stay, and the check says so).

use crate::onnx::proto::tensor_proto::DataType;
use crate::onnx::proto::{ModelProto, NodeProto, TensorProto};
use std::collections::HashMap;

/// What leaving the nodes in float changed.
#[derive(Debug, Default, PartialEq)]
pub struct Surgery {
    /// Excluded nodes found in the graph.
    pub nodes: usize,
    /// Activation inputs rewired past their quantiser pair.
    pub activations: usize,
    /// Weight inputs replaced by the float model's.
    pub float_weights: usize,
    /// The nodes whose quantised outputs the excluded nodes now read in float:
    /// `quantize_static` keeps quantising a node's output while the node itself is quantised,
    /// so the list that gives the same float inputs names them too.
    pub producers: Vec<String>,
}

pub fn leave_in_float(
    model: &mut ModelProto,
    nodes: &[String],
    float: Option<&ModelProto>,
) -> Surgery {
    let mut done = Surgery::default();
    let Some(graph) = model.graph.as_mut() else {
        return done;
    };
    let producer: HashMap<String, NodeProto> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.clone(), n.clone())))
        .collect();
    let float_nodes: HashMap<&str, &NodeProto> = float
        .and_then(|m| m.graph.as_ref())
        .map(|g| g.node.iter().map(|n| (n.name(), n)).collect())
        .unwrap_or_default();
    let float_init: HashMap<&str, &TensorProto> = float
        .and_then(|m| m.graph.as_ref())
        .map(|g| g.initializer.iter().map(|t| (t.name(), t)).collect())
        .unwrap_or_default();
    let own_init: HashMap<String, TensorProto> = graph
        .initializer
        .iter()
        .map(|t| (t.name().to_string(), t.clone()))
        .collect();
    let mut added: Vec<TensorProto> = Vec::new();
    let mut clips: Vec<NodeProto> = Vec::new();
    for node in graph
        .node
        .iter_mut()
        .filter(|n| nodes.iter().any(|x| x == n.name()))
    {
        done.nodes += 1;
        for (i, input) in node.input.iter_mut().enumerate() {
            let Some(dq) = producer.get(input.as_str()) else {
                continue;
            };
            if dq.op_type() != "DequantizeLinear" {
                continue;
            }
            let quantised = dq.input.first().cloned().unwrap_or_default();
            match producer.get(&quantised) {
                // An activation: read what the quantiser was given.
                Some(q) if q.op_type() == "QuantizeLinear" => {
                    let Some(x) = q.input.first() else {
                        continue;
                    };
                    if let Some(p) = producer.get(x.as_str()) {
                        if !done.producers.iter().any(|n| n == p.name()) {
                            done.producers.push(p.name().to_string());
                        }
                    }
                    *input = clipped_input(x, representable(q, &own_init), &mut clips, &mut added);
                    done.activations += 1;
                }
                // A stored weight: the float model's, where it has the same node.
                _ => {
                    let name = node.name.as_deref().unwrap_or_default();
                    let float_weight = float_nodes
                        .get(name)
                        .and_then(|f| f.input.get(i))
                        .and_then(|w| float_init.get(w.as_str()));
                    if let Some(w) = float_weight {
                        *input = add_float_weight(w, &mut added);
                        done.float_weights += 1;
                    }
                }
            }
        }
    }
    graph.initializer.extend(added);
    insert_after_producers(&mut graph.node, clips);
    done
}

/// Each Clip goes right after the node that makes its input, so the graph stays sorted.
fn insert_after_producers(nodes: &mut Vec<NodeProto>, clips: Vec<NodeProto>) {
    for clip in clips {
        let at = nodes
            .iter()
            .position(|n| n.output.contains(&clip.input[0]))
            .map_or(0, |i| i + 1);
        nodes.insert(at, clip);
    }
}

/// Adds the float model's weight `w` under a name of its own (once) and returns that name.
fn add_float_weight(w: &TensorProto, added: &mut Vec<TensorProto>) -> String {
    let name = format!("{}__float", w.name());
    if !added.iter().any(|t| t.name() == name) {
        let mut w = w.clone();
        w.name = Some(name.clone());
        added.push(w);
    }
    name
}

/// The float value `x` as the excluded node reads it: clipped to the range its quantiser
/// represents (`quantize_static` folds ReLUs into that range), through one Clip per value.
fn clipped_input(
    x: &str,
    range: Option<(f32, f32)>,
    clips: &mut Vec<NodeProto>,
    added: &mut Vec<TensorProto>,
) -> String {
    let Some((lo, hi)) = range else {
        return x.to_string();
    };
    let clipped = format!("{x}__float_range");
    if !clips.iter().any(|c| c.output[0] == clipped) {
        let (min, max) = (format!("{clipped}_min"), format!("{clipped}_max"));
        added.push(scalar_f32(&min, lo));
        added.push(scalar_f32(&max, hi));
        clips.push(NodeProto {
            name: Some(clipped.clone()),
            op_type: Some("Clip".into()),
            input: vec![x.to_string(), min, max],
            output: vec![clipped.clone()],
            ..Default::default()
        });
    }
    clipped
}

/// The float range a per-tensor QuantizeLinear represents: `(qmin - zp) * s ..= (qmax - zp) *
/// s`; `None` when its scale or zero point is not a stored scalar.
fn representable(q: &NodeProto, init: &HashMap<String, TensorProto>) -> Option<(f32, f32)> {
    let scale = scalar(init.get(q.input.get(1)?)?)?;
    let (zp, (qmin, qmax)) = match q.input.get(2).and_then(|n| init.get(n)) {
        Some(z) => (scalar(z)?, integer_range(z.data_type?)?),
        // No zero point: uint8 with zero point 0, as the operator defines it.
        None => (0.0, (0.0, 255.0)),
    };
    Some((((qmin - zp) * scale) as f32, ((qmax - zp) * scale) as f32))
}

fn integer_range(data_type: i32) -> Option<(f64, f64)> {
    Some(match DataType::try_from(data_type).ok()? {
        DataType::Int8 => (-128.0, 127.0),
        DataType::Uint8 => (0.0, 255.0),
        DataType::Int16 => (-32768.0, 32767.0),
        DataType::Uint16 => (0.0, 65535.0),
        _ => return None,
    })
}

/// A one-element float32 or integer tensor's value.
fn scalar(t: &TensorProto) -> Option<f64> {
    if t.dims.iter().product::<i64>() != 1 {
        return None;
    }
    let raw = t.raw_data.as_deref().unwrap_or_default();
    match DataType::try_from(t.data_type?).ok()? {
        DataType::Float => match raw.get(..4) {
            Some(b) => Some(f32::from_le_bytes(b.try_into().ok()?) as f64),
            None => t.float_data.first().map(|&v| v as f64),
        },
        DataType::Int8 => match raw.first() {
            Some(&b) => Some(b as i8 as f64),
            None => t.int32_data.first().map(|&v| v as f64),
        },
        DataType::Uint8 => match raw.first() {
            Some(&b) => Some(b as f64),
            None => t.int32_data.first().map(|&v| v as f64),
        },
        DataType::Int16 => match raw.get(..2) {
            Some(b) => Some(i16::from_le_bytes(b.try_into().ok()?) as f64),
            None => t.int32_data.first().map(|&v| v as f64),
        },
        DataType::Uint16 => match raw.get(..2) {
            Some(b) => Some(u16::from_le_bytes(b.try_into().ok()?) as f64),
            None => t.int32_data.first().map(|&v| v as f64),
        },
        _ => None,
    }
}

fn scalar_f32(name: &str, v: f32) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(v.to_le_bytes().to_vec().into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto::GraphProto;

    fn node(name: &str, op: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            name: Some(name.into()),
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            ..Default::default()
        }
    }

    #[test]
    fn an_excluded_node_reads_float_activations_and_the_float_weights() {
        let graph = GraphProto {
            node: vec![
                node("q", "QuantizeLinear", &["x", "s", "z"], "xq"),
                node("dq", "DequantizeLinear", &["xq", "s", "z"], "xd"),
                node("wdq", "DequantizeLinear", &["w_q", "ws", "wz"], "wd"),
                node("conv", "Conv", &["xd", "wd"], "y"),
            ],
            ..Default::default()
        };
        let mut model = ModelProto {
            graph: Some(graph),
            ..Default::default()
        };
        let float = ModelProto {
            graph: Some(GraphProto {
                node: vec![node("conv", "Conv", &["x", "w"], "y")],
                initializer: vec![TensorProto {
                    name: Some("w".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let done = leave_in_float(&mut model, &["conv".into()], Some(&float));
        assert_eq!(
            done,
            Surgery {
                nodes: 1,
                activations: 1,
                float_weights: 1,
                producers: Vec::new(),
            }
        );
        let g = model.graph.unwrap();
        assert_eq!(g.node[3].input, ["x", "w__float"]);
        assert_eq!(g.initializer[0].name(), "w__float");
        // Without the float model the dequantised weights stay.
        let mut again = ModelProto {
            graph: Some(GraphProto {
                node: g.node[..3]
                    .iter()
                    .cloned()
                    .chain([node("conv", "Conv", &["xd", "wd"], "y")])
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let done = leave_in_float(&mut again, &["conv".into()], None);
        assert_eq!((done.activations, done.float_weights), (1, 0));
    }
}
