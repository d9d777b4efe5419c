//! The commands, built from the stages: `check` (both models, every layer compared, one
//! `Outcome`, its reports and exit code), `inspect` (what one file is and what it offers) and
//! `summary` (many runs' JSON reports merged into one overview),
//! the isolation run that says where a failing layer's error is made (`isolation`), the
//! bundle that reproduces one layer without align-check (`repro`), the float64 run that says
//! what rounding alone does to the outputs (`rounding_reference`), and
//! what they share: the two runtimes behind the one runner shape (`runner`, `runners`), runtime
//! setup (`runtimes`), the ONNX side's loading, on a thread of its own where there is room
//! (`onnx_loading`), the operator library a refused model needs (`op_libraries`), progress
//! on stderr (`progress`), and what is said about the files
//! before any comparison (`training_mode`, `model_identity`, and for a pair, `signatures`).

pub mod check;
pub mod control_steering;
pub mod inspect;
pub mod isolation;
pub mod memory_plan;
pub mod model_identity;
pub mod onnx_loading;
pub mod op_libraries;
pub mod production;
pub mod progress;
pub mod quantized;
pub mod repro;
pub mod rounding_reference;
pub mod runner;
pub mod runners;
pub mod runtimes;
pub mod signatures;
pub mod summary;
pub mod training_mode;
