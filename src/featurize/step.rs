//! One stencil step of one band: the output rows that have become final, computed in
//! parallel tasks of whole output rows.
//!
//! Two paths give the same values:
//!
//! - **shared**: phase A finds every point's job per task (`jobs`), the keyed jobs are merged
//!   band-wide (`band`), then every job list is computed into its rows (`Stencil::compute`)
//!   and the tasks sum their points' rows for the pools;
//! - **direct**: when the input has no shared rows, or lookups are paused because the keys
//!   of this layer did not repeat in an earlier band, each task finds its points' neighbour
//!   pairs and computes one row per point at once, summing them while they are in cache.

use std::ops::Range;
use std::time::Instant;

use rayon::prelude::*;

use super::band::{share, BandJobs};
use super::coords::Coords;
use super::exec::{Progress, Run, ALL, FIRST_PAUSE, LONGEST_PAUSE};
use super::jobs::{expand_masks, task_jobs, Phase, TaskJobs};
use super::masks::MaskGeometry;
use super::memory::{Charge, RowBuf};
use super::ops::{Part, Reach, RowProducts, Stencil};
use super::rulebook::{
    count_pairs, grain, searches_in_blocks, task_points, tasks, Search, SERIAL_POINTS, TASK_POINTS,
};
use super::search_memo::{MemoChunk, MemoUse, SearchMemo};
use super::slabs::Slab;
use super::tree_sum::TreeSum;
use super::window::Window;
use crate::error::Result;
use crate::simd::kernels::Kernels;

/// Fewest multiply-adds per pair at which the repeated products of a list's pairs are found
/// (`TaskJobs::assign_slots`) and computed once. It trades a hash of every pair of the owned
/// keys against the fraction of a product each hashed pair saves: too small a product (WACO's
/// 32 → 32) and the hashing costs what it saves, while DASH's wider layers save 4–64 times
/// more per product (BENCHMARKS.md, "No repeated-product slots at WACO's 32 → 32").
pub(crate) const SLOT_MIN_MACS: u64 = 2048;

/// What looking a point's key up costs, in multiply-adds of the products it may save: the
/// break-even of the key lookups of a layer (a lookup's time over a multiply-add's, as
/// measured for BENCHMARKS.md's featurizer runs).
const LOOKUP_COST_IN_MACS: f64 = 1280.0;

/// The rows of a band's points, relative to the band (see [`Run::assemble`]).
enum BandIds<'a> {
    /// Point `i` has band row `i` (the direct path).
    Own,
    /// Per task, its points' rows (the shared path).
    Lists(&'a [Vec<u32>]),
}

/// The smallest multiple of `t` at or above `v` (`v ≥ 0`, saturating at [`ALL`]).
fn align_up(v: i64, t: i64) -> i64 {
    match v.checked_add(t - 1) {
        Some(x) => x / t * t,
        None => ALL,
    }
}

/// The pooled-sum partials of the points of task `rows` whose rows (in point order) are
/// `ids` of `table`, over the rows `slab` pools.
fn task_sums(
    out: &Coords,
    rows: std::ops::Range<usize>,
    table: &[f32],
    ids: &[u32],
    (c, t): (usize, u64),
    slab: &Slab,
    k: &Kernels,
) -> TreeSum {
    let base = out.row_start[rows.start];
    let first = out.rows[rows.clone()]
        .iter()
        .find(|&&r| slab.pools(r))
        .map_or(0, |&r| u64::from(r) / t);
    let mut sum = TreeSum::new(c, first);
    for ri in rows {
        if !slab.pools(out.rows[ri]) {
            continue;
        }
        let acc = sum.push_leaf(u64::from(out.rows[ri]) / t, k);
        let pts = out.row_range(ri);
        (k.sum_rows_f64)(acc, table, &ids[pts.start - base..pts.end - base]);
    }
    sum
}

/// The output coordinates of a band: the input's rows in `[start, end)` (a stride-1 step), or
/// the strided image of the input rows that snap into them.
fn band_coords(x: &Window<'_>, reach: &Reach, start: i64, end: i64) -> Coords {
    if reach.stride == 1 {
        return x.coords.copy_rows(x.coords.rows_between(start, end));
    }
    let in_end = if end == ALL {
        ALL
    } else {
        align_up(end, reach.t_out as i64)
    };
    x.coords
        .strided(x.coords.rows_between(start, in_end), reach.t_out)
}

