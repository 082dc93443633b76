//! Conversion from `sprs` compressed matrices (CSR or CSC storage) to [`CsrPattern`].

use sprs::{CompressedStorage, CsMatBase, SpIndex};
use std::ops::Deref;

use super::csr::check_dims;
use super::CsrPattern;
use crate::error::{Error, Result};

impl CsrPattern {
    /// Builds a pattern from any `sprs` compressed matrix (owned or view, CSR or CSC
    /// storage, any index types). Values are ignored; explicitly stored zeros count as
    /// entries. CSC input is transposed into CSR order.
    ///
    /// The structure is re-checked (sprs offers unchecked constructors), so a malformed
    /// matrix is an error rather than undefined featurizer behaviour.
    ///
    /// # Example
    ///
    /// ```
    /// use dashrank::pattern::CsrPattern;
    /// let m = sprs::CsMat::<f64>::eye(3).to_csc();
    /// let p = CsrPattern::from_sprs(&m)?;
    /// assert_eq!(p.col_idx(), &[0, 1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_sprs<N, I, Iptr, IS, DS, PS>(m: &CsMatBase<N, I, PS, IS, DS, Iptr>) -> Result<Self>
    where
        I: SpIndex,
        Iptr: SpIndex,
        PS: Deref<Target = [Iptr]>,
        IS: Deref<Target = [I]>,
        DS: Deref<Target = [N]>,
    {
        let (nrows, ncols) = (m.rows(), m.cols());
        check_dims(nrows, ncols)?;
        let indptr = m.indptr();
        let indices = m.indices();
        let (outer, inner) = (m.outer_dims(), m.inner_dims());
        let conv = |i: I, pos: usize| -> Result<u32> {
            match i.try_index() {
                Some(v) if v < inner => Ok(v as u32),
                _ => Err(Error::pattern(
                    None,
                    format!("sprs matrix: index {i:?} at position {pos} is out of range for {inner} inner dims"),
                )),
            }
        };
        let range = |o: usize| -> Result<std::ops::Range<usize>> {
            let r = indptr.outer_inds_sz(o);
            if r.start > r.end || r.end > indices.len() {
                return Err(Error::pattern(
                    None,
                    format!("sprs matrix: bad indptr range {r:?} at outer index {o}"),
                ));
            }
            Ok(r)
        };
        match m.storage() {
            CompressedStorage::CSR => {
                let mut rows = Vec::new();
                let mut row_start = vec![0];
                let mut col_idx = Vec::with_capacity(m.nnz());
                for o in 0..outer {
                    let r = range(o)?;
                    for pos in r {
                        col_idx.push(conv(indices[pos], pos)?);
                    }
                    if col_idx.len() > *row_start.last().unwrap_or(&0) {
                        // o < nrows <= MAX_DIM fits u32.
                        rows.push(o as u32);
                        row_start.push(col_idx.len());
                    }
                }
                Self::from_checked_rows(nrows, ncols, rows, row_start, col_idx)
            }
            CompressedStorage::CSC => {
                // Coordinates, then sort: work follows the entries, not the row count.
                let mut coords = Vec::with_capacity(m.nnz());
                for o in 0..outer {
                    for pos in range(o)? {
                        // o < ncols <= MAX_DIM fits u32.
                        coords.push((conv(indices[pos], pos)?, o as u32));
                    }
                }
                coords.sort_unstable();
                if let Some(w) = coords.windows(2).find(|w| w[0] == w[1]) {
                    return Err(Error::pattern(
                        None,
                        format!("duplicate column {} in row {}", w[0].1, w[0].0),
                    ));
                }
                Self::from_coordinates(nrows, ncols, coords)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprs::{CsMat, CsMatI, TriMat};

    #[test]
    fn csr_and_csc_agree() {
        let mut t = TriMat::<f64>::new((3, 4));
        for &(r, c) in &[(0, 3), (0, 1), (2, 0), (1, 2), (2, 3)] {
            t.add_triplet(r, c, 1.0);
        }
        let csr: CsMat<f64> = t.to_csr();
        let csc: CsMat<f64> = t.to_csc();
        let a = CsrPattern::from_sprs(&csr).expect("csr");
        let b = CsrPattern::from_sprs(&csc).expect("csc");
        assert_eq!(a, b);
        assert_eq!(a.row(0), &[1, 3]);
        assert_eq!(a.row(2), &[0, 3]);
        // Views and other index types.
        let small: CsMatI<f32, u16, u32> =
            CsMatI::new((2, 2), vec![0, 1, 2], vec![1, 0], vec![1.0, 2.0]);
        let p = CsrPattern::from_sprs(&small.view()).expect("view");
        assert_eq!(p.col_idx(), &[1, 0]);
    }

    #[test]
    fn unchecked_sprs_matrix_is_rechecked() {
        // SAFETY: none needed; `new_unchecked` only skips sprs's checks.
        let bad: CsMat<f64> = unsafe {
            CsMat::new_unchecked(
                sprs::CompressedStorage::CSR,
                (1, 3),
                vec![0, 2],
                vec![1, 1],
                vec![1.0, 1.0],
            )
        };
        let e = CsrPattern::from_sprs(&bad).expect_err("duplicate");
        assert_eq!(
            e.to_string(),
            "invalid sparsity pattern: duplicate column 1 in row 0"
        );
        // SAFETY: as above.
        let bad_csc: CsMat<f64> = unsafe {
            CsMat::new_unchecked(
                sprs::CompressedStorage::CSC,
                (3, 2),
                vec![0, 0, 2],
                vec![2, 2],
                vec![1.0, 1.0],
            )
        };
        let e = CsrPattern::from_sprs(&bad_csc).expect_err("duplicate");
        assert_eq!(
            e.to_string(),
            "invalid sparsity pattern: duplicate column 1 in row 2"
        );
    }

    #[test]
    fn tall_csc_costs_its_entries() {
        // 2^31 - 1 rows, 2 columns, one entry: no per-row array is ever built.
        let n = crate::pattern::MAX_DIM;
        let m: CsMatI<f32, u32, u32> =
            CsMatI::new_csc((n, 2), vec![0, 0, 1], vec![n as u32 - 1], vec![1.0]);
        let p = CsrPattern::from_sprs(&m).expect("valid");
        assert_eq!(p.nonempty_rows(), &[n as u32 - 1]);
        assert_eq!(p.row(n - 1), &[1]);
    }
}
