//! [`CsrPattern`] (owned) and [`CsrView`] (borrowed) sparsity patterns and their structure
//! checks.
//!
//! Invariants of a [`CsrPattern`] (checked by [`CsrPattern::new`], [`CsrView::new`] and
//! [`CsrPattern::from_coordinates`], assumed everywhere else): `nrows, ncols <= MAX_DIM`;
//! `rows` (the non-empty rows) strictly increasing and `< nrows`;
//! `row_start.len() == rows.len() + 1`, `row_start[0] == 0`, strictly increasing,
//! `row_start[last] == col_idx.len()`; every column `< ncols`; columns strictly increasing
//! within each row (sorted, no duplicates). Input row pointers (`nrows + 1` values) are checked
//! for the classic CSR rules: start at 0, non-decreasing, end at `nnz`.

use crate::error::{Error, Result};

/// Largest number of rows or columns a pattern may have: coordinates are kept in the
/// non-negative `i32` range, as in MinkowskiEngine, so that they fit every index type of the
/// C ABI.
pub const MAX_DIM: usize = i32::MAX as usize;

/// An index type accepted in caller-supplied CSR arrays: `i32`, `i64`, `u32`, `u64`, `usize`.
///
/// Sealed: implemented only in this crate.
pub trait CsrIndex: Copy + std::fmt::Display + sealed::Sealed + Send + Sync + 'static {
    /// The value as `usize`, or `None` if it is negative or does not fit.
    fn to_usize(self) -> Option<usize>;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! impl_csr_index {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl CsrIndex for $t {
            #[inline]
            fn to_usize(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
        }
    )*};
}
impl_csr_index!(i32, i64, u32, u64, usize);

/// A validated, owned sparsity pattern in CSR form (no values).
///
/// Columns are sorted within each row and free of duplicates. Build one with
/// [`CsrPattern::new`], from borrowed arrays with [`CsrView`], from coordinates with
/// [`CsrPattern::from_coordinates`], from `sprs` with [`CsrPattern::from_sprs`], or read one
/// from Matrix Market or WACO `.csr` files.
///
/// # Memory
///
/// Only rows holding entries are stored (compressed sparse rows over the non-empty rows, often
/// called DCSR): memory is proportional to the entries, never to the declared dimensions, so
/// a 2^31 − 1 × 2^31 − 1 matrix with one entry costs a few bytes. [`nonempty_rows`] and
/// [`row_starts`] expose that layout; [`to_row_ptr`] builds the classic `nrows + 1` row
/// pointers when a caller needs them (that costs `O(nrows)`).
///
/// [`nonempty_rows`]: Self::nonempty_rows
/// [`row_starts`]: Self::row_starts
/// [`to_row_ptr`]: Self::to_row_ptr
///
/// # Example
///
/// ```
/// use dashrank::pattern::CsrPattern;
/// // [[x . x]
/// //  [. . .]
/// //  [. x .]]   (row 0 given unsorted: it is sorted on construction)
/// let p = CsrPattern::new(3, 3, vec![0, 2, 2, 3], vec![2, 0, 1])?;
/// assert_eq!(p.nnz(), 3);
/// assert_eq!(p.col_idx(), &[0, 2, 1]);
/// assert_eq!(p.nonempty_rows(), &[0, 2]);
/// assert_eq!(p.row(1), &[] as &[u32]);
/// assert_eq!(p.to_row_ptr(), vec![0, 2, 2, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Threads
///
/// Plain immutable data: `Send + Sync`, share it freely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrPattern {
    nrows: usize,
    ncols: usize,
    /// Rows holding at least one entry, strictly ascending.
    rows: Vec<u32>,
    /// `row_start[i]..row_start[i + 1]` are the entries of `rows[i]`; `rows.len() + 1` values
    /// starting at 0, strictly increasing, ending at `nnz`.
    row_start: Vec<usize>,
    col_idx: Vec<u32>,
    /// [`CsrPattern::content_hash`] and [`CsrPattern::content_digest`], computed on first use.
    pub(super) hash: super::hash::HashCell,
}

