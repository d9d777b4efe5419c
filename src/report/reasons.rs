//! The one place an unpaired value's reason becomes a sentence. Pairing hands over a
//! `pairing::UnpairedReason` value; every report (terminal, Markdown, HTML, JUnit) writes it
//! with `Display`, and the JSON report with the `Serialize` below, which puts the same
//! sentence in `coverage.unpaired[].reason` and `shared_producer.reason` (docs/json.md: a
//! string meant for people). Rewording a sentence here changes no decision.

use crate::pairing::{ScaleFactor, UnpairedReason};
use serde::{Serialize, Serializer};
use std::fmt;

impl fmt::Display for UnpairedReason {
    // Over 80 lines: one arm per variant, each a sentence; split up, the sentences would
    // no longer read side by side.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UnpairedReason::*;
        match self {
            Identity { input } => {
                write!(
                    f,
                    "equals its input {input} (an identity the exporter drops)"
                )
            }
            VanishesInEval => f.write_str("identity in eval mode; ONNX drops it"),
            Duplicate { original } => write!(
                f,
                "computes what {original} computes (the same op on the same inputs; a \
                 simplifier merges the two)"
            ),
            MergedCopy { original } => write!(
                f,
                "computes what {original} computes (the same op on the same inputs; a \
                 simplifier merged the two)"
            ),
            FoldedConstant => {
                f.write_str("computes only from weights and constants; the exporter folded it")
            }
            LoopResult => f.write_str(
                "a loop's result is its last iteration's value, compared inside the loop",
            ),
            IfResult => f.write_str(
                "an if's result is its taken branch's value, compared inside the branch",
            ),
            InternalToModule { module } => write!(f, "internal to module {module}"),
            LayoutWithoutTwin => f.write_str(
                "layout op without an ONNX twin (the exporter merged or folded it); it computes \
                 nothing to compare",
            ),
            FusedIntoNode {
                node,
                compared_after,
            } => write!(
                f,
                "fused into ONNX node {node} (compared after {compared_after})"
            ),
            FusedWithConstant { node, constant_op } => write!(
                f,
                "fused into ONNX node {node} (compared after the constant {constant_op} it \
                 absorbed)"
            ),
            FusedIntoConsumer { node, op } => write!(f, "fused into ONNX node {node} ({op})"),
            InternalToFusedModule { module, node } => {
                write!(
                    f,
                    "internal to module {module}, fused into ONNX node {node}"
                )
            }
            AttentionScale { factor } => write!(
                f,
                "ONNX holds it times {factor:.4}, the scale of the attention it feeds, folded \
                 into its weights by a simplifier (its data is compared at the attention's \
                 output)"
            ),
            FoldedScale { factor, node } => write!(
                f,
                "ONNX holds it {}, folded into the weights of {node} (its data is compared \
                 where that node's output is)",
                times(factor)
            ),
            RelaidComputation { node } => write!(
                f,
                "ONNX computes it in another layout ({node} holds its values with the dims in \
                 another order, an optimiser moved a Transpose past it); its data is compared \
                 where the layout is restored"
            ),
            RelaidOutput => f.write_str(
                "its output is held by ONNX only in another arrangement (a layout node an \
                 optimiser merged; the data it passes on is compared where it is used)",
            ),
            RelaidLayout => f.write_str(
                "a layout op whose arrangement ONNX merged into another layout op (the data it \
                 passes on agrees where it is used)",
            ),
            TwinAgreesElsewhere { node, .. } => write!(
                f,
                "its ONNX twin by order, {node}, agrees with another value of its call"
            ),
            LacksBias { node } => write!(
                f,
                "its ONNX value {node} lacks the bias, which a later node adds"
            ),
            TwinFollowsOtherDataflow { node } => write!(
                f,
                "its ONNX twin by order, {node}, follows the dataflow of another value of its \
                 call"
            ),
            InsideKeptControlFlow { op, node } => write!(
                f,
                "not compared: computed inside ONNX {op} node {node}, which keeps its subgraph \
                 (coverage.uncapturable says why); only that node's result is compared"
            ),
            InControlFlowSubgraph { subgraph } => write!(
                f,
                "not compared: its ONNX twin is inside a control-flow subgraph (computed inside \
                 {subgraph}); only that node's result is compared"
            ),
            NoOnnxScope { scope } => write!(f, "no ONNX node carries the scope '{scope}'"),
            NoCompatibleOnnxOp { scope } => write!(
                f,
                "no ONNX op of a compatible kind and shape in scope '{scope}'"
            ),
            NoScopesNoOrder => {
                f.write_str("the ONNX graph has no scopes and no compatible op in order")
            }
            ReachesNoOutput => f.write_str(
                "no compared output is computed from it (the module's next state, or an output \
                 only PyTorch returns)",
            ),
            PreparesOnnxInput { input } => write!(
                f,
                "prepares the input ONNX Runtime was given as '{input}' (equal to it): the \
                 PyTorch model does that itself"
            ),
            NoTorchCall { scope } => {
                write!(f, "scope '{scope}' has no PyTorch module call to match")
            }
            NoCompatibleTorchOp { scope } => write!(
                f,
                "no PyTorch op of a compatible kind and shape in scope '{scope}'"
            ),
            NotALayer => f.write_str("not a layer"),
        }
    }
}

/// "times 0.1250", "times a factor per channel".
fn times(factor: &ScaleFactor) -> String {
    match factor {
        ScaleFactor::Scalar(k) => format!("times {k:.4}"),
        ScaleFactor::PerChannel => "times a factor per channel".to_string(),
    }
}

/// The JSON report holds the sentence, as it always has: the reason is prose for a reader,
/// and its kinds are no contract.
impl Serialize for UnpairedReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_the_sentences_the_reports_have_always_shown() {
        let cases = [
            (
                UnpairedReason::FusedIntoNode {
                    node: "/conv/Conv".into(),
                    compared_after: "bn".into(),
                },
                "fused into ONNX node /conv/Conv (compared after bn)",
            ),
            (
                UnpairedReason::FoldedScale {
                    factor: ScaleFactor::Scalar(0.125),
                    node: "/q/MatMul".into(),
                },
                "ONNX holds it times 0.1250, folded into the weights of /q/MatMul (its data is \
                 compared where that node's output is)",
            ),
            (
                UnpairedReason::NoCompatibleOnnxOp {
                    scope: "norm".into(),
                },
                "no ONNX op of a compatible kind and shape in scope 'norm'",
            ),
            (UnpairedReason::NotALayer, "not a layer"),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
            assert_eq!(
                serde_json::to_value(&reason).unwrap(),
                serde_json::Value::String(text.into())
            );
        }
    }

    #[test]
    fn the_json_report_holds_the_sentence_under_reason() {
        let reason = UnpairedReason::TwinAgreesElsewhere {
            node: "/a/Transpose".into(),
            layout: true,
        };
        let u = crate::pairing::Unpaired {
            side: crate::capture::Side::Torch,
            id: 4,
            name: "v4".into(),
            op: "aten::permute".into(),
            module: "attn".into(),
            accounted: reason.covered(),
            reason,
        };
        let json = serde_json::to_value(&u).unwrap();
        assert_eq!(
            json["reason"],
            "its ONNX twin by order, /a/Transpose, agrees with another value of its call"
        );
        assert_eq!(json["accounted"], true);
    }
}
