//! Ranking a prepared space with the default always reported, and tuning it through a C
//! measure callback.

use std::ffi::{c_char, c_void, CString};

use dashrank::rank::{SpaceRanked, SpaceTopK};
use dashrank::tune::{
    tune, MeasureRequest, Measured, Measurement, Measurer, ToolchainOps, TuneOptions, Tuned,
};

use super::boundary::{check_capacity, guard, try_mut, try_slice_mut, write_opt, FfiResult};
use super::handle::try_handle;
use super::matrix::dashrank_matrix;
use super::model::dashrank_model;
use super::space::{dashrank_space_candidates, matrix_name_or_default};
use super::status::dashrank_status;

/// One reported candidate of `dashrank_space_top_k`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct dashrank_ranked {
    /// Candidate index (`dashrank_space_candidates_*`).
    pub index: usize,
    /// The model's score; NaN when the head's schema rejected the candidate's line.
    pub score: f32,
    /// 1-based predicted rank: one plus the number of ranked candidates predicted better
    /// (1 = the best). An unranked default (a duplicate, or rejected by the toolchain) still
    /// gets the rank its score would have; 0 when it has no score.
    pub rank: usize,
    /// Whether this is the toolchain's default configuration.
    pub is_default: bool,
}

impl From<&SpaceRanked> for dashrank_ranked {
    fn from(e: &SpaceRanked) -> Self {
        Self {
            index: e.index,
            score: e.score,
            rank: e.rank.map_or(0, |r| r + 1),
            is_default: e.is_default,
        }
    }
}

/// What `dashrank_space_tune` asks the measure callback to run. The strings are
/// NUL-terminated and valid only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dashrank_measure_request {
    /// Candidate index.
    pub index: usize,
    /// The candidate in its toolchain's form (as `dashrank_space_candidates_render`).
    pub toolchain: *const c_char,
    /// The candidate's line (as `dashrank_space_candidates_line`).
    pub line: *const c_char,
    /// Whether it is the toolchain's default configuration.
    pub is_default: bool,
}

/// A measure callback: runs the candidate described by `*request`, writes its runtime in
/// milliseconds into `*out_ms` and returns true; returns false when the candidate could not
/// be built or run (it is skipped). A false return, or a time that is not a finite,
/// non-negative number, counts as a failed measurement. Called on the thread that called
/// `dashrank_space_tune`, once per candidate, best ranked first and the default last; it
/// must not unwind.
pub type dashrank_measure_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        request: *const dashrank_measure_request,
        out_ms: *mut f64,
    ) -> bool,
>;

/// One measurement of `dashrank_space_tune`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct dashrank_measurement {
    /// The candidate's ranking entry.
    pub ranked: dashrank_ranked,
    /// Whether the measurement succeeded.
    pub ok: bool,
    /// The measured time in milliseconds (NaN when `ok` is false).
    pub ms: f64,
}

/// The outcome of `dashrank_space_tune`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct dashrank_tune_result {
    /// Whether any measurement succeeded (else `best_*` are meaningless).
    pub has_best: bool,
    /// Index of the fastest measured candidate (the default included; ties: the better
    /// ranked).
    pub best_index: usize,
    /// Its time in milliseconds.
    pub best_ms: f64,
    /// Index of the toolchain's default configuration.
    pub default_index: usize,
    /// The default's time in milliseconds; NaN when its measurement failed.
    pub default_ms: f64,
    /// `default_ms / best_ms`; NaN when either is missing or `best_ms` is 0.
    pub speedup_over_default: f64,
    /// Number of candidates measured (successfully or not).
    pub measured: usize,
    /// Number of failed measurements.
    pub failed: usize,
}

/// Entries of a top-k into `out[0..n]`, after the capacity check.
fn write_entries(top: &SpaceTopK, out: &mut [dashrank_ranked]) -> FfiResult {
    check_capacity("out", out.len(), top.entries.len())?;
    for (slot, e) in out.iter_mut().zip(&top.entries) {
        *slot = e.into();
    }
    Ok(())
}

/// The `k` best candidates of `candidates` for `matrix`, best first (ties broken by
/// candidate index), then the toolchain's default when it is not among them: the default is
/// always reported, flagged `is_default`. Exact: every ranked candidate is scored.
///
/// Writes the `n` entries into `out[0..n]`; `len` is the capacity of `out`, which needs at
/// most `min(k, ranked) + 1` entries. `*out_n` (optional) receives `n`, also when `len < n`
/// (then nothing is written and `DASHRANK_STATUS_INSUFFICIENT_SIZE` is returned).
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn dashrank_space_top_k(
    model: *const dashrank_model,
    matrix: *const dashrank_matrix,
    candidates: *const dashrank_space_candidates,
    k: usize,
    out: *mut dashrank_ranked,
    len: usize,
    out_n: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let x = unsafe { try_handle(matrix, "matrix") }?;
        let c = unsafe { try_handle(candidates, "candidates") }?;
        let out = unsafe { try_slice_mut(out, len, "out") }?;
        let top = m.top_k_with_default(&x.embedding, c, k)?;
        unsafe { write_opt(out_n, top.entries.len()) };
        write_entries(&top, out)
    })
}

