//! The whole ranking workflow of the papers, as every face (C ABI, TVM module, CLI) runs it:
//! pick the head for a toolchain's space, enumerate the space for a matrix, rank it with the
//! toolchain's default always reported, render candidates in the toolchain's own form, and
//! tune by measuring the top `k` plus the default.
//!
//! ```text
//! select_head / head_for_space ─► prepare(model, head, AnySpace, shape) ─► SpaceCandidates<AnyConfig>
//!      top_k_runnable(_with) / Model::top_k_with_default ─► SpaceRankReport (lines + toolchain text)
//!      tune::tune(…, ToolchainOps, TuneOptions, measurer) ─► Tuned ─► TuneReport
//! ```
//!
//! A measurer is anything that implements [`crate::tune::Measurer`]: a closure here, the C
//! callback in the C ABI crate, a shell command and stock TACO in the CLI crate.
//!
//! The line form a head parses (native or COGNATE unified) is chosen from the head's schema
//! ([`LineForm::for_schema`]), so callers never pick it.
//!
//! # Example
//! ```
//! use dashrank::schedule::space::{AnySpace, MatrixShape, SpaceOptions};
//! use dashrank::workflow::{prepare, SpaceRankReport};
//! use dashrank::{CostModel, CsrPattern, LoadOptions, Model};
//! let model = Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default())?;
//! let pattern = CsrPattern::new(4, 4, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3])?;
//! let space = AnySpace::from_name("spade-sddmm", &SpaceOptions::default())?;
//! // No head named: the model's one spade/sddmm head; its schema parses unified lines.
//! let candidates = prepare(&model, None, &space, &MatrixShape::from(&pattern))?;
//! let matrix = model.embed_matrix(&pattern)?;
//! let top = model.top_k_with_default(&matrix, &candidates, 3)?;
//! let report = SpaceRankReport::new("diag4", &candidates, &top)?;
//! assert!(report.entries.iter().any(|e| e.is_default));
//! assert!(report.entries[0].toolchain.starts_with("diag4, ")); // a SPADE CSV row
//! # Ok::<(), dashrank::Error>(())
//! ```

mod report;

pub use report::{
    status_text, SkippedEntry, SpaceRankReport, SpaceRankedEntry, TuneEntry, TuneReport,
};

use crate::error::Result;
use crate::model::{HeadInfo, Model, ModelInfo};
use std::sync::Arc;

use crate::rank::{PreparedSpace, SpaceCandidates};
use crate::schedule::space::{AnyConfig, AnySpace, LineForm, MatrixShape};
use crate::vocab::{Kernel, Target};

/// The one head of `info` that matches every given criterion ([`ModelInfo::select_head`]).
///
/// # Errors
///
/// As [`ModelInfo::select_head`].
pub fn select_head<'a>(
    info: &'a ModelInfo,
    head: Option<&str>,
    target: Option<Target>,
    kernel: Option<Kernel>,
) -> Result<&'a HeadInfo> {
    info.select_head(head, target, kernel)
}

/// The head that ranks `space`: `head` if given (it must be for the space's target and
/// kernel), else the model's one head for them ([`select_head`]).
///
/// # Errors
///
/// As [`select_head`].
pub fn head_for_space<'a>(
    info: &'a ModelInfo,
    head: Option<&str>,
    space: &AnySpace,
) -> Result<&'a HeadInfo> {
    select_head(info, head, Some(space.target()), Some(space.kernel()))
}

/// Enumerates `space` for a matrix of this shape and prepares it for the head that ranks it
/// ([`head_for_space`]), in the line form that head's schema parses
/// ([`LineForm::for_schema`]): [`Model::prepare_space`] with the choices made.
///
/// # Errors
///
/// As [`head_for_space`] and [`LineForm::for_schema`]; an executor failure.
pub fn prepare(
    model: &Model,
    head: Option<&str>,
    space: &AnySpace,
    shape: &MatrixShape,
) -> Result<SpaceCandidates<AnyConfig>> {
    let (head, space) = for_head(model, head, space)?;
    model.prepare_space(&head, &space, shape)
}

/// The schedule side of `space` prepared once for the head that ranks it, in the line form
/// that head parses ([`Model::prepare_schedule_space`]); instantiate it for each matrix with
/// [`Model::space_candidates`], which is cheap. Use it to rank one space for many matrices.
///
/// # Errors
///
/// As [`prepare`].
///
/// # Example
/// ```
/// use dashrank::schedule::space::{AnySpace, MatrixShape, SpaceOptions};
/// use dashrank::{LoadOptions, Model};
/// let model = Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default())?;
/// let space = AnySpace::from_name("spade-spmm", &SpaceOptions::default())?;
/// let prepared = dashrank::workflow::prepare_once(&model, None, &space)?;
/// for cols in [500, 5000, 50_000] {
///     let cands = model.space_candidates(&prepared, &MatrixShape::new(100, cols, 1000))?;
///     assert!(cands.ranked_count() > 0);
/// }
/// # Ok::<(), dashrank::Error>(())
/// ```
pub fn prepare_once(
    model: &Model,
    head: Option<&str>,
    space: &AnySpace,
) -> Result<Arc<PreparedSpace<AnyConfig>>> {
    let (head, space) = for_head(model, head, space)?;
    model.prepare_schedule_space(&head, space)
}

