//! `dashrank eval`: a model against measured runtimes, per matrix and in aggregate, with
//! thresholds for CI. The metrics are the library's (`dashrank::eval`); this file finds the
//! files, runs the matrices in parallel, and prints/writes the report.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{bail, Context, Result};
use dashrank::eval::{self, RankingMetrics};
use dashrank::schedule::{read_measured_file, ParsedLine, Schedule, Schema};
use dashrank::{CostModel, Model};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::flags::EvalArgs;
use crate::svg;
use crate::{load_model, pick_head, read_matrix, EXIT_THRESHOLD};

/// How many invalid-line messages are kept per matrix.
const MAX_LINE_ERRORS: usize = 5;

/// One measured file and the matrix it belongs to.
struct Job {
    name: String,
    measured: PathBuf,
    csv: bool,
    matrix: PathBuf,
}

/// A measured file that could not be evaluated.
struct Skipped {
    measured: PathBuf,
    reason: String,
}

/// The evaluation of one matrix.
struct MatrixReport {
    name: String,
    matrix: PathBuf,
    measured: PathBuf,
    shape: (usize, usize, usize),
    /// Schedule lines in the file (valid or not).
    lines: usize,
    invalid_lines: usize,
    line_errors: Vec<String>,
    unmeasured_lines: usize,
    metrics: RankingMetrics,
    /// `(predicted rank, measured ms)` per evaluated candidate.
    points: Vec<(usize, f64)>,
    top1_schedule: Option<String>,
}

pub fn run(args: &EvalArgs) -> Result<ExitCode> {
    for (flag, value) in [
        ("--min-tau", args.min_tau),
        ("--min-rho", args.min_rho),
        ("--max-top1-ape", args.max_top1_ape),
    ] {
        if value.is_some_and(|v| !v.is_finite()) {
            bail!("{flag} must be a finite number");
        }
    }
    let (jobs, mut skipped) = find_jobs(&args.measured, &args.matrices)?;
    let model = load_model(&args.model)?;
    let head = pick_head(&model, args.model.head.as_deref())?;
    let schema = model.schema(&head)?;
    let default = args
        .default
        .as_deref()
        .map(|line| {
            schema
                .parse_line(line)
                .map(|p| p.schedule)
                .with_context(|| format!("--default '{line}' is not a schedule of head {head}"))
        })
        .transpose()?;

    let progress = Progress::new(
        jobs.len(),
        !args.no_progress && std::io::stderr().is_terminal(),
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.model.threads.unwrap_or(0))
        .build()
        .context("starting worker threads")?;
    let results: Vec<Result<Option<MatrixReport>>> = pool.install(|| {
        jobs.par_iter()
            .map(|job| {
                let r = evaluate(&model, &head, schema, default.as_ref(), job);
                progress.tick(&job.name);
                r
            })
            .collect()
    });
    progress.finish();
    let mut reports = Vec::new();
    for (job, result) in jobs.iter().zip(results) {
        match result? {
            Some(report) => reports.push(report),
            None => skipped.push(Skipped {
                measured: job.measured.clone(),
                reason: "no schedule line has a measured runtime".into(),
            }),
        }
    }
    skipped.sort_by(|a, b| a.measured.cmp(&b.measured));
    for r in &reports {
        if r.invalid_lines > 0 {
            eprintln!(
                "warning: {}: {} of {} lines are not valid schedules for head {head} and were skipped (first: {})",
                r.measured.display(),
                r.invalid_lines,
                r.lines,
                r.line_errors.first().map_or("", String::as_str)
            );
        }
    }
    if reports.is_empty() {
        bail!(
            "no measured file in {} has a matrix in {} ({} skipped)",
            args.measured.display(),
            args.matrices.display(),
            skipped.len()
        );
    }
    let failures = check_thresholds(args, &reports);

    let mut out = std::io::stdout().lock();
    print_table(&mut out, &model, &head, args, &reports, &skipped)?;
    if let Some(dir) = &args.svg_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating SVG directory {}", dir.display()))?;
        for r in &reports {
            let path = dir.join(format!("{}.svg", r.name));
            std::fs::write(&path, plot(r, &head))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        writeln!(
            out,
            "wrote {} SVG plots to {}",
            reports.len(),
            dir.display()
        )?;
    }
    if let Some(path) = &args.json_out {
        let report = json_report(&model, &head, args, &reports, &skipped, &failures);
        let text = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        writeln!(out, "wrote JSON report to {}", path.display())?;
    }
    out.flush()?;
    if failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for f in &failures {
        eprintln!("threshold failed: {f}");
    }
    eprintln!(
        "error: {} threshold check(s) failed on {} matrices",
        failures.len(),
        reports.len()
    );
    Ok(ExitCode::from(EXIT_THRESHOLD))
}

