//! Entry point: parse the command line, run, and map the result to an exit code.
//!
//! Every error is printed as one line with its whole context and exits 2; gate failures are
//! not errors and exit 1 from inside the check. A panic is never an answer: one that slips
//! through is caught here and reported as an internal error, also with exit 2.

use align_check::cli::config::CheckConfig;
use align_check::cli::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Inspect(args)) => align_check::app::inspect::run(args),
        Some(Command::Summary(args)) => align_check::app::summary::run(args),
        None => align_check::app::check::run(&CheckConfig::from_args(&cli.check)?),
    }
}

fn main() -> ExitCode {
    // Keep panics to one line: a stack trace is not a message for the user.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("align-check: internal error: {info}");
    }));
    match std::panic::catch_unwind(run) {
        Ok(Ok(code)) => code,
        Ok(Err(err)) => {
            // A model refused for an operator whose library the user has installed runs
            // again with it (`app::op_libraries`).
            if let Some(again) = align_check::app::op_libraries::retry_with_library(&err) {
                return again.unwrap_or_else(|e| {
                    eprintln!("align-check: error: {e:#}");
                    ExitCode::from(2)
                });
            }
            let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
            eprintln!("align-check: error: {}", chain.join(": "));
            ExitCode::from(2)
        }
        Err(_) => ExitCode::from(2),
    }
}
