//! The graph transformers ONNX Runtime 1.31 registers for its CPU execution provider, by the
//! optimisation level that adds them, in the order it applies them: the names
//! `optimization.disable_specified_optimizers` accepts, and the candidates the bisection
//! (`bisect`) searches when a production session's outputs differ.
//!
//! ONNX Runtime reports no list through its API. This one is ONNX Runtime's own, read from
//! its verbose log ("Applying graph transformer X", session log severity 0) of a session at
//! `ORT_ENABLE_ALL` with onnxruntime 1.31.1 (docs/production.md says how to list them again
//! for another version). Levels 3 and 4 of the log (layout transformers, then fp16
//! initializer folding) both run at `all`. The rule-based transformers hold many small
//! rewrites (`RULES`: EliminateIdentity, ConvBNFusion, ...); the log does not name them, but
//! `optimization.disable_specified_optimizers` takes a rule's own name too and turns off that
//! rule alone (checked with 1.31.1: `Pad_Fusion` alone restores a model whose zero Pad the
//! rule folds into a MaxPool, which pads with -inf).

use super::settings::OptLevel;

/// (transformer, the level that adds it), lowest level first, each level in ONNX Runtime's
/// order.
pub const TRANSFORMERS: &[(&str, OptLevel)] = &[
    ("Level1_RuleBasedTransformer", OptLevel::Basic),
    ("DoubleQDQPairsRemover", OptLevel::Basic),
    ("ConstantSharing", OptLevel::Basic),
    ("CommonSubexpressionElimination", OptLevel::Basic),
    ("ConstantFolding", OptLevel::Basic),
    ("MatMulAddFusion", OptLevel::Basic),
    ("ReshapeFusion", OptLevel::Basic),
    ("FreeDimensionOverrideTransformer", OptLevel::Basic),
    ("SliceConcatToSpaceToDepthFusion", OptLevel::Basic),
    ("GeluFusionL1", OptLevel::Basic),
    ("LayerNormFusionL1", OptLevel::Basic),
    ("QDQPropagationTransformer", OptLevel::Basic),
    ("WeightBiasQuantization", OptLevel::Basic),
    ("EnsureUniqueDQForNodeUnit", OptLevel::Basic),
    ("WhereDummyDq", OptLevel::Basic),
    ("TransposeOptimizer", OptLevel::Basic),
    ("Level2_RuleBasedTransformer", OptLevel::Extended),
    (
        "TransposeOptimizer_CPUExecutionProvider",
        OptLevel::Extended,
    ),
    ("QDQS8ToU8Transformer", OptLevel::Extended),
    ("QDQSelectorActionTransformer", OptLevel::Extended),
    ("GemmActivationFusion", OptLevel::Extended),
    ("MatMulIntegerToFloatFusion", OptLevel::Extended),
    ("DynamicQuantizeMatMulFusion", OptLevel::Extended),
    ("ConvActivationFusion", OptLevel::Extended),
    ("GeluFusionL2", OptLevel::Extended),
    ("LayerNormFusionL2", OptLevel::Extended),
    ("SimplifiedLayerNormFusion", OptLevel::Extended),
    ("AttentionFusion", OptLevel::Extended),
    ("EmbedLayerNormFusion", OptLevel::Extended),
    ("GatherSliceToSplitFusion", OptLevel::Extended),
    ("GatherToSliceFusion", OptLevel::Extended),
    ("MatmulTransposeFusion", OptLevel::Extended),
    ("BiasGeluFusion", OptLevel::Extended),
    ("GroupQueryAttentionFusion", OptLevel::Extended),
    ("MatMulAddFusion", OptLevel::Extended),
    ("SkipLayerNormFusion", OptLevel::Extended),
    ("BiasSkipLayerNormFusion", OptLevel::Extended),
    ("FastGeluFusion", OptLevel::Extended),
    ("QuickGeluFusion", OptLevel::Extended),
    ("GeluApproximation", OptLevel::Extended),
    ("BiasSoftmaxFusion", OptLevel::Extended),
    ("BiasDropoutFusion", OptLevel::Extended),
    ("MatMulScaleFusion", OptLevel::Extended),
    ("MatMulActivationFusion", OptLevel::Extended),
    ("MatMulNBitsFusion", OptLevel::Extended),
    ("GroupQueryAttentionPreNormFusion", OptLevel::Extended),
    ("QDQFinalCleanupTransformer", OptLevel::Extended),
    ("NchwcTransformer", OptLevel::All),
    ("NhwcTransformer", OptLevel::All),
    ("ConvAddActivationFusion", OptLevel::All),
    ("FuseFp16InitializerToFp32NodeTransformer", OptLevel::All),
];

/// The rewrite rules of each rule-based transformer, in the order ONNX Runtime 1.31 registers
/// them (its own rule names, as the library's strings spell them: `Pad_Fusion` is PadFusion).
pub const RULES: &[(&str, &[&str])] = &[
    (
        "Level1_RuleBasedTransformer",
        &[
            "EliminateIdentity",
            "EliminateSlice",
            "UnsqueezeElimination",
            "EliminateDropout",
            "ExpandElimination",
            "CastElimination",
            "CastChainElimination",
            "PreShapeNodeElimination",
            "NoopElimination",
            "DivMulFusion",
            "FuseReluClip",
            "GemmSumFusion",
            "GemmTransposeFusion",
            "NotWhereFusion",
            "ConvAddFusion",
            "ConvMulFusion",
            "ConvBNFusion",
            "Pad_Fusion",
            "MatMul_BatchNormalization_Fusion",
            "LabelEncoderFusion",
        ],
    ),
    (
        "Level2_RuleBasedTransformer",
        &["ClipQuantRewrite", "ReluQuantRewrite"],
    ),
];

/// The rules of transformer `name` (empty for a transformer that is not rule-based).
pub fn rules_of(name: &str) -> &'static [&'static str] {
    RULES
        .iter()
        .find(|(t, _)| *t == name)
        .map_or(&[], |(_, rules)| *rules)
}

/// The transformers `level` adds to the one below it, in ONNX Runtime's order (a name that
/// also runs at a lower level, MatMulAddFusion, is listed once, where it first runs).
pub fn added_at(level: OptLevel) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for &(name, at) in TRANSFORMERS {
        if at == level && !names.contains(&name) && !below(level).any(|n| n == name) {
            names.push(name);
        }
    }
    names
}

fn below(level: OptLevel) -> impl Iterator<Item = &'static str> {
    TRANSFORMERS
        .iter()
        .filter(move |(_, at)| *at < level)
        .map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_adds_its_own_transformers_once() {
        assert!(added_at(OptLevel::Disable).is_empty());
        let basic = added_at(OptLevel::Basic);
        let extended = added_at(OptLevel::Extended);
        assert_eq!(basic[0], "Level1_RuleBasedTransformer");
        assert!(extended.contains(&"GeluApproximation"));
        // Already applied at basic, so disabling it at extended is not a new candidate.
        assert!(!extended.contains(&"MatMulAddFusion"));
        assert!(added_at(OptLevel::All).contains(&"NchwcTransformer"));
    }
}