/// Measured files (`*.txt`, `*.csv`) sorted by matrix name, each with its matrix; measured
/// files without a matrix are returned as skipped.
fn find_jobs(measured: &Path, matrices: &Path) -> Result<(Vec<Job>, Vec<Skipped>)> {
    if !matrices.is_dir() {
        bail!("matrices directory {} does not exist", matrices.display());
    }
    let entries = std::fs::read_dir(measured)
        .with_context(|| format!("reading measured-data directory {}", measured.display()))?;
    let mut by_name: BTreeMap<String, (PathBuf, bool)> = BTreeMap::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading measured-data directory {}", measured.display()))?
            .path();
        let csv = match path.extension().and_then(|e| e.to_str()) {
            Some("txt") => false,
            Some("csv") => true,
            _ => continue,
        };
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if let Some((other, _)) = by_name.get(&name) {
            bail!(
                "two measured files for matrix {name}: {} and {}",
                other.display(),
                path.display()
            );
        }
        by_name.insert(name, (path, csv));
    }
    if by_name.is_empty() {
        bail!(
            "no measured files (<matrix>.txt or <matrix>.csv) in {}",
            measured.display()
        );
    }
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    for (name, (path, csv)) in by_name {
        let matrix = ["csr", "mtx"]
            .iter()
            .map(|ext| matrices.join(format!("{name}.{ext}")))
            .find(|p| p.is_file());
        match matrix {
            Some(matrix) => jobs.push(Job {
                name,
                measured: path,
                csv,
                matrix,
            }),
            None => skipped.push(Skipped {
                reason: format!("no {name}.csr or {name}.mtx in {}", matrices.display()),
                measured: path,
            }),
        }
    }
    Ok((jobs, skipped))
}

/// Evaluates one matrix; `None` when no line has a measured runtime.
fn evaluate(
    model: &Model,
    head: &str,
    schema: &Schema,
    default: Option<&Schedule>,
    job: &Job,
) -> Result<Option<MatrixReport>> {
    let lines = read_lines(schema, job)?;
    let mut schedules = Vec::new();
    let mut measured = Vec::new();
    let (mut invalid_lines, mut unmeasured_lines) = (0, 0);
    let mut line_errors = Vec::new();
    for (_, line) in &lines {
        match line {
            Ok(ParsedLine {
                schedule,
                measured_ms: Some(ms),
            }) => {
                schedules.push(schedule);
                measured.push(*ms);
            }
            Ok(_) => unmeasured_lines += 1,
            Err(e) => {
                invalid_lines += 1;
                if line_errors.len() < MAX_LINE_ERRORS {
                    line_errors.push(e.to_string());
                }
            }
        }
    }
    if schedules.is_empty() {
        if invalid_lines > 0 {
            bail!(
                "{}: none of its {} lines is a valid schedule for head {head} (first error: {})",
                job.measured.display(),
                lines.len(),
                line_errors[0]
            );
        }
        return Ok(None);
    }
    let texts: Vec<String> = schedules.iter().map(|s| schema.format(s)).collect();
    let candidates = model
        .prepare_candidates(head, &texts)
        .with_context(|| format!("embedding the schedules of {}", job.measured.display()))?;
    let pattern = read_matrix(&job.matrix)?;
    let embedding = model
        .embed_matrix(&pattern)
        .with_context(|| format!("embedding matrix {}", job.matrix.display()))?;
    let mut scores = vec![0.0f32; candidates.len()];
    model
        .score_into(&embedding, &candidates, &mut scores)
        .with_context(|| format!("scoring the schedules of {}", job.measured.display()))?;
    let polarity = model.info().head(head)?.polarity;
    let predicted = eval::oriented(&scores, polarity);
    if predicted.iter().any(|s| s.is_nan()) {
        bail!(
            "{}: the model gave a NaN score (a schedule the schema accepted was rejected)",
            job.measured.display()
        );
    }
    let default_index = default.and_then(|d| schedules.iter().position(|s| *s == d));
    let metrics = eval::ranking_metrics(&predicted, &measured, default_index);
    let ranks = eval::predicted_ranks(&predicted);
    let top1_schedule = ranks.iter().position(|&r| r == 1).map(|i| texts[i].clone());
    Ok(Some(MatrixReport {
        name: job.name.clone(),
        matrix: job.matrix.clone(),
        measured: job.measured.clone(),
        shape: (pattern.nrows(), pattern.ncols(), pattern.nnz()),
        lines: lines.len(),
        invalid_lines,
        line_errors,
        unmeasured_lines,
        metrics,
        points: ranks.into_iter().zip(measured).collect(),
        top1_schedule,
    }))
}

