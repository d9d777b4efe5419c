//! align-check as a library: the stages between two model files and a verdict.
//!
//! The binary (`main.rs`) is a thin shell over these modules; integration tests use them
//! directly. One module per stage, in the order a run goes through them: `cli` (arguments
//! and configuration), `inputs`, `torch` and `onnx` (the two runtimes, filling the types of
//! `capture`), `pairing`, `compare` (statistics and judged layers), `outcome` (the result
//! and its gates), `report`; `app` holds the commands built from them. Everything after
//! capture works on plain types and never touches tch or ort.
//!
//! Imports run one way, down this order: `text` (plain-text helpers: numbers, labels),
//! `capture`, `onnx`, `pairing`, `signature`, `torch`, `inputs`, `compare`, `production`
//! (the session the user ships), `quantized`, `outcome`,
//! `report`, `cli`, `app`. A module imports only modules before it, and no two files of
//! one folder import each other round a cycle; `architecture` checks both on the source.

#[cfg(test)]
mod architecture;

pub mod app;
pub mod capture;
pub mod cli;
pub mod compare;
pub mod inputs;
pub mod onnx;
pub mod outcome;
pub mod pairing;
pub mod production;
pub mod quantized;
pub mod report;
pub mod signature;
pub mod text;
pub mod torch;
