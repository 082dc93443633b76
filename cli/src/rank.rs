//! `dashrank rank`: the top candidates for each matrix, from a file of lines or from a
//! toolchain's whole space (default always reported), as a table, JSON, or toolchain text.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dashrank::program::taco::TacoProgram;
use dashrank::rank::top_k_indices;
use dashrank::schedule::space::MatrixShape;
use dashrank::tune::ToolchainOps;
use dashrank::workflow::{self, SpaceRankReport};
use dashrank::{eval, CostModel, Error, ErrorKind};
use serde_json::json;

use crate::flags::{FormatArg, RankArgs};
use crate::space::resolve_space;
use crate::{load_model, pick_head, read_matrix};

pub fn run(args: &RankArgs) -> Result<()> {
    let format = if args.json {
        FormatArg::Json
    } else {
        args.format
    };
    match (&args.candidates, args.space) {
        (Some(path), None) => run_lines(args, path, format),
        (None, Some(_)) => run_space(args, format),
        _ => bail!("give either --candidates FILE or --space"),
    }
}

/// The matrix name: the file stem.
pub fn matrix_name(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

// === --space ===

fn run_space(args: &RankArgs, format: FormatArg) -> Result<()> {
    let model = load_model(&args.model)?;
    let space_arg = args.space.context("--space missing")?;
    let (head, space) = resolve_space(
        &model,
        args.model.head.as_deref(),
        space_arg,
        &args.space_args,
    )?;
    // The schedule side is prepared once; each matrix only gets its statuses.
    let prepared = workflow::prepare_once(&model, Some(&head), &space)
        .with_context(|| format!("preparing space {}", space.entry().name))?;
    let mut reports = Vec::new();
    let mut out = std::io::stdout().lock();
    for path in &args.matrix {
        let pattern = read_matrix(path)?;
        let matrix = model
            .embed_matrix(&pattern)
            .with_context(|| format!("embedding matrix {}", path.display()))?;
        let shape = MatrixShape::from(&pattern);
        let candidates = model
            .space_candidates(&prepared, &shape)
            .with_context(|| format!("space {} for {}", space.entry().name, path.display()))?;
        let name = matrix_name(path);
        let ops = ToolchainOps::new(&candidates, &name).with_pattern(&pattern);
        let (top, refused) =
            workflow::top_k_runnable(&model, &matrix, &candidates, args.top, &ops)?;
        for r in &refused {
            eprintln!("{name}: candidate {} passed over: {}", r.index, r.reason);
        }
        let report = SpaceRankReport::new(&name, &candidates, &top)?;
        match format {
            FormatArg::Json => reports.push(report),
            FormatArg::Table => print_space_table(&mut out, &report)?,
            FormatArg::Taco => print_toolchain(&mut out, &report)?,
            FormatArg::Cpp => print_cpp(&mut out, &report)?,
        }
    }
    if format == FormatArg::Json {
        writeln!(out, "{}", serde_json::to_string_pretty(&reports)?)?;
    }
    out.flush()?;
    Ok(())
}

fn print_space_table(out: &mut impl Write, r: &SpaceRankReport) -> Result<()> {
    writeln!(
        out,
        "matrix {}: {} x {}, {} nonzeros; space {} ({} candidates, {} ranked), head {}",
        r.matrix, r.rows, r.cols, r.nnz, r.space, r.candidates, r.ranked, r.head
    )?;
    writeln!(out, "{:>6}  {:>7}  {:>12}  line", "rank", "index", "score")?;
    for e in &r.entries {
        let rank = e.rank.map_or_else(|| "-".to_owned(), |r| r.to_string());
        let score = e
            .score
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.5}"));
        let mark = if e.is_default {
            format!("  (toolchain default; {})", e.status)
        } else {
            String::new()
        };
        writeln!(
            out,
            "{rank:>6}  {:>7}  {score:>12}  {}{mark}",
            e.index, e.line
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// Each entry as the toolchain reads it; `#` lines say what it is.
fn print_toolchain(out: &mut impl Write, r: &SpaceRankReport) -> Result<()> {
    writeln!(
        out,
        "# {}: space {}, head {}; top {} of {} ranked, then the toolchain default",
        r.matrix,
        r.space,
        r.head,
        r.entries.len() - usize::from(r.default_position + 1 == r.entries.len()),
        r.ranked
    )?;
    for e in &r.entries {
        let rank = e.rank.map_or_else(|| "-".to_owned(), |r| r.to_string());
        let score = e
            .score
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.5}"));
        let default = if e.is_default {
            ", toolchain default"
        } else {
            ""
        };
        writeln!(
            out,
            "# rank {rank}, candidate {}, score {score}{default}",
            e.index
        )?;
        writeln!(out, "{}", e.toolchain)?;
    }
    Ok(())
}

/// Each TACO program in TACO's C++ API; `//` lines say what it is.
fn print_cpp(out: &mut impl Write, r: &SpaceRankReport) -> Result<()> {
    for e in &r.entries {
        let program = TacoProgram::parse_command_line(&e.toolchain).with_context(|| {
            format!("--format cpp prints TACO programs; {} is not one", r.space)
        })?;
        let rank = e.rank.map_or_else(|| "-".to_owned(), |r| r.to_string());
        let default = if e.is_default {
            ", toolchain default"
        } else {
            ""
        };
        writeln!(
            out,
            "// {}: rank {rank}, candidate {}{default}: {}",
            r.matrix, e.index, e.line
        )?;
        writeln!(out, "{}", program.cpp_snippet())?;
    }
    Ok(())
}

// === --candidates ===

fn run_lines(args: &RankArgs, path: &Path, format: FormatArg) -> Result<()> {
    if matches!(format, FormatArg::Taco | FormatArg::Cpp) {
        bail!("--format taco|cpp prints a space's candidates in their toolchain's form: use it with --space");
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading candidates {}", path.display()))?;
    let file = CandidateFile::read(path, &text)?;
    let model = load_model(&args.model)?;
    let head = pick_head(&model, args.model.head.as_deref())?;
    let set = model.prepare_candidates(&head, &file.lines)?;
    let problems: Vec<(usize, String)> = set
        .errors()
        .map(|(i, e)| (file.numbers[i], problem(e)))
        .collect();
    if set.valid_count() == 0 {
        bail!(
            "{}: none of its {} schedule lines is valid for head {head} (line {}: {})",
            path.display(),
            file.lines.len(),
            problems[0].0,
            problems[0].1
        );
    }
    let ctx = LinesContext {
        model: &model,
        head: &head,
        set: &set,
        file: &file,
        problems: &problems,
        top: args.top,
    };
    let mut out = std::io::stdout().lock();
    let mut reports = Vec::new();
    for matrix_path in &args.matrix {
        let ranked = ctx.rank(matrix_path)?;
        match format {
            FormatArg::Json => reports.push(ctx.json(matrix_path, &ranked)),
            _ => ctx.print(&mut out, matrix_path, &ranked)?,
        }
    }
    if format == FormatArg::Json {
        writeln!(out, "{}", serde_json::to_string_pretty(&reports)?)?;
    }
    out.flush()?;
    Ok(())
}

/// The schedule lines of a file with their 1-based line numbers: blank and comment lines are
/// not candidates but are counted, so numbers match what an editor shows.
struct CandidateFile<'a> {
    lines: Vec<&'a str>,
    numbers: Vec<usize>,
}

impl<'a> CandidateFile<'a> {
    fn read(path: &Path, text: &'a str) -> Result<Self> {
        let (numbers, lines): (Vec<usize>, Vec<&str>) = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l))
            .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .unzip();
        if lines.is_empty() {
            bail!(
                "{}: no schedule lines (blank lines and lines starting with # are skipped)",
                path.display()
            );
        }
        Ok(Self { lines, numbers })
    }
}

