//! The streaming executor: row bands of the pattern through the whole layer stack.
//!
//! The pattern is cut into bands of whole rows with about `band_entries` entries each. For
//! every band, the pattern's rows are appended to the input's [`Window`], then each stencil
//! step, in topological order, computes the output rows that have become *final* — all the
//! input rows they read are present — and appends them to its output window; right after
//! the last reader of a value has run, that value's window is cut down to the rows a later
//! band will still read (its halo). Global average pools sum each value's rows as they are
//! computed (`tree_sum`). After the last band the pooled means and the dense steps give the
//! output.
//!
//! A stencil step runs in two parallel phases over tasks of whole output rows (`rulebook`):
//! phase A finds every output point's neighbours and its job (`jobs`); the output table is
//! then sized, and phase B computes the jobs' rows straight into it (`Stencil::compute`) and
//! sums the task's rows for the pools. Since every output row and every pooled sum is
//! defined by the coordinates alone, the result is the same bit for bit for any band size
//! (one band = no streaming), thread count and SIMD level.

use std::time::Instant;

use rayon::prelude::*;

use super::band::share;
use super::coords::Coords;
use super::jobs::{task_jobs, Phase};
use super::masks::MaskGeometry;
use super::memory::{BufferPool, Memory};
use super::ops::RowProducts;
use super::plan::Plan;
use super::rulebook::tasks;
use super::tree_sum::TreeSum;
use super::window::Window;
use crate::error::{Error, Result};
use crate::pattern::CsrPattern;
use crate::simd::kernels::Kernels;

/// Figures of one run (see [`FeaturizerGraph::run_with_stats`]).
///
/// [`FeaturizerGraph::run_with_stats`]: super::FeaturizerGraph::run_with_stats
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct FeaturizeStats {
    /// Highest featurizer memory in use at once, as charged against the budget (bytes).
    pub peak_bytes: usize,
    /// Number of row bands.
    pub bands: usize,
    /// Pattern entries per band (the target; a band holds at least one whole row).
    pub band_entries: usize,
    /// Multiply-adds a direct evaluation would do: every `(output point, neighbour)` pair
    /// of every conv times `Cin · Cout` ("dense-counted"; shared rows make the actual work
    /// smaller).
    pub dense_macs: u64,
    /// Output rows actually computed, over all stencils (points sharing a row count once).
    pub rows_computed: u64,
    /// Output points, over all stencils.
    pub points: u64,
}

/// One run.
pub(crate) struct Run<'a, 'm> {
    plan: &'a Plan,
    k: &'static Kernels,
    pool: &'a BufferPool,
    mem: &'m Memory,
    pattern: &'a CsrPattern,
    windows: Vec<Option<Window<'m>>>,
    /// Per slot: every row below this is final (present or known to be empty).
    final_to: Vec<i64>,
    /// Per stencil step: the next output row it will produce.
    next_row: Vec<i64>,
    /// Per pooled slot: the sum so far.
    sums: Vec<Option<TreeSum>>,
    /// Per slot: points produced so far.
    points: Vec<u64>,
    /// Per stencil step: positive while keys are looked up, negative for the number of
    /// bands left without (after a band whose keys hardly repeated).
    share: Vec<i32>,
    /// Per stencil step: seconds spent, rows computed, neighbour pairs.
    times: Vec<(f64, u64, u64)>,
    /// Per stencil step, seconds per phase: coordinates, jobs, output table, rows and sums,
    /// window assembly, halo cuts.
    phases: Vec<[f64; 6]>,
    stats: FeaturizeStats,
}

/// "Every row": the end of the last band.
const ALL: i64 = i64::MAX;

/// The smallest multiple of `t` at or above `v` (`v ≥ 0`, saturating at [`ALL`]).
fn align_up(v: i64, t: i64) -> i64 {
    match v.checked_add(t - 1) {
        Some(x) => x / t * t,
        None => ALL,
    }
}

