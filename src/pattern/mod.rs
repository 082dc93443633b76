//! Matrix input: validated sparsity patterns.
//!
//! This module owns everything between "a matrix somewhere" and a [`CsrPattern`], the
//! validated, owned CSR structure (shape, `row_ptr`, sorted `col_idx`, no values) that the
//! featurizer consumes. Routes in:
//!
//! - raw arrays: [`CsrPattern::new`] (owned, checked) or [`CsrView::new`] (borrowed caller
//!   arrays of `i32`/`i64`/`u32`/`u64`/`usize`, checked without copying; used by the C ABI and
//!   the DLPack path), then [`CsrView::to_pattern`];
//! - `sprs` matrices: [`CsrPattern::from_sprs`] (CSR or CSC storage);
//! - Matrix Market text: [`CsrPattern::read_matrix_market`] /
//!   [`CsrPattern::from_matrix_market_reader`];
//! - WACO's binary `.csr`: [`CsrPattern::read_waco_csr`] / [`CsrPattern::from_waco_csr_bytes`].
//!
//! Every route validates at the boundary and reports structural problems as
//! [`ErrorKind::Pattern`](crate::ErrorKind::Pattern) naming the row, position or line; code
//! downstream of a `CsrPattern` trusts its invariants. [`CsrPattern::content_hash`] is a
//! stable 64-bit hash of the structure for caches.

mod convert;
mod csr;
mod hash;
mod mtx;
mod waco;

pub use csr::{CsrIndex, CsrPattern, CsrView, MAX_DIM};
