//! `dashrank` command-line tool: a thin shell over the library.
//!
//! `main` → `run` → `anyhow::Result<ExitCode>`: errors print their cause chain (`{:#}`) and
//! exit 1, a failed `eval` threshold exits 2, and a closed stdout (broken pipe) is success.

mod command;
mod eval;
mod flags;
mod inspect;
mod process;
mod rank;
mod space;
mod svg;
mod taco;
mod tune;
mod write;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use dashrank::{Backend, CsrPattern, LoadOptions, Model};

use flags::{BackendArg, Cli, Command, ModelArgs};

/// Exit status of a run whose `eval` thresholds failed.
pub const EXIT_THRESHOLD: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; usage errors exit 1 like every other
            // error, so that 2 always means "a threshold failed".
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Rank(args) => rank::run(args).map(|()| ExitCode::SUCCESS),
        Command::Tune(args) => tune::run(args).map(|()| ExitCode::SUCCESS),
        Command::Eval(args) => eval::run(args),
        Command::Merge(args) => eval::merge(args),
        Command::Inspect(args) => inspect::run(args),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Loads the bundle named by the flags.
pub fn load_model(args: &ModelArgs) -> Result<Model> {
    load_model_with(args, false)
}

/// Loads the bundle named by the flags; `deterministic` pins the dense graphs to one thread
/// so scores are bit-identical on any load (see `LoadOptions::deterministic`).
pub fn load_model_with(args: &ModelArgs, deterministic: bool) -> Result<Model> {
    let backend = match args.backend {
        BackendArg::Native => Backend::Native,
        BackendArg::Tract => Backend::Tract,
        BackendArg::Onnxruntime => Backend::OnnxRuntime {
            library: args
                .ort_lib
                .clone()
                .context("--backend onnxruntime needs --ort-lib PATH (libonnxruntime.so)")?,
        },
    };
    if !args.model.is_dir() {
        bail!(
            "model directory {} does not exist (convert the WACO checkpoints with `bash scripts/setup.sh`)",
            args.model.display()
        );
    }
    let options = LoadOptions {
        backend,
        threads: args.threads,
        deterministic,
        allow_provenance_mismatch: args.allow_provenance_mismatch,
        ..LoadOptions::default()
    };
    let model = Model::load(&args.model, &options)
        .with_context(|| format!("loading model {}", args.model.display()))?;
    for warning in &model.info().integrity.provenance_overrides {
        eprintln!("warning: {warning} (accepted: --allow-provenance-mismatch)");
    }
    Ok(model)
}

/// Reads a matrix by extension: `.csr` (WACO binary) or `.mtx` (Matrix Market).
pub fn read_matrix(path: &Path) -> Result<CsrPattern> {
    let pattern = match path.extension().and_then(|e| e.to_str()) {
        Some("csr") => CsrPattern::read_waco_csr(path),
        Some("mtx") => CsrPattern::read_matrix_market(path),
        _ => bail!(
            "{}: unknown matrix format (expected .csr or .mtx)",
            path.display()
        ),
    };
    pattern.with_context(|| format!("reading matrix {}", path.display()))
}

/// The head named by `--head`, or the model's only head.
pub fn pick_head(model: &Model, head: Option<&str>) -> Result<String> {
    Ok(model.info().select_head(head, None, None)?.name.clone())
}
