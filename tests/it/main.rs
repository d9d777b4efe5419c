//! The integration tests, one binary: libtorch is linked once for all of them instead of
//! once per file. One module per area; `common` (in `tests/common/`) holds the fixture
//! manifests, paths and the real binary's runner, `junit_xml` the one JUnit reader.
//!
//! Select tests by name as usual (`cargo test --test it gate::`, `cargo test --test it --
//! signature::planted`). The tests that loop over a fixture manifest also take
//! `ALIGN_CHECK_FIXTURE=NAME[,NAME...]` to check only those fixtures
//! (`ALIGN_CHECK_FIXTURE=fault_gelu cargo test --test it check_fixtures::`); without it they
//! check every fixture and assert that the manifest holds at least as many as it should, so
//! a fixture that failed to export fails the test instead of shrinking it.

#[path = "../common/mod.rs"]
mod common;
mod junit_xml;

mod bad_input;
mod bounded_segments;
mod capture_fixtures;
mod check_fixtures;
mod control_flow;
mod custom_ops;
mod export_pair;
mod exported_programs;
mod first_contact;
mod fused_ops;
mod fuzz_regressions;
mod fx_node_marks;
mod gate;
mod html_report;
mod isolation;
mod isolation_reports;
mod json_contract;
mod library_fixtures;
mod library_ops;
mod memory_budget;
mod model_explorer;
mod onnx_capture;
mod optimized_models;
mod precision;
mod production;
mod repro;
mod shared_siblings;
mod signature;
mod source_lines;
mod value_kinds;