/// [`Model::top_k_with_default`] without the candidates `ops` refuses for this matrix (TACO:
/// a layout over its size limit, [`ToolchainOps::with_pattern`](crate::tune::ToolchainOps::with_pattern)):
/// the `k` best that may run, then the default, and the refused ones met on the way (each with
/// its reason). Ranks stay the model's, so a refused candidate leaves a gap.
///
/// # Errors
///
/// As [`Model::top_k_with_default`].
pub fn top_k_runnable<C: crate::rank::SpaceConfig>(
    model: &Model,
    matrix: &crate::model::MatrixEmbedding,
    candidates: &SpaceCandidates<C>,
    k: usize,
    ops: &dyn crate::tune::CandidateOps,
) -> Result<(crate::rank::SpaceTopK, Vec<crate::tune::Skipped>)> {
    top_k_runnable_with(model, matrix, candidates, k, ops, false)
}

/// [`top_k_runnable`]; with `distinct`, a candidate whose program ([`CandidateOps::key`]:
/// for TACO, its rendered program) a better-ranked reported candidate already has is passed
/// over too, as [`TuneOptions::distinct`](crate::tune::TuneOptions::distinct) does when
/// tuning. The default is reported either way.
///
/// [`CandidateOps::key`]: crate::tune::CandidateOps::key
///
/// # Errors
///
/// As [`Model::top_k_with_default`].
pub fn top_k_runnable_with<C: crate::rank::SpaceConfig>(
    model: &Model,
    matrix: &crate::model::MatrixEmbedding,
    candidates: &SpaceCandidates<C>,
    k: usize,
    ops: &dyn crate::tune::CandidateOps,
    distinct: bool,
) -> Result<(crate::rank::SpaceTopK, Vec<crate::tune::Skipped>)> {
    let mut want = k;
    loop {
        let mut top = model.top_k_with_default(matrix, candidates, want)?;
        let (kept, passed) = pass_over(top.top(), k, ops, distinct);
        let exhausted = top.top_len < want;
        if kept.len() >= k || exhausted {
            let default = *top.default_entry();
            top.top_len = kept.len();
            top.entries = kept;
            top.default_position = match top.entries.iter().position(|e| e.is_default) {
                Some(p) => p,
                None => {
                    top.entries.push(default);
                    top.entries.len() - 1
                }
            };
            return Ok((top, passed));
        }
        want = want.saturating_mul(2).saturating_add(passed.len());
    }
}

/// The first `k` of `ranked` that `ops` lets run (and, with `distinct`, whose program no
/// earlier kept one has), and the ones passed over: every refused one, and the programs
/// already kept met before the `k`-th was found.
fn pass_over(
    ranked: &[crate::rank::SpaceRanked],
    k: usize,
    ops: &dyn crate::tune::CandidateOps,
    distinct: bool,
) -> (Vec<crate::rank::SpaceRanked>, Vec<crate::tune::Skipped>) {
    let mut kept = Vec::new();
    let mut passed = Vec::new();
    let mut keys = std::collections::HashMap::new();
    for e in ranked {
        let skip = |reason| crate::tune::Skipped {
            index: e.index,
            reason,
        };
        if let Some(why) = ops.refuse(e.index) {
            passed.push(skip(why));
            continue;
        }
        if kept.len() == k {
            continue;
        }
        if distinct {
            match ops.key(e.index) {
                Err(err) => {
                    passed.push(skip(err.to_string()));
                    continue;
                }
                Ok(key) => {
                    if let Some(of) = keys.get(&key) {
                        passed.push(skip(format!("the same program as candidate {of}")));
                        continue;
                    }
                    keys.insert(key, e.index);
                }
            }
        }
        kept.push(*e);
    }
    (kept, passed)
}

/// The head for `space` and the space in the line form that head parses.
fn for_head(model: &Model, head: Option<&str>, space: &AnySpace) -> Result<(String, AnySpace)> {
    let h = head_for_space(model.info(), head, space)?;
    let form = LineForm::for_schema(model.schema(&h.name)?, space)?;
    Ok((h.name.clone(), space.clone().with_form(form)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
