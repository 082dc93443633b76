//! Command-line flags (clap). Raw flags only: validation and model loading happen in the
//! subcommand modules.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const EXAMPLES: &str = "\
Examples:
  # the 10 best candidates for one matrix (table, or --format json)
  dashrank rank --model models/waco-spmm --matrix m.csr --candidates schedules.txt --top 10

  # TACO's whole SpMM space for a matrix: the top 5 and the TACO default as TACO commands
  dashrank rank --model models/waco-spmm --matrix m.mtx --space taco --top 5 --format taco

  # tune with stock TACO: the default, the model's 10 best programs, then their neighbours
  dashrank tune --model models/waco-spmm --matrix m.csr --space taco --measurer taco --budget 50

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
    /// Rank candidate schedules (a file of lines, or a toolchain's whole space with its
    /// default) for one or more matrices.
    Rank(RankArgs),
    /// Measure the default and the model's best candidates, go on from the fastest measured
    /// (a budgeted search), keep the fastest.
    Tune(TuneArgs),
    /// Evaluate a model against measured runtimes (rank correlation, top-k loss), for CI;
    /// `--shard I/N` evaluates one part and writes a partial report.
    Eval(EvalArgs),
    /// Merge the partial reports of `eval --shard 1/N … N/N` into the report of one run.
    Merge(MergeArgs),
    /// Print a model's metadata, heads, schemas and dimensions.
    Inspect(InspectArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// dashrank's own engine (pure Rust, every bundle the exporter writes).
    Native,
    /// tract (build feature `tract`).
    Tract,
    /// ONNX Runtime from --ort-lib (build feature `onnxruntime`).
    Onnxruntime,
}

