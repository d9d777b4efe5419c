//! Which decoded tensors keep slicing the file's bytes, and which get bytes of their own.
//!
//! `model::load` decodes tensor data as slices of the file's bytes (no copy of the weights),
//! and one slice keeps the whole buffer alive. The weights, the graph's large initializers,
//! leave the model when its session is built and free the buffer with them; everything
//! else a check keeps for its whole run (a `Constant` node's tensor, a subgraph's
//! initializer, a small scale or shape) would hold all of the file's bytes for that long.
//! Those tensors are copied out, which costs a few kilobytes on a typical model.

use super::proto;
use prost::bytes::Bytes;

/// Top-level initializers smaller than this are copied out too: a check may keep one (a
/// quantisation scale, a shape) after the weights are gone.
const SMALL: usize = 64 * 1024;

/// Gives every tensor of `model` its own bytes except the top-level initializers of at
/// least `SMALL` bytes, which keep slicing the file's.
pub fn own_all_but_weights(model: &mut proto::ModelProto) {
    if let Some(graph) = model.graph.as_mut() {
        for t in &mut graph.initializer {
            if t.raw_data.as_ref().is_some_and(|r| r.len() < SMALL) {
                own(t);
            }
        }
        own_graph_except_initializers(graph);
    }
    for f in &mut model.functions {
        f.node.iter_mut().for_each(own_node);
    }
}

fn own(t: &mut proto::TensorProto) {
    if let Some(raw) = t.raw_data.as_mut() {
        *raw = Bytes::copy_from_slice(raw);
    }
}

fn own_graph(g: &mut proto::GraphProto) {
    g.initializer.iter_mut().for_each(own);
    own_graph_except_initializers(g);
}

fn own_graph_except_initializers(g: &mut proto::GraphProto) {
    for s in &mut g.sparse_initializer {
        own_sparse(s);
    }
    g.node.iter_mut().for_each(own_node);
}

fn own_sparse(s: &mut proto::SparseTensorProto) {
    s.values
        .iter_mut()
        .chain(s.indices.iter_mut())
        .for_each(own);
}

fn own_node(n: &mut proto::NodeProto) {
    for a in &mut n.attribute {
        a.t.iter_mut().chain(a.tensors.iter_mut()).for_each(own);
        a.sparse_tensor.iter_mut().for_each(own_sparse);
        a.g.iter_mut()
            .chain(a.graphs.iter_mut())
            .for_each(own_graph);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, raw: &Bytes, len: usize) -> proto::TensorProto {
        proto::TensorProto {
            name: Some(name.into()),
            raw_data: Some(raw.slice(0..len)),
            ..Default::default()
        }
    }

    /// Whether `t`'s data lies inside `file`'s buffer.
    fn slices(t: &proto::TensorProto, file: &Bytes) -> bool {
        let r = t.raw_data.as_ref().unwrap();
        let range = file.as_ptr() as usize..file.as_ptr() as usize + file.len();
        range.contains(&(r.as_ptr() as usize))
    }

    #[test]
    fn only_large_top_level_initializers_keep_slicing_the_file() {
        let file = Bytes::from(vec![1u8; 2 * SMALL]);
        let constant = proto::NodeProto {
            op_type: Some("Constant".into()),
            attribute: vec![proto::AttributeProto {
                t: Some(tensor("c", &file, 2 * SMALL)),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut model = proto::ModelProto {
            graph: Some(proto::GraphProto {
                initializer: vec![tensor("w", &file, SMALL), tensor("scale", &file, 4)],
                node: vec![constant],
                ..Default::default()
            }),
            ..Default::default()
        };
        own_all_but_weights(&mut model);
        let g = model.graph.as_ref().unwrap();
        assert!(slices(&g.initializer[0], &file));
        assert!(!slices(&g.initializer[1], &file));
        let c = g.node[0].attribute[0].t.as_ref().unwrap();
        assert!(!slices(c, &file));
        assert_eq!(c.raw_data.as_ref().unwrap().len(), 2 * SMALL);
    }
}
