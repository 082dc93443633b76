//! Jobs: the distinct output rows of one task of a stencil band.
//!
//! A stencil's output at a point is a function of its *key*: the list of its neighbours'
//! `(κ, input row id)` pairs in visiting order (kernel row, then column: a canonical order of
//! the set). Points with equal keys get one output row.
//! Keys are looked up only when every input row in them is shared: an input row used by a
//! single point appears with a given κ in exactly one output point's key, so a key containing
//! it is unique and gets its own row without a lookup. This is what keeps memoization cheap
//! when most receptive fields are unique (the graph-like matrices) while it still shares the
//! repeated ones in the same layer. For a constant input (the pattern), keys are neighbour
//! masks read out of bitmaps (`masks`), carried as two pseudo-pairs through the band-wide
//! merge and expanded into their pairs once per distinct mask of the band ([`expand_masks`]).
//!
//! Phase A of a band step gives each task two job lists — its distinct *keyed* jobs (to be
//! merged band-wide, see `band`) and its *unique* jobs — and each point's job. Results never
//! depend on how jobs are numbered or merged: every row is computed from its key by the same
//! code in the same order.

use std::ops::Range;

use super::coords::Coords;
use super::lone::LoneFilter;
use super::masks::{MaskGeometry, MaskScanner};
use super::rulebook::{mask_kappas, Neighbours, PairSink, Search};
use super::search_memo::MemoChunk;
use super::window::Window;

/// A list of jobs: their neighbour pairs, how many points use each, and for the ones whose
/// products repeat, their product slots.
#[derive(Debug, Default)]
pub(crate) struct TaskJobs {
    /// `(κ, input row id)` of every job, in visiting order (kernel row `i_r` ascending, then
    /// `i_c`; for a constant input, κ ascending, and a mask's two pseudo-pairs before
    /// [`expand_masks`]).
    pub pairs: Vec<(u32, u32)>,
    /// Job `j` is `pairs[starts[j]..starts[j + 1]]`.
    pub starts: Vec<u32>,
    /// Number of points using each job.
    pub uses: Vec<u32>,
    /// Hash of each job's key (keyed jobs only).
    pub hash: Vec<u64>,
    /// After [`assign_slots`](Self::assign_slots): per pair, its slot in `hot`, or
    /// `u32::MAX`. Empty otherwise.
    pub slots: Vec<u32>,
    /// The distinct `(κ, input row id)` pairs used by two or more pairs, in slot order.
    pub hot: Vec<(u32, u32)>,
}

impl TaskJobs {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            starts: vec![0],
            ..Self::default()
        }
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.uses.len()
    }

    /// The pairs of job `j`.
    #[inline]
    pub fn pairs(&self, j: usize) -> &[(u32, u32)] {
        &self.pairs[self.starts[j] as usize..self.starts[j + 1] as usize]
    }

    /// Appends a job with `pairs`, used by `uses` points.
    #[inline]
    pub fn push_job(&mut self, pairs: impl Iterator<Item = (u32, u32)>, uses: u32) -> u32 {
        self.pairs.extend(pairs);
        self.starts.push(self.pairs.len() as u32);
        self.uses.push(uses);
        (self.uses.len() - 1) as u32
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.pairs.capacity() + self.hot.capacity() + self.hash.capacity()) * 8
            + (self.starts.capacity() + self.uses.capacity() + self.slots.capacity()) * 4
    }

    /// Fills `slots` and `hot`: every `(κ, row)` with a shared input row that two or more
    /// of the jobs' pairs use gets a slot (numbered in order of first occurrence), so its
    /// product is computed once.
    pub fn assign_slots(&mut self, input: &Window<'_>) {
        let mut map = PairMap::with_capacity(self.pairs.len());
        let mut seen: Vec<((u32, u32), u32)> = Vec::new(); // per map entry: pair, uses
        let first: Vec<u32> = self
            .pairs
            .iter()
            .map(|&(kappa, id)| {
                if !input.shared[id as usize] {
                    return u32::MAX;
                }
                let (e, new) = map.insert(pack(kappa, id));
                if new {
                    seen.push(((kappa, id), 0));
                }
                seen[e as usize].1 += 1;
                e
            })
            .collect();
        let mut slot_of = vec![u32::MAX; seen.len()];
        for (e, &(pair, uses)) in seen.iter().enumerate() {
            if uses >= 2 {
                slot_of[e] = self.hot.len() as u32;
                self.hot.push(pair);
            }
        }
        self.slots = first
            .iter()
            .map(|&e| {
                if e == u32::MAX {
                    e
                } else {
                    slot_of[e as usize]
                }
            })
            .collect();
    }
}