impl<'a, 'm> Run<'a, 'm> {
    /// A run of `plan` over `pattern`.
    pub fn new(
        plan: &'a Plan,
        pattern: &'a CsrPattern,
        k: &'static Kernels,
        pool: &'a BufferPool,
        mem: &'m Memory,
    ) -> Self {
        let n = plan.types.len();
        Self {
            plan,
            k,
            pool,
            mem,
            pattern,
            windows: (0..n)
                .map(|s| Some(Window::empty(plan.channels(s))))
                .collect(),
            final_to: vec![0; n],
            next_row: vec![0; plan.stencils.len()],
            share: vec![1; plan.stencils.len()],
            sums: (0..n)
                .map(|s| plan.pooled[s].then(|| TreeSum::new(plan.channels(s), 0)))
                .collect(),
            points: vec![0; n],
            times: vec![(0.0, 0, 0); plan.stencils.len()],
            phases: vec![[0.0; 6]; plan.stencils.len()],
            stats: FeaturizeStats::default(),
        }
    }

    /// Runs every band and the dense steps; returns the output and the run's figures.
    pub fn run(mut self, band_entries: usize) -> Result<(Vec<f32>, FeaturizeStats)> {
        let p = self.pattern;
        let rp = p.row_ptr();
        self.stats.band_entries = band_entries;
        let mut r0 = 0;
        loop {
            // Whole rows with about `band_entries` entries (at least one row).
            let target = rp[r0].saturating_add(band_entries.max(1));
            let mut r1 = r0 + rp[r0..].partition_point(|&e| e < target).max(1);
            r1 = r1.min(p.nrows());
            let last = r1 >= p.nrows();
            self.feed(r0..r1, last)?;
            for si in 0..self.plan.stencils.len() {
                let started = Instant::now();
                self.step(si)?;
                let cut = Instant::now();
                for &slot in &self.plan.trim_after[si] {
                    self.trim(slot)?;
                }
                self.phases[si][5] += cut.elapsed().as_secs_f64();
                self.times[si].0 += started.elapsed().as_secs_f64();
            }
            self.stats.bands += 1;
            if last {
                break;
            }
            r0 = r1;
        }
        if log::log_enabled!(log::Level::Trace) {
            log::trace!(
                "featurizer run: {} bands of {} entries, SIMD level {}",
                self.stats.bands,
                self.stats.band_entries,
                self.k.level
            );
            for ((st, &(t, rows, pairs)), ph) in
                self.plan.stencils.iter().zip(&self.times).zip(&self.phases)
            {
                let p = ph.map(|t| t * 1e3);
                log::trace!(
                    "featurizer step '{}' ({}): {:.3} ms, {} points, {} rows computed, {} pairs; \
                     ms in coordinates {:.1}, jobs {:.1}, tables {:.1}, rows and sums {:.1}, \
                     windows {:.1}, halos {:.1}",
                    st.name,
                    st.op.op_type(),
                    t * 1e3,
                    self.points[st.output],
                    rows,
                    pairs,
                    p[0],
                    p[1],
                    p[2],
                    p[3],
                    p[4],
                    p[5]
                );
            }
        }
        self.stats.peak_bytes = self.mem.peak();
        let stats = std::mem::take(&mut self.stats);
        let out = self.finish()?;
        Ok((out, stats))
    }

