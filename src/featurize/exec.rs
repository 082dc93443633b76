//! The streaming executor: row bands of the pattern through the whole layer stack.
//!
//! The pattern is cut into bands of whole rows with about `band_entries` entries each. For
//! every band, the pattern's rows are appended to the input's [`Window`], then each stencil
//! step, in topological order, computes the output rows that have become *final* — all the
//! input rows they read are present — and appends them to its output window; a step on the
//! direct path (no shared rows) takes them in chunks of about [`CHUNK_BYTES`] of output, and
//! the steps repeat until every final row is computed, so a chunk's rows reach the next
//! layers while still in cache. Once the last reader of a value has caught up, that value's
//! window is cut down to the rows a later band will still read (its halo). Global average
//! pools sum each value's rows as they are computed (`tree_sum`). After the last band the
//! pooled means and the dense steps give the output. A large pattern is cut into slabs of
//! rows first (`slabs`), each streamed by its own run on its own thread; their pooled sums
//! are joined before the dense steps ([`finish_slabs`]).
//!
//! A stencil step runs in two parallel phases over tasks of whole output rows (`rulebook`):
//! phase A finds every output point's neighbours and its job (`jobs`); the output table is
//! then sized, and phase B computes the jobs' rows straight into it (`Stencil::compute`) and
//! sums the task's rows for the pools. Since every output row and every pooled sum is
//! defined by the coordinates alone, the result is the same bit for bit for any band size
//! (one band = no streaming), chunk size, thread count and SIMD level.

use std::time::Instant;

use super::coords::Coords;
use super::memory::{BufferPool, Charge, Memory, RowBuf};
use super::plan::{Plan, CHUNK_BYTES};
use super::search_memo::SearchMemo;
use super::slabs::Slab;
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
    /// Number of row bands (over all slabs).
    pub bands: usize,
    /// Number of slabs run side by side (1: one run; see `FeaturizerGraph`'s `# Threads`).
    /// Step times are summed over the slabs.
    pub slabs: usize,
    /// Pattern entries per band (the target; a band holds at least one whole row).
    pub band_entries: usize,
    /// Multiply-adds a direct evaluation would do: every `(output point, neighbour)` pair
    /// of every conv times `Cin · Cout` ("dense-counted"; shared rows make the actual work
    /// smaller).
    pub dense_macs: u64,
    /// Multiply-adds actually done: the products of the rows computed, each repeated or
    /// shared product once, including the rows of slab margins that two slabs compute
    /// (which `dense_macs` counts once). The gap to `dense_macs` is what the shared rows
    /// and products save.
    pub computed_macs: u64,
    /// Output rows actually computed, over all stencils (points sharing a row count once).
    pub rows_computed: u64,
    /// Output points, over all stencils.
    pub points: u64,
    /// Per stencil step (sparse conv or pool), in plan order: where its time went.
    pub steps: Vec<StepStats>,
}

/// One stencil step's figures in a run (wall time, summed over the run's bands and calls).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct StepStats {
    /// The graph node the step computes.
    pub name: String,
    /// Its ONNX op type (`SparseConv`, `SparseMaxPool`, …).
    pub op_type: String,
    /// Seconds in the step in all.
    pub seconds: f64,
    /// Output points it produced.
    pub points: u64,
    /// Output rows it computed (points sharing a row count once).
    pub rows_computed: u64,
    /// `(output point, neighbour)` pairs it visited.
    pub pairs: u64,
    /// Multiply-adds it actually did (see [`FeaturizeStats::computed_macs`]).
    pub computed_macs: u64,
    /// Seconds per phase, in this order: output coordinates, neighbour jobs (the shared
    /// path's search and key lookups), output tables, rows and sums (the products and the
    /// pooling sums; on the direct path also its neighbour search), window assembly, halo
    /// cuts.
    pub phases: [f64; 6],
}