#[derive(Args)]
pub struct ModelArgs {
    /// Bundle directory (see docs/bundle-format.md).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Engine for the dense ONNX graphs.
    #[arg(long, value_enum, default_value = "native")]
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

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpaceArg {
    /// TACO (CPU), WACO's SuperSchedule space.
    Taco,
    /// The SPADE accelerator.
    Spade,
    /// SparseTIR (GPU).
    Sparsetir,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KernelArg {
    Spmm,
    Sddmm,
    Spmv,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// A table.
    Table,
    /// JSON.
    Json,
    /// Each reported candidate in its toolchain's form: stock `taco` command lines, SPADE CSV
    /// rows, SparseTIR JSON (with --space only).
    #[value(alias = "toolchain")]
    Taco,
    /// Each reported TACO program in TACO's C++ API (with --space taco only).
    Cpp,
}

/// Which toolchain space, for which kernel.
#[derive(Args)]
pub struct SpaceArgs {
    /// Kernel of the space (default: the kernel of --head, or of the model's one head for the
    /// space).
    #[arg(long, value_enum)]
    pub kernel: Option<KernelArg>,
    /// SparseTIR feature size (dense columns of SpMM's B, SDDMM's reduction length).
    #[arg(long, value_name = "F", default_value_t = 128)]
    pub feat_size: u32,
    /// Cut a TACO space's split and chunk lists at N (e.g. 4: 7 776 SpMM schedules instead
    /// of WACO's 611 712).
    #[arg(long, value_name = "N")]
    pub max_split: Option<u32>,
}

#[derive(Args)]
#[command(after_help = "\
Candidates come from --candidates (a file of schedule lines; blank and # lines are skipped,
line numbers count every line of the file) or from --space (the toolchain's whole space for
each matrix, the toolchain's default always reported beside the top N).

Examples:
  dashrank rank --model models/waco-spmm \\
      --matrix ../shared/data/waco/matrices/Trec6_16x16_9.csr \\
      --candidates ../shared/data/waco/collected/SpMM/Trec6_16x16_9.txt --top 10 --format json
  dashrank rank --model models/waco-spmm --matrix m.mtx --space taco --format taco
  dashrank rank --model tests/data/fixtures/tiny-cognate --matrix m.mtx --space spade \\
      --kernel sddmm --format json")]
pub struct RankArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Matrix files (.csr WACO binary or .mtx Matrix Market).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    pub matrix: Vec<PathBuf>,
    /// File of candidate schedules, one per line (an optional `= ms` suffix is shown as the
    /// measured runtime).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "space",
        required_unless_present = "space"
    )]
    pub candidates: Option<PathBuf>,
    /// Rank this toolchain's whole space instead of a file of lines.
    #[arg(long, value_enum)]
    pub space: Option<SpaceArg>,
    #[command(flatten)]
    pub space_args: SpaceArgs,
    /// How many candidates to print.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: FormatArg,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

#[derive(Args)]
#[command(after_help = "\
Strategies: `search` (default) measures the toolchain default, --top seeds (the model's
best-ranked candidates, at most --seeds-per-family of one loop order), then rounds of the
neighbours of the fastest measured ones (a split doubled or halved, two adjacent loops swapped,
a format flag flipped, the chunk doubled or halved), ranked by the model, until --budget
measurements (the default's included) or --budget-time, the last --confirm + 1 of them a
confirmation round that measures the default and the --confirm fastest again and picks the
fastest of that round that beat the default by --margin in both of its measurements, else the
default (the best of many noisy times is partly luck); `top-k` measures the --top best, then
the default. Candidates whose TACO program a measured one already has are skipped
(--all-programs measures them), as are TACO layouts over the size limit.

Measurers: `--measurer taco` runs each program through stock TACO with dashrank-taco-measure
(build it: bash scripts/taco-tools.sh), checks it against a CSR reference and times it
interleaved with TACO's CSR. `--measure-cmd` runs a shell command once per candidate, with `{}`
replaced by the candidate in its toolchain's form as one quoted word (TACO: a `taco ...` command
line; SPADE: a CSV row; SparseTIR: a JSON object); the environment also has
DASHRANK_CANDIDATE, DASHRANK_LINE and DASHRANK_INDEX. It must print its runtime in milliseconds
(the last number on stdout) and exit 0; anything else, or a run past --timeout (its process
group is killed), is a failed measurement and is skipped. What the command leaves running in
its process group is killed when it exits; only the last 64 KiB of its stdout and stderr are
kept.

Examples:
  dashrank tune --model models/waco-spmm --matrix m.csr --space taco --measurer taco --budget 50
  dashrank tune --model models/waco-spmm --matrix m.csr --space taco --strategy top-k --top 5 \\
      --measure-cmd 'target/taco/dashrank-taco-measure --matrix m.csr --kernel spmm {}'")]
pub struct TuneArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Matrix file (.csr WACO binary or .mtx Matrix Market).
    #[arg(long, value_name = "FILE")]
    pub matrix: PathBuf,
    /// The toolchain whose space is tuned.
    #[arg(long, value_enum)]
    pub space: SpaceArg,
    #[command(flatten)]
    pub space_args: SpaceArgs,
    /// Shell command measuring one candidate; `{}` is replaced by the candidate.
    #[arg(long, value_name = "CMD", conflicts_with = "measurer")]
    pub measure_cmd: Option<String>,
    /// A built-in measurer: `taco` (stock TACO through dashrank-taco-measure).
    #[arg(long, value_enum, required_unless_present = "measure_cmd")]
    pub measurer: Option<MeasurerArg>,
    /// Path of dashrank-taco-measure (default: $DASHRANK_TACO_MEASURE, target/taco/, PATH).
    #[arg(long, value_name = "FILE")]
    pub taco_measure: Option<PathBuf>,
    /// How candidates are chosen.
    #[arg(long, value_enum, default_value = "search")]
    pub strategy: StrategyArg,
    /// The best-ranked candidates measured first (search: the seeds).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Search: the most seeds of one loop order (0: no limit, the --top best-ranked).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seeds_per_family: usize,
    /// Most measurements, the default's included.
    #[arg(long, default_value_t = 50)]
    pub budget: usize,
    /// Seconds after which no measurement starts.
    #[arg(long, value_name = "SECS")]
    pub budget_time: Option<f64>,
    /// The fastest candidates measured again, with the default, in a final confirmation round
    /// that makes the pick (default: 3 for search, 0 for top-k; 0: none).
    #[arg(long, value_name = "N")]
    pub confirm: Option<usize>,
    /// After a confirmation round, how much faster than the default (a fraction) a candidate
    /// must be in both of its measurements to be picked over it.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.02)]
    pub margin: f64,
    /// Measure candidates whose program a measured candidate already has.
    #[arg(long)]
    pub all_programs: bool,
    /// OpenMP threads of the TACO programs (default: every core).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Seconds one measuring run may take (at most a week).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub timeout: f64,
    /// --measurer taco: most timing rounds per candidate (each runs the candidate and TACO's
    /// CSR once).
    #[arg(long, default_value_t = 15)]
    pub repeats: u32,
    /// --measurer taco: seconds after which a candidate's rounds stop (at least 3 rounds).
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub measure_seconds: f64,
    /// --measurer taco: instances of each program's operands (and of TACO's CSR), each
    /// allocated anew, timed interleaved: where operands land moves some programs' times by a
    /// third, so one instance is one draw (1 to 16).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub instances: u32,
    /// --measurer taco: instances of the operands in the confirmation round, whose few
    /// measurements decide the pick (1 to 16; timed by a second measurer process when they
    /// differ from --instances). Several instances in a new process keep a program that one
    /// placement, in a process that has measured many, made look fast from being picked.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub confirm_instances: u32,
    /// Write every successful measurement as `<line> = <ms>` (WACO's collected format, which
    /// `dashrank eval` reads) to this file.
    #[arg(long, value_name = "FILE")]
    pub write_measured: Option<PathBuf>,
    /// Output format (table or json).
    #[arg(long, value_enum, default_value = "table")]
    pub format: FormatArg,
}

