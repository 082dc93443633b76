//! Matrix handles: embed a CSR pattern (borrowed caller arrays) or a matrix file.

use std::ffi::c_char;

use dashrank::model::MatrixEmbedding;
use dashrank::pattern::{CsrIndex, CsrView};
use dashrank::schedule::space::MatrixShape;
use dashrank::{CostModel, CsrPattern};

use super::boundary::{guard, try_mut, try_slice, try_str, write_opt, Failure, FfiResult};
use super::handle::{box_into_handle, free_box_handle, try_handle, Castable, OwnershipBox};
use super::model::dashrank_model;
use super::status::dashrank_status;

/// The embedding of one matrix under one model (opaque).
///
/// Owned by the caller, freed with `dashrank_matrix_free`. Immutable: any number of threads
/// may read one handle at once. It does not keep its model alive, and it can only be scored
/// with the model that made it (`DASHRANK_STATUS_INVALID_ARGUMENT` otherwise).
pub struct dashrank_matrix {
    _private: [u8; 0],
}

impl Castable for dashrank_matrix {
    type Ownership = OwnershipBox;
    type RustType = EmbeddedMatrix;
}

/// What a `dashrank_matrix` holds: the embedding and the shape of the matrix (the schedule
/// spaces need it for per-candidate statuses).
#[derive(Debug)]
pub struct EmbeddedMatrix {
    /// The embedding.
    pub embedding: MatrixEmbedding,
    /// The matrix shape.
    pub shape: MatrixShape,
}

fn finish(out: &mut *mut dashrank_matrix, embedding: MatrixEmbedding, pattern: &CsrPattern) {
    *out = box_into_handle(EmbeddedMatrix {
        embedding,
        shape: MatrixShape::from(pattern),
    });
}

unsafe fn embed_csr<I: CsrIndex>(
    model: *const dashrank_model,
    nrows: usize,
    ncols: usize,
    row_ptr: *const I,
    col_idx: *const I,
    nnz: usize,
    out: *mut *mut dashrank_matrix,
) -> FfiResult {
    let out = unsafe { try_mut(out, "out") }?;
    *out = std::ptr::null_mut();
    let m = unsafe { try_handle(model, "model") }?;
    let rows_plus_one = nrows
        .checked_add(1)
        .ok_or_else(|| Failure::new(dashrank_status::InvalidArgument, "nrows is too large"))?;
    let row_ptr = unsafe { try_slice(row_ptr, rows_plus_one, "row_ptr") }?;
    let col_idx = unsafe { try_slice(col_idx, nnz, "col_idx") }?;
    let view = CsrView::new(nrows, ncols, row_ptr, col_idx)?;
    let pattern = view.to_pattern();
    let embedding = m.embed_matrix(&pattern)?;
    finish(out, embedding, &pattern);
    Ok(())
}

/// Embeds a CSR sparsity pattern given as 32-bit arrays (TACO, SciPy `int32`).
///
/// `row_ptr` has `nrows + 1` entries starting at 0 and ending at `nnz`; `col_idx` has `nnz`
/// entries (may be NULL when `nnz` is 0), unsorted within a row allowed, no duplicates.
/// Values are not needed: only the pattern counts. The arrays are read during the call
/// only (the caller keeps ownership). On success `*out` receives a new matrix; on failure
/// NULL. A structural problem gives `DASHRANK_STATUS_PATTERN` naming the row.
#[no_mangle]
pub unsafe extern "C" fn dashrank_matrix_embed_csr_i32(
    model: *const dashrank_model,
    nrows: usize,
    ncols: usize,
    row_ptr: *const i32,
    col_idx: *const i32,
    nnz: usize,
    out: *mut *mut dashrank_matrix,
) -> dashrank_status {
    guard(|| unsafe { embed_csr(model, nrows, ncols, row_ptr, col_idx, nnz, out) })
}

/// As `dashrank_matrix_embed_csr_i32`, with 64-bit arrays (SciPy/PyTorch `int64`).
#[no_mangle]
pub unsafe extern "C" fn dashrank_matrix_embed_csr_i64(
    model: *const dashrank_model,
    nrows: usize,
    ncols: usize,
    row_ptr: *const i64,
    col_idx: *const i64,
    nnz: usize,
    out: *mut *mut dashrank_matrix,
) -> dashrank_status {
    guard(|| unsafe { embed_csr(model, nrows, ncols, row_ptr, col_idx, nnz, out) })
}

/// Reads and embeds a matrix file: WACO binary `.csr` or Matrix Market `.mtx`/`.mm`
/// (by extension). On failure `*out` is NULL: `DASHRANK_STATUS_IO` (unreadable),
/// `DASHRANK_STATUS_PATTERN` (malformed; the message names the line) or
/// `DASHRANK_STATUS_INVALID_ARGUMENT` (unknown extension).
#[no_mangle]
pub unsafe extern "C" fn dashrank_matrix_embed_file(
    model: *const dashrank_model,
    path: *const c_char,
    out: *mut *mut dashrank_matrix,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let m = unsafe { try_handle(model, "model") }?;
        let path = unsafe { try_str(path, "path") }?;
        let pattern = CsrPattern::read_file(path)?;
        finish(out, m.embed_matrix(&pattern)?, &pattern);
        Ok(())
    })
}

/// Frees the matrix in `*matrix` and sets `*matrix` to NULL. `*matrix` may be NULL
/// (nothing happens); `matrix` itself must not be.
#[no_mangle]
pub unsafe extern "C" fn dashrank_matrix_free(
    matrix: *mut *mut dashrank_matrix,
) -> dashrank_status {
    guard(|| unsafe { free_box_handle(matrix, "matrix") })
}

/// Writes the shape of the embedded matrix: rows into `*nrows`, columns into `*ncols`,
/// stored entries into `*nnz` (each pointer may be NULL to skip it).
#[no_mangle]
pub unsafe extern "C" fn dashrank_matrix_shape(
    matrix: *const dashrank_matrix,
    nrows: *mut usize,
    ncols: *mut usize,
    nnz: *mut usize,
) -> dashrank_status {
    guard(|| {
        let x = unsafe { try_handle(matrix, "matrix") }?;
        unsafe {
            write_opt(nrows, x.shape.rows);
            write_opt(ncols, x.shape.cols);
            write_opt(nnz, x.shape.nnz);
        }
        Ok(())
    })
}
