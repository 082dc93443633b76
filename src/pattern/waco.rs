//! WACO's binary `.csr` files: little-endian `i32` values
//! `num_row, num_col, nnz, row_ptr[num_row + 1], col_idx[nnz]`, no values, nothing after.

use std::path::Path;

use super::csr::{check_cols_in_range, check_dims, check_row_ptr};
use super::CsrPattern;
use crate::error::{Error, ErrorKind, Result};

fn err(reason: String) -> Error {
    Error::pattern(None, format!("WACO .csr: {reason}"))
}

/// Prefixes a structure-check error with the file format.
fn in_file(e: Error) -> Error {
    match e.kind() {
        ErrorKind::Pattern { reason, .. } => err(reason.clone()),
        _ => e,
    }
}

impl CsrPattern {
    /// Reads a WACO binary `.csr` file (see [`from_waco_csr_bytes`](Self::from_waco_csr_bytes)).
    pub fn read_waco_csr(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(Some(path.to_path_buf()), e))?;
        Self::from_waco_csr_bytes(&bytes)
    }

    /// Parses WACO's binary CSR layout: little-endian `i32` `num_row, num_col, nnz`, then
    /// `row_ptr[num_row + 1]`, then `col_idx[nnz]`, and nothing after.
    ///
    /// A truncated header, negative counts, a byte length that disagrees with the header, a
    /// bad `row_ptr` or an out-of-range column each give an error saying which.
    ///
    /// # Example
    ///
    /// ```
    /// use dashrank::pattern::CsrPattern;
    /// let p = CsrPattern::new(2, 2, vec![0, 1, 2], vec![1, 0])?;
    /// let bytes = p.to_waco_csr_bytes()?;
    /// assert_eq!(CsrPattern::from_waco_csr_bytes(&bytes)?, p);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_waco_csr_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < 12 {
            return Err(err(format!(
                "truncated header: {} bytes, need 12 for num_row, num_col, nnz",
                bytes.len()
            )));
        }
        if !bytes.len().is_multiple_of(4) {
            return Err(err(format!(
                "truncated or corrupt file: length {} bytes is not a multiple of 4",
                bytes.len()
            )));
        }
        let words: Vec<i32> = bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let (nrows, ncols, nnz) = (words[0], words[1], words[2]);
        for (name, v) in [("num_row", nrows), ("num_col", ncols), ("nnz", nnz)] {
            if v < 0 {
                return Err(err(format!("negative {name} = {v} in header")));
            }
        }
        let (nrows, ncols, nnz) = (nrows as usize, ncols as usize, nnz as usize);
        let expected = 3 + (nrows + 1) + nnz;
        if words.len() != expected {
            let what = if words.len() < expected {
                "truncated"
            } else {
                "trailing data"
            };
            return Err(err(format!(
                "{what}: header (num_row = {nrows}, nnz = {nnz}) implies {} bytes, file has {}",
                4 * expected,
                bytes.len()
            )));
        }
        check_dims(nrows, ncols)?;
        let row_ptr = &words[3..3 + nrows + 1];
        let col_idx = &words[3 + nrows + 1..];
        check_row_ptr(nrows, row_ptr, nnz).map_err(in_file)?;
        check_cols_in_range(ncols, row_ptr, col_idx).map_err(in_file)?;
        let row_ptr = row_ptr.iter().map(|&v| v as usize).collect();
        let col_idx = col_idx.iter().map(|&v| v as u32).collect();
        Self::new(nrows, ncols, row_ptr, col_idx).map_err(in_file)
    }

    /// Serialises to WACO's binary CSR layout. Fails if `nnz` exceeds `i32::MAX`.
    pub fn to_waco_csr_bytes(&self) -> Result<Vec<u8>> {
        if self.nnz() > i32::MAX as usize {
            return Err(Error::invalid_argument(format!(
                "nnz = {} does not fit the WACO .csr format (i32)",
                self.nnz()
            )));
        }
        let mut out = Vec::with_capacity(4 * (3 + self.nrows() + 1 + self.nnz()));
        // All values are <= i32::MAX: dims by MAX_DIM, row_ptr by nnz, cols by ncols.
        for v in [self.nrows(), self.ncols(), self.nnz()]
            .into_iter()
            .chain(self.row_ptr().iter().copied())
        {
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        for &c in self.col_idx() {
            out.extend_from_slice(&(c as i32).to_le_bytes());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[i32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn reason(bytes: &[u8]) -> String {
        let e = CsrPattern::from_waco_csr_bytes(bytes).expect_err("must fail");
        match e.kind() {
            ErrorKind::Pattern { reason, .. } => reason.clone(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn roundtrip() {
        let b = words(&[2, 3, 3, 0, 2, 3, 2, 0, 1]);
        let p = CsrPattern::from_waco_csr_bytes(&b).expect("valid");
        assert_eq!(p.row(0), &[0, 2]);
        assert_eq!(p.row(1), &[1]);
        let again = p.to_waco_csr_bytes().expect("fits");
        assert_eq!(again, words(&[2, 3, 3, 0, 2, 3, 0, 2, 1]));
    }

    #[test]
    fn errors() {
        assert_eq!(
            reason(&[0u8; 8]),
            "WACO .csr: truncated header: 8 bytes, need 12 for num_row, num_col, nnz"
        );
        assert_eq!(
            reason(&[0u8; 13]),
            "WACO .csr: truncated or corrupt file: length 13 bytes is not a multiple of 4"
        );
        assert_eq!(
            reason(&words(&[-1, 2, 0])),
            "WACO .csr: negative num_row = -1 in header"
        );
        assert_eq!(
            reason(&words(&[1, 2, -5])),
            "WACO .csr: negative nnz = -5 in header"
        );
        assert_eq!(
            reason(&words(&[1, 2, 1, 0, 1])),
            "WACO .csr: truncated: header (num_row = 1, nnz = 1) implies 24 bytes, file has 20"
        );
        assert_eq!(
            reason(&words(&[1, 2, 1, 0, 1, 0, 7])),
            "WACO .csr: trailing data: header (num_row = 1, nnz = 1) implies 24 bytes, file has 28"
        );
        assert_eq!(
            reason(&words(&[1, 2, 1, 0, 2, 0])),
            "WACO .csr: row_ptr[1] = 2 but col_idx has 1 entries"
        );
        assert_eq!(
            reason(&words(&[1, 2, 1, 0, 1, 2])),
            "WACO .csr: column index 2 at position 0 (row 0) is out of range for 2 columns"
        );
        assert_eq!(
            reason(&words(&[1, 2, 1, 0, 1, -2])),
            "WACO .csr: column index -2 at position 0 (row 0) is out of range for 2 columns"
        );
        assert_eq!(
            reason(&words(&[1, 3, 2, 0, 2, 1, 1])),
            "WACO .csr: duplicate column 1 in row 0"
        );
    }

    #[test]
    fn missing_file_is_io_error() {
        let e = CsrPattern::read_waco_csr("/nonexistent/x.csr").expect_err("must fail");
        assert!(matches!(e.kind(), ErrorKind::Io { path: Some(_), .. }));
    }

    /// Reads every real WACO matrix shipped in the shared data directory, if present.
    #[test]
    fn real_matrices() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/waco/matrices");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            println!("skipping: {} not found", dir.display());
            return;
        };
        let mut n = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("csr") {
                continue;
            }
            let p = CsrPattern::read_waco_csr(&path).expect("real matrix reads");
            let bytes = std::fs::read(&path).expect("readable");
            assert!(p.nnz() > 0, "{}", path.display());
            assert_eq!(
                p.to_waco_csr_bytes().expect("fits"),
                bytes,
                "{}",
                path.display()
            );
            n += 1;
        }
        println!("read {n} real matrices");
    }
}
