//! `dashrank tune`: the library's tuning loop (`dashrank::tune`) with a measurer: stock TACO
//! (`--measurer taco`, `crate::taco`) or a shell command (`--measure-cmd`,
//! `workflow::MeasureCommand`).

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use dashrank::program::taco::TacoOptions;
use dashrank::schedule::space::MatrixShape;
use dashrank::tune::{
    self, Budget, MeasureRequest, Measured, Measurer, Strategy, ToolchainOps, TuneOptions,
};
use dashrank::workflow::{self, TuneReport};

use crate::command::MeasureCommand;
use dashrank::{CostModel, Target};

use crate::flags::{FormatArg, StrategyArg, TuneArgs};
use crate::rank::matrix_name;
use crate::space::resolve_space;
use crate::taco::{find_measurer, TacoMeasureConfig, TacoMeasurer};
use crate::{load_model, read_matrix};

pub fn run(args: &TuneArgs) -> Result<()> {
    let options = tune_options(args)?;
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
    let mut measurer = measurer(args, &space, &options)?;
    let ops = ToolchainOps::new(&candidates, &name)
        .with_taco(options.taco)
        .with_pattern(&pattern);
    let tuned = tune::tune(
        &model,
        &matrix,
        &candidates,
        &ops,
        &options,
        measurer.as_mut(),
    )?;
    let report = TuneReport::new(&name, &candidates, &tuned, &ops)?;
    if let Some(path) = &args.write_measured {
        write_measured(path, &report)?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        FormatArg::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        _ => print_table(&mut out, &report)?,
    }
    out.flush()?;
    if report.best_index.is_none() {
        let first = report
            .measurements
            .iter()
            .find_map(|m| m.failure.as_deref());
        bail!("every measurement failed (first: {})", first.unwrap_or(""));
    }
    Ok(())
}

fn tune_options(args: &TuneArgs) -> Result<TuneOptions> {
    let seconds = |v: f64, flag: &str| -> Result<Duration> {
        let max = MeasureCommand::MAX_TIMEOUT;
        Duration::try_from_secs_f64(v)
            .ok()
            .filter(|d| !d.is_zero() && *d <= max)
            .with_context(|| {
                format!(
                    "{flag} {v} must be a positive number of seconds, at most {} (a week)",
                    max.as_secs()
                )
            })
    };
    seconds(args.timeout, "--timeout")?;
    if matches!(args.format, FormatArg::Taco | FormatArg::Cpp) {
        bail!("tune prints a table or JSON (--format table|json)");
    }
    if !(0.0..1.0).contains(&args.margin) {
        bail!("--margin {} must be a fraction in [0, 1)", args.margin);
    }
    for (flag, n) in [
        ("--instances", args.instances),
        ("--confirm-instances", args.confirm_instances),
    ] {
        if !(1..=16).contains(&n) {
            bail!("{flag} {n} must be 1 to 16");
        }
    }
    if args.budget == 0 {
        bail!("--budget must be at least 1 (the default is always measured)");
    }
    let (strategy, confirm) = match args.strategy {
        StrategyArg::Search => (Strategy::Search, TuneOptions::default().confirm),
        StrategyArg::TopK => (Strategy::TopK, 0),
    };
    Ok(TuneOptions {
        strategy,
        confirm: args.confirm.unwrap_or(confirm),
        margin: args.margin,
        k: args.top,
        seeds_per_family: args.seeds_per_family,
        budget: Budget {
            measurements: args.budget,
            time: args
                .budget_time
                .map(|t| seconds(t, "--budget-time"))
                .transpose()?,
        },
        distinct: !args.all_programs,
        taco: TacoOptions {
            threads: args.threads,
            ..TacoOptions::default()
        },
        ..TuneOptions::default()
    })
}