thread_local! {
    /// `0, 1, 2, …`: the rows of a direct-path task's points, kept per thread.
    static IDENTITY: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Calls `f` with the ids `0..n`.
fn with_identity<R>(n: usize, f: impl FnOnce(&[u32]) -> R) -> R {
    IDENTITY.with(|ids| {
        let mut ids = ids.borrow_mut();
        let have = ids.len();
        if have < n {
            ids.extend(have as u32..n as u32);
        }
        f(&ids[..n])
    })
}

/// Per κ, the indices (ascending) of the shared rows (`index`: a row id's index among them,
/// or `u32::MAX`; `rows` of them) that some pair of `lists` reads with that κ: the products of
/// [`Stencil::row_products`] a band step needs. (A shared row is read with a few of the
/// κ: computing all of them did twice the products needed on DASH's conv10.)
fn wanted_products(lists: &[TaskJobs], index: &[u32], rows: usize, volume: usize) -> Vec<Vec<u32>> {
    let mut used = vec![false; volume * rows];
    for &(kappa, id) in lists.iter().flat_map(|l| l.pairs.iter()) {
        let i = index[id as usize];
        if i != u32::MAX {
            used[kappa as usize * rows + i as usize] = true;
        }
    }
    (0..volume)
        .map(|kappa| {
            let per_kappa = &used[kappa * rows..][..rows];
            (0..rows as u32)
                .filter(|&i| per_kappa[i as usize])
                .collect()
        })
        .collect()
}

/// Where a direct-path call over the input rows `[start, end)` of `x` stops so that it
/// reads at most about `points` input points (so computes at most about that many output
/// points): after the input row at which the count reaches `points`, rounded up to the
/// output stride `t_out`; `None` when the whole range is within the limit.
fn chunk_end(x: &Window<'_>, start: i64, end: i64, points: usize, t_out: i64) -> Option<i64> {
    let rows = x.coords.rows_between(start, end);
    let first = x.coords.row_start[rows.start];
    if x.coords.row_start[rows.end] - first <= points {
        return None;
    }
    // The first row whose end reaches `points` points.
    let i = rows.start
        + x.coords.row_start[rows.start + 1..=rows.end].partition_point(|&e| e - first < points);
    let stop = align_up(i64::from(x.coords.rows[i]) + 1, t_out);
    (stop < end).then_some(stop)
}

impl<'m> Run<'_, 'm> {
    /// Computes the output rows of stencil step `si` that have become final, or on the
    /// direct path a chunk of them (see [`Run::run_steps`]); with `busy` (an earlier step
    /// is still producing rows) a direct step whose final rows hold fewer than about
    /// `2 · SERIAL_POINTS` output points (estimated from the layer's ratio of output to
    /// input points so far) computes nothing and waits for more.
    pub(super) fn step(&mut self, si: usize, busy: bool) -> Result<Progress> {
        let step = &self.plan.stencils[si];
        let reach = step.op.reach();
        let x_slot = step.input;
        let h = self.final_to[x_slot];
        let start = self.next_row[si];
        // Output rows `R < end` are final; the next band starts at `next`.
        let (end, next) = if h == ALL {
            (ALL, ALL)
        } else {
            let end = h.saturating_sub(reach.lag());
            (end, align_up(end.max(start), reach.t_out as i64))
        };
        if end <= start {
            return Ok(Progress::Done);
        }
        let x = self.take(x_slot)?;
        // A constant input always shares (its keys are neighbour masks).
        let shared = x.is_constant() || (self.share[si] > 0 && x.shared.iter().any(|&s| s));
        if !shared && busy {
            // The final rows' output points, estimated from the layer's ratio so far.
            let rows = x.coords.rows_between(start, end);
            let input = x.coords.points_of(rows).len() as u64;
            let (read, made) = (self.points[x_slot], self.points[step.output]);
            let estimate = if made == 0 {
                input
            } else {
                input * made / read.max(1)
            };
            if estimate < 2 * SERIAL_POINTS as u64 {
                self.windows[x_slot] = Some(x);
                return Ok(Progress::Waiting);
            }
        }
        let (end, next, left) = if shared {
            (end, next, false)
        } else {
            chunk_end(&x, start, end, self.chunk_points(si), reach.t_out as i64)
                .map_or((end, next, false), |e| (e, e, true))
        };
        let result = self.step_rows(si, &x, start, end, next, shared);
        self.windows[x_slot] = Some(x);
        result.map(|()| if left { Progress::More } else { Progress::Done })
    }

    /// [`step`](Self::step) for the output rows in `[start, end)` of input window `x`.
    fn step_rows(
        &mut self,
        si: usize,
        x: &Window<'m>,
        start: i64,
        end: i64,
        next: i64,
        shared: bool,
    ) -> Result<()> {
        let plan = self.plan;
        let step = &plan.stencils[si];
        let op = step.op.as_ref();
        let reach = op.reach();
        let y_slot = step.output;
        let started = Instant::now();
        let out = band_coords(x, reach, start, end);
        self.next_row[si] = next;
        self.final_to[y_slot] = next;
        let points = out.len();
        if points == 0 {
            return Ok(());
        }
        let node = step.name.as_str();
        let _coord_charge =
            self.mem
                .charge(out.bytes(), node, "the output coordinates of a band")?;
        self.phases[si][0] += started.elapsed().as_secs_f64();
        let pooled_points = out
            .points_of(out.rows_between(self.slab.lo, self.slab.hi))
            .len();
        let unpooled_pairs = self.unpooled_pairs(x, &out, op);
        let halo = self.take(y_slot)?;
        let (replayed, record_charge) = self.chain_searches(si, points, out.rows.len());
        let memo = match (&replayed, &record_charge) {
            (Some(m), _) => MemoUse::Replay(m),
            (None, Some(_)) => MemoUse::Record,
            (None, None) => MemoUse::Off,
        };
        let result = if shared {
            self.shared_rows(si, x, out, halo, memo)
        } else {
            // Counted once per band, however many chunks the band takes.
            if self.share_band[si] != self.stats.bands {
                self.share_band[si] = self.stats.bands;
                self.share[si] += 1;
            }
            self.direct_rows(si, x, out, halo, memo)
        };
        if let (Some(r), Some(m)) = (plan.search_source[si], replayed) {
            self.memos[r] = Some(m);
            self.drop_replayed(r);
        }
        drop(record_charge);
        let (window, sums) = result?;
        self.stats.dense_macs -= unpooled_pairs * op.macs_per_pair();
        self.finish_band(y_slot, window, &sums, points, pooled_points);
        Ok(())
    }

    /// Adds a band's output (its window, the tasks' pooled sums and its point counts) to
    /// the output value of slot `y_slot`.
    fn finish_band(
        &mut self,
        y_slot: usize,
        window: Window<'m>,
        sums: &[TreeSum],
        points: usize,
        pooled_points: usize,
    ) {
        if let Some(total) = &mut self.sums[y_slot] {
            for part in sums {
                total.extend(part, self.k);
            }
        }
        self.points[y_slot] += points as u64;
        self.pooled_points[y_slot] += pooled_points as u64;
        self.stats.points += pooled_points as u64;
        self.windows[y_slot] = Some(window);
    }

    /// The new output window: the halo's rows, then the band's rows `table` (with the
    /// band's points' rows `ids`, relative to the band, and the band rows' shared flags).
    fn assemble(
        &self,
        halo: Window<'m>,
        out: Coords,
        table: RowBuf,
        ids: BandIds<'_>,
        shared: impl Iterator<Item = bool>,
        charge: Charge<'m>,
    ) -> Window<'m> {
        let halo_rows = halo.table_rows() as u32;
        let mut all_ids = halo.ids;
        all_ids.reserve(out.len());
        match ids {
            BandIds::Own => all_ids.extend(halo_rows..halo_rows + out.len() as u32),
            BandIds::Lists(lists) => {
                for l in lists {
                    all_ids.extend(l.iter().map(|&r| r + halo_rows));
                }
            }
        }
        let mut all_shared = halo.shared;
        all_shared.extend(shared);
        let coords = if halo.coords.len() == 0 && halo.coords.rows.is_empty() {
            out
        } else {
            let mut coords = halo.coords;
            coords.append(&out);
            coords
        };
        self.pool.give(halo.table);
        Window {
            coords,
            ids: all_ids,
            table,
            shared: all_shared,
            channels: halo.channels,
            charge: Some(charge),
        }
    }

    /// A table for the halo's rows and `band_rows` more, with the halo's rows in front,
    /// charged to the budget with the window it will belong to: the halo's own table grown
    /// in place when its allocation holds them (the rows then stay where they are), else a
    /// pooled one they are copied into.
    fn new_table(
        &self,
        node: &str,
        halo: &mut Window<'m>,
        out: &Coords,
        band_rows: usize,
    ) -> Result<(RowBuf, Charge<'m>)> {
        let c = halo.channels;
        let rows = halo.table_rows() + band_rows;
        let bytes = Window::bytes_for(
            halo.len() + out.len(),
            halo.coords.rows.len() + out.rows.len(),
            rows,
            c,
        );
        let charge = self.mem.charge(bytes, node, "the rows of a band")?;
        let mut table = std::mem::take(&mut halo.table);
        if !table.resize_in_place(rows * c) {
            let h = halo.table_rows() * c;
            let mut fresh = self.pool.take(rows * c);
            fresh[..h].copy_from_slice(&table[..h]);
            self.pool.give(std::mem::replace(&mut table, fresh));
        }
        Ok((table, charge))
    }

    /// The direct path (see the module docs).
    fn direct_rows(
        &mut self,
        si: usize,
        x: &Window<'m>,
        owned: Coords,
        mut halo: Window<'m>,
        memo: MemoUse<'_>,
    ) -> Result<(Window<'m>, Vec<TreeSum>)> {
        let out = &owned;
        let plan = self.plan;
        let step = &plan.stencils[si];
        let (op, node) = (step.op.as_ref(), step.name.as_str());
        let c = op.cout();
        let started = Instant::now();
        let (mut table, charge) = self.new_table(node, &mut halo, out, out.len())?;
        let halo_rows = halo.table_rows();
        let tasks = tasks(out, task_points(op.macs_per_pair()));
        let mut slices: Vec<&mut [f32]> = Vec::with_capacity(tasks.len());
        let mut rest = &mut table[halo_rows * c..];
        for rows in &tasks {
            let (head, tail) = rest.split_at_mut(out.points_of(rows.clone()).len() * c);
            slices.push(head);
            rest = tail;
        }
        let (k, t_y, pooled) = (self.k, plan.stride(step.output), plan.pooled[step.output]);
        let slab = &self.slab;
        let g = grain(out.len());
        let mut parts: Vec<(u64, Option<TreeSum>, Option<MemoChunk>)> = tasks
            .par_iter()
            .zip(slices)
            .with_min_len(g)
            .map(|(rows, dst)| {
                let (pairs, record) = op.compute_direct(x, out, rows.clone(), dst, memo, k);
                let sums = pooled.then(|| {
                    with_identity(dst.len() / c.max(1), |ids| {
                        task_sums(out, rows.clone(), dst, ids, (c, t_y), slab, k)
                    })
                });
                (pairs, sums, record)
            })
            .collect();
        self.keep_searches(si, parts.iter_mut().filter_map(|p| p.2.take()));
        let pairs: u64 = parts.iter().map(|p| p.0).sum();
        self.count(si, op, out.len(), pairs);
        self.done(si, pairs * op.macs_per_pair());
        self.phases[si][3] += started.elapsed().as_secs_f64();
        let n = out.len();
        let window = self.assemble(
            halo,
            owned,
            table,
            BandIds::Own,
            std::iter::repeat_n(false, n),
            charge,
        );
        Ok((window, parts.into_iter().filter_map(|p| p.1).collect()))
    }

    /// The neighbour pairs of the output rows of `out` that this run computes but does not
    /// pool (a slab's margins), which [`count`](Self::count) counted: the dense-counted
    /// figures cover each row of the matrix once, however it is cut into slabs.
    fn unpooled_pairs(&self, x: &Window<'_>, out: &Coords, op: &dyn Stencil) -> u64 {
        if self.slab.is_whole() || op.macs_per_pair() == 0 {
            return 0;
        }
        let pooled = out.rows_between(self.slab.lo, self.slab.hi);
        let geom = &op.reach().geom;
        let level = self.k.level;
        count_pairs(&x.coords, out, 0..pooled.start, geom, level)
            + count_pairs(&x.coords, out, pooled.end..out.rows.len(), geom, level)
    }

    /// Step `si`'s part in its chain's neighbour searches (see `search_memo`) for a band
    /// step of `points` output points in `rows` rows: the memo of the chain's first step to
    /// replay (taken out of the run; the caller puts it back), or, for a chain's first step,
    /// the charge of what its tasks will record (none when the budget has no room: the step
    /// then records nothing).
    fn chain_searches(
        &mut self,
        si: usize,
        points: usize,
        rows: usize,
    ) -> (Option<SearchMemo>, Option<Charge<'m>>) {
        if let Some(r) = self.plan.search_source[si] {
            return (self.memos[r].take(), None);
        }
        if self.plan.search_readers[si].is_empty() {
            return (None, None);
        }
        let step = &self.plan.stencils[si];
        let bytes = MemoChunk::bytes_for(points, rows, step.op.reach().geom.k);
        let what = "the neighbour searches kept for the next layers";
        (None, self.mem.charge(bytes, &step.name, what).ok())
    }

    /// Appends the searches step `si`'s tasks recorded (in task order, so rows ascend) to
    /// its memo and charges the memo anew; a memo the budget has no room for is dropped (its
    /// readers then search).
    fn keep_searches(&mut self, si: usize, records: impl Iterator<Item = MemoChunk>) {
        let mut memo = self.memos[si].take().unwrap_or_default();
        let mut any = false;
        for r in records {
            memo.append(r);
            any = true;
        }
        if !any {
            self.memos[si] = Some(memo);
            return;
        }
        self.memo_charges[si] = None;
        let node = self.plan.stencils[si].name.as_str();
        let what = "the neighbour searches kept for the next layers";
        match self.mem.charge(memo.bytes(), node, what) {
            Ok(charge) => {
                self.memo_charges[si] = Some(charge);
                self.memos[si] = Some(memo);
            }
            Err(_) => self.memos[si] = None,
        }
    }

    /// Drops the rows of step `r`'s memo that every step replaying it is past.
    fn drop_replayed(&mut self, r: usize) {
        let readers = &self.plan.search_readers[r];
        let past = readers.iter().map(|&c| self.next_row[c]).min();
        if let (Some(memo), Some(row)) = (&mut self.memos[r], past) {
            memo.drop_below(row);
        }
    }

    /// Records multiply-adds step `si` did.
    fn done(&mut self, si: usize, macs: u64) {
        self.stats.computed_macs += macs;
        self.done_macs[si] += macs;
    }

    /// Records a band step's figures.
    fn count(&mut self, si: usize, op: &dyn Stencil, rows: usize, pairs: u64) {
        self.stats.dense_macs += pairs * op.macs_per_pair();
        self.stats.rows_computed += rows as u64;
        self.times[si].1 += rows as u64;
        self.times[si].2 += pairs;
    }

    /// The shared path (see the module docs).
    fn shared_rows(
        &mut self,
        si: usize,
        x: &Window<'m>,
        owned: Coords,
        mut halo: Window<'m>,
        memo: MemoUse<'_>,
    ) -> Result<(Window<'m>, Vec<TreeSum>)> {
        let out = &owned;
        let plan = self.plan;
        let step = &plan.stencils[si];
        let op = step.op.as_ref();
        let mut laps = Laps {
            si,
            clock: Instant::now(),
        };
        let tasks = tasks(out, TASK_POINTS);
        let s = SharedStep {
            si,
            x,
            out,
            op,
            node: step.name.as_str(),
            c: op.cout(),
            g: grain(out.len()),
            k: self.k,
            slab: self.slab,
            memo,
        };
        let (mut band, figures, _band_charge) = self.band_jobs(&s, &tasks)?;
        self.pause_lookups(&s, &figures, band.rows);
        self.count(si, op, band.rows, figures.pairs);
        let products = self.shared_products(&s, &mut band)?;
        let products = products.as_ref().map(|(p, _)| p);
        laps.lap(&mut self.phases, 1);
        let (mut table, charge) = self.new_table(s.node, &mut halo, out, band.rows)?;
        let halo_rows = halo.table_rows();
        laps.lap(&mut self.phases, 2);
        // Phase B: the jobs' rows, list by list; then every task's pooled sums.
        let band_table = &mut table[halo_rows * s.c..];
        let (hot, _hot_charge) = self.hot_products(&s, &band)?;
        let multiplied = compute_lists(&s, &band, &hot, products, band_table)
            + hot
                .iter()
                .map(|h| (h.len() / s.c.max(1)) as u64)
                .sum::<u64>()
            + products.map_or(0, |p| p.computed);
        self.done(si, multiplied * op.macs_per_pair());
        let sums = if plan.pooled[step.output] {
            let t_y = plan.stride(step.output);
            pooled_sums(&s, &band.point_rows, &tasks, band_table, t_y)
        } else {
            Vec::new()
        };
        laps.lap(&mut self.phases, 3);
        let shared = band
            .lists
            .iter()
            .flat_map(|l| l.uses.iter().map(|&u| u >= 2));
        let ids = BandIds::Lists(&band.point_rows);
        let window = self.assemble(halo, owned, table, ids, shared, charge);
        laps.lap(&mut self.phases, 4);
        Ok((window, sums))
    }

    /// Phase A of the shared path: every task's jobs, merged band-wide (`band`), with the
    /// figures of their keys and the charge for the merged jobs.
    fn band_jobs(
        &mut self,
        s: &SharedStep<'_, 'm>,
        tasks: &[Range<usize>],
    ) -> Result<(BandJobs, KeyFigures, Charge<'m>)> {
        let (x, out, reach) = (s.x, s.out, s.op.reach());
        let masks = self.mask_layout(s);
        let search = Search {
            geom: &reach.geom,
            level: s.k.level,
            memo: s.memo,
            centred: reach.stride == 1,
        };
        let mut jobs: Vec<Phase> = tasks
            .par_iter()
            .with_min_len(s.g)
            .map(|rows| task_jobs(x, out, rows.clone(), search, masks.as_ref(), true))
            .collect();
        self.keep_searches(s.si, jobs.iter_mut().filter_map(|p| p.memo.take()));
        let figures = KeyFigures::of(&jobs);
        let a_charge = self.mem.charge(
            jobs.iter().map(Phase::bytes).sum(),
            s.node,
            "the neighbour pairs of a band",
        )?;
        let mut band = share(jobs, s.g);
        if x.is_constant() && reach.geom.volume() <= 64 {
            let k = reach.geom.k as u32;
            band.lists = std::mem::take(&mut band.lists)
                .into_par_iter()
                .with_min_len(s.g)
                .map(|l| expand_masks(l, k))
                .collect();
        }
        drop(a_charge);
        let band_charge = self
            .mem
            .charge(band.bytes(), s.node, "the neighbour pairs of a band")?;
        Ok((band, figures, band_charge))
    }

    /// The bitmap layout in which to find the keys (neighbour masks) of a constant input,
    /// if any. Bitmaps pay for a constant input unless its rows are very short, or the
    /// neighbour search finds the masks 16 points at a time (which beat bitmaps on every
    /// matrix of BENCHMARKS.md).
    fn mask_layout(&self, s: &SharedStep<'_, 'm>) -> Option<MaskGeometry> {
        let (x, reach) = (s.x, s.op.reach());
        (x.is_constant()
            && !searches_in_blocks(&reach.geom, s.k.level)
            && x.len() >= 4 * x.coords.rows.len().max(1))
        .then(|| MaskGeometry::new(&reach.geom, reach.t_in, self.pattern.ncols() as u64))
        .flatten()
    }

    /// Stops looking keys up in step `s.si` for a while when the rows they save (of the
    /// band's `band_rows`) cost less than the lookups: `LOOKUP_COST_IN_MACS` multiply-adds
    /// per point against the row's multiply-adds (a stencil without products needs 90 % of
    /// its keys to repeat).
    fn pause_lookups(&mut self, s: &SharedStep<'_, 'm>, figures: &KeyFigures, band_rows: usize) {
        let (si, keyed_points) = (s.si, figures.keyed_points);
        let keyed_rows = (band_rows - figures.unique_rows) as u64;
        let macs_per_row =
            (s.op.macs_per_pair() * figures.pairs) as f64 / s.out.len().max(1) as f64;
        let needed = if macs_per_row > 0.0 {
            (LOOKUP_COST_IN_MACS / macs_per_row).min(0.9)
        } else {
            0.1
        };
        // Each band that tries again in vain doubles the pause: the layers after the
        // memoised ones of an unstructured matrix never share, and every try costs a band
        // of key lookups (uniform 10 M's conv7–conv10: 5 tries each in 43 bands).
        if keyed_points >= 4096 && keyed_rows as f64 > (1.0 - needed) * keyed_points as f64 {
            self.share[si] = -self.share_pause[si];
            self.share_pause[si] = (2 * self.share_pause[si]).min(LONGEST_PAUSE);
        } else if keyed_points >= 4096 {
            self.share_pause[si] = FIRST_PAUSE;
        }
    }

    /// Products of shared input rows: for every shared row and κ at once (returned, with
    /// their charge) when that is at most half the products the jobs need, else per list
    /// for the repeated ones (`TaskJobs::assign_slots`).
    fn shared_products(
        &self,
        s: &SharedStep<'_, 'm>,
        band: &mut BandJobs,
    ) -> Result<Option<(RowProducts, Charge<'m>)>> {
        let (x, op, g) = (s.x, s.op, s.g);
        if !op.wants_products() {
            return Ok(None);
        }
        let refs: u64 = band
            .lists
            .par_iter()
            .with_min_len(g)
            .map(|l| l.pairs.iter().filter(|p| x.shared[p.1 as usize]).count() as u64)
            .sum();
        let rows: Vec<u32> = (0..x.table_rows() as u32)
            .filter(|&r| x.shared[r as usize])
            .collect();
        let volume = op.reach().geom.volume() as u64;
        if !rows.is_empty() && 2 * rows.len() as u64 * volume <= refs {
            let bytes = rows.len() * volume as usize * s.c * 4;
            let charge = self
                .mem
                .charge(bytes, s.node, "the products of shared rows")?;
            let mut index = vec![u32::MAX; x.table_rows()];
            for (i, &r) in rows.iter().enumerate() {
                index[r as usize] = i as u32;
            }
            let wanted = wanted_products(&band.lists, &index, rows.len(), volume as usize);
            let computed = wanted.iter().map(|w| w.len() as u64).sum();
            return Ok(op.row_products(x, &rows, &wanted, g, s.k).map(|table| {
                let rp = RowProducts {
                    index,
                    rows: rows.len(),
                    table,
                    computed,
                };
                (rp, charge)
            }));
        }
        if op.macs_per_pair() >= SLOT_MIN_MACS {
            // Lists of owned keys (the even ones) repeat products; unique jobs rarely do.
            band.lists
                .par_iter_mut()
                .step_by(2)
                .with_min_len(g)
                .for_each(|l| l.assign_slots(x));
        }
        Ok(None)
    }

    /// Each list's repeated products (`Stencil::hot_products`), computed once before its
    /// rows, with their charge.
    fn hot_products(
        &self,
        s: &SharedStep<'_, 'm>,
        band: &BandJobs,
    ) -> Result<(Vec<Vec<f32>>, Charge<'m>)> {
        let (x, op, k) = (s.x, s.op, s.k);
        let hot_bytes = band.lists.iter().map(|l| l.hot.len() * s.c * 4).sum();
        let charge = self
            .mem
            .charge(hot_bytes, s.node, "the products of repeated pairs")?;
        let hot = band
            .lists
            .par_iter()
            .with_min_len(s.g)
            .map(|l| op.hot_products(l, x, k))
            .collect();
        Ok((hot, charge))
    }
}