fn read_lines(schema: &Schema, job: &Job) -> Result<Vec<(usize, dashrank::Result<ParsedLine>)>> {
    let lines = if job.csv {
        let file = File::open(&job.measured)
            .with_context(|| format!("opening {}", job.measured.display()))?;
        eval::read_measured_csv(BufReader::new(file), schema)
    } else {
        read_measured_file(&job.measured, schema)
    };
    lines.with_context(|| format!("reading measured data {}", job.measured.display()))
}

fn check_thresholds(args: &EvalArgs, reports: &[MatrixReport]) -> Vec<String> {
    let mut failures = Vec::new();
    for r in reports {
        let m = &r.metrics;
        let checks = [
            (
                "Kendall tau",
                "--min-tau",
                m.kendall_tau,
                args.min_tau,
                true,
            ),
            (
                "Spearman rho",
                "--min-rho",
                m.spearman_rho,
                args.min_rho,
                true,
            ),
            (
                "top-1 APE %",
                "--max-top1-ape",
                m.top1.map(|o| o.ape_percent),
                args.max_top1_ape,
                false,
            ),
        ];
        for (metric, flag, value, limit, at_least) in checks {
            let Some(limit) = limit else { continue };
            match value {
                None => failures.push(format!(
                    "{}: {metric} is undefined ({} measured candidates), {flag} {limit}",
                    r.name, m.candidates
                )),
                Some(v) if at_least && v < limit => {
                    failures.push(format!("{}: {metric} {v:.4} < {flag} {limit}", r.name))
                }
                Some(v) if !at_least && v > limit => {
                    failures.push(format!("{}: {metric} {v:.2} > {flag} {limit}", r.name))
                }
                Some(_) => {}
            }
        }
    }
    failures
}

// === report: table ===

/// The table's metric columns: header, JSON key, value of one matrix, cell format.
type Column = (
    &'static str,
    &'static str,
    fn(&RankingMetrics) -> Option<f64>,
    Format,
);

#[derive(Clone, Copy)]
enum Format {
    Corr,
    Percent,
    Speedup,
}

const COLUMNS: [Column; 7] = [
    ("tau", "kendall_tau", |m| m.kendall_tau, Format::Corr),
    ("rho", "spearman_rho", |m| m.spearman_rho, Format::Corr),
    ("pairs", "pair_accuracy", |m| m.pair_accuracy, Format::Corr),
    (
        "top1_ape%",
        "top1_ape_percent",
        |m| m.top1.map(|o| o.ape_percent),
        Format::Percent,
    ),
    (
        "top5_ape%",
        "top5_ape_percent",
        |m| m.top5.map(|o| o.ape_percent),
        Format::Percent,
    ),
    (
        "top1_vs_def",
        "top1_speedup_over_default",
        |m| m.top1_speedup_over_default,
        Format::Speedup,
    ),
    (
        "top5_vs_def",
        "top5_speedup_over_default",
        |m| m.top5_speedup_over_default,
        Format::Speedup,
    ),
];

fn cell(value: Option<f64>, format: Format) -> String {
    match (value, format) {
        (None, _) => "n/a".into(),
        (Some(v), Format::Corr) => format!("{v:.3}"),
        (Some(v), Format::Percent) => format!("{v:.2}"),
        (Some(v), Format::Speedup) => format!("{v:.3}x"),
    }
}

fn column_values(reports: &[MatrixReport], get: fn(&RankingMetrics) -> Option<f64>) -> Vec<f64> {
    reports.iter().filter_map(|r| get(&r.metrics)).collect()
}