/// `Phase::point_job` bit of a keyed job.
pub(crate) const KEYED: u32 = 1 << 31;

/// Phase A's result for one task.
#[derive(Debug, Default)]
pub(crate) struct Phase {
    /// Distinct keyed jobs, with their hashes.
    pub keyed: TaskJobs,
    /// Unique jobs.
    pub unique: TaskJobs,
    /// Per point: its job, `KEYED | j` in `keyed` or `j` in `unique`.
    pub point_job: Vec<u32>,
    /// Neighbour pairs over all points.
    pub point_pairs: u64,
    /// What the task's block search recorded for later layers (see `search_memo`).
    pub memo: Option<MemoChunk>,
}

impl Phase {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.keyed.bytes()
            + self.unique.bytes()
            + self.point_job.capacity() * 4
            + self.memo.as_ref().map_or(0, MemoChunk::bytes)
    }
}

/// κ of the two pseudo-pairs `(MASK_KEY, low half)`, `(MASK_KEY, high half)` that stand for
/// a neighbour mask in the jobs of a constant input until [`expand_masks`] (no kernel index
/// is this large), so tasks and the band-wide merge handle two pairs per key, not one per
/// neighbour.
const MASK_KEY: u32 = u32::MAX;

/// The pseudo-pairs of `mask` (see [`MASK_KEY`]).
#[inline]
fn mask_key(mask: u64) -> [(u32, u32); 2] {
    [(MASK_KEY, mask as u32), (MASK_KEY, (mask >> 32) as u32)]
}

/// A job list of a constant input with each mask key replaced by its neighbour pairs
/// `(κ, row 0)`, κ ascending; `k` is the kernel size.
pub(crate) fn expand_masks(list: TaskJobs, k: u32) -> TaskJobs {
    let mut out = TaskJobs::new();
    out.pairs.reserve(list.len() * 8);
    for j in 0..list.len() {
        let mask = match list.pairs(j) {
            &[(MASK_KEY, lo), (MASK_KEY, hi)] => (u64::from(hi) << 32) | u64::from(lo),
            other => unreachable!("not a mask key: {other:?}"),
        };
        out.push_job(mask_kappas(mask, k).map(|kappa| (kappa, 0)), list.uses[j]);
    }
    out
}

/// Builds the jobs of the output rows `rows` of `out` (a band's output coordinates) over
/// `input`. `masks` is the bitmap layout to use for a constant input, if any; with
/// `share = false` no key is looked up and every point gets its own job. `level` is the
/// instruction-set level of the neighbour search.
pub(crate) fn task_jobs<'a>(
    input: &'a Window<'_>,
    out: &Coords,
    rows: Range<usize>,
    search: Search<'a>,
    masks: Option<&MaskGeometry>,
    share: bool,
) -> Phase {
    let n = out.points_of(rows.clone()).len();
    let ph = Phase {
        keyed: TaskJobs::new(),
        unique: TaskJobs::new(),
        point_job: Vec::with_capacity(n),
        point_pairs: 0,
        memo: None,
    };
    if input.is_constant() && search.geom.k * search.geom.k <= 64 {
        mask_jobs(input, out, rows, search, masks, ph)
    } else {
        pair_jobs(input, out, rows, search, share, ph)
    }
}

