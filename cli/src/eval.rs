//! `dashrank eval` and `dashrank merge`: a model against measured runtimes, whole or one
//! shard at a time, and the exact merge of the shards' partial reports. The evaluation, the
//! reports and the merge are the library's (`dashrank::eval`); this file converts flags,
//! shows progress, prints the table and writes the files (each replaced whole, never left
//! half-written: `write::write_atomically`).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{bail, Context, Result};
use dashrank::eval::{
    find_measured_files, EvalReport, EvalSetup, Evaluator, FileOutcome, FileWork, MatrixEval,
    MeasuredFile, Metric, ModelSummary, PartialReport, Shard, SkippedFile, Thresholds,
};

use crate::flags::{EvalArgs, MergeArgs};
use crate::svg;
use crate::write::write_atomically;
use crate::{load_model_with, pick_head, EXIT_THRESHOLD};

pub fn run(args: &EvalArgs) -> Result<ExitCode> {
    let thresholds = Thresholds {
        min_tau: args.min_tau,
        min_rho: args.min_rho,
        max_top1_ape_percent: args.max_top1_ape,
    };
    thresholds.validate()?;
    let shard: Option<Shard> = args.shard.as_deref().map(parse_shard).transpose()?;
    let all = find_measured_files(&args.measured, &args.matrices)?;
    let total = all.len();
    let (files, shard_note) = match shard {
        Some(s) => select_shard(s, all)?,
        None => (all, String::new()),
    };
    // Bit-identical scores on any load and thread count, so that shards merge exactly into
    // what one unsharded run reports; matrices are evaluated in parallel instead.
    let model = load_model_with(&args.model, true)?;
    let head = pick_head(&model, args.model.head.as_deref())?;
    let evaluator = Evaluator::new(&model, &head, args.default.as_deref()).with_context(|| {
        format!(
            "--default '{}' is not a schedule of head {head}",
            args.default.as_deref().unwrap_or("")
        )
    })?;
    let (evals, skipped) = evaluate_files(&evaluator, &files, args)?;
    warn_invalid_lines(&evals, &head);
    if evals.is_empty() && shard.is_none() {
        let mut why = String::new();
        for s in &skipped {
            why += &format!("\n  {}: {}", s.measured_file, s.reason);
        }
        bail!(
            "nothing to evaluate in {}: every measured file was skipped:{why}",
            args.measured.display()
        );
    }
    let setup = EvalSetup {
        dashrank_version: env!("CARGO_PKG_VERSION").to_owned(),
        model: ModelSummary::new(&model, &args.model.model.display().to_string(), &head),
        measured_dir: args.measured.display().to_string(),
        matrices_dir: args.matrices.display().to_string(),
        default_schedule: args.default.clone(),
        thresholds,
    };
    let report = EvalReport::new(&setup, &evals, &skipped);
    let mut out = std::io::stdout().lock();
    if shard.is_some() {
        writeln!(out, "{shard_note}")?;
    }
    print_table(&mut out, &report)?;
    if let Some(dir) = &args.svg_dir {
        write_plots(&mut out, dir, &evals, &head)?;
    }
    if let Some(path) = &args.json_out {
        let text = match shard {
            Some(s) => PartialReport::new(s, total, setup, evals, skipped).to_json(),
            None => report.to_json(),
        };
        write_atomically(path, text.as_bytes())?;
        let what = if shard.is_some() { "partial " } else { "" };
        writeln!(out, "wrote {what}JSON report to {}", path.display())?;
    }
    out.flush()?;
    Ok(verdict(&report))
}

/// Evaluates `files` on the model's threads (progress on stderr when it is a terminal);
/// the evaluated files and the skipped ones, in the order of `files`.
fn evaluate_files(
    evaluator: &Evaluator<'_>,
    files: &[MeasuredFile],
    args: &EvalArgs,
) -> Result<(Vec<MatrixEval>, Vec<SkippedFile>)> {
    let progress = Progress::new(
        files.len(),
        !args.no_progress && std::io::stderr().is_terminal(),
    );
    let results = evaluator.evaluate_all(files, args.model.threads, &|f| progress.tick(&f.name))?;
    progress.finish();
    let (mut evals, mut skipped) = (Vec::new(), Vec::new());
    for (file, result) in files.iter().zip(results) {
        match result.with_context(|| format!("evaluating {}", file.name))? {
            FileOutcome::Evaluated(e) => evals.push(*e),
            FileOutcome::Skipped(s) => skipped.push(s),
        }
    }
    Ok((evals, skipped))
}