fn print_table(
    out: &mut impl Write,
    model: &Model,
    head: &str,
    args: &EvalArgs,
    reports: &[MatrixReport],
    skipped: &[Skipped],
) -> Result<()> {
    let info = model.info();
    writeln!(
        out,
        "model {} ({} '{}'), head {}, backend {}",
        args.model.model.display(),
        info.family,
        info.model_name,
        head,
        info.backend
    )?;
    writeln!(
        out,
        "measured {} ({} matrices evaluated, {} skipped); default configuration: {}",
        args.measured.display(),
        reports.len(),
        skipped.len(),
        args.default
            .as_deref()
            .unwrap_or("none given (speedups n/a)")
    )?;
    let width = reports
        .iter()
        .map(|r| r.name.len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let mut header = format!("{:<width$} {:>5}", "matrix", "n");
    for (name, ..) in COLUMNS {
        header += &format!(" {name:>11}");
    }
    writeln!(out, "{header}")?;
    for r in reports {
        let mut row = format!("{:<width$} {:>5}", r.name, r.metrics.candidates);
        for (_, _, get, format) in COLUMNS {
            row += &format!(" {:>11}", cell(get(&r.metrics), format));
        }
        writeln!(out, "{row}")?;
    }
    for (label, summary) in [
        ("mean", eval::mean as fn(&[f64]) -> Option<f64>),
        ("median", eval::median),
    ] {
        let mut row = format!("{label:<width$} {:>5}", "");
        for (_, _, get, format) in COLUMNS {
            row += &format!(
                " {:>11}",
                cell(summary(&column_values(reports, get)), format)
            );
        }
        writeln!(out, "{row}")?;
    }
    for s in skipped {
        writeln!(out, "skipped {}: {}", s.measured.display(), s.reason)?;
    }
    Ok(())
}

// === report: JSON and SVG ===

/// Rounded to 6 decimals, so reports are stable and diffable.
fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

fn num(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |v| json!(round(v)))
}

fn json_report(
    model: &Model,
    head: &str,
    args: &EvalArgs,
    reports: &[MatrixReport],
    skipped: &[Skipped],
    failures: &[String],
) -> Value {
    let info = model.info();
    let matrices: Vec<Value> = reports
        .iter()
        .map(|r| {
            let m = &r.metrics;
            let mut v = json!({
                "matrix": r.name,
                "matrix_file": r.matrix.display().to_string(),
                "measured_file": r.measured.display().to_string(),
                "rows": r.shape.0, "cols": r.shape.1, "nnz": r.shape.2,
                "lines": r.lines,
                "invalid_lines": r.invalid_lines,
                "line_errors": r.line_errors,
                "unmeasured_lines": r.unmeasured_lines,
                "candidates": m.candidates,
                "best_measured_ms": num(m.top1.map(|o| o.best_ms)),
                "top1_ms": num(m.top1.map(|o| o.chosen_ms)),
                "top5_best_ms": num(m.top5.map(|o| o.chosen_ms)),
                "default_ms": num(m.default_ms),
                "top1_schedule": r.top1_schedule,
            });
            for (_, key, get, _) in COLUMNS {
                v[key] = num(get(m));
            }
            v
        })
        .collect();
    let mut aggregate = json!({ "matrices": reports.len() });
    for (_, key, get, _) in COLUMNS {
        let values = column_values(reports, get);
        aggregate[key] = json!({
            "mean": num(eval::mean(&values)),
            "median": num(eval::median(&values)),
            "matrices": values.len(),
        });
    }
    json!({
        "dashrank_version": env!("CARGO_PKG_VERSION"),
        "model": {
            "dir": args.model.model.display().to_string(),
            "family": info.family,
            "name": info.model_name,
            "content_hash": format!("{:016x}", info.content_hash),
            "backend": info.backend,
            "head": head,
        },
        "measured_dir": args.measured.display().to_string(),
        "matrices_dir": args.matrices.display().to_string(),
        "default_schedule": args.default,
        "matrices": matrices,
        "skipped": skipped.iter().map(|s| json!({
            "measured_file": s.measured.display().to_string(),
            "reason": s.reason,
        })).collect::<Vec<_>>(),
        "aggregate": aggregate,
        "thresholds": {
            "min_tau": args.min_tau,
            "min_rho": args.min_rho,
            "max_top1_ape_percent": args.max_top1_ape,
        },
        "failures": failures,
        "passed": failures.is_empty(),
    })
}

fn plot(r: &MatrixReport, head: &str) -> String {
    let m = &r.metrics;
    let title = format!("{} ({head})", r.name);
    let subtitle = format!(
        "{} candidates; tau {}, rho {}, top-1 APE {}%, top-5 APE {}%",
        m.candidates,
        cell(m.kendall_tau, Format::Corr),
        cell(m.spearman_rho, Format::Corr),
        cell(m.top1.map(|o| o.ape_percent), Format::Percent),
        cell(m.top5.map(|o| o.ape_percent), Format::Percent),
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