/// The borrowed state of one band step on the shared path.
struct SharedStep<'s, 'm> {
    /// The stencil step.
    si: usize,
    /// Its input window.
    x: &'s Window<'m>,
    /// The band's output coordinates.
    out: &'s Coords,
    op: &'s dyn Stencil,
    /// The node name, for charges.
    node: &'s str,
    /// Output channels.
    c: usize,
    /// The parallel loops' `with_min_len` (see `rulebook::grain`).
    g: usize,
    k: &'static Kernels,
    /// The rows the run pools.
    slab: Slab,
    /// What the step's searches do with their chain's memo.
    memo: MemoUse<'s>,
}

/// What phase A found: neighbour pairs over all points, points whose jobs are keyed, and
/// the rows of unique jobs.
struct KeyFigures {
    pairs: u64,
    keyed_points: u64,
    unique_rows: usize,
}

impl KeyFigures {
    /// The figures of the tasks' `jobs`.
    fn of(jobs: &[Phase]) -> Self {
        Self {
            pairs: jobs.iter().map(|p| p.point_pairs).sum(),
            keyed_points: jobs
                .iter()
                .map(|p| p.keyed.uses.iter().map(|&u| u64::from(u)).sum::<u64>())
                .sum(),
            unique_rows: jobs.iter().map(|p| p.unique.len()).sum(),
        }
    }
}

