//! The one shape both runtimes take in a check (Polygraphy's `BaseRunner`): a model loaded
//! once, then captured on each input sample into the store. The pipeline (`app::check`) runs
//! a list of these and never needs to know which runtime it holds; each runtime's glue (which
//! inputs it takes, in which dtype, how its errors read) lives with its implementation in
//! `app::runners`. It is the commands' abstraction over input samples, so it lives with
//! them: the capture types below know nothing of inputs.

use crate::capture::store::Keep;
use crate::capture::{Capture, Side};
use crate::inputs::samples::Sample;
use anyhow::Result;

pub trait Runner {
    /// Which side of the comparison this runtime is (TorchScript is the reference).
    fn side(&self) -> Side;

    /// Runs one sample (each runtime takes its own side of it) and returns every captured
    /// value, each kept as `keep` says.
    /// `group_bytes` bounds how much one run may fetch at once, for a runtime that can split
    /// its capture into several runs under a memory budget (`None`: everything in one run).
    fn capture(
        &mut self,
        sample: &Sample,
        keep: &Keep,
        group_bytes: Option<u64>,
    ) -> Result<Capture>;

    /// How many runs of the runtime the last capture took.
    fn runs_last_capture(&self) -> usize {
        1
    }
}