/// Tunes as the papers do: ranks `candidates` for `matrix`, calls `measure` on the top `k`
/// (best first) and then on the default (if it is not among them), and reports the fastest
/// measured candidate. A failed measurement is skipped. Because the default is measured, the
/// result is never slower than the default as measured.
///
/// `matrix_name` (may be NULL: `matrix`) fills the first column of SPADE rows in the
/// requests. `*result` receives the outcome. When `measurements` is not NULL, every
/// measurement is written into `measurements[0..n]` in the order taken; `len` is its
/// capacity, checked **before** anything is measured: it must hold
/// `min(k, ranked) + 1` entries (`dashrank_space_candidates_len`), else
/// `DASHRANK_STATUS_INSUFFICIENT_SIZE` with that number in `*out_n`. `*out_n` (optional)
/// receives `n`. The callback receives `user_data` unchanged.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dashrank_space_tune(
    model: *const dashrank_model,
    matrix: *const dashrank_matrix,
    candidates: *const dashrank_space_candidates,
    k: usize,
    matrix_name: *const c_char,
    measure: dashrank_measure_callback,
    user_data: *mut c_void,
    result: *mut dashrank_tune_result,
    measurements: *mut dashrank_measurement,
    len: usize,
    out_n: *mut usize,
) -> dashrank_status {
    guard(|| {
        let m = unsafe { try_handle(model, "model") }?;
        let x = unsafe { try_handle(matrix, "matrix") }?;
        let c = unsafe { try_handle(candidates, "candidates") }?;
        let name = unsafe { matrix_name_or_default(matrix_name) }?;
        let callback = measure.ok_or_else(|| super::boundary::Failure::null("measure"))?;
        let result = unsafe { try_mut(result, "result") }?;
        let slots = if measurements.is_null() {
            None
        } else {
            Some(unsafe { try_slice_mut(measurements, len, "measurements") }?)
        };
        if let Some(slots) = &slots {
            let most = k.min(c.ranked_count()) + 1;
            unsafe { write_opt(out_n, most) };
            check_capacity("measurements", slots.len(), most)?;
        }
        let ops = ToolchainOps::new(c, name);
        let mut measurer = CallbackMeasurer {
            callback,
            user_data,
        };
        let tuned = tune(
            m,
            &x.embedding,
            c,
            &ops,
            &TuneOptions::top_k(k),
            &mut measurer,
        )?;
        *result = tune_result(&tuned, c.default_index());
        unsafe { write_opt(out_n, tuned.measurements.len()) };
        if let Some(slots) = slots {
            for (slot, t) in slots.iter_mut().zip(&tuned.measurements) {
                *slot = measurement(t);
            }
        }
        Ok(())
    })
}

/// The C callback as a [`Measurer`]: the request's strings as C strings, `false` or a time
/// that is not finite and non-negative as a failed measurement.
struct CallbackMeasurer {
    callback: unsafe extern "C" fn(*mut c_void, *const dashrank_measure_request, *mut f64) -> bool,
    user_data: *mut c_void,
}

impl Measurer for CallbackMeasurer {
    fn measure(&mut self, r: &MeasureRequest<'_>) -> Result<Measured, String> {
        let nul = |s: &str| CString::new(s.replace('\0', " ")).unwrap_or_default();
        let (toolchain, line) = (nul(r.program), nul(r.line));
        let request = dashrank_measure_request {
            index: r.index,
            toolchain: toolchain.as_ptr(),
            line: line.as_ptr(),
            is_default: r.is_default,
        };
        let mut ms = f64::NAN;
        // SAFETY: the callback contract is documented on `dashrank_measure_callback`; the
        // request and its strings outlive the call.
        let ok = unsafe { (self.callback)(self.user_data, &request, &mut ms) };
        if ok {
            Ok(Measured::ms(ms))
        } else {
            Err("the measure callback returned false".to_owned())
        }
    }
}

fn tune_result(t: &Tuned, default_index: usize) -> dashrank_tune_result {
    let best = t.best_measurement();
    dashrank_tune_result {
        has_best: best.is_some(),
        best_index: best.map_or(0, |b| b.index),
        best_ms: best.and_then(Measurement::ms).unwrap_or(f64::NAN),
        default_index,
        default_ms: t
            .default_measurement()
            .and_then(Measurement::ms)
            .unwrap_or(f64::NAN),
        speedup_over_default: t.speedup_over_default().unwrap_or(f64::NAN),
        measured: t.measurements.len(),
        failed: t.measurements.iter().filter(|m| m.result.is_err()).count(),
    }
}

fn measurement(t: &Measurement) -> dashrank_measurement {
    dashrank_measurement {
        ranked: dashrank_ranked {
            index: t.index,
            score: t.score,
            rank: t.rank.map_or(0, |r| r + 1),
            is_default: t.is_default,
        },
        ok: t.ms().is_some(),
        ms: t.ms().unwrap_or(f64::NAN),
    }
}