    /// Appends pattern rows `rows` to the input window.
    fn feed(&mut self, rows: std::ops::Range<usize>, last: bool) -> Result<()> {
        let slot = self.plan.input_slot;
        let new = Coords::from_pattern_rows(self.pattern, rows.clone());
        let mut w = self.take(slot)?;
        let bytes = Window::bytes_for(
            w.len() + new.len(),
            w.coords.rows.len() + new.rows.len(),
            1,
            1,
        );
        let charge = self
            .mem
            .charge(bytes, "graph input", "the pattern rows of a band")?;
        if let Some(sum) = &mut self.sums[slot] {
            let mut part = TreeSum::new(1, new.rows.first().map_or(0, |&r| u64::from(r)));
            for (i, &r) in new.rows.iter().enumerate() {
                let acc = part.push_leaf(u64::from(r), self.k);
                for p in new.row_range(i) {
                    (self.k.sum_f64)(acc, &[1.0], p == new.row_start[i]);
                }
            }
            sum.extend(&part, self.k);
        }
        self.points[slot] += new.len() as u64;
        w.ids.resize(w.ids.len() + new.len(), 0);
        w.coords.append(&new);
        if w.table.is_empty() {
            w.table = vec![1.0];
            w.shared = vec![true];
        }
        w.charge = Some(charge);
        self.windows[slot] = Some(w);
        self.final_to[slot] = if last { ALL } else { rows.end as i64 };
        if self.plan.readers[slot].is_empty() {
            self.trim(slot)?;
        }
        Ok(())
    }