/// [`task_jobs`] of a constant input whose neighbour masks fit a `u64`: the key is the
/// neighbour mask, kept as two pseudo-pairs until [`expand_masks`] (the job's pairs then all
/// read row 0); the masks come from the bitmaps of `masks`, else from the neighbour search,
/// which rows whose points are all certified alone (see `lone`) skip.
fn mask_jobs(
    input: &Window<'_>,
    out: &Coords,
    rows: Range<usize>,
    search: Search<'_>,
    masks: Option<&MaskGeometry>,
    mut ph: Phase,
) -> Phase {
    let geom = search.geom;
    let mut jobs = MaskJobs::default();
    if let Some(g) = masks {
        let mut scan = MaskScanner::new(&input.coords, geom, g);
        for ri in rows {
            scan.start_row(out.rows[ri]);
            for p in out.row_range(ri) {
                jobs.point(scan.mask(out.cols[p]), &mut ph);
            }
        }
    } else {
        let mut nb = Neighbours::new(&input.coords, geom, search.level);
        let mut lone = search
            .centred
            .then(|| LoneFilter::new(&input.coords, geom))
            .flatten();
        // The mask of a lone point: its own offset, `(⌊k/2⌋, ⌊k/2⌋)`.
        let own = 1u64 << (geom.k / 2 * (geom.k + 1));
        for ri in rows {
            let (row, cols) = (out.rows[ri], &out.cols[out.row_range(ri)]);
            if let Some(f) = &mut lone {
                // A row with one point not certified is searched whole: on the patterns of
                // BENCHMARKS.md searching only those points gained nothing.
                if f.row_alone(row, cols) {
                    cols.iter().for_each(|_| jobs.point(own, &mut ph));
                    continue;
                }
                if !f.pays() {
                    lone = None;
                }
            }
            nb.start_row(row);
            nb.each_mask(cols, |_, mask| jobs.point(mask, &mut ph));
        }
    }
    ph
}

/// The jobs of [`mask_jobs`]: one per distinct neighbour mask, found through an index of
/// the masks' hashes.
struct MaskJobs {
    index: Index,
    /// Per job, its mask and the mask's hash.
    masks: Vec<u64>,
    hashes: Vec<u64>,
    /// The last point's mask and job (consecutive points often share one).
    last: Option<(u64, u32)>,
}

impl Default for MaskJobs {
    fn default() -> Self {
        Self {
            index: Index::with_capacity(64),
            masks: Vec::new(),
            hashes: Vec::new(),
            last: None,
        }
    }
}

impl MaskJobs {
    /// Gives the next point, of neighbour mask `mask`, its job in `ph` (a new job for a
    /// new mask).
    #[inline]
    fn point(&mut self, mask: u64, ph: &mut Phase) {
        let j = match self.last {
            Some((m, j)) if m == mask => j,
            _ => self.job_of(mask, ph),
        };
        self.last = Some((mask, j));
        ph.keyed.uses[j as usize] += 1;
        ph.point_job.push(KEYED | j);
        ph.point_pairs += u64::from(mask.count_ones());
    }

    /// The job of `mask`, added to `ph`'s keyed jobs when new.
    fn job_of(&mut self, mask: u64, ph: &mut Phase) -> u32 {
        // The index takes the hash's low bits: fold the product's high half into them (the
        // low bits of a product depend only on the mask's low bits, and masks that differ
        // only in their upper kernel columns would all probe from one slot).
        let x = mask.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let h = x ^ (x >> 32);
        let masks = &self.masks;
        let (j, new) = self.index.find(h, &self.hashes, |j| masks[j] == mask);
        if new {
            let key = mask_key(mask);
            ph.keyed.hash.push(hash_pairs(key.into_iter()));
            ph.keyed.push_job(key.into_iter(), 0);
            self.masks.push(mask);
            self.hashes.push(h);
        }
        j
    }
}