impl CsrPattern {
    /// Builds a pattern from owned CSR arrays, checking the structure.
    ///
    /// Columns may be unsorted within a row; they are sorted. Duplicate columns within a
    /// row, a malformed `row_ptr`, or an out-of-range column are errors naming the row and
    /// position.
    pub fn new(nrows: usize, ncols: usize, row_ptr: Vec<usize>, col_idx: Vec<u32>) -> Result<Self> {
        check_dims(nrows, ncols)?;
        check_row_ptr(nrows, &row_ptr, col_idx.len())?;
        check_cols_in_range(ncols, &row_ptr, &col_idx)?;
        let (rows, row_start) = compress_row_ptr(&row_ptr, |&v| v);
        drop(row_ptr);
        Self::from_checked_rows(nrows, ncols, rows, row_start, col_idx)
    }

    /// Sorts the columns of each row and rejects duplicates; everything else (dimensions,
    /// compressed row structure, column range) is already checked by the caller.
    pub(crate) fn from_checked_rows(
        nrows: usize,
        ncols: usize,
        rows: Vec<u32>,
        row_start: Vec<usize>,
        mut col_idx: Vec<u32>,
    ) -> Result<Self> {
        for (&r, w) in rows.iter().zip(row_start.windows(2)) {
            let row = &mut col_idx[w[0]..w[1]];
            if !row.windows(2).all(|w| w[0] < w[1]) {
                row.sort_unstable();
                if let Some(w) = row.windows(2).find(|w| w[0] == w[1]) {
                    return Err(duplicate(r as usize, w[0] as usize));
                }
            }
        }
        Ok(Self::new_trusted(nrows, ncols, rows, row_start, col_idx))
    }

    /// Builds a pattern without any check. The caller guarantees every invariant listed in
    /// the module documentation, in the compressed layout (`rows`, `row_start`).
    pub(crate) fn new_trusted(
        nrows: usize,
        ncols: usize,
        rows: Vec<u32>,
        row_start: Vec<usize>,
        col_idx: Vec<u32>,
    ) -> Self {
        debug_assert!(nrows <= MAX_DIM && ncols <= MAX_DIM);
        debug_assert_eq!(row_start.len(), rows.len() + 1);
        debug_assert_eq!(row_start.last().copied(), Some(col_idx.len()));
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(rows.last().is_none_or(|&r| (r as usize) < nrows));
        Self {
            nrows,
            ncols,
            rows,
            row_start,
            col_idx,
            hash: Default::default(),
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }

    /// The rows holding at least one entry, ascending.
    pub fn nonempty_rows(&self) -> &[u32] {
        &self.rows
    }

    /// Start offsets into [`col_idx`](Self::col_idx) of the non-empty rows:
    /// `row_starts()[i]..row_starts()[i + 1]` are the columns of `nonempty_rows()[i]`
    /// (`nonempty_rows().len() + 1` values, from 0 to `nnz`).
    pub fn row_starts(&self) -> &[usize] {
        &self.row_start
    }

    /// Column indices in row-major order, sorted and unique within each row.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// The non-empty rows with their columns, ascending by row.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = (usize, &[u32])> + '_ {
        self.rows
            .iter()
            .zip(self.row_start.windows(2))
            .map(|(&r, w)| (r as usize, &self.col_idx[w[0]..w[1]]))
    }

    /// The column indices of row `r` (empty for an empty row); a binary search over the
    /// non-empty rows.
    ///
    /// # Panics
    ///
    /// If `r >= nrows`.
    pub fn row(&self, r: usize) -> &[u32] {
        assert!(
            r < self.nrows,
            "row {r} out of range for {} rows",
            self.nrows
        );
        match self.rows.binary_search(&(r as u32)) {
            Ok(i) => &self.col_idx[self.row_start[i]..self.row_start[i + 1]],
            Err(_) => &[],
        }
    }

    /// The positions in [`nonempty_rows`](Self::nonempty_rows) (and `row_starts`) of the
    /// non-empty rows inside `rows`: a binary search, so walking a band of rows costs its
    /// entries, not its length.
    ///
    /// ```
    /// use dashrank::pattern::CsrPattern;
    /// let p = CsrPattern::from_coordinates(1 << 30, 4, vec![(5, 0), (9, 1), (1 << 20, 2)])?;
    /// let i = p.nonempty_index_range(0..1000);
    /// assert_eq!(i, 0..2);
    /// assert_eq!(&p.col_idx()[p.row_starts()[i.start]..p.row_starts()[i.end]], &[0, 1]);
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn nonempty_index_range(&self, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let first = self.rows.partition_point(|&r| (r as usize) < rows.start);
        let end = self.rows.partition_point(|&r| (r as usize) < rows.end);
        first..end.max(first)
    }

