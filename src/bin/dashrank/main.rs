//! `dashrank` command-line tool: a thin shell over the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use dashrank::eval;
use dashrank::{Backend, CandidateStatus, CostModel, CsrPattern, LoadOptions, Model};

#[derive(Parser)]
#[command(
    name = "dashrank",
    version,
    about = "Rank sparse-kernel schedules with a learned cost model",
    after_help = "Examples:\n  dashrank rank --model models/waco-spmm --matrix m.csr --candidates schedules.txt --top 10\n  dashrank inspect --model models/waco-spmm"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Tract,
    Onnxruntime,
}

#[derive(clap::Args)]
struct ModelArgs {
    /// Bundle directory (see docs/bundle-format.md).
    #[arg(long)]
    model: PathBuf,
    /// Engine for the dense ONNX graphs.
    #[arg(long, value_enum, default_value = "tract")]
    backend: BackendArg,
    /// libonnxruntime shared library (required with --backend onnxruntime).
    #[arg(long)]
    ort_lib: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Rank candidate schedules for one or more matrices.
    Rank {
        #[command(flatten)]
        model: ModelArgs,
        /// Matrix files (.csr WACO binary or .mtx Matrix Market).
        #[arg(long, required = true, num_args = 1..)]
        matrix: Vec<PathBuf>,
        /// File of candidate schedules, one per line (an optional `= ms` suffix is shown as
        /// the measured runtime).
        #[arg(long)]
        candidates: PathBuf,
        /// Head to use (default: the model's only head).
        #[arg(long)]
        head: Option<String>,
        /// How many candidates to print.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a model's metadata, heads, schemas and dimensions.
    Inspect {
        #[command(flatten)]
        model: ModelArgs,
    },
}

fn load_model(args: &ModelArgs) -> Result<Model> {
    let backend = match args.backend {
        BackendArg::Tract => Backend::Tract,
        BackendArg::Onnxruntime => Backend::OnnxRuntime {
            library: args
                .ort_lib
                .clone()
                .context("--backend onnxruntime needs --ort-lib PATH (libonnxruntime.so)")?,
        },
    };
    let options = LoadOptions {
        backend,
        threads: args.threads,
        ..LoadOptions::default()
    };
    Model::load(&args.model, &options)
        .with_context(|| format!("loading model {}", args.model.display()))
}

fn read_matrix(path: &Path) -> Result<CsrPattern> {
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

fn pick_head(model: &Model, head: Option<&str>) -> Result<String> {
    let heads = &model.info().heads;
    match head {
        Some(h) => Ok(h.to_string()),
        None if heads.len() == 1 => Ok(heads[0].name.clone()),
        None => bail!(
            "the model has several heads; choose one with --head ({})",
            heads
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn rank(
    model_args: &ModelArgs,
    matrices: &[PathBuf],
    candidates: &Path,
    head: Option<&str>,
    top: usize,
    json: bool,
) -> Result<()> {
    let model = load_model(model_args)?;
    let head = pick_head(&model, head)?;
    let text = std::fs::read_to_string(candidates)
        .with_context(|| format!("reading candidates {}", candidates.display()))?;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    let set = model.prepare_candidates(&head, &lines)?;
    let info = model.info();
    let polarity = info
        .head(&head)
        .map(|h| h.polarity)
        .context("head vanished")?;
    let mut reports = Vec::new();
    for path in matrices {
        let pattern = read_matrix(path)?;
        let started = Instant::now();
        let embedding = model.embed_matrix(&pattern)?;
        let embed_secs = started.elapsed().as_secs_f64();
        let mut scores = vec![0.0f32; set.len()];
        model.score_into(&embedding, &set, &mut scores)?;
        let ranked = model.top_k(&embedding, &set, top)?;
        // Quality against the measured runtimes given in the file, if any.
        let measured: Vec<(f64, f64)> = set
            .measured_ms()
            .iter()
            .zip(&scores)
            .filter_map(|(m, &s)| m.filter(|_| !s.is_nan()).map(|m| (s, m)))
            .collect();
        let oriented: Vec<f64> = eval::oriented(
            &measured.iter().map(|p| p.0 as f32).collect::<Vec<_>>(),
            polarity,
        );
        let ms: Vec<f64> = measured.iter().map(|p| p.1).collect();
        let tau = eval::kendall_tau_b(&oriented, &ms);
        let rho = eval::spearman_rho(&oriented, &ms);
        let top1 = eval::top_k_outcome(&oriented, &ms, 1);
        let top5 = eval::top_k_outcome(&oriented, &ms, 5);
        if json {
            reports.push(serde_json::json!({
                "matrix": path.display().to_string(),
                "rows": pattern.nrows(), "cols": pattern.ncols(), "nnz": pattern.nnz(),
                "embed_seconds": embed_secs,
                "top": ranked.iter().map(|r| serde_json::json!({
                    "index": r.index, "score": r.score, "schedule": lines[r.index],
                    "measured_ms": set.measured_ms()[r.index],
                })).collect::<Vec<_>>(),
                "kendall_tau": tau, "spearman_rho": rho,
                "top1_ms": top1.map(|o| o.chosen_ms), "top5_best_ms": top5.map(|o| o.chosen_ms),
                "best_measured_ms": top1.map(|o| o.best_ms),
            }));
            continue;
        }
        println!(
            "matrix {}: {} x {}, {} nonzeros (embedded in {:.3} s)",
            path.display(),
            pattern.nrows(),
            pattern.ncols(),
            pattern.nnz(),
            embed_secs
        );
        println!(
            "model {} '{}', head {} ({}), backend {}; {} candidates, {} invalid",
            info.family,
            info.model_name,
            head,
            polarity,
            info.backend,
            set.len(),
            set.len() - set.valid_count()
        );
        println!(
            "{:>4}  {:>5}  {:>12}  {:>12}  schedule",
            "rank", "line", "score", "measured_ms"
        );
        for (r, item) in ranked.iter().enumerate() {
            let measured = set.measured_ms()[item.index]
                .map(|m| format!("{m:.3}"))
                .unwrap_or_else(|| "-".into());
            let schedule = lines[item.index].split('=').next().unwrap_or("").trim();
            println!(
                "{:>4}  {:>5}  {:>12.5}  {:>12}  {}",
                r + 1,
                item.index + 1,
                item.score,
                measured,
                schedule
            );
        }
        for (i, status) in set.statuses().iter().enumerate() {
            if let CandidateStatus::Invalid(e) = status {
                println!("  skipped line {}: {e}", i + 1);
            }
        }
        if let (Some(t1), Some(t5)) = (top1, top5) {
            println!(
                "measured: best {:.3} ms; model top-1 {:.3} ms ({:.2}x best); best of top-5 {:.3} ms ({:.2}x best)",
                t1.best_ms,
                t1.chosen_ms,
                t1.chosen_ms / t1.best_ms,
                t5.chosen_ms,
                t5.chosen_ms / t5.best_ms
            );
        }
        if let (Some(t), Some(r)) = (tau, rho) {
            println!(
                "agreement with measured runtimes over {} candidates: Kendall tau {t:.3}, Spearman rho {r:.3}",
                ms.len()
            );
        }
        println!();
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(())
}

fn inspect(args: &ModelArgs) -> Result<()> {
    let model = load_model(args)?;
    let info = model.info();
    println!("family:            {}", info.family);
    println!("model name:        {}", info.model_name);
    println!("format version:    {}", info.format_version);
    println!("backend:           {}", info.backend);
    println!("featurizer output: {}", info.featurizer_dim);
    println!("matrix embedding:  {}", info.matrix_embedding_dim);
    let n = &info.shape_normalization;
    println!("shape normalization ({}):", n.source);
    for ((f, m), s) in n.features.iter().zip(&n.mean).zip(&n.std) {
        println!("  {f:?}: mean {m}, std {s}");
    }
    println!("content hash:      {:016x}", info.content_hash);
    for h in &info.heads {
        println!(
            "head {}: kernel {}, target {}, {}, schema '{}' ({} columns), schedule embedding {}",
            h.name,
            h.kernel,
            h.target,
            h.polarity,
            h.schema_name,
            h.schedule_width,
            h.schedule_embedding_dim
        );
        if !h.score_meaning.is_empty() {
            println!("  score: {}", h.score_meaning);
        }
        println!("  schema: {}", model.schema(&h.name)?.to_json());
    }
    Ok(())
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Rank {
            model,
            matrix,
            candidates,
            head,
            top,
            json,
        } => rank(model, matrix, candidates, head.as_deref(), *top, *json),
        Command::Inspect { model } => inspect(model),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
