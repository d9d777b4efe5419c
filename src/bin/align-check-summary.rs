//! `align-check-summary`: the commands that need no model runtime (`summary`, `--help`,
//! `--version`) in a binary that never loads libtorch, for the wheel (`python/align_check`).
//!
//! It parses the very command line `align-check` parses and runs `summary` through the same
//! library code; everything else is refused with one line (exit 2). It references nothing
//! of tch, so the linker (`--as-needed`, rustc's default) records no dependency on libtorch
//! and it starts in a `summary` job that has no torch installed. The wheel puts it on PATH
//! (scripts/build_wheel.sh) and its launcher runs it for those commands.

use align_check::cli::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn run() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Some(Command::Summary(args)) => align_check::app::summary::run(&args),
        _ => anyhow::bail!(
            "align-check-summary runs only `summary`, `--help` and `--version`; \
             checks and `inspect` need the full `align-check` (with torch installed)"
        ),
    }
}

fn main() -> ExitCode {
    // As main.rs: panics and errors are one line, exit 2.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("align-check: internal error: {info}");
    }));
    match std::panic::catch_unwind(run) {
        Ok(Ok(code)) => code,
        Ok(Err(err)) => {
            let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
            eprintln!("align-check: error: {}", chain.join(": "));
            ExitCode::from(2)
        }
        Err(_) => ExitCode::from(2),
    }
}
