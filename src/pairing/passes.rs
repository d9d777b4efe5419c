//! The ordered list of pairing passes: the one place that says what runs, in which order.
//!
//! Each pass reads and changes the shared `PairState` through its mutators; a pass that
//! makes pairs stamps them with its name, which is the `paired_by` of the reports. The
//! README's "How pairing works" (docs/pairing.md) lists the same passes in the same order;
//! a test below keeps the two lists equal. Adding a rule is one pass file, one line here
//! and its unit tests.

use super::Pairer;

pub(super) struct Pass {
    /// The pass's name: the `paired_by` of the pairs it makes, and its heading in
    /// docs/pairing.md (read by the tests that keep the two lists equal).
    #[allow(dead_code)]
    pub name: &'static str,
    pub run: fn(&mut Pairer<'_>),
}

pub(super) const PASSES: &[Pass] = &[
    // Slices and expands that keep all of their input (`x[:, :]`): aliases, not aligned.
    Pass {
        name: "identities",
        run: |p| p.mark_identities(),
    },
    // A value computing again what an earlier one did (merged by simplifiers): an alias.
    Pass {
        name: "duplicates",
        run: |p| p.mark_duplicates(),
    },
    // A module called several times in a row, one run on the TorchScript side: split.
    Pass {
        name: "repeated_calls",
        run: |p| p.split_repeated_calls(),
    },
    // Each leaf module call's output with the last ONNX value of the same call and shape.
    Pass {
        name: "module_output",
        run: |p| p.pair_module_outputs(),
    },
    // The pieces of a chunk/split/unbind with the ONNX slices that cut them, by wiring.
    Pass {
        name: "split_outputs",
        run: |p| p.pair_split_outputs(),
    },
    // Functional ops of a scope with child modules, by compatible kind, shape and order.
    Pass {
        name: "op_order",
        run: |p| p.pair_ops_in_scope(),
    },
    // A graph without scopes: the same alignment over the whole graph.
    Pass {
        name: "global_order",
        run: |p| p.pair_globally(),
    },
    // A node that also computes the modules after its own (Conv+BatchNorm, FusedConv).
    Pass {
        name: "fusion",
        run: |p| p.fuse_consumers_into_node(),
    },
    // A Conv whose node carries the BatchNorm's scope (the dynamo exporter's folding).
    Pass {
        name: "fused_producer",
        run: |p| p.fuse_producer_into_node(),
    },
    // A pair on a decomposition's partial value moves to the node that completes it.
    Pass {
        name: "decomposed_op",
        run: |p| p.complete_decompositions(),
    },
    // Sibling projections an optimiser reordered, uncrossed by their values.
    Pass {
        name: "uncross_siblings",
        run: |p| p.uncross_siblings(),
    },
    // Every pair checked against both graphs' wiring; repaired or marked off the dataflow.
    Pass {
        name: "dataflow",
        run: |p| p.repair_dataflow(),
    },
    // An ONNX value off its pair's dataflow, given to the value of its call it follows.
    Pass {
        name: "dataflow_owner",
        run: |p| p.hand_over_by_dataflow(),
    },
    // A Linear compared with a bias-less MatMul (its bias moved into a fused node): unpaired.
    Pass {
        name: "partial_linear",
        run: |p| p.split_partial_linear(),
    },
    // A layout op whose arrangement ONNX merged into another: unpaired, covered. An op whose
    // output ONNX holds only rearranged goes first: the layout ops after it are judged by
    // the producers they then look through to.
    Pass {
        name: "relaid_layout",
        run: |p| {
            p.unpair_relaid_outputs();
            p.unpair_relaid_layout()
        },
    },
    // Values left open meet scope-less fused nodes (SkipLayerNormalization) by dataflow;
    // a fused node that also applies the activation after its module (FusedGemm) holds it.
    Pass {
        name: "scopeless",
        run: |p| {
            p.pair_scopeless();
            p.fuse_consumers_into_scopeless();
        },
    },
    // Values still open (an unlisted op, a chain out of order) pair by dataflow, shape, place.
    Pass {
        name: "left_open",
        run: |p| p.pair_left_open(),
    },
    // The layout pairs judged again, now that `left_open` has paired the values they look
    // through to (a key's `cat` before its transpose).
    Pass {
        name: "relaid_after_open",
        run: |p| p.unpair_relaid_layout(),
    },
    // A failing pair of crossed chains moved to the value of its call that agrees with it.
    Pass {
        name: "agreeing_twins",
        run: |p| p.repair_by_agreement(),
    },
    // An op ONNX computes in another layout (a Transpose moved past it): unpaired, covered.
    Pass {
        name: "relaid_computation",
        run: |p| p.account_relaid_computations(),
    },
    // A Conv/Gemm/MatMul that also applies the constant scale or shift after it (layer scale).
    Pass {
        name: "folded_affine",
        run: |p| p.fold_constant_consumers(),
    },
    // A value ONNX holds times a constant factor folded into its reader's weights: unpaired.
    Pass {
        name: "folded_scale",
        run: |p| p.unpair_folded_scale(),
    },
    // A query or key ONNX holds times the attention's scale (folded into its Linear): covered.
    Pass {
        name: "attention_scale",
        run: |p| p.unpair_folded_attention_scale(),
    },
    // The other values of a compared module call are internal to it: covered.
    Pass {
        name: "module_internals",
        run: |p| p.account_module_internals(),
    },
    // Values whose consumers all meet one scope-less fused node were fused into it: covered.
    Pass {
        name: "fused_into_consumers",
        run: |p| p.account_fused_into_consumers(),
    },
    // Values that flow only into an ONNX Loop or If kept as such: covered by its result.
    Pass {
        name: "kept_control_flow",
        run: |p| p.account_kept_control_flow(),
    },
];

#[cfg(test)]
mod tests {
    use super::super::PairedBy;
    use super::*;

    #[test]
    fn every_pair_label_names_a_pass() {
        let labels = [
            PairedBy::ModuleOutput,
            PairedBy::SplitOutputs,
            PairedBy::OpOrder,
            PairedBy::GlobalOrder,
            PairedBy::Fusion,
            PairedBy::FusedProducer,
            PairedBy::FoldedAffine,
            PairedBy::DecomposedOp,
            PairedBy::UncrossSiblings,
            PairedBy::Dataflow,
            PairedBy::DataflowOwner,
            PairedBy::Scopeless,
            PairedBy::LeftOpen,
            PairedBy::AgreeingTwins,
        ];
        for label in labels {
            assert!(
                PASSES.iter().any(|p| p.name == label.as_str()),
                "{} is no pass",
                label.as_str()
            );
        }
    }

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
        let table: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        assert_eq!(documented, table);
    }
}