    /// The classic CSR row pointers: `nrows + 1` entries starting at 0 and ending at `nnz`.
    /// Allocates `O(nrows)`; the pattern itself does not keep them.
    pub fn to_row_ptr(&self) -> Vec<usize> {
        let mut row_ptr = Vec::with_capacity(self.nrows + 1);
        row_ptr.push(0);
        for (&r, &end) in self.rows.iter().zip(&self.row_start[1..]) {
            let last = *row_ptr.last().unwrap_or(&0);
            row_ptr.resize(r as usize + 1, last);
            row_ptr.push(end);
        }
        row_ptr.resize(self.nrows + 1, self.nnz());
        row_ptr
    }

    /// `(rows, cols, nnz)` as `f64`, the raw shape features of the cost models.
    pub fn shape_stats(&self) -> [f64; 3] {
        [self.nrows as f64, self.ncols as f64, self.nnz() as f64]
    }

    /// Consumes the pattern and returns `(nrows, ncols, row_ptr, col_idx)` with classic
    /// `nrows + 1` row pointers (see [`to_row_ptr`](Self::to_row_ptr)).
    pub fn into_parts(self) -> (usize, usize, Vec<usize>, Vec<u32>) {
        let row_ptr = self.to_row_ptr();
        (self.nrows, self.ncols, row_ptr, self.col_idx)
    }
}

/// The non-empty rows and their start offsets from checked row pointers (`nrows + 1` values,
/// non-decreasing, from 0); `get` converts one value.
pub(crate) fn compress_row_ptr<P>(
    row_ptr: &[P],
    get: impl Fn(&P) -> usize,
) -> (Vec<u32>, Vec<usize>) {
    let mut rows = Vec::new();
    let mut row_start = vec![0];
    for (r, w) in row_ptr.windows(2).enumerate() {
        let end = get(&w[1]);
        if end > get(&w[0]) {
            // r < nrows <= MAX_DIM fits u32.
            rows.push(r as u32);
            row_start.push(end);
        }
    }
    (rows, row_start)
}

/// A validated sparsity pattern borrowing the caller's CSR arrays without copying.
///
/// `I` is the index type of both arrays (`i32`, `i64`, `u32`, `u64` or `usize`). Columns may
/// be unsorted within a row (they are checked for duplicates, and sorted by
/// [`to_pattern`](Self::to_pattern)).
///
/// # Example
///
/// ```
/// use dashrank::pattern::CsrView;
/// let row_ptr: [i64; 3] = [0, 1, 3];
/// let col_idx: [i64; 3] = [1, 2, 0];
/// let view = CsrView::new(2, 3, &row_ptr, &col_idx)?;
/// let pattern = view.to_pattern();
/// assert_eq!(pattern.row(1), &[0, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Threads
///
/// A pair of shared slices: `Send + Sync`.
#[derive(Debug, Clone, Copy)]
pub struct CsrView<'a, I: CsrIndex> {
    nrows: usize,
    ncols: usize,
    row_ptr: &'a [I],
    col_idx: &'a [I],
    sorted: bool,
}

impl<'a, I: CsrIndex> CsrView<'a, I> {
    /// Checks the structure of borrowed CSR arrays (same rules as [`CsrPattern::new`], plus
    /// no negative values).
    pub fn new(nrows: usize, ncols: usize, row_ptr: &'a [I], col_idx: &'a [I]) -> Result<Self> {
        check_dims(nrows, ncols)?;
        check_row_ptr(nrows, row_ptr, col_idx.len())?;
        check_cols_in_range(ncols, row_ptr, col_idx)?;
        // Row bounds are valid usize values now.
        let mut sorted = true;
        let mut scratch: Vec<usize> = Vec::new();
        for r in 0..nrows {
            let (b, e) = (ix(row_ptr[r]), ix(row_ptr[r + 1]));
            let row = &col_idx[b..e];
            if row.windows(2).all(|w| ix(w[0]) < ix(w[1])) {
                continue;
            }
            sorted = false;
            scratch.clear();
            scratch.extend(row.iter().map(|&c| ix(c)));
            scratch.sort_unstable();
            if let Some(w) = scratch.windows(2).find(|w| w[0] == w[1]) {
                return Err(duplicate(r, w[0]));
            }
        }
        Ok(Self {
            nrows,
            ncols,
            row_ptr,
            col_idx,
            sorted,
        })
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }

