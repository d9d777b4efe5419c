//! Why a value was left without a twin, as a value: one variant per kind of reason, carrying
//! the names and numbers its sentence needs, and whether it still counts as covered.
//!
//! Pairing (and the signature accounting after it) only says which reason applies; the
//! sentence a reader sees is written in one place, `report::reasons`, for every report and
//! the JSON alike. So a test or a later stage asks which variant a value got, never what its
//! text contains, and rewording a sentence cannot change what the tool decides.

/// The factor ONNX holds a value scaled by, where a simplifier folded a scale into weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScaleFactor {
    /// One factor for the whole tensor.
    Scalar(f64),
    /// A factor per channel.
    PerChannel,
}

/// Why a TorchScript value or an ONNX node has no pair.
#[derive(Debug, Clone, PartialEq)]
pub enum UnpairedReason {
    // TorchScript values the exporter or an optimiser made disappear: covered.
    /// Equal to its input (a full slice, a multiplication by 1): the exporter drops it.
    Identity { input: String },
    /// A dropout, a clone, an unpack: an identity in eval mode.
    VanishesInEval,
    /// The same op on the same inputs as `original`, in another module's scope.
    Duplicate { original: String },
    /// Computes what `original` computes; a simplifier merged the two into one node.
    MergedCopy { original: String },
    /// Computed only from weights and constants; the exporter folded it.
    FoldedConstant,
    /// A loop's result: its last iteration's value, compared inside the loop.
    LoopResult,
    /// An if's result: its taken branch's value, compared inside the branch.
    IfResult,
    /// A value of a module call whose output is compared.
    InternalToModule { module: String },
    /// A layout op with no ONNX twin: it computes nothing to compare.
    LayoutWithoutTwin,
    /// Fused into ONNX node `node`, whose value is compared after module `compared_after`.
    FusedIntoNode {
        node: String,
        compared_after: String,
    },
    /// Fused into ONNX node `node` together with the constant op after it.
    FusedWithConstant { node: String, constant_op: String },
    /// Fused into the ONNX node its consumers read.
    FusedIntoConsumer { node: String, op: String },
    /// A value of module call `module`, whose output was fused into ONNX node `node`.
    InternalToFusedModule { module: String, node: String },
    /// ONNX holds it scaled by the attention scale, folded into weights by a simplifier.
    AttentionScale { factor: f64 },
    /// ONNX holds it scaled, the factor folded into the weights of node `node`.
    FoldedScale { factor: ScaleFactor, node: String },
    /// ONNX computes it with its dims in another order (in `node`).
    RelaidComputation { node: String },
    /// Its output exists in ONNX only in another arrangement.
    RelaidOutput,
    /// A layout op whose arrangement ONNX merged into another layout op.
    RelaidLayout,
    /// Its twin by order, `node`, agrees with another value of its call; a layout op
    /// (`layout`) computes nothing, so only it stays covered.
    TwinAgreesElsewhere { node: String, layout: bool },

    // TorchScript values nothing on the ONNX side computes to compare with: not covered.
    /// The ONNX value `node` lacks the bias, which a later node adds.
    LacksBias { node: String },
    /// Its twin by order, `node`, follows the dataflow of another value of its call.
    TwinFollowsOtherDataflow { node: String },
    /// Computed inside an ONNX control-flow node that keeps its subgraph.
    InsideKeptControlFlow { op: String, node: String },
    /// Its ONNX twin is inside a control-flow subgraph (`subgraph`).
    InControlFlowSubgraph { subgraph: String },
    /// No ONNX node carries module scope `scope`.
    NoOnnxScope { scope: String },
    /// No ONNX op of a compatible kind and shape in scope `scope`.
    NoCompatibleOnnxOp { scope: String },
    /// The ONNX graph has no scopes, and the order met no compatible op.
    NoScopesNoOrder,

    // TorchScript values the two signatures account for (`signature::accounting`): covered.
    /// No compared output is computed from it.
    ReachesNoOutput,
    /// Prepares what ONNX Runtime was given as input `input`.
    PreparesOnnxInput { input: String },

    // ONNX nodes without a TorchScript twin: not covered.
    /// ONNX scope `scope` has no TorchScript module call.
    NoTorchCall { scope: String },
    /// No TorchScript op of a compatible kind and shape in scope `scope`.
    NoCompatibleTorchOp { scope: String },
    /// A node of no scope that no pass placed.
    NotALayer,
}

impl UnpairedReason {
    /// Whether a value left unpaired for this reason still counts as covered: compared
    /// within another value (fused, folded, an identity) or accounted by the signatures.
    pub fn covered(&self) -> bool {
        use UnpairedReason::*;
        match self {
            TwinAgreesElsewhere { layout, .. } => *layout,
            Identity { .. }
            | VanishesInEval
            | Duplicate { .. }
            | MergedCopy { .. }
            | FoldedConstant
            | LoopResult
            | IfResult
            | InternalToModule { .. }
            | LayoutWithoutTwin
            | FusedIntoNode { .. }
            | FusedWithConstant { .. }
            | FusedIntoConsumer { .. }
            | InternalToFusedModule { .. }
            | AttentionScale { .. }
            | FoldedScale { .. }
            | RelaidComputation { .. }
            | RelaidOutput
            | RelaidLayout
            | ReachesNoOutput
            | PreparesOnnxInput { .. } => true,
            LacksBias { .. }
            | TwinFollowsOtherDataflow { .. }
            | InsideKeptControlFlow { .. }
            | InControlFlowSubgraph { .. }
            | NoOnnxScope { .. }
            | NoCompatibleOnnxOp { .. }
            | NoScopesNoOrder
            | NoTorchCall { .. }
            | NoCompatibleTorchOp { .. }
            | NotALayer => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_says_whether_its_value_still_counts_as_covered() {
        let agrees = |layout| UnpairedReason::TwinAgreesElsewhere {
            node: "/t/Transpose".into(),
            layout,
        };
        assert!(agrees(true).covered(), "a layout op computes nothing");
        assert!(!agrees(false).covered(), "any other op is missing");
        assert!(UnpairedReason::VanishesInEval.covered());
        assert!(!UnpairedReason::NotALayer.covered());
        let scope = || "norm".to_string();
        assert!(!UnpairedReason::NoCompatibleOnnxOp { scope: scope() }.covered());
    }
}
