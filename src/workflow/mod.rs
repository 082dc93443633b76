//! The whole ranking workflow of the papers, as every face (C ABI, TVM module, CLI) runs it:
//! pick the head for a toolchain's space, enumerate the space for a matrix, rank it with the
//! toolchain's default always reported, render candidates in the toolchain's own form, and
//! tune by measuring the top `k` plus the default.
//!
//! ```text
//! select_head / head_for_space ─► prepare(model, head, AnySpace, shape) ─► SpaceCandidates<AnyConfig>
//!      Model::top_k_with_default ─► SpaceRankReport (lines + toolchain text per entry)
//!      Model::tune(…, measure)    ─► TuneResult   (measure = closure, C callback, MeasureCommand)
//! ```
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

mod command;
mod process;
mod report;

pub use command::{parse_ms, MeasureCommand, MeasureFailure};
pub use report::{status_text, SpaceRankReport, SpaceRankedEntry, TuneEntry, TuneReport};

use crate::error::{Error, Result};
use crate::model::{HeadInfo, Model, ModelInfo};
use std::sync::Arc;

use crate::rank::{PreparedSpace, SpaceCandidates};
use crate::schedule::space::{AnyConfig, AnySpace, LineForm, MatrixShape};
use crate::vocab::{Kernel, Target};

/// The one head of `info` that matches every given criterion: its name, its target, its
/// kernel. With no criterion, the model's only head.
///
/// # Errors
///
/// [`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead) for a name the model lacks;
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when no head or several
/// heads match (the message lists the heads with their targets and kernels).
///
/// # Example
/// ```
/// use dashrank::{LoadOptions, Model, Target};
/// let model = Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default())?;
/// let h = dashrank::workflow::select_head(model.info(), None, Some(Target::GpuSparseTir), None)?;
/// assert_eq!(h.name, "gpu-sparsetir/spmm");
/// // Two SPADE heads (SpMM, SDDMM): the kernel must be named.
/// assert!(dashrank::workflow::select_head(model.info(), None, Some(Target::Spade), None).is_err());
/// # Ok::<(), dashrank::Error>(())
/// ```
pub fn select_head<'a>(
    info: &'a ModelInfo,
    head: Option<&str>,
    target: Option<Target>,
    kernel: Option<Kernel>,
) -> Result<&'a HeadInfo> {
    if let Some(name) = head {
        let h = info.head(name)?;
        let wrong = target.is_some_and(|t| t != h.target) || kernel.is_some_and(|k| k != h.kernel);
        if wrong {
            return Err(Error::invalid_argument(format!(
                "head {name} ranks {} {} schedules, not {}",
                h.target,
                h.kernel,
                wanted(target, kernel)
            )));
        }
        return Ok(h);
    }
    let matching: Vec<&HeadInfo> = info
        .heads
        .iter()
        .filter(|h| target.is_none_or(|t| t == h.target) && kernel.is_none_or(|k| k == h.kernel))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::invalid_argument(format!(
            "the model has no head for {} (heads: {})",
            wanted(target, kernel),
            describe_heads(&info.heads)
        ))),
        several => Err(Error::invalid_argument(format!(
            "the model has {} heads for {}; choose one ({})",
            several.len(),
            wanted(target, kernel),
            describe_heads(several.iter().copied())
        ))),
    }
}

fn wanted(target: Option<Target>, kernel: Option<Kernel>) -> String {
    match (target, kernel) {
        (Some(t), Some(k)) => format!("{t} {k}"),
        (Some(t), None) => format!("target {t}"),
        (None, Some(k)) => format!("kernel {k}"),
        (None, None) => "any target".to_owned(),
    }
}

fn describe_heads<'a>(heads: impl IntoIterator<Item = &'a HeadInfo>) -> String {
    let all: Vec<String> = heads
        .into_iter()
        .map(|h| {
            if h.name == format!("{}/{}", h.target, h.kernel) {
                h.name.clone()
            } else {
                format!("{} ({} {})", h.name, h.target, h.kernel)
            }
        })
        .collect();
    all.join(", ")
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

/// The head for `space` and the space in the line form that head parses.
fn for_head(model: &Model, head: Option<&str>, space: &AnySpace) -> Result<(String, AnySpace)> {
    let h = head_for_space(model.info(), head, space)?;
    let form = LineForm::for_schema(model.schema(&h.name)?, space)?;
    Ok((h.name.clone(), space.clone().with_form(form)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
