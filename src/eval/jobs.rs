//! Which files an evaluation reads: the measured files of a directory paired with their
//! matrices, and the deterministic split of that list into shards balanced by work.

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
/// [`ErrorKind::Io`] when a directory cannot be read; [`ErrorKind::InvalidArgument`] when
/// there is no measured file at all, or two for one matrix (`a.txt` and `a.csv`).
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

/// Shard `index` of `count` (1-based, written `I/N`) of a list of jobs, balanced by work.
///
/// The shards of one `count` partition the list; each item goes to one shard by a
/// deterministic greedy rule ([`Shard::assign`]): items in decreasing order of work (ties
/// by position), each to the shard with the least work so far (ties to the lowest shard).
/// Every job of a run computes the same assignment from the same list, so `N` jobs (a CI
/// matrix, a Slurm array) can each evaluate one shard and
/// [`EvalReport::merge`](super::EvalReport::merge) combines their partial reports. The
/// shards' total work differs by at most the largest item's work.
///
/// For an evaluation, an item's work is [`FileWork::units`](super::FileWork::units): the
/// matrix's nonzeros times the measured lines.
///
/// # Example
/// ```
/// use dashrank::eval::Shard;
/// let shard: Shard = "2/3".parse()?;
/// // Works 5, 9, 1, 7, 3: shard 1 gets 9, shard 2 gets 7 then 1, shard 3 gets 5 then 3.
/// let work = [5u64, 9, 1, 7, 3];
/// assert_eq!(Shard::assign(&work, 3), vec![2, 0, 1, 1, 2]);
/// assert_eq!(shard.select(vec!['a', 'b', 'c', 'd', 'e'], &work), vec!['c', 'd']);
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
    /// [`ErrorKind::InvalidArgument`] unless `1 <= index <= count`.
    pub fn new(index: usize, count: usize) -> Result<Self> {
        if count == 0 || index == 0 || index > count {
            return Err(Error::invalid_argument(format!(
                "shard {index}/{count}: need 1 <= I <= N in I/N"
            )));
        }
        Ok(Self { index, count })
    }

    /// The shard of the running task of a Slurm job array, from the values of
    /// `SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_MIN`, `SLURM_ARRAY_TASK_COUNT` and
    /// `SLURM_ARRAY_TASK_STEP` (1 when unset): task `min + step × (I − 1)` is shard `I/count`.
    /// Any contiguous or stepped range works (`--array=0-7`, `1-8`, `0-14:2`, with a `%`
    /// limit or not).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for a task that is not on the range (an irregular list
    /// such as `--array=1,4,5`).
    ///
    /// # Example
    /// ```
    /// use dashrank::eval::Shard;
    /// assert_eq!(Shard::from_array_task(10, 8, 4, 2)?.to_string(), "2/4");
    /// assert!(Shard::from_array_task(9, 8, 4, 2).is_err());
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn from_array_task(task: u64, min: u64, count: u64, step: u64) -> Result<Self> {
        let bad = |why: &str| {
            Error::invalid_argument(format!(
                "array task {task} (array of {count} tasks from {min}, step {step}) {why}; \
                 submit a range such as --array=1-{count}"
            ))
        };
        let offset = task
            .checked_sub(min)
            .ok_or_else(|| bad("is below the first task"))?;
        if step == 0 || offset % step != 0 {
            return Err(bad("is not on the array's range"));
        }
        let index = usize::try_from(offset / step + 1).map_err(|_| bad("is out of range"))?;
        let count = usize::try_from(count).map_err(|_| bad("is out of range"))?;
        Shard::new(index, count).map_err(|_| bad("is past the last task"))
    }

    /// The 1-based shard number `I`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of shards `N`.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The 0-based shard of each item of a list whose items have the given `work`, for
    /// `count` shards: items by decreasing work (ties by position), each to the shard with
    /// the least work so far (ties to the lowest shard). The same on every machine; the
    /// shards' totals differ by at most the largest work (when an item goes to the lightest
    /// shard, the heaviest exceeds it by at most the work of its own last item).
    pub fn assign(work: &[u64], count: usize) -> Vec<usize> {
        let count = count.max(1);
        let mut order: Vec<usize> = (0..work.len()).collect();
        order.sort_by(|&a, &b| work[b].cmp(&work[a]).then(a.cmp(&b)));
        let mut load = vec![0u64; count];
        let mut shard_of = vec![0; work.len()];
        for item in order {
            let lightest = (0..count).min_by_key(|&s| (load[s], s)).unwrap_or(0);
            load[lightest] = load[lightest].saturating_add(work[item]);
            shard_of[item] = lightest;
        }
        shard_of
    }

    /// The items of this shard, in list order, given each item's work (`work[p]` for
    /// `items[p]`; see [`Shard::assign`]).
    ///
    /// # Panics
    ///
    /// When `work` and `items` differ in length.
    pub fn select<T>(&self, items: Vec<T>, work: &[u64]) -> Vec<T> {
        assert_eq!(items.len(), work.len(), "one work value per item");
        let shard_of = Self::assign(work, self.count);
        items
            .into_iter()
            .zip(shard_of)
            .filter(|(_, s)| *s == self.index - 1)
            .map(|(t, _)| t)
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
        let work: Vec<u64> = (0..23u64).map(|i| (i * 7919) % 31).collect();
        for n in 1..6 {
            let mut all: Vec<usize> = (1..=n)
                .flat_map(|i| Shard::new(i, n).unwrap().select((0..23).collect(), &work))
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

    /// A small deterministic generator (xorshift), so the test needs no dependency.
    fn works(seed: u64, n: usize) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Heavy-tailed, as matrix sizes are: some items dwarf the rest.
                (x % 1000) * (1 + (x >> 40) % 4).pow(4)
            })
            .collect()
    }

    #[test]
    fn shard_totals_differ_by_at_most_the_largest_item() {
        for seed in 1..200u64 {
            let n = (seed % 40) as usize;
            let work = works(seed, n);
            for count in 1..9 {
                let shard_of = Shard::assign(&work, count);
                let mut load = vec![0u64; count];
                for (w, s) in work.iter().zip(&shard_of) {
                    load[*s] += w;
                }
                let spread = load.iter().max().unwrap() - load.iter().min().unwrap();
                let largest = work.iter().copied().max().unwrap_or(0);
                assert!(
                    spread <= largest,
                    "seed {seed}, {count} shards: {load:?} {work:?}"
                );
                assert_eq!(Shard::assign(&work, count), shard_of, "deterministic");
            }
        }
    }

    #[test]
    fn more_shards_than_items_give_each_heavy_item_its_own_shard() {
        let shard_of = Shard::assign(&[4, 0, 9], 5);
        assert_eq!(shard_of, vec![1, 2, 0]);
        assert!(Shard::assign(&[], 3).is_empty());
    }

    #[test]
    fn array_tasks_map_to_shards() {
        let at = |t, min, count, step| {
            Shard::from_array_task(t, min, count, step).map(|s| s.to_string())
        };
        assert_eq!(at(1, 1, 4, 1).unwrap(), "1/4");
        assert_eq!(at(0, 0, 4, 1).unwrap(), "1/4");
        assert_eq!(at(3, 0, 4, 1).unwrap(), "4/4");
        assert_eq!(at(14, 0, 8, 2).unwrap(), "8/8");
        for (t, min, count, step) in [
            (4, 0, 4, 1),
            (0, 1, 4, 1),
            (3, 0, 8, 2),
            (1, 1, 0, 1),
            (1, 1, 1, 0),
        ] {
            let e = at(t, min, count, step).unwrap_err().to_string();
            assert!(
                e.contains(&format!("array task {t}")) && e.contains("--array=1-"),
                "{e}"
            );
        }
    }
}