    /// Copies into an owned [`CsrPattern`], sorting columns within rows if needed.
    pub fn to_pattern(&self) -> CsrPattern {
        let (rows, row_start) = compress_row_ptr(self.row_ptr, |&v| ix(v));
        // Columns are < ncols <= MAX_DIM, so they fit u32.
        let mut col_idx: Vec<u32> = self.col_idx.iter().map(|&v| ix(v) as u32).collect();
        if !self.sorted {
            for w in row_start.windows(2) {
                col_idx[w[0]..w[1]].sort_unstable();
            }
        }
        CsrPattern::new_trusted(self.nrows, self.ncols, rows, row_start, col_idx)
    }
}

/// Converts a value already checked to be a valid non-negative index.
#[inline]
fn ix<I: CsrIndex>(v: I) -> usize {
    v.to_usize().unwrap_or(usize::MAX)
}

fn duplicate(row: usize, col: usize) -> Error {
    Error::pattern(None, format!("duplicate column {col} in row {row}"))
}

pub(crate) fn check_dims(nrows: usize, ncols: usize) -> Result<()> {
    for (name, v) in [("nrows", nrows), ("ncols", ncols)] {
        if v > MAX_DIM {
            return Err(Error::pattern(
                None,
                format!("{name} = {v} exceeds the coordinate limit {MAX_DIM}"),
            ));
        }
    }
    Ok(())
}

/// Checks `row_ptr`: length `nrows + 1`, starts at 0, non-decreasing, ends at `nnz`, no
/// negative values.
pub(crate) fn check_row_ptr<I: CsrIndex>(nrows: usize, row_ptr: &[I], nnz: usize) -> Result<()> {
    if row_ptr.len() != nrows + 1 {
        return Err(Error::pattern(
            None,
            format!(
                "row_ptr has {} entries, expected nrows + 1 = {}",
                row_ptr.len(),
                nrows + 1
            ),
        ));
    }
    let mut prev = 0usize;
    for (i, &v) in row_ptr.iter().enumerate() {
        let Some(u) = v.to_usize() else {
            return Err(Error::pattern(
                None,
                format!("row_ptr[{i}] = {v} is negative or too large"),
            ));
        };
        if i == 0 && u != 0 {
            return Err(Error::pattern(
                None,
                format!("row_ptr[0] = {u}, expected 0"),
            ));
        }
        if u < prev {
            return Err(Error::pattern(
                None,
                format!(
                    "row_ptr decreases at row {}: row_ptr[{}] = {prev} > row_ptr[{i}] = {u}",
                    i - 1,
                    i - 1
                ),
            ));
        }
        prev = u;
    }
    if prev != nnz {
        return Err(Error::pattern(
            None,
            format!("row_ptr[{nrows}] = {prev} but col_idx has {nnz} entries"),
        ));
    }
    Ok(())
}

