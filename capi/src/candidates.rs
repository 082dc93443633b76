//! Candidate-set handles: prepare schedule lines for a head, per-candidate statuses.

use std::ffi::c_char;

use dashrank::rank::{CandidateSet, CandidateStatus};
use dashrank::CostModel;

use super::boundary::{guard, try_mut, try_slice, try_str, write_str, Failure};
use super::handle::{box_into_handle, free_box_handle, try_handle, Castable, OwnershipBox};
use super::model::dashrank_model;
use super::status::dashrank_status;

/// Candidate schedules prepared for one head (opaque): parsed, validated and embedded once,
/// reusable for any number of matrices.
///
/// Owned by the caller, freed with `dashrank_candidates_free`. Immutable: any number of
/// threads may read one handle at once. It does not keep its model alive.
pub struct dashrank_candidates {
    _private: [u8; 0],
}

impl Castable for dashrank_candidates {
    type Ownership = OwnershipBox;
    type RustType = CandidateSet;
}

/// Parses, validates and embeds `n` schedule lines for head `head` (e.g. `cpu-taco/spmm`;
/// WACO SuperSchedule text such as `16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16`, an
/// optional `= ms` suffix is allowed).
///
/// An invalid line does not fail the call: it gets its own status
/// (`dashrank_candidates_status`) and a NaN score. The call fails on misuse: unknown head
/// (`DASHRANK_STATUS_UNKNOWN_HEAD`), a NULL line (`DASHRANK_STATUS_NULL_ARGUMENT`) or a line
/// that is not UTF-8 (`DASHRANK_STATUS_INVALID_UTF8`). The strings are read during the call
/// only. On success `*out` receives a new set; on failure NULL.
#[no_mangle]
pub unsafe extern "C" fn dashrank_candidates_prepare(
    model: *const dashrank_model,
    head: *const c_char,
    lines: *const *const c_char,
    n: usize,
    out: *mut *mut dashrank_candidates,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let m = unsafe { try_handle(model, "model") }?;
        let head = unsafe { try_str(head, "head") }?;
        let ptrs = unsafe { try_slice(lines, n, "lines") }?;
        let texts = ptrs
            .iter()
            .enumerate()
            .map(|(i, &p)| unsafe { try_str(p, &format!("lines[{i}]")) })
            .collect::<Result<Vec<&str>, Failure>>()?;
        *out = box_into_handle(m.prepare_candidates(head, &texts)?);
        Ok(())
    })
}

/// Writes the number of candidates (valid or not) into `*len` and, if `valid` is not NULL,
/// the number of valid ones into `*valid`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_candidates_len(
    candidates: *const dashrank_candidates,
    len: *mut usize,
    valid: *mut usize,
) -> dashrank_status {
    guard(|| {
        let c = unsafe { try_handle(candidates, "candidates") }?;
        *unsafe { try_mut(len, "len") }? = c.len();
        unsafe { super::boundary::write_opt(valid, c.valid_count()) };
        Ok(())
    })
}

fn status_at(c: &CandidateSet, index: usize) -> Result<CandidateStatus<'_>, Failure> {
    c.status(index).ok_or_else(|| {
        Failure::new(
            dashrank_status::IndexOutOfRange,
            format!(
                "candidate index {index} out of range ({} candidates)",
                c.len()
            ),
        )
    })
}

/// Writes the status of candidate `index` into `*status`: `DASHRANK_STATUS_OK` when it is
/// valid, else why it was rejected (usually `DASHRANK_STATUS_SCHEDULE`). The call itself
/// returns `DASHRANK_STATUS_OK` unless the arguments are wrong.
#[no_mangle]
pub unsafe extern "C" fn dashrank_candidates_status(
    candidates: *const dashrank_candidates,
    index: usize,
    status: *mut dashrank_status,
) -> dashrank_status {
    guard(|| {
        let c = unsafe { try_handle(candidates, "candidates") }?;
        let out = unsafe { try_mut(status, "status") }?;
        *out = match status_at(c, index)? {
            CandidateStatus::InvalidSchedule(e) => dashrank_status::from_error(e),
            _ => dashrank_status::Ok,
        };
        Ok(())
    })
}

/// Writes why candidate `index` was rejected (e.g. `invalid schedule #3 field 'isplit'
/// value '3': …`) into `buf`; an empty string for a valid candidate. Size reporting and
/// truncation as in `dashrank_status_message`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_candidates_message(
    candidates: *const dashrank_candidates,
    index: usize,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    guard(|| {
        let c = unsafe { try_handle(candidates, "candidates") }?;
        let text = match status_at(c, index)? {
            CandidateStatus::InvalidSchedule(e) => e.to_string(),
            _ => String::new(),
        };
        unsafe { write_str(&text, buf, len, needed) }
    })
}

/// Frees the set in `*candidates` and sets `*candidates` to NULL. `*candidates` may be
/// NULL (nothing happens); `candidates` itself must not be.
#[no_mangle]
pub unsafe extern "C" fn dashrank_candidates_free(
    candidates: *mut *mut dashrank_candidates,
) -> dashrank_status {
    guard(|| unsafe { free_box_handle(candidates, "candidates") })
}
