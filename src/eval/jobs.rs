//! Which files an evaluation reads: the measured files of a directory paired with their
//! matrices, and the deterministic split of that list into shards.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, ErrorKind, Result};

/// How a measured file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeasuredFormat {
    /// `<matrix>.txt`: WACO lines `<schedule tokens> = <ms>`
    /// ([`read_measured_lines`](crate::schedule::read_measured_lines)).
    Waco,
    /// `<matrix>.csv`: `schedule,ms` ([`read_measured_csv`](super::read_measured_csv)).
    Csv,
}

/// One measured file and the matrix it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredFile {
    /// The matrix name (the file stem).
    pub name: String,
    /// The measured file.
    pub measured: PathBuf,
    /// Its format (by extension).
    pub format: MeasuredFormat,
    /// `<name>.csr` or `<name>.mtx` in the matrices directory, when one exists.
    pub matrix: Option<PathBuf>,
}

/// The measured files (`<matrix>.txt`, `<matrix>.csv`) of `measured_dir`, sorted by matrix
/// name, each with its matrix `<matrix>.csr` (preferred) or `<matrix>.mtx` from
/// `matrices_dir` when there is one. Other files are ignored.
///
/// # Errors
///
/// [`ErrorKind::Io`](crate::ErrorKind::Io) when a directory cannot be read;
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when there is no measured
/// file at all, or two for one matrix (`a.txt` and `a.csv`).
pub fn find_measured_files(measured_dir: &Path, matrices_dir: &Path) -> Result<Vec<MeasuredFile>> {
    if !matrices_dir.is_dir() {
        return Err(Error::new(ErrorKind::Io {
            path: Some(matrices_dir.to_owned()),
            reason: "the matrices directory does not exist".into(),
        }));
    }
    let unreadable = |e: std::io::Error| {
        Error::new(ErrorKind::Io {
            path: Some(measured_dir.to_owned()),
            reason: format!("cannot read the measured-data directory: {e}"),
        })
    };
    let entries = std::fs::read_dir(measured_dir).map_err(unreadable)?;
    let mut by_name: BTreeMap<String, (PathBuf, MeasuredFormat)> = BTreeMap::new();
    for entry in entries {
        let path = entry.map_err(unreadable)?.path();
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("txt") => MeasuredFormat::Waco,
            Some("csv") => MeasuredFormat::Csv,
            _ => continue,
        };
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if let Some((other, _)) = by_name.get(&name) {
            return Err(Error::invalid_argument(format!(
                "two measured files for matrix {name}: {} and {}",
                other.display(),
                path.display()
            )));
        }
        by_name.insert(name, (path, format));
    }
    if by_name.is_empty() {
        return Err(Error::invalid_argument(format!(
            "no measured files (<matrix>.txt or <matrix>.csv) in {}",
            measured_dir.display()
        )));
    }
    Ok(by_name
        .into_iter()
        .map(|(name, (measured, format))| {
            let matrix = ["csr", "mtx"]
                .iter()
                .map(|ext| matrices_dir.join(format!("{name}.{ext}")))
                .find(|p| p.is_file());
            MeasuredFile {
                name,
                measured,
                format,
                matrix,
            }
        })
        .collect())
}

/// Shard `index` of `count` (1-based, written `I/N`): the items at positions `p` (0-based, in
/// the sorted file list) with `p mod count = index − 1`. The shards of one `count` partition
/// the list, and each is the same on every machine, so `N` jobs (a CI matrix, a Slurm array)
/// can each evaluate one shard and [`EvalReport::merge`](super::EvalReport::merge) combines
/// their partial reports.
///
/// # Example
/// ```
/// use dashrank::eval::Shard;
/// let shard: Shard = "2/3".parse()?;
/// assert_eq!(shard.select((0..8).collect()), vec![1, 4, 7]);
/// assert!("0/3".parse::<Shard>().is_err() && "4/3".parse::<Shard>().is_err());
/// # Ok::<(), dashrank::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    index: usize,
    count: usize,
}

impl Shard {
    /// The whole list (`1/1`).
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) unless
    /// `1 <= index <= count`.
    pub fn new(index: usize, count: usize) -> Result<Self> {
        if count == 0 || index == 0 || index > count {
            return Err(Error::invalid_argument(format!(
                "shard {index}/{count}: need 1 <= I <= N in I/N"
            )));
        }
        Ok(Self { index, count })
    }

    /// The 1-based shard number `I`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of shards `N`.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether position `p` (0-based) of the list belongs to this shard.
    pub fn contains(&self, p: usize) -> bool {
        p % self.count == self.index - 1
    }

    /// The items of this shard, in order.
    pub fn select<T>(&self, items: Vec<T>) -> Vec<T> {
        let keep = items.into_iter().enumerate();
        keep.filter(|(p, _)| self.contains(*p))
            .map(|(_, t)| t)
            .collect()
    }
}

impl FromStr for Shard {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid_argument(format!("shard '{s}' is not of the form I/N"));
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse().map_err(|_| bad())?;
        let n = n.trim().parse().map_err(|_| bad())?;
        Shard::new(i, n)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Serialize for Shard {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Shard {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_list() {
        for n in 1..6 {
            let mut all: Vec<usize> = (1..=n)
                .flat_map(|i| Shard::new(i, n).unwrap().select((0..23).collect()))
                .collect();
            all.sort_unstable();
            assert_eq!(all, (0..23).collect::<Vec<_>>());
        }
        let s: Shard = " 3 / 4 ".parse().unwrap();
        assert_eq!(s.to_string(), "3/4");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"3/4\"");
        assert_eq!(serde_json::from_str::<Shard>("\"3/4\"").unwrap(), s);
        for bad in ["3", "a/4", "1/0", "0/1", "5/4", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