    fn take(&mut self, slot: usize) -> Result<Window<'m>> {
        self.windows[slot].take().ok_or_else(|| {
            Error::featurize("graph", format!("internal: value slot {slot} is missing"))
        })
    }

    /// Cuts a window down to the rows its readers will still read.
    fn trim(&mut self, slot: usize) -> Result<()> {
        let lo = self.plan.readers[slot]
            .iter()
            .map(|&r| {
                self.next_row[r].saturating_add(self.plan.stencils[r].op.reach().reach_back())
            })
            .min()
            .unwrap_or(ALL);
        let w = self.take(slot)?;
        self.windows[slot] = Some(w.keep_from(lo, self.pool, self.mem, "graph")?);
        Ok(())
    }

    /// Computes the output rows of stencil step `si` that have become final.
    fn step(&mut self, si: usize) -> Result<()> {
        let plan = self.plan;
        let step = &plan.stencils[si];
        let reach = step.op.reach();
        let x_slot = step.input;
        let h = self.final_to[x_slot];
        let start = self.next_row[si];
        let t_out = reach.t_out as i64;
        // Output rows `R < end` are final; the next band starts at `next`.
        let (end, next) = if h == ALL {
            (ALL, ALL)
        } else {
            let end = h.saturating_sub(reach.lag());
            (end, align_up(end.max(start), t_out))
        };
        if end <= start {
            return Ok(());
        }
        let x = self.take(x_slot)?;
        let result = self.step_rows(si, &x, start, end, next);
        self.windows[x_slot] = Some(x);
        result
    }

    /// [`step`](Self::step) for the output rows in `[start, end)` of input window `x`.
    fn step_rows(
        &mut self,
        si: usize,
        x: &Window<'m>,
        start: i64,
        end: i64,
        next: i64,
    ) -> Result<()> {
        let plan = self.plan;
        let step = &plan.stencils[si];
        let op = step.op.as_ref();
        let reach = op.reach();
        let y_slot = step.output;
        let t_out = reach.t_out as i64;
        let mut clock = Instant::now();
        let mut lap = |phases: &mut Vec<[f64; 6]>, i: usize| {
            let now = Instant::now();
            phases[si][i] += (now - clock).as_secs_f64();
            clock = now;
        };
        let out = if reach.stride == 1 {
            x.coords.copy_rows(x.coords.rows_between(start, end))
        } else {
            let in_end = if end == ALL {
                ALL
            } else {
                align_up(end, t_out)
            };
            x.coords
                .strided(x.coords.rows_between(start, in_end), reach.t_out)
        };
        self.next_row[si] = next;
        if out.len() == 0 {
            self.final_to[y_slot] = next;
            return Ok(());
        }
        let node = step.name.as_str();
        let coord_charge =
            self.mem
                .charge(out.bytes(), node, "the output coordinates of a band")?;
        let tasks = tasks(&out);
        // Bitmaps pay for a constant input unless its rows are very short.
        let masks = (x.is_constant() && x.len() >= 4 * x.coords.rows.len().max(1))
            .then(|| MaskGeometry::new(&reach.geom, reach.t_in, self.pattern.ncols() as u64))
            .flatten();
        lap(&mut self.phases, 0);
        // Phase A: every task's jobs, then merged band-wide.
        let share_keys = self.share[si] > 0;
        let jobs: Vec<Phase> = tasks
            .par_iter()
            .map(|rows| {
                task_jobs(
                    x,
                    &out,
                    rows.clone(),
                    &reach.geom,
                    masks.as_ref(),
                    share_keys,
                )
            })
            .collect();
        let pairs: u64 = jobs.iter().map(Phase::point_pairs).sum();
        let keyed_points: u64 = jobs
            .iter()
            .map(|p| p.keyed.uses.iter().map(|&u| u64::from(u)).sum::<u64>())
            .sum();
        let phase_a_bytes = jobs.iter().map(Phase::bytes).sum();
        let a_charge = self
            .mem
            .charge(phase_a_bytes, node, "the neighbour pairs of a band")?;
        let unique_rows: usize = jobs.iter().map(|p| p.unique.len()).sum();
        let mut band = share(jobs);
        drop(a_charge);
        // Stop looking keys up in this layer for a while when they hardly repeat.
        let keyed_rows = (band.rows - unique_rows) as u64;
        self.share[si] = if !share_keys {
            self.share[si] + 1
        } else if keyed_points >= 4096 && 10 * keyed_rows > 9 * keyed_points {
            -8
        } else {
            1
        };
        let _band_charge = self
            .mem
            .charge(band.bytes(), node, "the neighbour pairs of a band")?;
        let n_jobs = band.rows;
        self.stats.dense_macs += pairs * op.macs_per_pair();
        self.stats.rows_computed += n_jobs as u64;
        self.times[si].1 += n_jobs as u64;
        self.times[si].2 += pairs;
        self.stats.points += out.len() as u64;
        // Products of shared input rows: for every shared row and κ at once when that is
        // at most half the products the jobs need, else per list for the repeated ones.
        let k = self.k;
        let mut products = None;
        if op.wants_products() && std::env::var_os("NOPROD").is_none() {
            let refs: u64 = band
                .lists
                .par_iter()
                .map(|l| l.pairs.iter().filter(|p| x.shared[p.1 as usize]).count() as u64)
                .sum();
            let rows: Vec<u32> = (0..x.table_rows() as u32)
                .filter(|&r| x.shared[r as usize])
                .collect();
            let volume = reach.geom.volume() as u64;
            if !rows.is_empty() && 2 * rows.len() as u64 * volume <= refs {
                let bytes = rows.len() * volume as usize * op.cout() * 4;
                let charge = self
                    .mem
                    .charge(bytes, node, "the products of shared rows")?;
                let mut index = vec![u32::MAX; x.table_rows()];
                for (i, &r) in rows.iter().enumerate() {
                    index[r as usize] = i as u32;
                }
                products = op.row_products(x, &rows, k).map(|table| {
                    (
                        RowProducts {
                            index,
                            rows: rows.len(),
                            table,
                        },
                        charge,
                    )
                });
            } else {
                band.lists.par_iter_mut().for_each(|l| l.assign_slots(x));
            }
        }
        let products = products.as_ref().map(|(p, _)| p);

        lap(&mut self.phases, 1);
        // The new output window: the halo, then the band's rows.
        let halo = self.take(y_slot)?;
        let c = op.cout();
        let (halo_rows, halo_points) = (halo.table_rows(), halo.len());
        let bytes = Window::bytes_for(
            halo_points + out.len(),
            halo.coords.rows.len() + out.rows.len(),
            halo_rows + n_jobs,
            c,
        );
        let charge = self.mem.charge(bytes, node, "the rows of a band")?;
        let mut table = self.pool.take((halo_rows + n_jobs) * c);
        table[..halo_rows * c].copy_from_slice(&halo.table[..halo_rows * c]);
        lap(&mut self.phases, 2);
        // Phase B: the jobs' rows, list by list.
        let mut slices: Vec<&mut [f32]> = Vec::with_capacity(band.lists.len());
        let mut rest = &mut table[halo_rows * c..];
        for l in &band.lists {
            let (head, tail) = rest.split_at_mut(l.len() * c);
            slices.push(head);
            rest = tail;
        }
        band.lists
            .par_iter()
            .zip(slices)
            .for_each(|(l, dst)| op.compute(l, x, products, dst, k));
        lap(&mut self.phases, 5);
        // Phase C: every task's pooled sums.
        let t_y = self.plan.stride(y_slot);
        if self.plan.pooled[y_slot] {
            let rows_table = &table[halo_rows * c..];
            let partials: Vec<TreeSum> = band
                .point_rows
                .par_iter()
                .zip(&tasks)
                .map(|(prows, rows)| {
                    let first = u64::from(out.rows[rows.start]) / t_y;
                    let mut sum = TreeSum::new(c, first);
                    let base = out.row_start[rows.start];
                    for ri in rows.clone() {
                        let acc = sum.push_leaf(u64::from(out.rows[ri]) / t_y, k);
                        let pts = out.row_range(ri);
                        (k.sum_rows_f64)(acc, rows_table, &prows[pts.start - base..pts.end - base]);
                    }
                    sum
                })
                .collect();
            if let Some(sum) = &mut self.sums[y_slot] {
                for part in &partials {
                    sum.extend(part, k);
                }
            }
        }
        lap(&mut self.phases, 3);
        let mut ids = Vec::with_capacity(halo_points + out.len());
        ids.extend_from_slice(&halo.ids);
        for p in &band.point_rows {
            ids.extend(p.iter().map(|&r| r + halo_rows as u32));
        }
        let mut shared = Vec::with_capacity(halo_rows + n_jobs);
        shared.extend_from_slice(&halo.shared);
        for l in &band.lists {
            shared.extend(l.uses.iter().map(|&u| u >= 2));
        }
        let mut coords = halo.coords;
        coords.append(&out);
        self.pool.give(halo.table);
        drop(coord_charge);
        self.points[y_slot] += out.len() as u64;
        self.windows[y_slot] = Some(Window {
            coords,
            ids,
            table,
            shared,
            channels: c,
            charge: Some(charge),
        });
        self.final_to[y_slot] = next;
        lap(&mut self.phases, 4);
        Ok(())
    }

    /// The pooled means, the dense steps, and the graph output.
    fn finish(mut self) -> Result<Vec<f32>> {
        let mut dense: Vec<Option<Vec<f32>>> = vec![None; self.plan.types.len()];
        for &(x, y) in &self.plan.pools {
            let n = self.points[x];
            let c = self.plan.channels(x);
            let sum = self.sums[x].take().unwrap_or_else(|| TreeSum::new(c, 0));
            let total = sum.total(self.k);
            let mean = if n == 0 {
                vec![0.0; c]
            } else {
                total.iter().map(|t| (t / n as f64) as f32).collect()
            };
            self.sums[x] = Some(sum);
            dense[y] = Some(mean);
        }
        for step in &self.plan.dense {
            let inputs: Option<Vec<&[f32]>> =
                step.inputs.iter().map(|&s| dense[s].as_deref()).collect();
            let inputs =
                inputs.ok_or_else(|| Error::featurize("graph", "internal: dense input missing"))?;
            dense[step.output] = Some(step.op.run(&inputs));
        }
        for w in self.windows.into_iter().flatten() {
            w.release(self.pool);
        }
        match dense[self.plan.output_slot].take() {
            Some(v) if v.len() == self.plan.output_dim => Ok(v),
            _ => Err(Error::featurize(
                "graph",
                "internal: output value missing or mis-sized",
            )),
        }
    }
}
