//! Stage 1, arguments: the command line as the user typed it (this file: clap definitions,
//! parsing and validation only), the configuration file under it (`config_file`), and the
//! resolved configuration a run uses (`config`).
//!
//! Nothing here runs a model. `config.rs` turns these raw arguments, with the configuration
//! file (`config_file.rs`) underneath, into the resolved configuration a run uses.

pub mod config;
pub mod config_file;
pub mod production;
pub mod quantized;

use crate::inputs::{parse_shape, split_assignment};
use crate::report::{Format, FORMATS};
use clap::{Arg, ArgMatches, Args, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

const ABOUT: &str = "Find where ONNX Runtime first departs from PyTorch, layer by layer.";

const LONG_ABOUT: &str = "\
Find where ONNX Runtime first departs from PyTorch, layer by layer.

align-check runs the PyTorch model (the reference: TorchScript from torch.jit.trace/script, or \
a torch.export ExportedProgram saved as .pt2) and the ONNX model exported from the same network \
on identical inputs, captures every intermediate tensor on both sides, pairs them \
layer by layer (through BatchNorm fusion, decomposed ops and renamed nodes), and reports the \
first layer where the two disagree, by how much, and whether it passes the tolerance.

No change to the model is needed. Inputs are seeded random tensors shaped by the ONNX \
signature unless you give .npy/.npz files; a .pt2 reference given no inputs (and no --seed, \
--samples or --shape) runs on its own sample inputs, the ones it was exported with.";

const AFTER_HELP: &str = "\
Examples:
  align-check model.pt model.onnx
  align-check model.pt model.onnx --shape images=1x3x640x640 --json report.json
  align-check model.pt model.onnx --inputs sample.npz --tolerance 'head.*=1e-3'
  align-check model.pt2 model.onnx
  align-check inspect model.onnx
  align-check summary reports/ --markdown summary.md --junit summary.xml --html index.html

Exit codes:
  0  every gated check passed
  1  a gate failed: a layer or output beyond tolerance, or coverage under --min-coverage
  2  align-check could not do its job (bad arguments, unreadable or mismatched models, I/O)";

#[derive(Debug, Parser)]
#[command(
    name = "align-check",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub check: CheckArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Say what a model file is (TorchScript and its format version, training mode; ONNX IR
    /// version, opsets, producer, exporter, external data), then list every value align-check
    /// can capture from it: execution index, module path and class, op, dtype, shape and, for
    /// TorchScript, the source line. Run this first when pairing surprises you.
    // Boxed: its input options make it several times larger than the other commands.
    Inspect(Box<InspectArgs>),

    /// Merge the JSON reports of many runs (a CI matrix: one job per model) into one Markdown
    /// job summary, one JUnit file and one HTML index, a row per model: verdict and failed
    /// gates, first divergence, worst layer, coverage, time, and a link to its HTML report
    /// (REPORT.html next to REPORT.json) or else its JSON. Exit 1 when any report failed
    #[command(
        long_about = SUMMARY_ABOUT,
        after_help = SUMMARY_AFTER_HELP
    )]
    Summary(SummaryArgs),
}

const SUMMARY_ABOUT: &str = "\
Merge the JSON reports of many runs into one overview, a row per model.

A repository with many models runs align-check once per model (a CI matrix job each, with \
--json and --html), then this once over all the reports: one Markdown job summary, one JUnit \
file and one HTML index, a row per model (its two files, verdict and failed gates, first \
divergence, worst layer, coverage, time, a link to its HTML report when REPORT.html lies \
next to REPORT.json, else to the JSON). With no output flag the Markdown goes to stdout.