/// The clock of a step's phases: each lap adds the time since the last to a phase.
struct Laps {
    si: usize,
    clock: Instant,
}

impl Laps {
    /// Adds the time since the last lap to phase `i` of step `si`.
    fn lap(&mut self, phases: &mut [[f64; 6]], i: usize) {
        let now = Instant::now();
        phases[self.si][i] += (now - self.clock).as_secs_f64();
        self.clock = now;
    }
}

/// Phase B of the shared path: computes the job lists of `band` into their rows of `table`
/// (the band's rows, list after list). Lists of heavy jobs (wide layers) are split into
/// parts of `task_points` jobs so the threads stay balanced; `hot` are the lists' repeated
/// products. Returns the number of pairs multiplied.
fn compute_lists(
    s: &SharedStep<'_, '_>,
    band: &BandJobs,
    hot: &[Vec<f32>],
    products: Option<&RowProducts>,
    table: &mut [f32],
) -> u64 {
    let (x, op, k, c) = (s.x, s.op, s.k, s.c);
    let mut slices: Vec<&mut [f32]> = Vec::with_capacity(band.lists.len());
    let mut rest = table;
    for l in &band.lists {
        let (head, tail) = rest.split_at_mut(l.len() * c);
        slices.push(head);
        rest = tail;
    }
    let part_jobs = task_points(op.macs_per_pair());
    let mut parts = Vec::new();
    for ((l, dst), hot) in band.lists.iter().zip(slices).zip(hot) {
        let mut dst = dst;
        for start in (0..l.len()).step_by(part_jobs) {
            let range = start..(start + part_jobs).min(l.len());
            let (head, tail) = dst.split_at_mut(range.len() * c);
            dst = tail;
            let part = Part {
                jobs: l,
                range,
                hot,
            };
            parts.push((part, head));
        }
    }
    parts
        .into_par_iter()
        .with_min_len(s.g)
        .map(|(part, dst)| op.compute(&part, x, products, dst, k))
        .sum()
}

/// Every task's pooled-sum partials, from its points' rows `point_rows` of `table` (the
/// band's rows); `t_y` is the output tensor stride.
fn pooled_sums(
    s: &SharedStep<'_, '_>,
    point_rows: &[Vec<u32>],
    tasks: &[Range<usize>],
    table: &[f32],
    t_y: u64,
) -> Vec<TreeSum> {
    let (out, c, k) = (s.out, s.c, s.k);
    point_rows
        .par_iter()
        .zip(tasks)
        .with_min_len(s.g)
        .map(|(ids, rows)| task_sums(out, rows.clone(), table, ids, (c, t_y), &s.slab, k))
        .collect()
}