/// Checks every column is a valid index `< ncols`; `row_ptr` must already be checked.
pub(crate) fn check_cols_in_range<P: CsrIndex, C: CsrIndex>(
    ncols: usize,
    row_ptr: &[P],
    col_idx: &[C],
) -> Result<()> {
    let bad = col_idx
        .iter()
        .position(|&c| c.to_usize().is_none_or(|c| c >= ncols));
    if let Some(pos) = bad {
        // Row containing `pos`: the last r with row_ptr[r] <= pos.
        let row = row_ptr.partition_point(|&p| ix(p) <= pos).saturating_sub(1);
        return Err(Error::pattern(
            None,
            format!(
                "column index {} at position {pos} (row {row}) is out of range for {ncols} columns",
                col_idx[pos]
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn reason(e: Error) -> String {
        match e.kind() {
            ErrorKind::Pattern { reason, .. } => reason.clone(),
            other => panic!("unexpected kind {other:?}"),
        }
    }

    #[test]
    fn new_accepts_and_sorts() {
        let p = CsrPattern::new(3, 4, vec![0, 3, 3, 4], vec![3, 0, 1, 2]).expect("valid");
        assert_eq!(p.row(0), &[0, 1, 3]);
        assert_eq!(p.row(1), &[] as &[u32]);
        assert_eq!(p.row(2), &[2]);
        assert_eq!(p.shape_stats(), [3.0, 4.0, 4.0]);
        assert_eq!(p.to_row_ptr(), vec![0, 3, 3, 4]);
        assert_eq!(p.nonempty_rows(), &[0, 2]);
        assert_eq!(p.row_starts(), &[0, 3, 4]);
        let rows: Vec<(usize, Vec<u32>)> = p.rows().map(|(r, c)| (r, c.to_vec())).collect();
        assert_eq!(rows, vec![(0, vec![0, 1, 3]), (2, vec![2])]);
        assert_eq!(
            p.clone().into_parts(),
            (3, 4, vec![0, 3, 3, 4], vec![0, 1, 3, 2])
        );
    }

    #[test]
    fn empty_pattern() {
        let p = CsrPattern::new(0, 0, vec![0], vec![]).expect("valid");
        assert_eq!(p.nnz(), 0);
        assert_eq!(p.to_row_ptr(), vec![0]);
        let p = CsrPattern::new(3, 2, vec![0, 0, 0, 0], vec![]).expect("valid");
        assert_eq!(p.to_row_ptr(), vec![0, 0, 0, 0]);
        assert_eq!(p.nonempty_rows(), &[] as &[u32]);
    }

    #[test]
    fn new_errors() {
        let e = |r: Result<CsrPattern>| reason(r.expect_err("must fail"));
        assert_eq!(
            e(CsrPattern::new(2, 2, vec![0, 1], vec![0])),
            "row_ptr has 2 entries, expected nrows + 1 = 3"
        );
        assert_eq!(
            e(CsrPattern::new(1, 2, vec![1, 1], vec![0])),
            "row_ptr[0] = 1, expected 0"
        );
        assert_eq!(
            e(CsrPattern::new(2, 2, vec![0, 2, 1], vec![0, 1])),
            "row_ptr decreases at row 1: row_ptr[1] = 2 > row_ptr[2] = 1"
        );
        assert_eq!(
            e(CsrPattern::new(1, 2, vec![0, 1], vec![0, 1])),
            "row_ptr[1] = 1 but col_idx has 2 entries"
        );
        assert_eq!(
            e(CsrPattern::new(2, 2, vec![0, 1, 2], vec![0, 5])),
            "column index 5 at position 1 (row 1) is out of range for 2 columns"
        );
        assert_eq!(
            e(CsrPattern::new(2, 3, vec![0, 0, 3], vec![2, 0, 2])),
            "duplicate column 2 in row 1"
        );
        assert_eq!(
            e(CsrPattern::new(
                MAX_DIM + 1,
                1,
                vec![0; MAX_DIM.min(4)],
                vec![]
            )),
            format!(
                "nrows = {} exceeds the coordinate limit {MAX_DIM}",
                MAX_DIM + 1
            )
        );
    }

    #[test]
    fn view_all_index_types() {
        fn check<I: CsrIndex>(rp: &[I], ci: &[I]) {
            let v = CsrView::new(2, 3, rp, ci).expect("valid");
            assert_eq!((v.nrows(), v.ncols(), v.nnz()), (2, 3, 3));
            let p = v.to_pattern();
            assert_eq!(p.row(0), &[0, 2]);
            assert_eq!(p.row(1), &[1]);
        }
        check::<i32>(&[0, 2, 3], &[2, 0, 1]);
        check::<i64>(&[0, 2, 3], &[0, 2, 1]);
        check::<u32>(&[0, 2, 3], &[2, 0, 1]);
        check::<u64>(&[0, 2, 3], &[2, 0, 1]);
        check::<usize>(&[0, 2, 3], &[2, 0, 1]);
    }

    #[test]
    fn view_errors() {
        let e = |r: Result<CsrView<'_, i32>>| reason(r.expect_err("must fail"));
        assert_eq!(
            e(CsrView::new(1, 2, &[0, -1], &[])),
            "row_ptr[1] = -1 is negative or too large"
        );
        assert_eq!(
            e(CsrView::new(1, 2, &[0, 1], &[-3])),
            "column index -3 at position 0 (row 0) is out of range for 2 columns"
        );
        assert_eq!(
            e(CsrView::new(1, 4, &[0, 3], &[3, 1, 3])),
            "duplicate column 3 in row 0"
        );
        assert_eq!(
            e(CsrView::new(3, 4, &[0, 1, 1], &[0])),
            "row_ptr has 3 entries, expected nrows + 1 = 4"
        );
    }
}
