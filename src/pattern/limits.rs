//! Limits on what a matrix file may make the library allocate.
//!
//! The readers never allocate in proportion to what a header *claims*: storage grows with the
//! entries actually read, and a pattern stores only its non-empty rows. These limits bound
//! what real data may cost, and refuse a file up front when its header already declares
//! more than allowed, so a host fails fast with a clear error instead of reading gigabytes
//! first.

use super::csr::MAX_DIM;
use crate::error::{Error, Result};

/// Default [`PatternLimits::max_nnz`]: 2^28 stored entries (a 2^28-entry pattern takes
/// about 1 GiB of coordinates while it is read, and far more to featurize).
pub const DEFAULT_MAX_NNZ: usize = 1 << 28;

/// Default [`PatternLimits::max_line_bytes`]: 1 MiB per Matrix Market line.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

/// Limits applied by the matrix file readers ([`CsrPattern::read_file_with`] and the
/// `*_with` reader functions); the plain readers use [`PatternLimits::default`].
///
/// Exceeding a limit is an [`ErrorKind::Pattern`](crate::ErrorKind::Pattern) error that
/// names the limit, the value found and this type, before the data is read where the header
/// tells (a WACO `.csr` header, a Matrix Market size line), else as soon as it is exceeded.
///
/// # Example
///
/// ```
/// use dashrank::pattern::{CsrPattern, PatternLimits};
/// let text = "%%MatrixMarket matrix coordinate pattern general\n1000000 1000000 3\n1 1\n2 2\n3 3\n";
/// let tight = PatternLimits { max_nnz: 2, ..PatternLimits::default() };
/// let e = CsrPattern::from_matrix_market_reader_with(text.as_bytes(), &tight).unwrap_err();
/// assert!(e.to_string().contains("max_nnz"), "{e}");
/// // The defaults accept it; memory is proportional to the 3 entries, not to 10^6 rows.
/// assert_eq!(CsrPattern::from_matrix_market_reader(text.as_bytes())?.nnz(), 3);
/// # Ok::<(), dashrank::Error>(())
/// ```
///
/// [`CsrPattern::read_file_with`]: super::CsrPattern::read_file_with
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternLimits {
    /// Largest row or column count. Default and ceiling: [`MAX_DIM`] (`i32::MAX`), the
    /// coordinate range of every index type of the C ABI; a larger value acts as `MAX_DIM`.
    pub max_dim: usize,
    /// Largest number of stored entries (after a symmetric Matrix Market file is expanded
    /// to both triangles). Default [`DEFAULT_MAX_NNZ`]; raise it for larger matrices.
    pub max_nnz: usize,
    /// Longest Matrix Market line in bytes, comments included. Default
    /// [`DEFAULT_MAX_LINE_BYTES`]; bounds the memory of a file with no line breaks.
    pub max_line_bytes: usize,
}

impl Default for PatternLimits {
    fn default() -> Self {
        Self {
            max_dim: MAX_DIM,
            max_nnz: DEFAULT_MAX_NNZ,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

impl PatternLimits {
    /// Checks declared dimensions against `max_dim` (and `MAX_DIM`).
    pub(crate) fn check_dims(&self, nrows: usize, ncols: usize) -> Result<()> {
        let max = self.max_dim.min(MAX_DIM);
        for (name, v) in [("rows", nrows), ("columns", ncols)] {
            if v > max {
                let why = if max == MAX_DIM && self.max_dim >= MAX_DIM {
                    format!("the coordinate limit {MAX_DIM}")
                } else {
                    format!("PatternLimits::max_dim = {max}")
                };
                return Err(Error::pattern(None, format!("{v} {name} exceed {why}")));
            }
        }
        Ok(())
    }

    /// Checks a (declared or reached) entry count against `max_nnz`.
    pub(crate) fn check_nnz(&self, nnz: usize, what: &str) -> Result<()> {
        if nnz > self.max_nnz {
            return Err(Error::pattern(
                None,
                format!(
                    "{what} {nnz} entries, above PatternLimits::max_nnz = {} (raise it to read this matrix)",
                    self.max_nnz
                ),
            ));
        }
        Ok(())
    }
}
