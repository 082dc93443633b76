//! WACO's binary `.csr` files: little-endian `i32` values
//! `num_row, num_col, nnz, row_ptr[num_row + 1], col_idx[nnz]`, no values, nothing after.

use std::io::Read;
use std::path::Path;

use super::csr::{check_cols_in_range, check_row_ptr, compress_row_ptr};
use super::{CsrPattern, PatternLimits};
use crate::error::{Error, ErrorKind, Result};

fn err(reason: String) -> Error {
    Error::pattern(None, format!("WACO .csr: {reason}"))
}

/// The three header words, checked to be non-negative.
#[derive(Debug, Clone, Copy)]
struct Header {
    nrows: usize,
    ncols: usize,
    nnz: usize,
}

fn header(bytes: &[u8]) -> Result<Header> {
    if bytes.len() < 12 {
        return Err(err(format!(
            "truncated header: {} bytes, need 12 for num_row, num_col, nnz",
            bytes.len()
        )));
    }
    let word = |i: usize| {
        i32::from_le_bytes([
            bytes[4 * i],
            bytes[4 * i + 1],
            bytes[4 * i + 2],
            bytes[4 * i + 3],
        ])
    };
    let mut v = [0usize; 3];
    for (i, name) in ["num_row", "num_col", "nnz"].into_iter().enumerate() {
        let w = word(i);
        v[i] = usize::try_from(w).map_err(|_| err(format!("negative {name} = {w} in header")))?;
    }
    Ok(Header {
        nrows: v[0],
        ncols: v[1],
        nnz: v[2],
    })
}

impl Header {
    fn check(self, limits: &PatternLimits) -> Result<Self> {
        limits.check_dims(self.nrows, self.ncols).map_err(in_file)?;
        limits
            .check_nnz(self.nnz, "header declares")
            .map_err(in_file)?;
        Ok(self)
    }

    /// File length implied by the header.
    fn byte_len(self) -> usize {
        self.nrows
            .saturating_add(self.nnz)
            .saturating_add(4)
            .saturating_mul(4)
    }
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
        Self::read_waco_csr_with(path, &PatternLimits::default())
    }

    /// [`read_waco_csr`](Self::read_waco_csr) with explicit limits. The header is read and
    /// checked first; then at most the byte count it implies (plus one, to detect trailing
    /// data) is read, so neither a lying header nor an endless file can make it allocate
    /// more than the limits allow.
    pub fn read_waco_csr_with(path: impl AsRef<Path>, limits: &PatternLimits) -> Result<Self> {
        let path = path.as_ref();
        let io = |e: std::io::Error| Error::io(Some(path.to_path_buf()), e);
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut bytes = Vec::new();
        (&mut file).take(12).read_to_end(&mut bytes).map_err(io)?;
        let expected = match header(&bytes).and_then(|h| h.check(limits)) {
            Ok(h) => h.byte_len(),
            Err(e) => return Err(e),
        };
        // Reserve what is both announced and present (a lying header gets neither).
        let present = file.metadata().map_err(io)?.len();
        bytes.reserve(usize::try_from(present).unwrap_or(0).min(expected));
        file.take(expected.saturating_sub(12) as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        Self::from_waco_csr_bytes_with(&bytes, limits)
    }

    /// Parses WACO's binary CSR layout: little-endian `i32` `num_row, num_col, nnz`, then
    /// `row_ptr[num_row + 1]`, then `col_idx[nnz]`, and nothing after.
    ///
    /// A truncated header, negative counts, a byte length that disagrees with the header, a
    /// bad `row_ptr` or an out-of-range column each give an error saying which. The header's
    /// dimensions and `nnz` are checked against [`PatternLimits::default`] (see
    /// [`from_waco_csr_bytes_with`](Self::from_waco_csr_bytes_with)).
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
        Self::from_waco_csr_bytes_with(bytes, &PatternLimits::default())
    }

    /// [`from_waco_csr_bytes`](Self::from_waco_csr_bytes) with explicit limits.
    pub fn from_waco_csr_bytes_with(bytes: &[u8], limits: &PatternLimits) -> Result<Self> {
        let h = header(bytes)?.check(limits)?;
        if !bytes.len().is_multiple_of(4) {
            return Err(err(format!(
                "truncated or corrupt file: length {} bytes is not a multiple of 4",
                bytes.len()
            )));
        }
        if bytes.len() != h.byte_len() {
            let what = if bytes.len() < h.byte_len() {
                "truncated"
            } else {
                "trailing data"
            };
            return Err(err(format!(
                "{what}: header (num_row = {}, nnz = {}) implies {} bytes, file has {}",
                h.nrows,
                h.nnz,
                h.byte_len(),
                bytes.len()
            )));
        }
        let words = |range: std::ops::Range<usize>| -> Vec<i32> {
            bytes[4 * range.start..4 * range.end]
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        let row_ptr = words(3..3 + h.nrows + 1);
        check_row_ptr(h.nrows, &row_ptr, h.nnz).map_err(in_file)?;
        let col_idx = words(3 + h.nrows + 1..3 + h.nrows + 1 + h.nnz);
        check_cols_in_range(h.ncols, &row_ptr, &col_idx).map_err(in_file)?;
        // Checked: row_ptr values are in 0..=nnz, columns in 0..ncols.
        let (rows, row_start) = compress_row_ptr(&row_ptr, |&v| v as usize);
        drop(row_ptr);
        let col_idx = col_idx.into_iter().map(|v| v as u32).collect();
        Self::from_checked_rows(h.nrows, h.ncols, rows, row_start, col_idx).map_err(in_file)
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
        for v in [self.nrows(), self.ncols(), self.nnz()] {
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        let mut end = 0;
        let mut nonempty = self.nonempty_rows().iter().zip(&self.row_starts()[1..]);
        let mut next = nonempty.next();
        out.extend_from_slice(&0i32.to_le_bytes());
        for r in 0..self.nrows() {
            if let Some((&row, &row_end)) = next {
                if row as usize == r {
                    end = row_end;
                    next = nonempty.next();
                }
            }
            out.extend_from_slice(&(end as i32).to_le_bytes());
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
