//! Matrix input: validated sparsity patterns.
//!
//! This module owns everything between "a matrix somewhere" and a [`CsrPattern`], the
//! validated, owned CSR structure (shape, `row_ptr`, sorted `col_idx`, no values) that the
//! featurizer consumes. Routes in:
//!
//! - raw arrays: [`CsrPattern::new`] (owned, checked) or [`CsrView::new`] (borrowed caller
//!   arrays of `i32`/`i64`/`u32`/`u64`/`usize`, checked without copying; used by the C ABI and
//!   the DLPack path), then [`CsrView::to_pattern`];
//! - coordinates: [`CsrPattern::from_coordinates`] (any order, duplicates merged);
//! - `sprs` matrices: [`CsrPattern::from_sprs`] (CSR or CSC storage);
//! - Matrix Market text: [`CsrPattern::read_matrix_market`] /
//!   [`CsrPattern::from_matrix_market_reader`];
//! - WACO's binary `.csr`: [`CsrPattern::read_waco_csr`] / [`CsrPattern::from_waco_csr_bytes`].
//!
//! A pattern stores only its non-empty rows, so its memory follows the entries, never the
//! declared dimensions. The file readers also bound what a file may make them allocate
//! ([`PatternLimits`]: dimensions, entries, line length), checking a header's claims before
//! reading the data it announces.
//!
//! Every route validates at the boundary and reports structural problems as
//! [`ErrorKind::Pattern`](crate::ErrorKind::Pattern) naming the row, position or line; code
//! downstream of a `CsrPattern` trusts its invariants. [`CsrPattern::content_hash`] is a
//! stable 64-bit hash of the structure; [`CsrPattern::content_digest`], its SHA-256, keys the
//! embedding cache.

mod convert;
mod coo;
mod csr;
mod hash;
mod limits;
mod lines;
mod mtx;
mod waco;

pub use csr::{CsrIndex, CsrPattern, CsrView, MAX_DIM};
pub use limits::{PatternLimits, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_NNZ};

impl CsrPattern {
    /// Reads a matrix file, choosing the format by extension: `.csr` is WACO binary
    /// ([`read_waco_csr`](Self::read_waco_csr)), `.mtx` or `.mm` is Matrix Market
    /// ([`read_matrix_market`](Self::read_matrix_market)); the match is case-insensitive.
    /// Any other extension is an [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// naming the path.
    ///
    /// # Example
    ///
    /// ```
    /// use dashrank::pattern::CsrPattern;
    /// let dir = std::env::temp_dir().join(format!("dashrank-read-file-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("m.mtx");
    /// std::fs::write(&path, "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")?;
    /// assert_eq!(CsrPattern::read_file(&path)?.nnz(), 1);
    /// assert!(CsrPattern::read_file(dir.join("m.txt")).is_err());
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_file(path: impl AsRef<std::path::Path>) -> crate::Result<Self> {
        Self::read_file_with(path, &PatternLimits::default())
    }

    /// [`read_file`](Self::read_file) with explicit [`PatternLimits`].
    pub fn read_file_with(
        path: impl AsRef<std::path::Path>,
        limits: &PatternLimits,
    ) -> crate::Result<Self> {
        let path = path.as_ref();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("csr") => Self::read_waco_csr_with(path, limits),
            Some("mtx") | Some("mm") => Self::read_matrix_market_with(path, limits),
            _ => Err(crate::Error::invalid_argument(format!(
                "{}: unknown matrix file extension (expected .csr or .mtx)",
                path.display()
            ))),
        }
    }
}
