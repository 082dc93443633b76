//! `dashrank inspect`: model metadata, heads and schemas; `--check` runs the model once.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use dashrank::{CostModel, CsrPattern, Model};

use crate::flags::InspectArgs;
use crate::load_model;

pub fn run(args: &InspectArgs) -> Result<ExitCode> {
    let model = load_model(&args.model)?;
    let info = model.info();
    let mut out = std::io::stdout().lock();
    writeln!(out, "family:            {}", info.family)?;
    writeln!(out, "model name:        {}", info.model_name)?;
    writeln!(out, "format version:    {}", info.format_version)?;
    writeln!(
        out,
        "backend:           {} (SIMD {})",
        info.backend, info.simd
    )?;
    writeln!(out, "engines:")?;
    for e in &info.engines {
        match &e.note {
            Some(note) => writeln!(out, "  {}: {} ({note})", e.file, e.engine)?,
            None => writeln!(out, "  {}: {}", e.file, e.engine)?,
        }
    }
    writeln!(out, "featurizer output: {}", info.featurizer_dim)?;
    writeln!(out, "matrix embedding:  {}", info.matrix_embedding_dim)?;
    let n = &info.shape_normalization;
    writeln!(out, "shape normalization ({}):", n.source)?;
    for ((f, m), s) in n.features.iter().zip(&n.mean).zip(&n.std) {
        writeln!(out, "  {f:?}: mean {m}, std {s}")?;
    }
    writeln!(out, "content hash:      {:016x}", info.content_hash)?;
    print_integrity(&mut out, &info.integrity)?;
    let heads: Vec<_> = match &args.model.head {
        Some(name) => vec![crate::pick_head(&model, Some(name))?],
        None => info.heads.iter().map(|h| h.name.clone()).collect(),
    };
    for name in &heads {
        print_head(&mut out, &model, name)?;
    }
    if !args.check {
        return Ok(ExitCode::SUCCESS);
    }
    match check(&model, &heads) {
        Ok(lines) => {
            for line in lines {
                writeln!(out, "check: {line}")?;
            }
            writeln!(out, "check: OK")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            writeln!(out, "check: FAILED: {e:#}")?;
            out.flush()?;
            eprintln!("error: model check failed: {e:#}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// A head's line: its kernel, target, polarity, schema and widths, what its score means,
/// its native work, and its schema.
fn print_head(out: &mut impl Write, model: &Model, name: &str) -> Result<()> {
    let info = model.info();
    let h = info.head(name)?;
    writeln!(
        out,
        "head {}: kernel {}, target {}, {}, schema '{}' ({} columns), schedule embedding {}",
        h.name,
        h.kernel,
        h.target,
        h.polarity,
        h.schema_name,
        h.schedule_width,
        h.schedule_embedding_dim
    )?;
    if !h.score_meaning.is_empty() {
        writeln!(out, "  score: {}", h.score_meaning)?;
    }
    if let Some(c) = h.cost {
        writeln!(
            out,
            "  native work: {} MAC per candidate to prepare ({} floats stored), {} per matrix, {} per (matrix, candidate)",
            c.prepare_macs, c.stored_floats, c.matrix_macs, c.score_macs
        )?;
    }
    writeln!(out, "  schema: {}", model.schema(&h.name)?.to_json())?;
    Ok(())
}

/// The provenance hashes and the manifest (all verified at load).
fn print_integrity(out: &mut impl Write, integrity: &dashrank::BundleIntegrity) -> Result<()> {
    writeln!(out, "featurizer sha256: {}", integrity.featurizer_sha256)?;
    writeln!(out, "mapper sha256:     {}", integrity.mapper_sha256)?;
    writeln!(
        out,
        "manifest ({} files, sizes and SHA-256 verified at load):",
        integrity.files.len()
    )?;
    for e in &integrity.files {
        let head = e
            .head
            .as_deref()
            .map(|h| format!(", head {h}"))
            .unwrap_or_default();
        writeln!(
            out,
            "  {}  {:>10}  {} ({}{head})",
            e.sha256, e.bytes, e.name, e.role
        )?;
    }
    for warning in &integrity.provenance_overrides {
        writeln!(out, "provenance override: {warning}")?;
    }
    Ok(())
}

/// Embeds a small synthetic matrix and scores a few schedules built from each head's schema;
/// returns one line of findings per step.
fn check(model: &Model, heads: &[String]) -> Result<Vec<String>> {
    let pattern = synthetic_pattern()?;
    let embedding = model
        .embed_matrix(&pattern)
        .context("embedding a 64 x 64 synthetic matrix")?;
    let mut found = vec![format!(
        "embedded a {} x {} synthetic matrix ({} nonzeros)",
        pattern.nrows(),
        pattern.ncols(),
        pattern.nnz()
    )];
    for head in heads {
        let schema = model.schema(head)?;
        let lines = schema
            .example_lines(4)
            .with_context(|| format!("building schedules from the schema of head {head}"))?;
        let set = model
            .prepare_candidates(head, &lines)
            .with_context(|| format!("embedding schedules for head {head}"))?;
        if let Some((i, e)) = set.errors().next() {
            anyhow::bail!(
                "head {head}: synthetic schedule '{}' rejected: {e}",
                lines[i]
            );
        }
        let mut scores = vec![0.0f32; set.len()];
        model
            .score_into(&embedding, &set, &mut scores)
            .with_context(|| format!("scoring head {head}"))?;
        if let Some(bad) = scores.iter().find(|s| !s.is_finite()) {
            anyhow::bail!("head {head}: a synthetic schedule scored {bad} (not finite)");
        }
        let (lo, hi) = scores
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &s| {
                (lo.min(s), hi.max(s))
            });
        found.push(format!(
            "head {head}: {} schedules scored, scores in [{lo:.5}, {hi:.5}]",
            scores.len()
        ));
    }
    Ok(found)
}

/// A 64 × 64 banded pattern (diagonal and two off-diagonals, plus one dense row).
fn synthetic_pattern() -> Result<CsrPattern> {
    let n = 64usize;
    let mut row_ptr = vec![0usize];
    let mut col_idx = Vec::new();
    for r in 0..n {
        let cols: Vec<u32> = if r == n / 2 {
            (0..n as u32).collect()
        } else {
            [r.wrapping_sub(1), r, r + 1]
                .into_iter()
                .filter(|&c| c < n)
                .map(|c| c as u32)
                .collect()
        };
        col_idx.extend(cols);
        row_ptr.push(col_idx.len());
    }
    Ok(CsrPattern::new(n, n, row_ptr, col_idx)?)
}