Reports are read through the documented JSON contract: a file that is not an align-check \
JSON report, or one written by a newer align-check (a higher schema_version), stops the \
summary with one line naming it. In a folder, JSON files without a schema_version (a repro \
bundle's repro.json, a Model Explorer overlay) are skipped and counted; anything else must be \
a readable report.";

const SUMMARY_AFTER_HELP: &str = "\
Examples:
  align-check summary reports/
  align-check summary reports/ --markdown \"$GITHUB_STEP_SUMMARY\" \\
      --junit summary.xml --html index.html
  align-check summary resnet.json vit.json --markdown -

Exit codes:
  0  every report passed
  1  at least one report failed
  2  a report could not be read, is not an align-check report, or has a newer schema";

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The PyTorch reference: TorchScript (torch.jit.trace or torch.jit.script, saved with
    /// torch.jit.save) or a torch.export program (.pt2, saved with torch.export.save)
    #[arg(value_name = "MODEL_PT")]
    pub model_pt: Option<PathBuf>,

    /// ONNX model exported from the same network (legacy or dynamo exporter)
    #[arg(value_name = "MODEL_ONNX")]
    pub model_onnx: Option<PathBuf>,

    /// Configuration file holding any of these options (see README, Configuration file).
    /// Default: align-check.toml in the working directory, when it exists. Flags given on
    /// the command line win over the file
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub inputs: InputArgs,

    #[command(flatten)]
    pub runtime: RuntimeArgs,

    #[command(flatten)]
    pub production: production::ProductionArgs,

    #[command(flatten)]
    pub quantized: quantized::QuantizedArgs,

    /// Absolute tolerance for every layer, replacing the dtype default. Scales with the
    /// tensor's magnitude once its largest |value| exceeds 1 (see README, Tolerances)
    #[arg(long, value_name = "ATOL", help_heading = "Tolerances")]
    pub atol: Option<f64>,

    /// Relative tolerance for every layer, replacing the dtype default
    #[arg(long, value_name = "RTOL", help_heading = "Tolerances")]
    pub rtol: Option<f64>,

    /// Per-layer tolerance: GLOB=ATOL[,RTOL], matched against the module path (layer4.*) or
    /// the ONNX node name (/head/*). Repeatable; the first match wins
    #[arg(
        long = "tolerance",
        value_name = "GLOB=ATOL[,RTOL]",
        help_heading = "Tolerances"
    )]
    pub tolerances: Vec<String>,

    /// Absolute tolerance of the graph outputs, replacing their default (float32: 1e-4, 10x a
    /// layer's). Outputs are judged in your terms: the rounding a deep network accumulates
    /// passes, an export bug a layer introduces fails at that layer anyway. Under the
    /// defaults, an output beyond them with no layer introducing error still passes within
    /// 16x of how far PyTorch's own float32 result is from float64 (measured by running the
    /// TorchScript module once more in float64); a tolerance you set here decides alone
    #[arg(long, value_name = "ATOL", help_heading = "Tolerances")]
    pub output_atol: Option<f64>,

    /// Relative tolerance of the graph outputs, replacing their default (float32: 1e-3)
    #[arg(long, value_name = "RTOL", help_heading = "Tolerances")]
    pub output_rtol: Option<f64>,

    /// Judge each graph output by its error relative to its range alone:
    /// max|onnx - torch| <= R * max|torch| (instead of element by element)
    #[arg(long, value_name = "R", help_heading = "Tolerances")]
    pub output_rel_to_range: Option<f64>,

    /// Fail layers whose values all lie below the absolute tolerance but whose error is large
    /// against their range (by default they pass with a warning in every report)
    #[arg(long, help_heading = "Tolerances")]
    pub strict_small: bool,

    /// Fail (exit 1) when fewer than this share of TorchScript layers were compared
    /// [default: 0.9]
    #[arg(long, value_name = "RATIO", help_heading = "Gate")]
    pub min_coverage: Option<f64>,

    /// Compare with a previous JSON report: fail when a layer's or output's error grew by more
    /// than --max-growth times, even if it is still under tolerance
    #[arg(long, value_name = "OLD.json", help_heading = "Gate")]
    pub baseline: Option<PathBuf>,

    /// Largest allowed growth of a layer's error relative to the baseline (errors below 1e-7
    /// of the tensor's range count as 1e-7: rounding noise is not a regression)
    #[arg(long, value_name = "FACTOR", help_heading = "Gate")]
    pub max_growth: Option<f64>,

    /// Write this run's JSON report to the --baseline path, making it the new baseline
    /// (creates it when missing)
    #[arg(long, help_heading = "Gate")]
    pub update_baseline: bool,

    /// Report, but always exit 0 when the check ran (exit 2 still means it could not run)
    #[arg(long, help_heading = "Gate")]
    pub exit_zero: bool,

    /// Compare even when a model was traced or exported in training mode (BatchNorm using
    /// batch statistics, active dropout), which is otherwise refused with the fix; the
    /// report then says so
    #[arg(long, help_heading = "Gate")]
    pub allow_training_mode: bool,

    /// Also measure each layer's error in isolation (its ONNX segment fed PyTorch's values)
    /// on a clean run. It runs anyway when a layer or output fails: a failing layer that
    /// passes in isolation only carries error from upstream, and the first divergence is the
    /// first layer that fails on its own
    #[arg(long, help_heading = "Diagnosis")]
    pub isolate: bool,

    /// Write a bundle that reproduces the first divergence without align-check into DIR:
    /// the smallest ONNX model that computes that layer from PyTorch's values, those values
    /// (inputs.npz), PyTorch's result (expected.npz), repro.py (numpy and onnxruntime only;
    /// exit 1 beyond tolerance) and a README with versions, to attach to a bug report
    #[arg(long, value_name = "DIR", help_heading = "Diagnosis")]
    pub repro: Option<PathBuf>,

    /// The layer --repro reproduces instead of the first divergence: its index in the
    /// report's layers, its module path (layer3.1.conv2) or its ONNX node name
    #[arg(
        long,
        value_name = "LAYER",
        requires = "repro",
        help_heading = "Diagnosis"
    )]
    pub repro_layer: Option<String>,

    /// One `--FORMAT PATH` flag per file format of `report::FORMATS`.
    #[command(flatten)]
    pub reports: ReportArgs,

    /// Show every layer in the terminal table, not only those around the first divergence
    /// and the worst ones
    #[arg(long, help_heading = "Reports")]
    pub all: bool,

    /// How many of the worst layers the terminal table shows besides the first divergence
    #[arg(long, value_name = "N", default_value_t = 10, help_heading = "Reports")]
    pub worst: usize,

    /// Print timings of each stage and pairing details
    #[arg(short, long, help_heading = "Reports")]
    pub verbose: bool,

    /// Print nothing on the terminal but errors (reports are still written)
    #[arg(short, long, help_heading = "Reports")]
    pub quiet: bool,
}

