//! Fuzz target: arbitrary bytes as an `.onnx` file, through everything `inspect` and `check`
//! do with one before ONNX Runtime sees it: sniffing, decoding (`model::from_bytes`, what
//! `model::load` runs after reading the file), the input signature, the output names, and the
//! "expose everything" rewrite with the scope and source parsing of every node.
//!
//! Seeds are the committed fixture models, so mutations start from real exporter output.

#![no_main]

use align_check::onnx::{expose_all, inputs, model, output_names, scope};
use align_check::capture::sniff::sniff;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = sniff(data);
    // Errors reach the user as one line (exit 2): a name from the file must not break it.
    let one_line = |e: &anyhow::Error| assert!(!format!("{e:#}").contains('\n'), "{e:#}");
    let m = match model::from_bytes(Path::new("fuzz.onnx"), data) {
        Ok(m) => m,
        Err(e) => return one_line(&e),
    };
    let _ = m.opset();
    if let Err(e) = inputs(&m) {
        one_line(&e);
    }
    let names = output_names(&m);
    for node in &m.graph().node {
        let _ = scope::node_scope(node);
        let _ = scope::node_source(node);
    }
    match expose_all(&m.proto) {
        Err(e) => one_line(&e),
        Ok(exposed) => {
            // The rewrite keeps the original outputs first and in order: capture relies on it.
            let outs = &exposed
                .model
                .graph
                .as_ref()
                .expect("exposed has a graph")
                .output;
            assert!(outs.len() >= names.len());
            for (o, n) in outs.iter().zip(&names) {
                assert_eq!(o.name(), n);
            }
        }
    }
});