fn measurer(
    args: &TuneArgs,
    space: &dashrank::schedule::space::AnySpace,
    options: &TuneOptions,
) -> Result<Box<dyn Measurer>> {
    let timeout = Duration::from_secs_f64(args.timeout);
    if let Some(template) = &args.measure_cmd {
        return Ok(Box::new(CommandMeasurer(MeasureCommand::new(
            template, timeout,
        )?)));
    }
    if space.target() != Target::CpuTaco {
        bail!("--measurer taco measures TACO programs; use --space taco");
    }
    let config = TacoMeasureConfig {
        exe: find_measurer(args.taco_measure.as_deref())?,
        matrix: args.matrix.clone(),
        kernel: space.kernel(),
        threads: options.taco.threads,
        dense_extent: options.taco.dense_extent,
        timeout,
        repeats: args.repeats,
        seconds: args.measure_seconds,
        instances: args.instances,
        confirm_instances: args.confirm_instances,
    };
    Ok(Box::new(TacoMeasurer::start(config)?))
}

/// A shell command per candidate (`--measure-cmd`).
struct CommandMeasurer(MeasureCommand);

impl Measurer for CommandMeasurer {
    fn measure(&mut self, r: &MeasureRequest<'_>) -> std::result::Result<Measured, String> {
        let ms = self
            .0
            .measure(r.index, r.line, r.program)
            .map_err(|e| e.to_string())?;
        eprintln!("candidate {}: {ms:.4} ms", r.index);
        Ok(Measured::ms(ms))
    }
}

/// Successful measurements as WACO's collected lines `<line> = <ms>`, each candidate's first.
fn write_measured(path: &std::path::Path, r: &TuneReport) -> Result<()> {
    let mut text = String::new();
    for m in r.measurements.iter().filter(|m| !m.confirmation) {
        if let (Some(ms), false) = (m.ms, m.ranked.line.is_empty()) {
            text.push_str(&format!("{} = {ms}\n", m.ranked.line));
        }
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn print_table(out: &mut impl Write, r: &TuneReport) -> Result<()> {
    writeln!(
        out,
        "matrix {}: space {} ({} candidates, {} ranked), head {}; {} measured, {} skipped",
        r.matrix,
        r.space,
        r.candidates,
        r.ranked,
        r.head,
        r.measurements.len(),
        r.skipped.len()
    )?;
    writeln!(
        out,
        "{:>6}  {:>7}  {:>5}  {:>10}  {:>10}  candidate",
        "rank", "index", "round", "ms", "base ms"
    )?;
    for m in &r.measurements {
        let e = &m.ranked;
        let rank = e.rank.map_or_else(|| "-".to_owned(), |r| r.to_string());
        let ms =
            m.ms.map_or_else(|| "failed".to_owned(), |t| format!("{t:.4}"));
        let base = m
            .baseline_ms
            .map_or_else(|| "-".to_owned(), |t| format!("{t:.4}"));
        let default = match (e.is_default, m.confirmation) {
            (true, true) => " (toolchain default, confirmation)",
            (true, false) => " (toolchain default)",
            (false, true) => " (confirmation)",
            (false, false) => "",
        };
        writeln!(
            out,
            "{rank:>6}  {:>7}  {:>5}  {ms:>10}  {base:>10}  {}{default}",
            e.index, m.round, e.line
        )?;
        if let Some(why) = &m.failure {
            writeln!(out, "{:>44}{why}", "")?;
        }
    }
    match (r.best_index, r.best_ms) {
        (Some(i), Some(ms)) => {
            let best = r.measurements.iter().find(|m| m.ranked.index == i);
            writeln!(out, "fastest: candidate {i}, {ms:.4} ms")?;
            if let Some(x) = r.speedup_over_default {
                writeln!(out, "speedup over the toolchain default: {x:.3}x")?;
            }
            if let Some(b) = best {
                writeln!(out, "program: {}", b.ranked.toolchain)?;
            }
        }
        _ => writeln!(out, "no candidate could be measured")?,
    }
    Ok(())
}