/// The report files asked for on the command line: `--json PATH`, `--html PATH` and a flag
/// for every other format in `report::FORMATS`, which also gives each flag its help. A new
/// format gets its flag here without a line of its own.
#[derive(Debug, Clone, Default)]
pub struct ReportArgs {
    /// Each format given, with its path, in the order of `FORMATS`.
    pub paths: Vec<(&'static Format, PathBuf)>,
}

impl ReportArgs {
    /// The path given for `format`, if any.
    pub fn path(&self, format: &Format) -> Option<&PathBuf> {
        self.paths
            .iter()
            .find(|(f, _)| f.key == format.key)
            .map(|(_, p)| p)
    }
}

impl Args for ReportArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        FORMATS.iter().fold(cmd, |cmd, format| {
            cmd.arg(
                Arg::new(format.key)
                    .long(format.flag)
                    .value_name("PATH")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help(format.help)
                    .help_heading("Reports"),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ReportArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ReportArgs::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for format in FORMATS {
            if let Some(path) = matches.get_one::<PathBuf>(format.key) {
                self.paths.retain(|(f, _)| f.key != format.key);
                self.paths.push((format, path.clone()));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct InputArgs {
    /// Seed for the random inputs [default: 0]
    #[arg(long, help_heading = "Inputs")]
    pub seed: Option<u64>,

    /// Take input NAME from a .npy file. Repeatable
    #[arg(long = "input", value_name = "NAME=FILE.npy", value_parser = split_assignment, help_heading = "Inputs")]
    pub input_files: Vec<(String, String)>,

    /// Take inputs from the arrays of an .npz archive, matched by input name. A folder of
    /// .npz files checks every one of them (one sample each; the gate takes the worst case)
    #[arg(long = "inputs", value_name = "FILE.npz|DIR", help_heading = "Inputs")]
    pub inputs_archive: Option<PathBuf>,

    /// Check N random samples (seeds SEED..SEED+N-1); statistics are aggregated per layer and
    /// the gate uses the worst sample
    #[arg(long, value_name = "N", help_heading = "Inputs")]
    pub samples: Option<usize>,

    /// Concrete shape for input NAME, resolving its dynamic dimensions (1x3x224x224).
    /// Repeatable
    #[arg(long = "shape", value_name = "NAME=SHAPE", value_parser = parse_shape_arg, help_heading = "Inputs")]
    pub shapes: Vec<(String, Vec<usize>)>,

    /// Feed ONNX input ONNX_INPUT to TorchScript argument TORCH_ARG (an element of a dict or
    /// tuple argument as ARG.KEY, module state as self.NAME), when the two signatures differ.
    /// Arguments are otherwise matched by name, then by position. Repeatable
    #[arg(long = "map", value_name = "TORCH_ARG=ONNX_INPUT", value_parser = split_assignment, help_heading = "Inputs")]
    pub maps: Vec<(String, String)>,

    /// Value of a non-tensor TorchScript argument (int, float, bool, str); also given to the
    /// ONNX input it maps to. Repeatable
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = split_assignment, help_heading = "Inputs")]
    pub args: Vec<(String, String)>,

    /// TorchScript's own inputs, arrays named by forward argument, when the two models take
    /// their inputs in different conventions (one prepends a context window itself). The
    /// reports say that the inputs differed; such inputs are not compared
    #[arg(
        long = "torch-inputs",
        value_name = "FILE.npz",
        help_heading = "Inputs"
    )]
    pub torch_inputs: Option<PathBuf>,

    /// The ONNX model's inputs, as --inputs but for the ONNX side only (with --torch-inputs)
    #[arg(
        long = "onnx-inputs",
        value_name = "FILE.npz",
        conflicts_with = "inputs_archive",
        help_heading = "Inputs"
    )]
    pub onnx_inputs: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// Threads for each runtime (libtorch intra-op and ONNX Runtime intra-op); 0 = all cores
    /// [default: 0]
    #[arg(long, help_heading = "Runtimes")]
    pub threads: Option<usize>,

