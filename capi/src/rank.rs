//! Scoring and top-k into caller-allocated arrays.

use dashrank::CostModel;

use super::boundary::{check_capacity, guard, try_slice_mut, write_opt, Failure};
use super::candidates::dashrank_candidates;
use super::handle::try_handle;
use super::matrix::dashrank_matrix;
use super::model::dashrank_model;
use super::status::dashrank_status;

/// Scores every candidate of `candidates` for `matrix` into `scores[0..n]`, `n` being the
/// number of candidates, in the caller's order; invalid candidates get NaN. Which direction
/// is better is given by `dashrank_model_head_polarity`.
///
/// `len` is the capacity of `scores`. `*out_n` (optional) receives `n`, also when `len < n`
/// (then nothing is written and `DASHRANK_STATUS_INSUFFICIENT_SIZE` is returned).
/// Thread-safe: many threads may score with the same handles at once.
#[no_mangle]
pub unsafe extern "C" fn dashrank_score(
    model: *const dashrank_model,
    matrix: *const dashrank_matrix,
    candidates: *const dashrank_candidates,
    scores: *mut f32,
    len: usize,
    out_n: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let x = unsafe { try_handle(matrix, "matrix") }?;
        let c = unsafe { try_handle(candidates, "candidates") }?;
        let n = c.len();
        unsafe { write_opt(out_n, n) };
        let scores = unsafe { try_slice_mut(scores, len, "scores") }?;
        check_capacity("scores", len, n)?;
        m.score_into(&x.embedding, c, &mut scores[..n])?;
        Ok(())
    })
}

/// Writes the `k` best valid candidates, best first (ties broken by candidate index), into
/// `indices[0..w]` (candidate positions in the caller's order) and, when `scores` is not
/// NULL, their scores into `scores[0..w]`; `w = min(k, number of valid candidates)`.
///
/// `len` is the capacity of `indices` (and of `scores`). `*out_n` (optional) receives `w`,
/// also when `len < w` (then nothing is written and `DASHRANK_STATUS_INSUFFICIENT_SIZE` is
/// returned). Thread-safe.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dashrank_top_k(
    model: *const dashrank_model,
    matrix: *const dashrank_matrix,
    candidates: *const dashrank_candidates,
    k: usize,
    indices: *mut u32,
    scores: *mut f32,
    len: usize,
    out_n: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let x = unsafe { try_handle(matrix, "matrix") }?;
        let c = unsafe { try_handle(candidates, "candidates") }?;
        let indices = unsafe { try_slice_mut(indices, len, "indices") }?;
        let scores = if scores.is_null() {
            None
        } else {
            Some(unsafe { try_slice_mut(scores, len, "scores") }?)
        };
        let best = m.top_k(&x.embedding, c, k)?;
        unsafe { write_opt(out_n, best.len()) };
        check_capacity("indices", len, best.len())?;
        for (slot, r) in indices.iter_mut().zip(&best) {
            *slot = u32::try_from(r.index).map_err(|_| {
                Failure::new(
                    dashrank_status::InvalidArgument,
                    format!("candidate index {} does not fit uint32_t", r.index),
                )
            })?;
        }
        if let Some(scores) = scores {
            for (slot, r) in scores.iter_mut().zip(&best) {
                *slot = r.score;
            }
        }
        Ok(())
    })
}
