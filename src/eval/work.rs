//! How much work evaluating a measured file is, estimated without evaluating it: the unit in
//! which [`Shard`](super::Shard)s are balanced.
//!
//! The estimate of a file is the nonzeros of its matrix times its measured lines, read from
//! the matrix's header (a few bytes) and a scan of the measured file; bounded by what the
//! files hold, so that a lying header cannot make one file look like the whole run. It depends
//! only on the files' contents, so every job of a sharded run computes the same estimates.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::jobs::{MeasuredFile, MeasuredFormat};
use crate::error::{Error, Result};

/// The estimated work of evaluating one measured file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileWork {
    /// Stored entries of the matrix (0 when the file has no matrix: it is skipped, not
    /// evaluated).
    pub nnz: u64,
    /// Lines of the measured file that carry a runtime (`… = <ms>`, or `…,<ms>` in CSV).
    pub measured_lines: u64,
}

impl FileWork {
    /// Estimates the work of `file`: the nonzeros its matrix announces (bounded by the
    /// matrix file's size) and its measured lines.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Io`](crate::ErrorKind::Io) when the measured file or the matrix cannot
    /// be read. A matrix whose header cannot be parsed is estimated from its size (its
    /// evaluation reports the problem).
    pub fn of(file: &MeasuredFile) -> Result<Self> {
        let measured_lines = count_measured_lines(&file.measured, file.format)?;
        let nnz = match &file.matrix {
            Some(path) => matrix_nnz(path)?,
            None => 0,
        };
        Ok(Self {
            nnz,
            measured_lines,
        })
    }

    /// The work in shard-balancing units: `nnz × measured_lines` (saturating).
    pub fn units(&self) -> u64 {
        self.nnz.saturating_mul(self.measured_lines)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(Some(path.to_owned()), e)
}

/// Lines with a runtime: WACO's `<tokens> = <ms>`, or CSV's `<schedule>,<ms>` (a header, blank
/// lines and `#` comments have none).
fn count_measured_lines(path: &Path, format: MeasuredFormat) -> Result<u64> {
    let reader = BufReader::new(File::open(path).map_err(io(path))?);
    let mut count = 0;
    for line in reader.split(b'\n') {
        let bytes = line.map_err(io(path))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let separator = match format {
            MeasuredFormat::Waco => '=',
            MeasuredFormat::Csv => ',',
        };
        let runtime = text.rsplit_once(separator).map(|(_, ms)| ms.trim());
        if runtime.is_some_and(|ms| ms.parse::<f64>().is_ok_and(f64::is_finite)) {
            count += 1;
        }
    }
    Ok(count)
}

/// The nonzeros a matrix file announces, at most what its size can hold (4 bytes per entry
/// in WACO's `.csr`; an entry line of Matrix Market is at least 4 bytes, `1 1\n`).
fn matrix_nnz(path: &Path) -> Result<u64> {
    let len = std::fs::metadata(path).map_err(io(path))?.len();
    let most = len / 4;
    let is_csr = path.extension().is_some_and(|e| e == "csr");
    let announced = if is_csr {
        waco_header_nnz(path)?
    } else {
        mtx_header_nnz(path)?
    };
    Ok(announced.map_or(most, |n| n.min(most)))
}

fn waco_header_nnz(path: &Path) -> Result<Option<u64>> {
    let mut header = [0u8; 12];
    let mut file = File::open(path).map_err(io(path))?;
    if file.read_exact(&mut header).is_err() {
        return Ok(None);
    }
    let nnz = i32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    Ok(u64::try_from(nnz).ok())
}

/// The entry count of the size line (`rows cols entries`, the first line after the `%`
/// comments) of a Matrix Market file.
fn mtx_header_nnz(path: &Path) -> Result<Option<u64>> {
    let reader = BufReader::new(File::open(path).map_err(io(path))?);
    // The size line comes after the header and comments; give up after a bounded prefix.
    for line in reader.split(b'\n').take(10_000) {
        let bytes = line.map_err(io(path))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() || text.starts_with('%') {
            continue;
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        return Ok(match fields[..] {
            [_, _, entries] => entries.parse().ok(),
            _ => None,
        });
    }
    Ok(None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dashrank-work-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn work_counts_nonzeros_and_measured_lines() {
        let dir = scratch("counts");
        let mtx = dir.join("a.mtx");
        std::fs::write(
            &mtx,
            "%%MatrixMarket matrix coordinate pattern general\n% c\n3 3 3\n1 1\n2 2\n3 3\n",
        )
        .unwrap();
        let txt = dir.join("a.txt");
        std::fs::write(&txt, "# c\n1 2 = 1.5\n\n3 4 = 2\n5 6\n7 8 = x\n").unwrap();
        let csv = dir.join("b.csv");
        std::fs::write(&csv, "schedule,ms\n\"1,2\",1.5\n3,nan\n4,2\n").unwrap();
        let file = |measured: &Path, format, matrix: Option<&Path>| MeasuredFile {
            name: "a".into(),
            measured: measured.to_owned(),
            format,
            matrix: matrix.map(Path::to_owned),
        };
        let w = FileWork::of(&file(&txt, MeasuredFormat::Waco, Some(&mtx))).unwrap();
        assert_eq!((w.nnz, w.measured_lines, w.units()), (3, 2, 6));
        let w = FileWork::of(&file(&csv, MeasuredFormat::Csv, None)).unwrap();
        assert_eq!((w.nnz, w.measured_lines, w.units()), (0, 2, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lying_header_is_bounded_by_the_file_size() {
        let dir = scratch("lying");
        let csr = dir.join("big.csr");
        let mut bytes = Vec::new();
        for v in [2i32, 2, i32::MAX, 0, 1, 2, 0, 1] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(&csr, &bytes).unwrap();
        assert_eq!(matrix_nnz(&csr).unwrap(), 8);
        let real = crate::CsrPattern::new(2, 2, vec![0, 1, 2], vec![1, 0]).unwrap();
        std::fs::write(&csr, real.to_waco_csr_bytes().unwrap()).unwrap();
        assert_eq!(matrix_nnz(&csr).unwrap(), 2);
        let mtx = dir.join("m.mtx");
        std::fs::write(
            &mtx,
            "%%MatrixMarket matrix coordinate pattern general\n9 9 99999\n1 1\n",
        )
        .unwrap();
        let len = std::fs::metadata(&mtx).unwrap().len();
        assert_eq!(matrix_nnz(&mtx).unwrap(), len / 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
