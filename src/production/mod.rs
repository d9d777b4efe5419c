//! The production session: after the per-layer check (which runs ONNX Runtime with graph
//! optimisation disabled so that every value survives), run the model once more as the user
//! ships it (their optimisation level, threads and session config entries) and compare its
//! graph outputs with PyTorch's and with the unoptimised run's. When only the production
//! session differs, find the ONNX Runtime optimiser responsible by bisection and say how to
//! keep it out.
//!
//! `settings` is what the user ships, `references` the values of the check it is compared
//! against, `judge` the comparison, `transformers` and `bisect` the search for the pass,
//! `layers` the first paired layer the pass changes, `report` the outcome's record, sentence
//! and gate. The ONNX Runtime sessions themselves are built by `app::production`; everything
//! here works on plain values.

pub mod bisect;
pub mod judge;
pub mod layers;
pub mod references;
pub mod report;
/// The session settings live with ONNX Runtime's session setup, which reads them.
pub use crate::onnx::session_settings as settings;
pub mod transformers;
