//! Command-line flags (clap). Raw flags only: validation and model loading happen in the
//! subcommand modules.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const EXAMPLES: &str = "\
Examples:
  # the 10 best candidates for one matrix (table, or --json)
  dashrank rank --model models/waco-spmm --matrix m.csr --candidates schedules.txt --top 10

  # evaluate against measured runtimes; exit 2 if any matrix has tau < 0.5
  dashrank eval --model models/waco-spmm \\
      --measured ../shared/data/waco/collected/SpMM \\
      --matrices ../shared/data/waco/matrices \\
      --json-out report.json --svg-dir plots --min-tau 0.5

  # model metadata, heads and schemas; --check also runs it on a tiny synthetic matrix
  dashrank inspect --model models/waco-spmm --check

Exit status: 0 success, 1 error (bad input, unreadable model, ...), 2 a threshold of
`dashrank eval` failed.";

#[derive(Parser)]
#[command(
    name = "dashrank",
    version,
    about = "Rank sparse-kernel schedules with a learned cost model (WACO, DASH/COGNATE)",
    after_help = EXAMPLES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Rank candidate schedules for one or more matrices.
    Rank(RankArgs),
    /// Evaluate a model against measured runtimes (rank correlation, top-k loss), for CI.
    Eval(EvalArgs),
    /// Print a model's metadata, heads, schemas and dimensions.
    Inspect(InspectArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    Tract,
    Onnxruntime,
}

#[derive(Args)]
pub struct ModelArgs {
    /// Bundle directory (see docs/bundle-format.md).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Engine for the dense ONNX graphs.
    #[arg(long, value_enum, default_value = "tract")]
    pub backend: BackendArg,
    /// libonnxruntime shared library (required with --backend onnxruntime).
    #[arg(long, value_name = "FILE")]
    pub ort_lib: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Head to use (default: the model's only head).
    #[arg(long)]
    pub head: Option<String>,
    /// Load heads trained with another featurizer or mapper than the bundle's (experts only;
    /// each mismatch is printed as a warning). Corrupted files are refused either way.
    #[arg(long)]
    pub allow_provenance_mismatch: bool,
}

#[derive(Args)]
#[command(
    after_help = "Example:\n  dashrank rank --model models/waco-spmm \\\n      --matrix ../shared/data/waco/matrices/Trec6_16x16_9.csr \\\n      --candidates ../shared/data/waco/collected/SpMM/Trec6_16x16_9.txt --top 10 --json"
)]
pub struct RankArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Matrix files (.csr WACO binary or .mtx Matrix Market).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    pub matrix: Vec<PathBuf>,
    /// File of candidate schedules, one per line (an optional `= ms` suffix is shown as the
    /// measured runtime).
    #[arg(long, value_name = "FILE")]
    pub candidates: PathBuf,
    /// How many candidates to print.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
#[command(after_help = "\
Measured data: one file per matrix in --measured, named <matrix>.txt (WACO lines
`<schedule tokens> = <ms>`) or <matrix>.csv (`schedule,ms`, optional header). The matrix is
<matrix>.csr or <matrix>.mtx in --matrices; measured files without one are reported and
skipped. Thresholds are checked on every matrix; a failure exits with status 2.

Example (CI):
  dashrank eval --model models/waco-spmm --measured ../shared/data/waco/collected/SpMM \\
      --matrices ../shared/data/waco/matrices --json-out report.json --min-tau 0.5")]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Directory of measured runtimes, one <matrix>.txt or <matrix>.csv per matrix.
    #[arg(long, value_name = "DIR")]
    pub measured: PathBuf,
    /// Directory holding <matrix>.csr or <matrix>.mtx for each measured file.
    #[arg(long, value_name = "DIR")]
    pub matrices: PathBuf,
    /// The default configuration (a schedule line); top-1/top-5 speedups over it are reported
    /// for matrices where it was measured.
    #[arg(long, value_name = "SCHEDULE")]
    pub default: Option<String>,
    /// Write the full report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// Write one SVG plot per matrix (predicted rank against measured runtime) into DIR.
    #[arg(long, value_name = "DIR")]
    pub svg_dir: Option<PathBuf>,
    /// Fail (exit 2) if any matrix has Kendall tau below X.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub min_tau: Option<f64>,
    /// Fail (exit 2) if any matrix has Spearman rho below X.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub min_rho: Option<f64>,
    /// Fail (exit 2) if any matrix's top-1 pick is more than PCT percent slower than the best
    /// measured.
    #[arg(long, value_name = "PCT")]
    pub max_top1_ape: Option<f64>,
    /// Never show the progress bar (it is shown only when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Also run the model: embed a small synthetic matrix and score a few schedules built from
    /// each head's schema; prints OK or the error (exit 1).
    #[arg(long)]
    pub check: bool,
}
