//! The residual sum inside ONNX Runtime's `SkipLayerNormalization`, made observable.
//!
//! The transformer optimiser replaces a Linear's bias Add, the residual Add and the LayerNorm
//! after it with one `SkipLayerNormalization` (or its RMSNorm form,
//! `SkipSimplifiedLayerNormalization`). The op's optional output 3, `input_skip_bias_sum`,
//! is that residual sum: PyTorch's Add, computed inside the node. A model rewritten here asks
//! for it on every such node that does not already, so that the Add pairs and compares like
//! any other value instead of being accounted as fused; the model's own outputs are unchanged.
//!
//! The sum is an intermediate of the node's normalised output: capture lists it first and
//! makes it that output's only producer, so the dataflow sees `Add -> LayerNorm` on both
//! sides. Pure protobuf, idempotent.

use super::proto;

/// `input_skip_bias_sum`'s position among the node's outputs (after `mean`, `inv_std_var`).
pub const SUM_OUTPUT: usize = 3;

/// Appended to the node's name to name a sum output the graph did not ask for.
const SUM_SUFFIX: &str = "::input_skip_bias_sum";

/// Whether `node` is a fused residual-and-norm whose output [`SUM_OUTPUT`] is its sum.
pub fn has_sum_output(node: &proto::NodeProto) -> bool {
    node.domain() == "com.microsoft"
        && matches!(
            node.op_type(),
            "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization"
        )
}

/// The op name capture gives the sum output of a node of op `op` (`domain::Op`): a name of
/// its own, so that it is taken for the Add it is and not for the norm.
pub fn sum_op_name(op: &str) -> String {
    format!("{op}.sum")
}

/// Names the sum output of every fused residual-and-norm that leaves it out; returns how many
/// it named. Names are made unique from the node's first output.
pub fn make_observable(model: &mut proto::ModelProto) -> usize {
    let Some(graph) = model.graph.as_mut() else {
        return 0;
    };
    let mut named = 0;
    for node in graph.node.iter_mut().filter(|n| has_sum_output(n)) {
        if node.output.get(SUM_OUTPUT).is_some_and(|o| !o.is_empty()) {
            continue;
        }
        let Some(first) = node.output.first().filter(|o| !o.is_empty()).cloned() else {
            continue;
        };
        // Outputs 1 and 2 stay absent: an empty name is an optional output not produced.
        node.output.resize(SUM_OUTPUT + 1, String::new());
        node.output[SUM_OUTPUT] = format!("{first}{SUM_SUFFIX}");
        named += 1;
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, domain: &str, outputs: &[&str]) -> proto::NodeProto {
        proto::NodeProto {
            op_type: Some(op.into()),
            domain: Some(domain.into()),
            name: Some("n".into()),
            input: vec!["x".into(), "skip".into(), "gamma".into()],
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn model(nodes: Vec<proto::NodeProto>) -> proto::ModelProto {
        proto::ModelProto {
            graph: Some(proto::GraphProto {
                node: nodes,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_sum_is_asked_for_once_and_only_of_fused_residual_norms() {
        let mut m = model(vec![
            node("SkipLayerNormalization", "com.microsoft", &["y"]),
            node(
                "SkipSimplifiedLayerNormalization",
                "com.microsoft",
                &["z", "", "", "s"],
            ),
            node("LayerNormalization", "", &["w"]),
            node("SkipLayerNormalization", "", &["v"]),
        ]);
        assert_eq!(make_observable(&mut m), 1);
        let g = m.graph.as_ref().unwrap();
        assert_eq!(g.node[0].output, ["y", "", "", "y::input_skip_bias_sum"]);
        assert_eq!(g.node[1].output, ["z", "", "", "s"]);
        assert_eq!(g.node[2].output, ["w"]);
        assert_eq!(g.node[3].output, ["v"]);
        assert_eq!(make_observable(&mut m), 0, "idempotent");
    }
}