    /// ONNX Runtime shared library (libonnxruntime.so, version 1.31). Default: ORT_DYLIB_PATH,
    /// else the library of the environment scripts/bootstrap.sh installed
    #[arg(
        long,
        value_name = "LIB",
        env = "ORT_DYLIB_PATH",
        help_heading = "Runtimes"
    )]
    pub ort_lib: Option<PathBuf>,

    /// ONNX Runtime custom-op library to register (for ops from non-standard domains)
    #[arg(long, value_name = "LIB", help_heading = "Runtimes")]
    pub ort_custom_ops: Option<PathBuf>,

    /// TorchScript operator library to load before the model (for ops registered with
    /// TORCH_LIBRARY in a C++ extension). Without it, an operator of an installed Python
    /// package (torchvision::nms) is found in the active, the bootstrapped or python3's
    /// environment and its library loaded (-v says which)
    #[arg(long, value_name = "LIB", help_heading = "Runtimes")]
    pub torch_ops: Vec<PathBuf>,

    /// Keep the whole process under SIZE of resident memory (800M, 4G): both sides' captured
    /// tensors go to a temporary file and ONNX Runtime's values are fetched in several runs,
    /// each a segment of the graph fed from the one before (about one forward pass in all),
    /// with results identical to an unbounded run (half-precision models: up to the last bits,
    /// see docs/usage.md). Without it each runtime runs once, ONNX
    /// Runtime's values stay in memory and TorchScript's go to the temporary file (fastest).
    /// Must cover the two loaded models; a budget too small says what would fit
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, help_heading = "Runtimes")]
    pub max_memory: Option<u64>,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    crate::capture::memory::parse_size(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A TorchScript (.pt), torch.export (.pt2) or ONNX (.onnx) model
    pub model: PathBuf,

    #[command(flatten)]
    pub inputs: InputArgs,

    #[command(flatten)]
    pub runtime: RuntimeArgs,

    /// For a .pt or .pt2 model: the ONNX model whose signature shapes the inputs (otherwise give
    /// --shape for each input, float32 assumed; a .pt2 given neither runs on its own sample
    /// inputs)
    #[arg(long, value_name = "MODEL_ONNX")]
    pub onnx: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// JSON reports written by `align-check --json`, or folders: every *.json report below
    /// them, in path order
    #[arg(value_name = "REPORT.json|DIR", required = true)]
    pub reports: Vec<PathBuf>,

    /// Write the Markdown summary (a table for a job summary or pull-request comment) to
    /// PATH ('-' for stdout). The default when no output is given: stdout
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,

    /// Write JUnit XML, one test case per model, to PATH ('-' for stdout)
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// Write a self-contained HTML index, a row per model linking to its report, to PATH
    /// ('-' for stdout). Links are relative to PATH's folder
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

fn parse_shape_arg(s: &str) -> Result<(String, Vec<usize>), String> {
    let (name, shape) = split_assignment(s)?;
    Ok((name, parse_shape(&shape)?))
}
