//! Report sinks. Each writer turns the one `Outcome` into a format; adding a format is adding
//! one file here.
//!
//! Files are written to a temporary sibling and renamed into place, so an interrupted run
//! never leaves half a report for CI to read.

pub mod format;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod terminal;

use anyhow::{anyhow, Context, Result};
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically, or to stdout when `path` is `-`.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()?;
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(anyhow!(
            "cannot write {}: folder {} does not exist",
            path.display(),
            dir.display()
        ));
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| anyhow!("cannot write {}: not a file path", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("cannot write {}", path.display()))
}

pub use format::module_label;