/// What ranking one file's lines needs, shared by every matrix.
struct LinesContext<'a> {
    model: &'a dashrank::Model,
    head: &'a str,
    set: &'a dashrank::CandidateSet,
    file: &'a CandidateFile<'a>,
    problems: &'a [(usize, String)],
    top: usize,
}

/// One matrix's ranking of the lines.
struct RankedLines {
    pattern: dashrank::CsrPattern,
    embed_secs: f64,
    scores: Vec<f32>,
    top: Vec<usize>,
    metrics: eval::RankingMetrics,
    measured_count: usize,
}

impl LinesContext<'_> {
    fn polarity(&self) -> Result<dashrank::model::ScorePolarity> {
        Ok(self.model.info().head(self.head)?.polarity)
    }

    /// Embeds the matrix, scores every line once and takes the top k from those scores, with
    /// the ranking quality against the measured runtimes given in the file, if any.
    fn rank(&self, matrix_path: &Path) -> Result<RankedLines> {
        let pattern = read_matrix(matrix_path)?;
        let started = Instant::now();
        let embedding = self
            .model
            .embed_matrix(&pattern)
            .with_context(|| format!("embedding matrix {}", matrix_path.display()))?;
        let embed_secs = started.elapsed().as_secs_f64();
        let mut scores = vec![0.0f32; self.set.len()];
        self.model.score_into(&embedding, self.set, &mut scores)?;
        let polarity = self.polarity()?;
        let top = top_k_indices(&scores, self.top, polarity);
        let (predicted, measured): (Vec<f32>, Vec<f64>) = self
            .set
            .measured_ms()
            .iter()
            .zip(&scores)
            .filter_map(|(m, &s)| m.filter(|_| !s.is_nan()).map(|m| (s, m)))
            .unzip();
        let metrics = eval::ranking_metrics(&eval::oriented(&predicted, polarity), &measured, None);
        Ok(RankedLines {
            pattern,
            embed_secs,
            scores,
            top,
            metrics,
            measured_count: measured.len(),
        })
    }

    fn json(&self, matrix_path: &Path, r: &RankedLines) -> serde_json::Value {
        let measured_ms = self.set.measured_ms();
        json!({
            "matrix": matrix_path.display().to_string(),
            "rows": r.pattern.nrows(), "cols": r.pattern.ncols(), "nnz": r.pattern.nnz(),
            "head": self.head,
            "embed_seconds": r.embed_secs,
            "top": r.top.iter().map(|&i| json!({
                "index": i, "line": self.file.numbers[i], "score": r.scores[i],
                "schedule": schedule_text(self.file.lines[i]),
                "measured_ms": measured_ms[i],
            })).collect::<Vec<_>>(),
            "invalid": self.problems.iter().map(|(line, e)| json!({"line": line, "error": e}))
                .collect::<Vec<_>>(),
            "kendall_tau": r.metrics.kendall_tau, "spearman_rho": r.metrics.spearman_rho,
            "top1_ms": r.metrics.top1.map(|o| o.chosen_ms),
            "top5_best_ms": r.metrics.top5.map(|o| o.chosen_ms),
            "best_measured_ms": r.metrics.top1.map(|o| o.best_ms),
        })
    }

    fn print(&self, out: &mut impl Write, matrix_path: &Path, r: &RankedLines) -> Result<()> {
        let info = self.model.info();
        let p = &r.pattern;
        writeln!(
            out,
            "matrix {}: {} x {}, {} nonzeros (embedded in {:.3} s)",
            matrix_path.display(),
            p.nrows(),
            p.ncols(),
            p.nnz(),
            r.embed_secs
        )?;
        writeln!(
            out,
            "model {} '{}', head {} ({}), backend {}; {} candidates, {} invalid",
            info.family,
            info.model_name,
            self.head,
            self.polarity()?,
            info.backend,
            self.set.len(),
            self.problems.len()
        )?;
        self.print_top(out, r)?;
        self.print_quality(out, r)?;
        writeln!(out)?;
        Ok(())
    }

    fn print_top(&self, out: &mut impl Write, r: &RankedLines) -> Result<()> {
        let measured_ms = self.set.measured_ms();
        writeln!(
            out,
            "{:>4}  {:>5}  {:>12}  {:>12}  schedule",
            "rank", "line", "score", "measured_ms"
        )?;
        for (rank, &i) in r.top.iter().enumerate() {
            let measured = measured_ms[i]
                .map(|m| format!("{m:.3}"))
                .unwrap_or_else(|| "-".into());
            let line = schedule_text(self.file.lines[i]);
            writeln!(
                out,
                "{:>4}  {:>5}  {:>12.5}  {measured:>12}  {line}",
                rank + 1,
                self.file.numbers[i],
                r.scores[i]
            )?;
        }
        for (line, e) in self.problems {
            writeln!(out, "  skipped line {line}: {e}")?;
        }
        Ok(())
    }

    fn print_quality(&self, out: &mut impl Write, r: &RankedLines) -> Result<()> {
        if let (Some(t1), Some(t5)) = (r.metrics.top1, r.metrics.top5) {
            writeln!(
                out,
                "measured: best {:.3} ms; model top-1 {:.3} ms ({:.2}x best); best of top-5 {:.3} ms ({:.2}x best)",
                t1.best_ms,
                t1.chosen_ms,
                t1.chosen_ms / t1.best_ms,
                t5.chosen_ms,
                t5.chosen_ms / t5.best_ms
            )?;
        }
        if let (Some(t), Some(rho)) = (r.metrics.kendall_tau, r.metrics.spearman_rho) {
            writeln!(
                out,
                "agreement with measured runtimes over {} candidates: Kendall tau {t:.3}, Spearman rho {rho:.3}",
                r.measured_count
            )?;
        }
        Ok(())
    }
}

/// What is wrong with a rejected line, without the batch position the library's message
/// starts with (the CLI numbers lines by their place in the file instead).
fn problem(e: &Error) -> String {
    match e.kind() {
        ErrorKind::Schedule {
            field,
            value,
            reason,
            ..
        } => {
            let mut text = String::new();
            if let Some(f) = field {
                text += &format!("field '{f}' ");
            }
            if let Some(v) = value {
                text += &format!("value '{v}' ");
            }
            if text.is_empty() {
                reason.clone()
            } else {
                format!("{}: {reason}", text.trim_end())
            }
        }
        _ => e.to_string(),
    }
}

/// A candidate line without its `= ms` suffix.
fn schedule_text(line: &str) -> &str {
    dashrank::schedule::split_measured(line).0.trim()
}