pub fn merge(args: &MergeArgs) -> Result<ExitCode> {
    let partials = args
        .partials
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading partial report {}", p.display()))?;
            PartialReport::from_json(&text).with_context(|| format!("reading {}", p.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let (report, evals) = EvalReport::merge(&partials)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "merged {} shards: {} matrices evaluated, {} skipped",
        partials.len(),
        report.matrices.len(),
        report.skipped.len()
    )?;
    print_table(&mut out, &report)?;
    if let Some(dir) = &args.svg_dir {
        write_plots(&mut out, dir, &evals, &report.model.head)?;
    }
    if let Some(path) = &args.json_out {
        write_atomically(path, report.to_json().as_bytes())?;
        writeln!(out, "wrote JSON report to {}", path.display())?;
    }
    out.flush()?;
    Ok(verdict(&report))
}

/// `--shard I/N`, or `auto`: the shard of this task of a Slurm job array.
fn parse_shard(text: &str) -> Result<Shard> {
    if text.trim() != "auto" {
        return Ok(text.parse()?);
    }
    let var = |name: &str| -> Result<Option<u64>> {
        match std::env::var(name) {
            Ok(v) => Ok(Some(v.trim().parse().with_context(|| {
                format!("--shard auto: {name}='{v}' is not a number")
            })?)),
            Err(_) => Ok(None),
        }
    };
    let task = var("SLURM_ARRAY_TASK_ID")?;
    let count = var("SLURM_ARRAY_TASK_COUNT")?;
    let min = var("SLURM_ARRAY_TASK_MIN")?;
    let (Some(task), Some(count), Some(min)) = (task, count, min) else {
        bail!(
            "--shard auto takes the shard from a Slurm job array, but SLURM_ARRAY_TASK_ID, \
             SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_MIN are not all set (submit with \
             `sbatch --array=1-N`, or give --shard I/N)"
        );
    };
    let step = var("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
    Shard::from_array_task(task, min, count, step).context("--shard auto")
}

/// The files of shard `s`, balanced by work (nonzeros × measured lines), and the line that
/// says which part of the run this is.
fn select_shard(s: Shard, all: Vec<MeasuredFile>) -> Result<(Vec<MeasuredFile>, String)> {
    let work = all
        .iter()
        .map(|f| FileWork::of(f).map(|w| w.units()))
        .collect::<dashrank::Result<Vec<u64>>>()
        .context("estimating the work of each measured file, to balance the shards")?;
    let total = all.len();
    let total_work: u64 = work.iter().sum();
    let mine: u64 = Shard::assign(&work, s.count())
        .iter()
        .zip(&work)
        .filter(|(shard, _)| **shard == s.index() - 1)
        .map(|(_, w)| w)
        .sum();
    let files = s.select(all, &work);
    let note = format!(
        "shard {s}: {} of {total} measured files, work {mine} of {total_work} (nonzeros x measured lines)",
        files.len()
    );
    Ok((files, note))
}

fn warn_invalid_lines(evals: &[MatrixEval], head: &str) {
    for r in evals.iter().filter(|r| r.invalid_lines > 0) {
        eprintln!(
            "warning: {}: {} of {} lines are not valid schedules for head {head} and were skipped (first: {})",
            r.measured_file,
            r.invalid_lines,
            r.lines,
            r.line_errors.first().map_or("", String::as_str)
        );
    }
}

/// Exit 0, or 2 after listing the failed thresholds.
fn verdict(report: &EvalReport) -> ExitCode {
    if report.passed {
        return ExitCode::SUCCESS;
    }
    for f in &report.failures {
        eprintln!("threshold failed: {f}");
    }
    eprintln!(
        "error: {} threshold check(s) failed on {} matrices",
        report.failures.len(),
        report.matrices.len()
    );
    ExitCode::from(EXIT_THRESHOLD)
}

fn print_table(out: &mut impl Write, report: &EvalReport) -> Result<()> {
    let m = &report.model;
    writeln!(
        out,
        "model {} ({} '{}'), head {}, backend {}",
        m.dir, m.family, m.name, m.head, m.backend
    )?;
    writeln!(
        out,
        "measured {} ({} matrices evaluated, {} skipped); default configuration: {}",
        report.measured_dir,
        report.matrices.len(),
        report.skipped.len(),
        report
            .default_schedule
            .as_deref()
            .unwrap_or("none given (speedups n/a)")
    )?;
    let width = report
        .matrices
        .iter()
        .map(|r| r.matrix.len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let mut header = format!("{:<width$} {:>5}", "matrix", "n");
    for k in Metric::ALL {
        header += &format!(" {:>11}", k.header());
    }
    writeln!(out, "{header}")?;
    for r in &report.matrices {
        let mut row = format!("{:<width$} {:>5}", r.matrix, r.candidates);
        for k in Metric::ALL {
            row += &format!(" {:>11}", k.cell(*r.metrics.get(k)));
        }
        writeln!(out, "{row}")?;
    }
    type Pick = fn(&dashrank::eval::Summary) -> Option<f64>;
    for (label, pick) in [
        ("mean", (|s| s.mean) as Pick),
        ("median", (|s| s.median) as Pick),
    ] {
        let mut row = format!("{label:<width$} {:>5}", "");
        for k in Metric::ALL {
            row += &format!(" {:>11}", k.cell(pick(report.aggregate.metrics.get(k))));
        }
        writeln!(out, "{row}")?;
    }
    for s in &report.skipped {
        writeln!(out, "skipped {}: {}", s.measured_file, s.reason)?;
    }
    Ok(())
}

fn write_plots(out: &mut impl Write, dir: &Path, evals: &[MatrixEval], head: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating SVG directory {}", dir.display()))?;
    for r in evals {
        let path = dir.join(format!("{}.svg", r.matrix));
        write_atomically(&path, plot(r, head).as_bytes())?;
    }
    writeln!(out, "wrote {} SVG plots to {}", evals.len(), dir.display())?;
    Ok(())
}

fn plot(r: &MatrixEval, head: &str) -> String {
    let m = &r.metrics;
    let title = format!("{} ({head})", r.matrix);
    let subtitle = format!(
        "{} candidates; tau {}, rho {}, top-1 APE {}%, top-5 APE {}%",
        m.candidates,
        Metric::KendallTau.cell(m.kendall_tau),
        Metric::SpearmanRho.cell(m.spearman_rho),
        Metric::Top1Ape.cell(Metric::Top1Ape.of(m)),
        Metric::Top5Ape.cell(Metric::Top5Ape.of(m)),
    );
    svg::render(&svg::Plot {
        title: &title,
        subtitle: &subtitle,
        points: &r.points,
        default_ms: m.default_ms,
    })
}

// === progress ===

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
struct Progress {
    total: usize,
    done: AtomicUsize,
    enabled: bool,
}

impl Progress {
    fn new(total: usize, enabled: bool) -> Self {
        let p = Self {
            total,
            done: AtomicUsize::new(0),
            enabled,
        };
        p.draw(0, "");
        p
    }

    fn tick(&self, name: &str) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        self.draw(done, name);
    }

    fn draw(&self, done: usize, name: &str) {
        if !self.enabled || self.total == 0 {
            return;
        }
        const WIDTH: usize = 30;
        let filled = done * WIDTH / self.total;
        let name: String = name.chars().take(40).collect();
        eprint!(
            "\r\x1b[2K[{}{}] {done}/{} matrices {name}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            self.total
        );
    }

    fn finish(&self) {
        if self.enabled && self.total > 0 {
            eprint!("\r\x1b[2K");
        }
    }
}
