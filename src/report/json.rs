//! The JSON report: the `Outcome` as is. Its keys are the public contract CI gates on.

use crate::outcome::Outcome;
use anyhow::Result;

pub fn render(outcome: &Outcome) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(outcome)?;
    bytes.push(b'\n');
    Ok(bytes)
}
