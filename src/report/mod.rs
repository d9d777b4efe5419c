//! Stage 6, reports: every sink turns the one `Outcome` into a format, through one trait,
//! [`Report`], writing to any `io::Write` (criterion's `Report`, ripgrep's printers). The
//! file formats are listed once, in [`FORMATS`]: each module's `FORMAT` names its flag, its
//! `[reports]` key in align-check.toml and its writer, so adding a format is adding its file
//! and its name to the `formats!` line below; the command line, the configuration file and
//! the pipeline take it from there. The terminal table is a `Report` too, written to stdout
//! after the files. Shared formatting lives in `format`; the sentence of every unpaired
//! reason in `reasons`, the label of every tolerance rule in `tolerance_rules` (pairing and
//! comparison hand over values; only the reports write them out). `summary` is the one
//! writer that reads reports instead: many runs' JSON merged into one overview
//! (`align-check summary`).
//!
//! Files are written to a temporary sibling and renamed into place, so an interrupted run
//! never leaves half a report for CI to read.

pub mod findings;
pub mod format;
pub mod narrative;
pub mod reasons;
pub mod summary;
pub mod terminal;
pub mod tolerance_rules;

use crate::outcome::Outcome;
use anyhow::{anyhow, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A report sink: renders an outcome into a writer.
pub trait Report {
    /// Writes this report of `outcome` to `out`.
    fn write(&self, outcome: &Outcome, out: &mut dyn Write) -> Result<()>;

    /// Whether the report carries the time the other reports took (`timing.reports_s`), and
    /// so is written after them.
    fn includes_report_time(&self) -> bool {
        false
    }
}

/// A file format a run can be asked for.
pub struct Format {
    /// Its key in the `[reports]` table of align-check.toml (`model_explorer`).
    pub key: &'static str,
    /// Its command-line flag, without the dashes (`model-explorer`).
    pub flag: &'static str,
    /// The flag's line in `--help`.
    pub help: &'static str,
    pub writer: &'static dyn Report,
}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

/// Declares each format's module and lists its `FORMAT` in [`FORMATS`], in this order (the
/// order of the flags in `--help`).
macro_rules! formats {
    ($($module:ident),* $(,)?) => {
        $(pub mod $module;)*
        /// Every file format, in the order of their flags in `--help`.
        pub const FORMATS: &[&Format] = &[$(&$module::FORMAT),*];
    };
}

formats![json, html, markdown, junit, model_explorer];

/// The format whose `[reports]` key is `key`.
pub fn format_named(key: &str) -> Option<&'static Format> {
    FORMATS.iter().copied().find(|f| f.key == key)
}

/// Where a report goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    File(PathBuf),
}

impl Destination {
    /// `-` is stdout; anything else a file path.
    pub fn from_path(path: &Path) -> Destination {
        if path == Path::new("-") {
            Destination::Stdout
        } else {
            Destination::File(path.to_path_buf())
        }
    }
}

/// One report a run writes: which format and where.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: &'static Format,
    pub to: Destination,
}

/// Writes `report` of `outcome` to `to`: a file atomically, stdout in one piece (nothing is
/// printed when rendering fails).
pub fn emit(report: &dyn Report, outcome: &Outcome, to: &Destination) -> Result<()> {
    match to {
        Destination::Stdout => {
            let mut bytes = Vec::new();
            report.write(outcome, &mut bytes)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
            Ok(())
        }
        Destination::File(path) => write_atomically(path, |file| report.write(outcome, file)),
    }
}

/// Writes a file through `fill`: into a temporary sibling first, renamed into place once
/// complete, removed when anything fails.
fn write_atomically(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
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
    let written = (|| -> Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut file)?;
        file.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    written
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The bytes `report` writes for `outcome`, for callers that want the text itself.
pub fn render_to_vec(report: &dyn Report, outcome: &Outcome) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    report.write(outcome, &mut bytes)?;
    Ok(bytes)
}

pub use format::module_label;
