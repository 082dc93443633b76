//! Jobs: the distinct output rows of one task of a stencil band.
//!
//! A stencil's output at a point is a function of its *key*: the list of its neighbours'
//! `(κ, input row id)` pairs in ascending κ (for a constant input, the neighbour mask). Points
//! with equal keys get one output row. Keys are hashed only when every input row in them is
//! shared: an input row used by a single point appears with a given κ in exactly one output
//! point's key, so a key containing it is unique and gets its own row without a lookup. This
//! is what keeps memoization cheap when most receptive fields are unique (the graph-like
//! matrices), and still shares the repeated ones in the same layer.
//!
//! Jobs are numbered in order of first occurrence within the task. Results never depend on
//! the numbering: every row is computed from its key by the same code in the same order.

use std::ops::Range;

use super::coords::Coords;
use super::masks::{mask_kappas, mask_of_list, MaskGeometry, MaskScanner};
use super::rulebook::{Geometry, Neighbours};
use super::window::Window;

/// The distinct output rows (jobs) of one task, and the job of each of its points.
#[derive(Debug, Default)]
pub(crate) struct TaskJobs {
    /// `(κ, input row id)` of every job, κ ascending within a job.
    pub pairs: Vec<(u32, u32)>,
    /// Job `j` is `pairs[starts[j]..starts[j + 1]]`.
    pub starts: Vec<u32>,
    /// Job of every output point of the task, in point order.
    pub point_job: Vec<u32>,
    /// Number of points using each job.
    pub uses: Vec<u32>,
    /// When the stencil wants shared products: per pair, its slot in `hot` if its input row
    /// is shared, else `u32::MAX`. Empty otherwise.
    pub slots: Vec<u32>,
    /// The distinct `(κ, input row id)` pairs with a shared input row, in slot order.
    pub hot: Vec<(u32, u32)>,
}

impl TaskJobs {
    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.uses.len()
    }

    /// The pairs of job `j`.
    #[inline]
    pub fn pairs(&self, j: usize) -> &[(u32, u32)] {
        &self.pairs[self.starts[j] as usize..self.starts[j + 1] as usize]
    }

    /// Neighbour pairs over all points (each point counts its job's pairs).
    pub fn point_pairs(&self) -> u64 {
        (0..self.len())
            .map(|j| u64::from(self.uses[j]) * u64::from(self.starts[j + 1] - self.starts[j]))
            .sum()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.pairs.capacity() + self.hot.capacity()) * 8
            + (self.starts.capacity()
                + self.point_job.capacity()
                + self.uses.capacity()
                + self.slots.capacity())
                * 4
    }

    /// Fills `slots` and `hot`: every pair whose input row is shared gets the slot of its
    /// `(κ, row)`, numbered in order of first occurrence.
    fn assign_slots(&mut self, input: &Window<'_>) {
        let mut map = PairMap::default();
        self.slots = self
            .pairs
            .iter()
            .map(|&(kappa, id)| {
                if !input.shared[id as usize] {
                    return u32::MAX;
                }
                let (slot, new) = map.insert(pack(kappa, id));
                if new {
                    self.hot.push((kappa, id));
                }
                slot
            })
            .collect();
    }

    fn new_job(&mut self, pairs: impl Iterator<Item = (u32, u32)>) -> u32 {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        self.pairs.extend(pairs);
        self.starts.push(self.pairs.len() as u32);
        self.uses.push(0);
        (self.uses.len() - 1) as u32
    }

    fn use_job(&mut self, j: u32) {
        self.point_job.push(j);
        self.uses[j as usize] += 1;
    }
}

/// Builds the jobs of the output rows `rows` of `out` (a band's output coordinates) over
/// `input`. `masks` is the bitmap layout to use for a constant input, if any; `products`
/// asks for the shared-product slots (`slots`, `hot`).
pub(crate) fn task_jobs(
    input: &Window<'_>,
    out: &Coords,
    rows: Range<usize>,
    geom: &Geometry,
    masks: Option<&MaskGeometry>,
    products: bool,
) -> TaskJobs {
    let mut jobs = find_jobs(input, out, rows, geom, masks);
    if products {
        jobs.assign_slots(input);
    }
    jobs
}

fn find_jobs(
    input: &Window<'_>,
    out: &Coords,
    rows: Range<usize>,
    geom: &Geometry,
    masks: Option<&MaskGeometry>,
) -> TaskJobs {
    let mut jobs = TaskJobs {
        starts: vec![0],
        point_job: Vec::with_capacity(out.points_of(rows.clone()).len()),
        pairs: Vec::with_capacity(2 * out.points_of(rows.clone()).len()),
        ..TaskJobs::default()
    };
    let mut keys = KeySet::with_capacity(out.points_of(rows.clone()).len());
    let mut key_job: Vec<u32> = Vec::new();
    let k = geom.k as u32;
    if input.is_constant() && geom.k * geom.k <= 64 {
        // The key is the neighbour mask; the job's pairs all read row 0.
        let mut job_of = |mask: u64, jobs: &mut TaskJobs| -> u32 {
            let (key, new) = keys.insert(&[mask]);
            if new {
                key_job.push(jobs.new_job(mask_kappas(mask, k).map(|kappa| (kappa, 0))));
            }
            key_job[key as usize]
        };
        let mut last: Option<(u64, u32)> = None;
        let mut once = |mask: u64, jobs: &mut TaskJobs| {
            let j = match last {
                Some((m, j)) if m == mask => j,
                _ => job_of(mask, jobs),
            };
            last = Some((mask, j));
            jobs.use_job(j);
        };
        if let Some(g) = masks {
            let mut scan = MaskScanner::new(&input.coords, geom, g);
            for ri in rows {
                scan.start_row(out.rows[ri]);
                for p in out.row_range(ri) {
                    once(scan.mask(out.cols[p]), &mut jobs);
                }
                scan.end_row();
            }
        } else {
            let mut nb = Neighbours::new(&input.coords, geom);
            for ri in rows {
                nb.start_row(out.rows[ri]);
                for p in out.row_range(ri) {
                    once(mask_of_list(nb.point_unsorted(out.cols[p]), k), &mut jobs);
                }
            }
        }
        return jobs;
    }
    let mut nb = Neighbours::new(&input.coords, geom);
    let mut key: Vec<u64> = Vec::with_capacity(geom.volume());
    for ri in rows {
        nb.start_row(out.rows[ri]);
        for p in out.row_range(ri) {
            let list = nb.point(out.cols[p]);
            let pairs = list
                .iter()
                .map(|&(kappa, q)| (kappa, input.ids[q as usize]));
            let j = if list.iter().all(|&(_, q)| input.point_shared(q as usize)) {
                key.clear();
                key.extend(pairs.clone().map(|(kappa, id)| pack(kappa, id)));
                let (kk, new) = keys.insert(&key);
                if new {
                    key_job.push(jobs.new_job(pairs));
                }
                key_job[kk as usize]
            } else {
                jobs.new_job(pairs)
            };
            jobs.use_job(j);
        }
    }
    jobs
}

