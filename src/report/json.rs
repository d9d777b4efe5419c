//! The JSON report: the `Outcome` as is. Its keys are the public contract CI gates on.

use super::{Format, Report};
use crate::outcome::Outcome;
use anyhow::Result;
use std::io::Write;

pub const FORMAT: Format = Format {
    key: "json",
    flag: "json",
    help: "Write the JSON report to PATH ('-' for stdout)",
    writer: &Json,
};

#[derive(Debug)]
pub struct Json;

impl Report for Json {
    fn write(&self, outcome: &Outcome, out: &mut dyn Write) -> Result<()> {
        serde_json::to_writer_pretty(&mut *out, outcome)?;
        out.write_all(b"\n")?;
        Ok(())
    }

    /// The JSON report carries every timing, that of the other reports included.
    fn includes_report_time(&self) -> bool {
        true
    }
}
