//! `align-check summary REPORT.json|DIR...`: finds the reports (files as given, folders
//! walked for every `*.json` below them), reads each through the JSON contract, writes the
//! Markdown, JUnit and HTML summaries asked for (Markdown to stdout when none is), says on
//! stderr how many reports it read, and exits 1 when any of them failed.
//!
//! Exit 2, with one line naming the file, for anything that keeps the summary from being
//! true: a file that cannot be read or is not a complete report, a newer schema, no report
//! at all, an output that would overwrite a report. The one thing passed over is JSON with
//! no `schema_version` found while walking a folder (CI artifacts hold repro bundles and
//! Model Explorer overlays); a file named on the command line must be a report.

use crate::cli::SummaryArgs;
use crate::report::summary::reader::{self, Read};
use crate::report::summary::{emit, Form, Summary};
use crate::report::Destination;
use anyhow::{anyhow, bail, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(args: &SummaryArgs) -> Result<ExitCode> {
    let outputs = outputs(args)?;
    let mut seen = HashSet::new();
    let mut reports = Vec::new();
    let mut skipped = Vec::new();
    for (path, named) in candidates(&args.reports)? {
        // The same file reached twice (named, and inside a folder given too) is one model.
        if !seen.insert(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())) {
            continue;
        }
        match reader::read(&path)? {
            Read::Report(r) => reports.push((path, *r)),
            Read::NotAReport if named => bail!(
                "{}: not an align-check JSON report (it has no schema_version)",
                path.display()
            ),
            Read::NotAReport => skipped.push(path),
        }
    }
    if reports.is_empty() {
        bail!(
            "no align-check JSON reports found in {}",
            args.reports
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for (_, to) in &outputs {
        if let Destination::File(out) = to {
            if seen.contains(&resolved(out)) {
                bail!(
                    "{}: refusing to overwrite a report being summarised with the summary",
                    out.display()
                );
            }
        }
    }

    let summary = Summary::new(reports);
    for (form, to) in &outputs {
        emit(&summary, *form, to)?;
    }
    eprintln!(
        "align-check summary: read {} report{}{}; {}",
        summary.rows.len(),
        if summary.rows.len() == 1 { "" } else { "s" },
        skipped_note(&skipped),
        summary.totals()
    );
    Ok(ExitCode::from(if summary.failed() > 0 { 1 } else { 0 }))
}

/// What to write where: the forms asked for, or the Markdown on stdout when none is.
fn outputs(args: &SummaryArgs) -> Result<Vec<(Form, Destination)>> {
    let asked: Vec<(Form, Destination)> = [
        (Form::Markdown, &args.markdown),
        (Form::Junit, &args.junit),
        (Form::Html, &args.html),
    ]
    .into_iter()
    .filter_map(|(form, path)| path.as_deref().map(|p| (form, Destination::from_path(p))))
    .collect();
    if asked.is_empty() {
        return Ok(vec![(Form::Markdown, Destination::Stdout)]);
    }
    if asked
        .iter()
        .filter(|(_, to)| *to == Destination::Stdout)
        .count()
        > 1
    {
        bail!("only one of --markdown, --junit and --html can write to stdout ('-')");
    }
    let files: Vec<PathBuf> = asked
        .iter()
        .filter_map(|(_, to)| match to {
            Destination::File(p) => Some(resolved(p)),
            Destination::Stdout => None,
        })
        .collect();
    if files.iter().collect::<HashSet<_>>().len() < files.len() {
        bail!("--markdown, --junit and --html must name different files");
    }
    Ok(asked)
}

/// Every file to read, with whether it was named on the command line (else found in a
/// folder), in the order given; a folder's files in path order.
fn candidates(args: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>> {
    let mut found = Vec::new();
    for arg in args {
        if arg.is_dir() {
            let mut files = Vec::new();
            walk(arg, &mut files)?;
            files.sort();
            found.extend(files.into_iter().map(|f| (f, false)));
        } else if arg.exists() {
            found.push((arg.clone(), true));
        } else {
            bail!("{}: no such file or folder", arg.display());
        }
    }
    Ok(found)
}

/// Collects the `*.json` files below `dir`. Links to folders are not followed, so a link
/// back up the tree cannot make the walk endless.
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow!("{}: cannot list the folder: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| anyhow!("{}: cannot list the folder: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        if kind.is_dir() {
            walk(&path, files)?;
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            files.push(path);
        }
    }
    Ok(())
}

/// `path` resolved as far as it exists: a file not written yet resolves through its folder.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// ` (skipped 2 JSON files without a schema_version: a.json, b.json)`, or nothing.
fn skipped_note(skipped: &[PathBuf]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    format!(
        " (skipped {} JSON file{} without a schema_version: {})",
        skipped.len(),
        if skipped.len() == 1 { "" } else { "s" },
        skipped
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}