/// One run.
pub(crate) struct Run<'a, 'm> {
    pub(super) plan: &'a Plan,
    pub(super) k: &'static Kernels,
    pub(super) pool: &'a BufferPool,
    pub(super) mem: &'m Memory,
    pub(super) pattern: &'a CsrPattern,
    pub(super) windows: Vec<Option<Window<'m>>>,
    /// Per slot: every row below this is final (present or known to be empty).
    pub(super) final_to: Vec<i64>,
    /// Per stencil step: the next output row it will produce.
    pub(super) next_row: Vec<i64>,
    /// Per pooled slot: the sum so far.
    pub(super) sums: Vec<Option<TreeSum>>,
    /// Per slot: points produced so far.
    pub(super) points: Vec<u64>,
    /// Per slot: points produced so far in the rows this run pools.
    pub(super) pooled_points: Vec<u64>,
    /// The rows this run pools and the rows it is fed.
    pub(super) slab: Slab,
    /// Per stencil step: positive while keys are looked up, negative for the number of
    /// bands left without (after a band whose keys hardly repeated).
    pub(super) share: Vec<i32>,
    /// Per stencil step: the band in which `share` was last counted up.
    pub(super) share_band: Vec<usize>,
    /// Per stencil step: bands to go without lookups after the next band whose keys hardly
    /// repeat ([`FIRST_PAUSE`], doubled after each such band up to [`LONGEST_PAUSE`], back to
    /// the first after a band whose keys paid).
    pub(super) share_pause: Vec<i32>,
    /// Per stencil step: seconds spent, rows computed, neighbour pairs.
    pub(super) times: Vec<(f64, u64, u64)>,
    /// Per stencil step: multiply-adds done.
    pub(super) done_macs: Vec<u64>,
    /// Per stencil step, seconds per phase: coordinates, jobs, output table, rows and sums,
    /// window assembly, halo cuts.
    pub(super) phases: Vec<[f64; 6]>,
    pub(super) stats: FeaturizeStats,
    /// Bytes of output rows per direct-path call of a step (see [`Run::run_steps`]).
    pub(super) chunk_bytes: usize,
    /// Per stencil step that records its neighbour searches for later steps, the rows they
    /// have not all replayed yet, and their charge (see `search_memo`).
    pub(super) memos: Vec<Option<SearchMemo>>,
    pub(super) memo_charges: Vec<Option<Charge<'m>>>,
}

/// What a call of [`Run::step`] left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Progress {
    /// Every final row is computed.
    Done,
    /// A chunk was computed; final rows are left for another call.
    More,
    /// Nothing was computed: a direct step had only a few final rows (under about
    /// `2 · SERIAL_POINTS` output points) while an earlier step was still producing rows,
    /// so it waits for more: a call below `SERIAL_POINTS` runs on one thread, and deep
    /// layers, whose final rows grow a few at a time behind their producers' chunks, had
    /// run all their calls that way (conv11 of uniform-10m: 279 calls of 2–4 k points).
    /// It runs once the earlier steps are done, so the wait always ends.
    Waiting,
}

/// Bands a step goes without key lookups after the first band whose keys hardly repeated.
pub(super) const FIRST_PAUSE: i32 = 8;
/// The longest such pause: a layer whose keys start repeating further down the matrix finds
/// out within this many bands.
pub(super) const LONGEST_PAUSE: i32 = 64;

