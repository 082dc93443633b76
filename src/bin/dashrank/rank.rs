//! `dashrank rank`: the top-k candidates for each matrix, as a table or JSON.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use dashrank::{eval, CostModel};
use serde_json::json;

use crate::flags::RankArgs;
use crate::{load_model, pick_head, read_matrix};

pub fn run(args: &RankArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.candidates)
        .with_context(|| format!("reading candidates {}", args.candidates.display()))?;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    let model = load_model(&args.model)?;
    let head = pick_head(&model, args.model.head.as_deref())?;
    let set = model.prepare_candidates(&head, &lines)?;
    let info = model.info();
    let polarity = info.head(&head)?.polarity;
    let mut out = std::io::stdout().lock();
    let mut reports = Vec::new();
    for path in &args.matrix {
        let pattern = read_matrix(path)?;
        let started = Instant::now();
        let embedding = model
            .embed_matrix(&pattern)
            .with_context(|| format!("embedding matrix {}", path.display()))?;
        let embed_secs = started.elapsed().as_secs_f64();
        let mut scores = vec![0.0f32; set.len()];
        model.score_into(&embedding, &set, &mut scores)?;
        let ranked = model.top_k(&embedding, &set, args.top)?;
        // Quality against the measured runtimes given in the file, if any.
        let (predicted, measured): (Vec<f32>, Vec<f64>) = set
            .measured_ms()
            .iter()
            .zip(&scores)
            .filter_map(|(m, &s)| m.filter(|_| !s.is_nan()).map(|m| (s, m)))
            .unzip();
        let metrics = eval::ranking_metrics(&eval::oriented(&predicted, polarity), &measured, None);
        if args.json {
            reports.push(json!({
                "matrix": path.display().to_string(),
                "rows": pattern.nrows(), "cols": pattern.ncols(), "nnz": pattern.nnz(),
                "head": head,
                "embed_seconds": embed_secs,
                "top": ranked.iter().map(|r| json!({
                    "index": r.index, "score": r.score, "schedule": schedule_text(lines[r.index]),
                    "measured_ms": set.measured_ms()[r.index],
                })).collect::<Vec<_>>(),
                "invalid": set.errors().map(|(i, e)| json!({"index": i, "error": e.to_string()})).collect::<Vec<_>>(),
                "kendall_tau": metrics.kendall_tau, "spearman_rho": metrics.spearman_rho,
                "top1_ms": metrics.top1.map(|o| o.chosen_ms),
                "top5_best_ms": metrics.top5.map(|o| o.chosen_ms),
                "best_measured_ms": metrics.top1.map(|o| o.best_ms),
            }));
            continue;
        }
        writeln!(
            out,
            "matrix {}: {} x {}, {} nonzeros (embedded in {:.3} s)",
            path.display(),
            pattern.nrows(),
            pattern.ncols(),
            pattern.nnz(),
            embed_secs
        )?;
        writeln!(
            out,
            "model {} '{}', head {} ({}), backend {}; {} candidates, {} invalid",
            info.family,
            info.model_name,
            head,
            polarity,
            info.backend,
            set.len(),
            set.len() - set.valid_count()
        )?;
        writeln!(
            out,
            "{:>4}  {:>5}  {:>12}  {:>12}  schedule",
            "rank", "line", "score", "measured_ms"
        )?;
        for (r, item) in ranked.iter().enumerate() {
            let measured = set.measured_ms()[item.index]
                .map(|m| format!("{m:.3}"))
                .unwrap_or_else(|| "-".into());
            writeln!(
                out,
                "{:>4}  {:>5}  {:>12.5}  {:>12}  {}",
                r + 1,
                item.index + 1,
                item.score,
                measured,
                schedule_text(lines[item.index])
            )?;
        }
        for (i, e) in set.errors() {
            writeln!(out, "  skipped candidate {}: {e}", i + 1)?;
        }
        if let (Some(t1), Some(t5)) = (metrics.top1, metrics.top5) {
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
        if let (Some(t), Some(r)) = (metrics.kendall_tau, metrics.spearman_rho) {
            writeln!(
                out,
                "agreement with measured runtimes over {} candidates: Kendall tau {t:.3}, Spearman rho {r:.3}",
                measured.len()
            )?;
        }
        writeln!(out)?;
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&reports)?)?;
    }
    out.flush()?;
    Ok(())
}

/// A candidate line without its `= ms` suffix.
fn schedule_text(line: &str) -> &str {
    dashrank::schedule::split_measured(line).0.trim()
}
