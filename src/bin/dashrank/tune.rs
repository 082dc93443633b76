//! `dashrank tune`: measure the top k of a toolchain's space and its default with a shell
//! command, keep the fastest. The measuring is the library's `workflow::MeasureCommand`.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use dashrank::schedule::space::MatrixShape;
use dashrank::workflow::{self, MeasureCommand, TuneReport};
use dashrank::CostModel;

use crate::flags::{FormatArg, TuneArgs};
use crate::rank::matrix_name;
use crate::space::resolve_space;
use crate::{load_model, read_matrix};

pub fn run(args: &TuneArgs) -> Result<()> {
    let max = MeasureCommand::MAX_TIMEOUT.as_secs();
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|t| !t.is_zero() && *t <= MeasureCommand::MAX_TIMEOUT);
    let Some(timeout) = timeout else {
        bail!(
            "--timeout {} must be a positive number of seconds, at most {max} (a week)",
            args.timeout
        );
    };
    if args.format == FormatArg::Taco {
        bail!("tune prints a table or JSON (--format table|json)");
    }
    let command = MeasureCommand::new(&args.measure_cmd, timeout)?;
    let model = load_model(&args.model)?;
    let (head, space) = resolve_space(
        &model,
        args.model.head.as_deref(),
        args.space,
        &args.space_args,
    )?;
    let pattern = read_matrix(&args.matrix)?;
    let name = matrix_name(&args.matrix);
    let matrix = model
        .embed_matrix(&pattern)
        .with_context(|| format!("embedding matrix {}", args.matrix.display()))?;
    let candidates = workflow::prepare(&model, Some(&head), &space, &MatrixShape::from(&pattern))?;
    let mut failures = Vec::new();
    let mut render_error = None;
    let tuned = model.tune(&matrix, &candidates, args.top, |i| {
        let config = candidates.config(i)?;
        let text = match config.render(&name) {
            Ok(text) => text,
            Err(e) => {
                render_error.get_or_insert(e);
                return None;
            }
        };
        let line = candidates.line(i).unwrap_or_default();
        match command.measure(i, &line, &text) {
            Ok(ms) => {
                eprintln!("candidate {i}: {ms:.4} ms");
                Some(ms)
            }
            Err(why) => {
                eprintln!("candidate {i}: failed, skipped: {why}");
                failures.push((i, why.to_string()));
                None
            }
        }
    })?;
    if let Some(e) = render_error {
        return Err(e.into());
    }
    let report = TuneReport::new(&name, &candidates, &tuned, &failures)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        FormatArg::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        _ => print_table(&mut out, &report)?,
    }
    out.flush()?;
    if report.best_index.is_none() {
        bail!(
            "every measurement failed (first: {})",
            failures.first().map_or("", |(_, why)| why.as_str())
        );
    }
    Ok(())
}

fn print_table(out: &mut impl Write, r: &TuneReport) -> Result<()> {
    writeln!(
        out,
        "matrix {}: space {} ({} candidates, {} ranked), head {}",
        r.matrix, r.space, r.candidates, r.ranked, r.head
    )?;
    writeln!(
        out,
        "{:>6}  {:>7}  {:>12}  candidate",
        "rank", "index", "ms"
    )?;
    for m in &r.measurements {
        let e = &m.ranked;
        let rank = e.rank.map_or_else(|| "-".to_owned(), |r| r.to_string());
        let ms =
            m.ms.map_or_else(|| "failed".to_owned(), |t| format!("{t:.4}"));
        let default = if e.is_default {
            " (toolchain default)"
        } else {
            ""
        };
        writeln!(
            out,
            "{rank:>6}  {:>7}  {ms:>12}  {}{default}",
            e.index, e.toolchain
        )?;
        if let Some(why) = &m.failure {
            writeln!(out, "{:>30}{why}", "")?;
        }
    }
    match (r.best_index, r.best_ms) {
        (Some(i), Some(ms)) => {
            write!(out, "fastest: candidate {i}, {ms:.4} ms")?;
            match (r.speedup_over_default, r.default_ms) {
                (Some(x), Some(d)) => writeln!(out, " ({x:.3}x the default's {d:.4} ms)")?,
                _ => writeln!(out, " (the default was not measured)")?,
            }
        }
        _ => writeln!(out, "no candidate could be measured")?,
    }
    Ok(())
}
