//! align-check as a library: the stages between two model files and a verdict.
//!
//! The binary (`main.rs`) is a thin shell over these modules; integration tests use them
//! directly. Runtime-specific code lives in `torch` and `onnx`; everything after capture
//! (pairing, evaluate, outcome, report) works on the plain types of `capture` and `tensor`
//! and never touches tch or ort.

pub mod baseline;
pub mod capture;
pub mod check;
pub mod cli;
pub mod config;
pub mod config_file;
pub mod details;
pub mod evaluate;
pub mod inputs;
pub mod inspect;
pub mod memory;
pub mod model_identity;
pub mod onnx;
pub mod outcome;
pub mod pairing;
pub mod precision;
pub mod progress;
pub mod report;
pub mod runtimes;
pub mod sniff;
pub mod stats;
pub mod store;
pub mod tensor;
pub mod tolerance;
pub mod torch;
pub mod training_mode;
pub mod verdict;
