//! Patterns from coordinate lists: sort, merge duplicates, compress. Work and memory are
//! proportional to the number of entries, whatever the declared dimensions.

use super::csr::{check_dims, CsrPattern};
use crate::error::{Error, Result};

impl CsrPattern {
    /// Builds a pattern from 0-based `(row, col)` coordinates in any order; duplicates are
    /// merged. Costs `O(n log n)` time and `O(n)` memory for `n` coordinates, independent of
    /// `nrows` and `ncols`.
    ///
    /// A coordinate outside `nrows × ncols` is an error naming its position in `entries`.
    ///
    /// # Example
    ///
    /// ```
    /// use dashrank::pattern::CsrPattern;
    /// // One entry in a 2^31 - 1 square matrix: a few bytes, not 16 GiB of row pointers.
    /// let n = dashrank::pattern::MAX_DIM;
    /// let p = CsrPattern::from_coordinates(n, n, vec![(7, 3), (7, 3)])?;
    /// assert_eq!((p.nrows(), p.nnz()), (n, 1));
    /// assert_eq!(p.row(7), &[3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_coordinates(
        nrows: usize,
        ncols: usize,
        mut entries: Vec<(u32, u32)>,
    ) -> Result<Self> {
        check_dims(nrows, ncols)?;
        if let Some(pos) = entries
            .iter()
            .position(|&(r, c)| r as usize >= nrows || c as usize >= ncols)
        {
            let (r, c) = entries[pos];
            return Err(Error::pattern(
                None,
                format!("coordinate ({r}, {c}) at position {pos} is outside {nrows} x {ncols}"),
            ));
        }
        entries.sort_unstable();
        entries.dedup();
        let mut rows: Vec<u32> = Vec::new();
        let mut row_start = vec![0usize];
        let mut col_idx = Vec::with_capacity(entries.len());
        for (r, c) in entries {
            if rows.last() != Some(&r) {
                if !rows.is_empty() {
                    row_start.push(col_idx.len());
                }
                rows.push(r);
            }
            col_idx.push(c);
        }
        if !rows.is_empty() {
            row_start.push(col_idx.len());
        }
        Ok(Self::new_trusted(nrows, ncols, rows, row_start, col_idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_merges_and_compresses() {
        let p = CsrPattern::from_coordinates(4, 3, vec![(3, 2), (0, 1), (3, 0), (0, 1), (0, 0)])
            .expect("valid");
        assert_eq!(p.nonempty_rows(), &[0, 3]);
        assert_eq!(p.row_starts(), &[0, 2, 4]);
        assert_eq!(p.col_idx(), &[0, 1, 0, 2]);
        assert_eq!(
            p,
            CsrPattern::new(4, 3, vec![0, 2, 2, 2, 4], vec![1, 0, 2, 0]).expect("valid")
        );
        let empty = CsrPattern::from_coordinates(5, 5, vec![]).expect("valid");
        assert_eq!(
            empty,
            CsrPattern::new(5, 5, vec![0; 6], vec![]).expect("valid")
        );
    }

    #[test]
    fn out_of_range_is_named() {
        let e = CsrPattern::from_coordinates(2, 2, vec![(0, 0), (1, 2)]).expect_err("range");
        assert_eq!(
            e.to_string(),
            "invalid sparsity pattern: coordinate (1, 2) at position 1 is outside 2 x 2"
        );
    }
}