/// "Every row": the end of the last band.
pub(super) const ALL: i64 = i64::MAX;

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
            share_band: vec![usize::MAX; plan.stencils.len()],
            share_pause: vec![FIRST_PAUSE; plan.stencils.len()],
            sums: (0..n)
                .map(|s| plan.pooled[s].then(|| TreeSum::new(plan.channels(s), 0)))
                .collect(),
            points: vec![0; n],
            pooled_points: vec![0; n],
            slab: Slab::whole(pattern),
            times: vec![(0.0, 0, 0); plan.stencils.len()],
            done_macs: vec![0; plan.stencils.len()],
            phases: vec![[0.0; 6]; plan.stencils.len()],
            stats: FeaturizeStats::default(),
            chunk_bytes: CHUNK_BYTES,
            memos: (0..plan.stencils.len()).map(|_| None).collect(),
            memo_charges: (0..plan.stencils.len()).map(|_| None).collect(),
        }
    }

    /// This run fed and pooling only the rows of `slab` (see `slabs`).
    pub fn in_slab(mut self, slab: Slab) -> Self {
        for (s, sum) in self.sums.iter_mut().enumerate() {
            if let Some(sum) = sum {
                let t = self.plan.stride(s).max(1) as i64;
                *sum = TreeSum::new(self.plan.channels(s), (slab.lo / t) as u64);
            }
        }
        self.slab = slab;
        self
    }

    /// Runs every band and the dense steps; returns the output and the run's figures.
    pub fn run(mut self, band_entries: usize) -> Result<(Vec<f32>, FeaturizeStats)> {
        self.run_bands(band_entries)?;
        let stats = std::mem::take(&mut self.stats);
        let (plan, k) = (self.plan, self.k);
        trace(&stats, k);
        let (sums, points) = self.pooled();
        let out = finish(plan, k, sums, &points)?;
        Ok((out, stats))
    }

    /// Runs every band of a slab; returns its pooled sums, its pooled points per slot and
    /// its figures, for [`finish`] once every slab is done.
    pub fn run_slab(mut self, band_entries: usize) -> Result<SlabSums> {
        self.run_bands(band_entries)?;
        let stats = std::mem::take(&mut self.stats);
        let (sums, points) = self.pooled();
        Ok(SlabSums {
            sums,
            points,
            stats,
        })
    }

    /// Streams the slab's rows through the stencil steps, band by band, and gathers the
    /// run's figures.
    fn run_bands(&mut self, band_entries: usize) -> Result<()> {
        let p = self.pattern;
        // Bands are cut over the non-empty rows (the pattern stores only those), so walking
        // the matrix costs its entries, not its row count.
        let rows = p.nonempty_rows();
        let starts = p.row_starts();
        let (feed_lo, feed_hi) = self.slab.feed;
        let first = rows.partition_point(|&r| (r as usize) < feed_lo);
        let end = rows.partition_point(|&r| (r as usize) < feed_hi);
        self.stats.band_entries = band_entries;
        self.stats.slabs = 1;
        let (mut r0, mut i0) = (feed_lo, first);
        loop {
            // Whole rows with about `band_entries` entries (at least one non-empty row); the
            // band ends where the next non-empty row starts.
            let target = starts[i0].saturating_add(band_entries.max(1));
            let i1 = (i0 + starts[i0..end].partition_point(|&e| e < target).max(1)).min(end);
            let last = i1 >= end;
            let r1 = if last { feed_hi } else { rows[i1] as usize };
            self.feed(r0..r1, last)?;
            self.run_steps()?;
            self.stats.bands += 1;
            if last {
                break;
            }
            (r0, i0) = (r1, i1);
        }
        self.stats.peak_bytes = self.mem.peak();
        self.stats.steps = self.step_stats();
        Ok(())
    }

    /// The per-step figures gathered so far.
    fn step_stats(&self) -> Vec<StepStats> {
        let per_step = self.plan.stencils.iter().zip(&self.times).zip(&self.phases);
        per_step
            .zip(&self.done_macs)
            .map(
                |(((st, &(seconds, rows, pairs)), &phases), &done)| StepStats {
                    name: st.name.clone(),
                    op_type: st.op.op_type().to_string(),
                    seconds,
                    points: self.pooled_points[st.output],
                    rows_computed: rows,
                    pairs,
                    computed_macs: done,
                    phases,
                },
            )
            .collect()
    }

    /// Runs the stencil steps in order until none has final rows left. A step on the direct
    /// path computes at most [`chunk_points`](Self::chunk_points) output points per call, so
    /// its rows reach the next layers while they are still in cache (a band's whole table of
    /// a layer without shared rows is tens of MiB); steps that share rows take all their
    /// final rows at once, since sharing pays over many points. A window is cut down to its
    /// halo only once its last reader has caught up (a cut copies the rows it keeps).
    fn run_steps(&mut self) -> Result<()> {
        loop {
            let mut more = false;
            // An earlier step of this round has rows left: a direct step with only a few
            // final rows may wait for more (see `Progress::Waiting`).
            let mut busy = false;
            for si in 0..self.plan.stencils.len() {
                let started = Instant::now();
                let progress = self.step(si, busy)?;
                let cut = Instant::now();
                if progress == Progress::Done {
                    for &slot in &self.plan.trim_after[si] {
                        self.trim(slot)?;
                    }
                } else {
                    more = true;
                    busy = true;
                }
                self.phases[si][5] += cut.elapsed().as_secs_f64();
                self.times[si].0 += started.elapsed().as_secs_f64();
            }
            if !more {
                return Ok(());
            }
        }
    }

    /// Most output points of one direct-path call of stencil step `si`: about
    /// `chunk_bytes` of its output rows.
    pub(super) fn chunk_points(&self, si: usize) -> usize {
        let c = self.plan.stencils[si].op.cout().max(1);
        (self.chunk_bytes / (4 * c)).max(1)
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
        let slab = self.slab;
        let pooled = new.rows_between(slab.lo, slab.hi);
        if let Some(sum) = &mut self.sums[slot] {
            let first = new.rows.get(pooled.start).map_or(0, |&r| u64::from(r));
            let mut part = TreeSum::new(1, first);
            for i in pooled.clone() {
                let acc = part.push_leaf(u64::from(new.rows[i]), self.k);
                for p in new.row_range(i) {
                    (self.k.sum_f64)(acc, &[1.0], p == new.row_start[i]);
                }
            }
            sum.extend(&part, self.k);
        }
        self.points[slot] += new.len() as u64;
        self.pooled_points[slot] += new.points_of(pooled).len() as u64;
        w.ids.resize(w.ids.len() + new.len(), 0);
        w.coords.append(&new);
        if w.table.is_empty() {
            w.table = RowBuf::from_vec(vec![1.0]);
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

    pub(super) fn take(&mut self, slot: usize) -> Result<Window<'m>> {
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

    /// The pooled sums and pooled points of every slot; releases the windows.
    fn pooled(self) -> (Vec<Option<TreeSum>>, Vec<u64>) {
        for w in self.windows.into_iter().flatten() {
            w.release(self.pool);
        }
        (self.sums, self.pooled_points)
    }
}

/// What a slab run hands back (see [`Run::run_slab`]).
pub(crate) struct SlabSums {
    /// Per slot, its pooled sum over the slab's rows.
    pub sums: Vec<Option<TreeSum>>,
    /// Per slot, its points in the slab's rows.
    pub points: Vec<u64>,
    /// The slab run's figures.
    pub stats: FeaturizeStats,
}

/// Joins the slabs' sums (in row order) and figures, and computes the output.
pub(crate) fn finish_slabs(
    plan: &Plan,
    k: &'static Kernels,
    slabs: Vec<SlabSums>,
) -> Result<(Vec<f32>, FeaturizeStats)> {
    if log::log_enabled!(log::Level::Trace) {
        for (i, slab) in slabs.iter().enumerate() {
            let seconds: f64 = slab.stats.steps.iter().map(|s| s.seconds).sum();
            log::trace!(
                "featurizer slab {i}: {:.3} ms in its steps, {} bands, {} points",
                seconds * 1e3,
                slab.stats.bands,
                slab.stats.points
            );
        }
    }
    let mut all = slabs.into_iter();
    let Some(mut first) = all.next() else {
        return Err(Error::featurize("graph", "internal: no slab ran"));
    };
    for slab in all {
        for (total, part) in first.sums.iter_mut().zip(&slab.sums) {
            if let (Some(total), Some(part)) = (total, part) {
                total.extend(part, k);
            }
        }
        for (total, part) in first.points.iter_mut().zip(&slab.points) {
            *total += part;
        }
        first.stats.join(&slab.stats);
    }
    trace(&first.stats, k);
    let out = finish(plan, k, first.sums, &first.points)?;
    Ok((out, first.stats))
}

impl FeaturizeStats {
    /// Adds another slab run's figures (the peak is the shared budget's, taken last).
    fn join(&mut self, other: &FeaturizeStats) {
        self.peak_bytes = self.peak_bytes.max(other.peak_bytes);
        self.bands += other.bands;
        self.slabs += other.slabs;
        self.dense_macs += other.dense_macs;
        self.computed_macs += other.computed_macs;
        self.rows_computed += other.rows_computed;
        self.points += other.points;
        for (a, b) in self.steps.iter_mut().zip(&other.steps) {
            a.seconds += b.seconds;
            a.points += b.points;
            a.rows_computed += b.rows_computed;
            a.pairs += b.pairs;
            a.computed_macs += b.computed_macs;
            for (x, y) in a.phases.iter_mut().zip(b.phases) {
                *x += y;
            }
        }
    }
}

/// The pooled means (`sums` over `points` per slot), the dense steps, and the graph output.
fn finish(
    plan: &Plan,
    k: &'static Kernels,
    mut sums: Vec<Option<TreeSum>>,
    points: &[u64],
) -> Result<Vec<f32>> {
    let mut dense: Vec<Option<Vec<f32>>> = vec![None; plan.types.len()];
    for &(x, y) in &plan.pools {
        let n = points[x];
        let c = plan.channels(x);
        let sum = sums[x].take().unwrap_or_else(|| TreeSum::new(c, 0));
        let total = sum.total(k);
        let mean = if n == 0 {
            vec![0.0; c]
        } else {
            total.iter().map(|t| (t / n as f64) as f32).collect()
        };
        sums[x] = Some(sum);
        dense[y] = Some(mean);
    }
    for step in &plan.dense {
        let inputs: Option<Vec<&[f32]>> =
            step.inputs.iter().map(|&s| dense[s].as_deref()).collect();
        let inputs =
            inputs.ok_or_else(|| Error::featurize("graph", "internal: dense input missing"))?;
        dense[step.output] = Some(step.op.run(&inputs));
    }
    match dense[plan.output_slot].take() {
        Some(v) if v.len() == plan.output_dim => Ok(v),
        _ => Err(Error::featurize(
            "graph",
            "internal: output value missing or mis-sized",
        )),
    }
}

/// Logs a run's figures per step (`log::trace!`).
fn trace(stats: &FeaturizeStats, k: &Kernels) {
    if !log::log_enabled!(log::Level::Trace) {
        return;
    }
    log::trace!(
        "featurizer run: {} slab(s), {} bands of {} entries, SIMD level {}",
        stats.slabs,
        stats.bands,
        stats.band_entries,
        k.level
    );
    for st in &stats.steps {
        let p = st.phases.map(|t| t * 1e3);
        log::trace!(
            "featurizer step '{}' ({}): {:.3} ms, {} points, {} rows computed, {} pairs, \
             {:.3} GMAC done; ms in coordinates {:.1}, jobs {:.1}, tables {:.1}, rows and sums {:.1}, \
             windows {:.1}, halos {:.1}",
            st.name,
            st.op_type,
            st.seconds * 1e3,
            st.points,
            st.rows_computed,
            st.pairs,
            st.computed_macs as f64 / 1e9,
            p[0],
            p[1],
            p[2],
            p[3],
            p[4],
            p[5]
        );
    }
}