/// [`task_jobs`] of an input of computed rows (or of a constant input with wide kernels):
/// each point's key is its neighbour pairs, looked up through a [`KeySink`].
fn pair_jobs<'a>(
    input: &'a Window<'_>,
    out: &Coords,
    rows: Range<usize>,
    search: Search<'a>,
    share: bool,
    mut ph: Phase,
) -> Phase {
    let geom = search.geom;
    let n = out.points_of(rows.clone()).len();
    ph.unique.pairs.reserve(geom.k * n);
    ph.unique.starts.reserve(n);
    ph.unique.uses.reserve(n);
    let mut nb = search.neighbours(&input.coords);
    nb.reserve_record(n, rows.len());
    // Single-pair keys (most points of the sparse inputs' early layers) are found by
    // `(κ, row)` in a table, when it is small beside the task's points.
    let entries = geom.volume() * input.table_rows();
    let single = if share && entries <= SINGLE_ENTRIES_PER_POINT * n.max(1) {
        vec![0; entries]
    } else {
        Vec::new()
    };
    let mut keys = KeySink {
        ids: &input.ids,
        shared: &input.shared,
        share,
        all_shared: share,
        key: Vec::with_capacity(geom.volume()),
        index: Index::with_capacity(if share { n } else { 0 }),
        single,
        ph,
    };
    for ri in rows {
        nb.start_row(out.rows[ri]);
        nb.each_point_into(&out.cols[out.row_range(ri)], &mut keys);
    }
    let mut ph = keys.ph;
    ph.memo = nb.into_record();
    count_uses(&mut ph);
    ph
}

/// Counts the points of each keyed job from `point_job` (once the task's points all have
/// their jobs: a separate pass, so that finding a point's job never waits on its count).
fn count_uses(ph: &mut Phase) {
    let uses = &mut ph.keyed.uses;
    for &j in &ph.point_job {
        if j & KEYED != 0 {
            uses[(j & !KEYED) as usize] += 1;
        }
    }
}

/// Phase A's pair sink for an input of computed rows: builds each point's key
/// `(κ, input row id)` and finds its job.
struct KeySink<'a> {
    /// The input points' row ids and the input rows' shared flags.
    ids: &'a [u32],
    shared: &'a [bool],
    /// Look keys up at all.
    share: bool,
    /// Every row of the current key is shared so far.
    all_shared: bool,
    /// The current point's key.
    key: Vec<(u32, u32)>,
    /// The task's keyed jobs by key hash, except the single-pair keys that `single` holds.
    index: Index,
    /// The keyed job + 1 of the single-pair key `(κ, row)` at `κ · table rows + row` (0:
    /// not seen yet), in place of `index` for them; empty when too large for the task.
    single: Vec<u32>,
    ph: Phase,
}

/// The single-pair key table of a task is used when it has at most this many entries per
/// point of the task (its zeroing then costs about a nanosecond per point).
const SINGLE_ENTRIES_PER_POINT: usize = 8;

impl PairSink for KeySink<'_> {
    #[inline(always)]
    fn pair(&mut self, kappa: u32, q: u32) {
        let id = self.ids[q as usize];
        self.all_shared &= self.shared[id as usize];
        self.key.push((kappa, id));
    }

    #[inline(always)]
    fn end_point(&mut self) {
        self.ph.point_pairs += self.key.len() as u64;
        if self.all_shared {
            let single = match self.key.as_slice() {
                &[(kappa, id)] if !self.single.is_empty() => {
                    Some(kappa as usize * self.shared.len() + id as usize)
                }
                _ => None,
            };
            let known = single.map_or(0, |e| self.single[e]);
            let j = if known != 0 {
                known - 1
            } else {
                self.look_up(single)
            };
            self.ph.point_job.push(KEYED | j);
        } else {
            let j = self.ph.unique.push_job(self.key.iter().copied(), 1);
            self.ph.point_job.push(j);
        }
        self.key.clear();
        self.all_shared = self.share;
    }

    /// A single-pair key already in the table gives the point its job without building the
    /// key (a non-zero entry means its row is shared).
    #[inline(always)]
    fn only_pair(&mut self, kappa: u32, q: u32) {
        let id = self.ids[q as usize];
        let e = kappa as usize * self.shared.len() + id as usize;
        match self.single.get(e) {
            Some(&known) if known != 0 => {
                self.ph.point_pairs += 1;
                self.ph.point_job.push(KEYED | (known - 1));
            }
            _ => {
                self.pair(kappa, q);
                self.end_point();
            }
        }
    }
}

