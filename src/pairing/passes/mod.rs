//! The ordered list of pairing passes: the one place that says what runs, in which order.
//!
//! Each pass reads and changes the shared `PairState` through its mutators; the runner
//! stamps the pairs a pass makes with the pass's name, which is the `paired_by` of the
//! reports. The
//! README's "How pairing works" (docs/pairing.md) lists the same passes in the same order;
//! a test below keeps the two lists equal. Adding a rule is one pass file in this folder, one
//! line here and its unit tests.

use super::{trace, PairCx, PairState};

mod agreeing_twins;
mod attention_scale;
mod dataflow;
mod dataflow_owner;
mod decomposed_op;
mod duplicates;
mod folded_affine;
mod folded_scale;
mod fused_into_consumers;
mod fused_producer;
mod fusion;
mod fx_nodes;
mod global_order;
mod identities;
mod kept_control_flow;
mod left_open;
mod module_internals;
mod module_output;
mod op_order;
mod partial_linear;
mod relaid_after_open;
mod relaid_computation;
mod relaid_layout;
mod scopeless;
mod split_outputs;
mod uncross_siblings;

/// One pairing pass: a type in its own file. Passes never call each other; what a pass
/// needs of an earlier one's work it asks the state (`PairState::made_by`).
pub(super) trait Pass: Sync {
    /// The pass's name: the `paired_by` of the pairs it makes, and its heading in
    /// docs/pairing.md (read by the tests that keep the two lists equal).
    fn name(&self) -> &'static str;
    /// Reads the context, changes the state through its mutators.
    fn run(&self, cx: &PairCx, state: &mut PairState);
}

/// Runs the passes in their declared order over `state`. The runner, not the pass, names
/// the pass running (the stamp of every pair it makes), checks the state's invariants after
/// it (debug builds) and, when asked (`trace`), prints what it changed.
pub(super) fn run_passes(cx: &PairCx, state: &mut PairState) {
    let tracing = trace::enabled();
    for pass in PASSES {
        state.begin_pass(pass.name());
        let before = tracing.then(|| trace::Snapshot::of(state));
        pass.run(cx, state);
        state.check();
        if let Some(before) = before {
            trace::print_changes(pass.name(), &before, state, cx);
        }
    }
}

pub(super) const PASSES: &[&dyn Pass] = &[
    // Slices and expands that keep all of their input (`x[:, :]`): aliases, not aligned.
    &identities::Identities,
    // A value computing again what an earlier one did (merged by simplifiers): an alias.
    &duplicates::Duplicates,
    // Each leaf module call's output with the last ONNX value of the same call and shape.
    &module_output::ModuleOutput,
    // The pieces of a chunk/split/unbind with the ONNX slices that cut them, by wiring.
    &split_outputs::SplitOutputs,
    // Functional ops of a scope with child modules, by compatible kind, shape and order.
    &op_order::OpOrder,
    // A graph without scopes: the same alignment over the whole graph.
    &global_order::GlobalOrder,
    // A node that also computes the modules after its own (Conv+BatchNorm, FusedConv).
    &fusion::Fusion,
    // A Conv whose node carries the BatchNorm's scope (the dynamo exporter's folding).
    &fused_producer::FusedProducer,
    // A pair on a decomposition's partial value moves to the node that completes it.
    &decomposed_op::DecomposedOp,
    // Sibling projections an optimiser reordered, uncrossed by their values.
    &uncross_siblings::UncrossSiblings,
    // Every pair checked against both graphs' wiring; repaired or marked off the dataflow.
    &dataflow::Dataflow,
    // An ONNX value off its pair's dataflow, given to the value of its call it follows.
    &dataflow_owner::DataflowOwner,
    // A Linear compared with a bias-less MatMul (its bias moved into a fused node): unpaired.
    &partial_linear::PartialLinear,
    // A layout op whose arrangement ONNX merged into another: unpaired, covered. An op whose
    // output ONNX holds only rearranged goes first: the layout ops after it are judged by
    // the producers they then look through to.
    &relaid_layout::RelaidLayout,
    // Values left open meet scope-less fused nodes (SkipLayerNormalization) by dataflow;
    // a fused node that also applies the activation after its module (FusedGemm) holds it.
    &scopeless::Scopeless,
    // A .pt2 value and the ONNX value marked as the same torch.export node's result (the
    // dynamo exporter's `fx_node`): such a pair is certain, an open value takes it.
    &fx_nodes::FxNodes,
    // Values still open (an unlisted op, a chain out of order) pair by dataflow, shape, place.
    &left_open::LeftOpen,
    // The layout pairs judged again, now that `left_open` has paired the values they look
    // through to (a key's `cat` before its transpose).
    &relaid_after_open::RelaidAfterOpen,
    // A failing pair of crossed chains moved to the value of its call that agrees with it.
    &agreeing_twins::AgreeingTwins,
    // An op ONNX computes in another layout (a Transpose moved past it): unpaired, covered.
    &relaid_computation::RelaidComputation,
    // A Conv/Gemm/MatMul that also applies the constant scale or shift after it (layer scale).
    &folded_affine::FoldedAffine,
    // A value ONNX holds times a constant factor folded into its reader's weights: unpaired.
    &folded_scale::FoldedScale,
    // A query or key ONNX holds times the attention's scale (folded into its Linear): covered.
    &attention_scale::AttentionScale,
    // The other values of a compared module call are internal to it: covered.
    &module_internals::ModuleInternals,
    // Values whose consumers all meet one scope-less fused node were fused into it: covered.
    &fused_into_consumers::FusedIntoConsumers,
    // Values that flow only into an ONNX Loop or If kept as such: covered by its result.
    &kept_control_flow::KeptControlFlow,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_pass_list_is_the_table() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/pairing.md"))
            .expect("docs/pairing.md");
        // Passes are documented as `### N. name` headings, in order.
        let documented: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("### "))
            .filter_map(|l| l.split_once(". ").map(|(_, name)| name.trim_matches('`')))
            .collect();
        let table: Vec<&str> = PASSES.iter().map(|p| p.name()).collect();
        assert_eq!(documented, table);
    }
}