/// Built-in measurers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MeasurerArg {
    /// Stock TACO (dashrank-taco-measure).
    Taco,
}

/// Tuning strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// The default, --top seeds, then neighbours of the fastest.
    Search,
    /// The best --top, then the default.
    TopK,
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
    /// Directory of measured runtimes, one MATRIX.txt or MATRIX.csv per matrix.
    #[arg(long, value_name = "DIR")]
    pub measured: PathBuf,
    /// Directory holding MATRIX.csr or MATRIX.mtx for each measured file.
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
    /// Evaluate only shard I of N (1-based) and write a partial report with --json-out, for
    /// `dashrank merge`. Shards are balanced by work (nonzeros x measured lines), the same
    /// on every machine. `auto`: this Slurm array task's shard (SLURM_ARRAY_TASK_ID, _MIN,
    /// _COUNT).
    #[arg(long, value_name = "I/N|auto")]
    pub shard: Option<String>,
}

#[derive(Args)]
#[command(after_help = "\
Combines the partial reports of `dashrank eval --shard 1/N` ... `--shard N/N` (same model,
head, directories, default and thresholds) into the report one unsharded `dashrank eval`
writes, byte for byte. Thresholds are checked again on all matrices (exit 2 on failure).

Example:
  for i in 1 2 3; do
    dashrank eval --model models/waco-spmm --measured M --matrices X --shard $i/3 \\
        --json-out part-$i.json
  done
  dashrank merge part-*.json --json-out report.json")]
pub struct MergeArgs {
    /// Partial reports written by `dashrank eval --shard I/N --json-out`.
    #[arg(required = true, value_name = "PARTIAL")]
    pub partials: Vec<PathBuf>,
    /// Write the merged report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// Write one SVG plot per matrix into DIR.
    #[arg(long, value_name = "DIR")]
    pub svg_dir: Option<PathBuf>,
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