impl KeySink<'_> {
    /// The keyed job of the current key, not in the single-pair table: with `single` (the
    /// key is one pair and its entry there is empty) a new job recorded in the table, else
    /// found in (or added to) the index, which holds only the keys the table does not.
    #[inline(never)]
    fn look_up(&mut self, single: Option<usize>) -> u32 {
        let (ph, key) = (&mut self.ph, &self.key);
        let h = hash_pairs(key.iter().copied());
        let next = ph.keyed.len() as u32;
        let j = match single {
            Some(e) => {
                self.single[e] = next + 1;
                next
            }
            None => {
                let keyed = &ph.keyed;
                let same = |j| keyed.pairs(j) == key.as_slice();
                self.index.find_or_add(h, &keyed.hash, same, next)
            }
        };
        if j == next {
            ph.keyed.push_job(key.iter().copied(), 0);
            ph.keyed.hash.push(h);
        }
        j
    }
}

/// A `(κ, row)` pair as one `u64`.
#[inline]
pub(crate) fn pack(kappa: u32, id: u32) -> u64 {
    (u64::from(kappa) << 32) | u64::from(id)
}

/// Hash of a key.
#[inline]
pub(crate) fn hash_pairs(mut pairs: impl Iterator<Item = (u32, u32)>) -> u64 {
    // Two chains, even and odd pairs, so the multiplies of a long key overlap.
    const M: u64 = 0x517c_c1b7_2722_0a95;
    let (mut a, mut b) = (0x243f_6a88_85a3_08d3u64, 0x1319_8a2e_0370_7344u64);
    while let Some((kappa, id)) = pairs.next() {
        a = (a.rotate_left(5) ^ pack(kappa, id)).wrapping_mul(M);
        let Some((kappa, id)) = pairs.next() else {
            break;
        };
        b = (b.rotate_left(5) ^ pack(kappa, id)).wrapping_mul(M);
    }
    let h = (a ^ b.rotate_left(29)).wrapping_mul(M);
    h ^ (h >> 29)
}

/// An open-addressing index over the jobs of a list, by key hash; the keys themselves are
/// the jobs' pairs (or masks), compared by the caller.
pub(crate) struct Index {
    /// `0` = empty, else job number + 1.
    slots: Vec<u32>,
    len: usize,
}