/// A set of keys (`u64` sequences) numbered in insertion order: open addressing over a
/// power-of-two slot array, keys stored back to back in one arena.
#[derive(Default)]
struct KeySet {
    /// `0` = empty, else key number + 1.
    slots: Vec<u32>,
    hashes: Vec<u64>,
    /// Key `k` is `arena[starts[k]..starts[k + 1]]`.
    starts: Vec<usize>,
    arena: Vec<u64>,
}

impl KeySet {
    /// An empty set with room for about `n` keys without growing.
    fn with_capacity(n: usize) -> Self {
        Self {
            slots: vec![0; (2 * n).next_power_of_two().max(64)],
            hashes: Vec::with_capacity(n),
            starts: Vec::with_capacity(n),
            arena: Vec::with_capacity(n),
        }
    }

    fn len(&self) -> usize {
        self.hashes.len()
    }

    fn key(&self, k: usize) -> &[u64] {
        let end = self.starts.get(k + 1).copied().unwrap_or(self.arena.len());
        &self.arena[self.starts[k]..end]
    }

    fn hash(key: &[u64]) -> u64 {
        let mut h = key.len() as u64;
        for &v in key {
            h = (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        h ^ (h >> 29)
    }

    /// The number of `key`, inserting it if new, and whether it was new.
    #[inline]
    fn insert(&mut self, key: &[u64]) -> (u32, bool) {
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let h = Self::hash(key);
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            match self.slots[i] {
                0 => {
                    let k = self.len();
                    self.slots[i] = k as u32 + 1;
                    self.hashes.push(h);
                    self.starts.push(self.arena.len());
                    self.arena.extend_from_slice(key);
                    return (k as u32, true);
                }
                s => {
                    let k = (s - 1) as usize;
                    // Element by element: keys are short, and a slice `==` calls `memcmp`.
                    let old = self.key(k);
                    if self.hashes[k] == h
                        && old.len() == key.len()
                        && old.iter().zip(key).all(|(a, b)| a == b)
                    {
                        return (k as u32, false);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(64);
        self.slots = vec![0; size];
        let mask = size - 1;
        for (k, &h) in self.hashes.iter().enumerate() {
            let mut i = (h as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = k as u32 + 1;
        }
    }
}

#[inline]
fn pack(kappa: u32, id: u32) -> u64 {
    (u64::from(kappa) << 32) | u64::from(id)
}

/// `u64 → slot` map numbering keys in insertion order (open addressing).
#[derive(Default)]
struct PairMap {
    /// `(key, slot + 1)`; slot 0 = empty.
    table: Vec<(u64, u32)>,
    len: usize,
}

impl PairMap {
    #[inline]
    fn index(key: u64, mask: usize) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
    }

    /// The slot of `key`, inserting it if new, and whether it was new.
    fn insert(&mut self, key: u64) -> (u32, bool) {
        if (self.len + 1) * 2 > self.table.len() {
            let old = std::mem::take(&mut self.table);
            self.table = vec![(0, 0); (old.len() * 2).max(64)];
            let mask = self.table.len() - 1;
            for (k, s) in old.into_iter().filter(|e| e.1 != 0) {
                let mut i = Self::index(k, mask);
                while self.table[i].1 != 0 {
                    i = (i + 1) & mask;
                }
                self.table[i] = (k, s);
            }
        }
        let mask = self.table.len() - 1;
        let mut i = Self::index(key, mask);
        loop {
            match self.table[i] {
                (_, 0) => {
                    self.len += 1;
                    self.table[i] = (key, self.len as u32);
                    return (self.len as u32 - 1, true);
                }
                (k, s) if k == key => return (s - 1, false),
                _ => i = (i + 1) & mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_set_numbers_in_insertion_order() {
        let mut s = KeySet::default();
        let keys: Vec<Vec<u64>> = (0..1000u64).map(|i| vec![i % 7, i % 13, i]).collect();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.insert(k), (i as u32, true));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.insert(k), (i as u32, false));
            assert_eq!(s.key(i), k.as_slice());
        }
        assert_eq!(s.insert(&[]), (1000, true));
        assert_eq!(s.insert(&[]), (1000, false));
        assert_eq!(s.len(), 1001);
    }
}