impl Index {
    /// An empty index with room for about `n` jobs without growing.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            slots: vec![0; (2 * n).next_power_of_two().max(64)],
            len: 0,
        }
    }

    /// The job whose hash is `h` and for which `same(job)` holds, or the next job number
    /// (the number of jobs indexed so far) registered as new. `hashes` are the hashes of
    /// the jobs indexed so far; the caller appends the new job (and its hash) when the
    /// answer is new.
    #[inline]
    pub fn find(&mut self, h: u64, hashes: &[u64], same: impl Fn(usize) -> bool) -> (u32, bool) {
        let next = self.len as u32;
        let j = self.find_or_add(h, hashes, same, next);
        (j, j == next)
    }

    /// [`find`](Self::find) for a list whose jobs are not all indexed: the job whose hash
    /// is `h` and for which `same(job)` holds, or `next` (not yet indexed) registered as
    /// new. `hashes` holds the hash of every job of the list.
    #[inline]
    pub fn find_or_add(
        &mut self,
        h: u64,
        hashes: &[u64],
        same: impl Fn(usize) -> bool,
        next: u32,
    ) -> u32 {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow(hashes);
        }
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = next + 1;
                    self.len += 1;
                    return next;
                }
                s => {
                    let j = (s - 1) as usize;
                    if hashes[j] == h && same(j) {
                        return j as u32;
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the slots, placing the indexed jobs anew.
    fn grow(&mut self, hashes: &[u64]) {
        let size = (self.slots.len() * 2).max(64);
        let old = std::mem::replace(&mut self.slots, vec![0; size]);
        let mask = size - 1;
        for s in old.into_iter().filter(|&s| s != 0) {
            let mut i = (hashes[(s - 1) as usize] as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }
}

/// `u64 → slot` map numbering keys in insertion order (open addressing).
#[derive(Default)]
struct PairMap {
    /// `(key, slot + 1)`; slot 0 = empty.
    table: Vec<(u64, u32)>,
    len: usize,
}

impl PairMap {
    /// An empty map with room for `n` keys without growing.
    fn with_capacity(n: usize) -> Self {
        Self {
            table: vec![(0, 0); (2 * n).next_power_of_two().max(64)],
            len: 0,
        }
    }

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
    use crate::featurize::memory::RowBuf;
    use crate::featurize::rulebook::{tasks, Geometry, TASK_POINTS};
    use crate::featurize::tests::{random_pattern, rmat, scattered, Rng};
    use crate::simd::SimdLevel;

    /// Everything a task's jobs hold, for comparing two builds of them.
    fn parts(ph: &Phase) -> impl PartialEq + std::fmt::Debug + '_ {
        let list = |l: &TaskJobs| {
            (
                l.pairs.clone(),
                l.starts.clone(),
                l.uses.clone(),
                l.hash.clone(),
            )
        };
        (
            list(&ph.keyed),
            list(&ph.unique),
            &ph.point_job,
            ph.point_pairs,
        )
    }

    /// A window over `coords` whose points read a few popular rows, rows shared by a few
    /// points, and (up to 200 points) rows of their own: a table small beside a task's
    /// points, so that single-pair keys go through the task's table.
    fn window_of(coords: Coords, seed: u64) -> Window<'static> {
        let (mut rng, mut own) = (Rng(seed), 424..624);
        let ids: Vec<u32> = (0..coords.len())
            .map(|_| match rng.next() % 8 {
                0 => own.next().unwrap_or(0),
                1 | 2 => 24 + (rng.next() % 400) as u32,
                _ => (rng.next() % 24) as u32,
            })
            .collect();
        let rows = 624;
        let mut uses = vec![0u32; rows];
        for &id in &ids {
            uses[id as usize] += 1;
        }
        Window {
            coords,
            ids,
            table: RowBuf::zeroed(rows),
            shared: uses.iter().map(|&u| u >= 2).collect(),
            channels: 1,
            charge: None,
        }
    }

    /// The block searches' pair sink (with its shortcut for points of one pair) builds the
    /// same jobs, numbered alike, with the same use counts, as the scalar search: on a
    /// graph-like pattern (mostly single-pair keys) and a clustered one, stride 1 and 2, at
    /// two tensor strides.
    #[test]
    fn pair_jobs_agree_across_levels() {
        let best = SimdLevel::detect();
        let mut single_keys = 0;
        for (p, seed) in [
            (rmat(12, 20_000, 3), 11u64),
            (random_pattern(700, 9, 5), 12),
        ] {
            let base = Coords::from_pattern(&p);
            for t_in in [1u64, 2] {
                let coords = if t_in == 1 {
                    base.clone()
                } else {
                    base.strided(0..base.rows.len(), t_in)
                };
                let x = window_of(coords, seed + t_in);
                for (k, stride) in [(3, 2), (5, 1), (2, 2), (3, 1)] {
                    let geom = Geometry::new(k, 1, t_in);
                    let out = x.coords.strided(0..x.coords.rows.len(), t_in * stride);
                    for task in tasks(&out, TASK_POINTS) {
                        let jobs = |level| {
                            task_jobs(
                                &x,
                                &out,
                                task.clone(),
                                Search::new(&geom, level),
                                None,
                                true,
                            )
                        };
                        let want = jobs(SimdLevel::Scalar);
                        for level in [SimdLevel::Avx2, SimdLevel::Avx512] {
                            if level <= best {
                                assert_eq!(
                                    parts(&jobs(level)),
                                    parts(&want),
                                    "k {k}, s {stride}, t {t_in}, {level}"
                                );
                            }
                        }
                        single_keys += (0..want.keyed.len())
                            .filter(|&j| want.keyed.pairs(j).len() == 1 && want.keyed.uses[j] >= 2)
                            .count();
                    }
                }
            }
        }
        assert!(
            single_keys > 1000,
            "single-pair keys used twice: {single_keys}"
        );
    }

    /// The pattern itself as a layer input: every point reads the one shared row.
    fn constant_window(coords: Coords) -> Window<'static> {
        Window {
            ids: vec![0; coords.len()],
            coords,
            table: RowBuf::zeroed(1),
            shared: vec![true],
            channels: 1,
            charge: None,
        }
    }

    /// Stride-1 mask jobs with lone points certified (`Search::centred`) equal those found by
    /// searching every point, on every level: on a scattered pattern (nearly every row
    /// skips its search), a graph-like and a near-diagonal one, for 3 × 3 and 5 × 5 windows
    /// at tensor strides 1 and 2, and a dilated window (which gets no certificates).
    #[test]
    fn lone_points_get_the_masks_the_search_finds() {
        let best = SimdLevel::detect();
        for p in [
            scattered(20_000, 3, 4),
            rmat(12, 20_000, 5),
            random_pattern(2000, 7, 6),
        ] {
            let base = Coords::from_pattern(&p);
            for (k, dilation, t) in [
                (5usize, 1u64, 1u64),
                (3, 1, 1),
                (3, 1, 2),
                (5, 1, 2),
                (3, 2, 1),
            ] {
                let x = constant_window(base.strided(0..base.rows.len(), t));
                let geom = Geometry::new(k, dilation, t);
                for task in tasks(&x.coords, TASK_POINTS) {
                    for level in SimdLevel::ALL.into_iter().filter(|&l| l <= best) {
                        let jobs = |centred| {
                            let search = Search {
                                centred,
                                ..Search::new(&geom, level)
                            };
                            task_jobs(&x, &x.coords, task.clone(), search, None, true)
                        };
                        let (certified, searched) = (jobs(true), jobs(false));
                        assert_eq!(
                            parts(&certified),
                            parts(&searched),
                            "k {k}, d {dilation}, t {t}, {level}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn index_numbers_in_insertion_order() {
        let keys: Vec<Vec<(u32, u32)>> = (0..1000u32)
            .map(|i| vec![(i % 7, i % 13), (9, i)])
            .collect();
        let mut jobs = TaskJobs::new();
        let mut index = Index::with_capacity(4);
        for round in 0..2 {
            for (i, k) in keys.iter().enumerate() {
                let h = hash_pairs(k.iter().copied());
                let (j, new) = index.find(h, &jobs.hash, |j| jobs.pairs(j) == k.as_slice());
                assert_eq!((j, new), (i as u32, round == 0));
                if new {
                    jobs.push_job(k.iter().copied(), 1);
                    jobs.hash.push(h);
                }
            }
        }
        assert_eq!(jobs.len(), 1000);
        // Only every third job indexed (the others live elsewhere, as single-pair keys in
        // a task's table): each is found under its own number, across the index's growth.
        let hashes: Vec<u64> = keys.iter().map(|k| hash_pairs(k.iter().copied())).collect();
        let mut index = Index::with_capacity(4);
        for round in 0..2 {
            for j in (0..1000).step_by(3) {
                let same = |i: usize| keys[i] == keys[j];
                let found = index.find_or_add(hashes[j], &hashes, same, j as u32);
                assert_eq!(found, j as u32, "round {round}");
            }
        }
        let absent = |i: usize| i == 1;
        assert_eq!(index.find_or_add(hashes[1], &hashes, absent, 1), 1);
        let mut pm = PairMap::default();
        assert_eq!(pm.insert(7), (0, true));
        assert_eq!(pm.insert(9), (1, true));
        assert_eq!(pm.insert(7), (0, false));
    }
}
