//! Neighbour search ("rulebook") for conv and pool layers, in pull form.
//!
//! For each output point `p` the layer needs the list of `(κ, input point)` pairs with
//! `p + offset(κ)` present in the input, in a canonical order (*visiting order*: kernel row,
//! then column). Rather than materialising a
//! global rulebook, [`Neighbours`] produces that list per output point on the fly: for an
//! output row `R` it locates each input row `R + a_r` by binary search once, then walks the
//! output row's columns left to right with one monotone cursor per kernel row, so each
//! output point costs `O(k²)` comparisons. On the AVX2 and AVX-512 levels, kernels of up to
//! 5 × 5 without dilation take the points 16 at a time instead (`blocks_search`): each
//! kernel row's columns near the 16 windows are compared once with all of them in vector
//! lanes, which gives every point's neighbour mask and first neighbour per kernel row
//! without a branch per point (2× fewer nanoseconds per point than the cursor walk on
//! sparse rows). Every level finds the same pairs in the same order. The block search of the
//! first layer of a chain of stride-1 layers is recorded and replayed in the chain's later
//! layers, which would find the same neighbours (`search_memo`). Work is split into
//! [`tasks`] of whole output rows that depend only on the output coordinates and the layer
//! (never on the thread count).

use std::ops::Range;

use super::coords::Coords;
use super::search_memo::{MemoChunk, MemoUse, SearchMemo};
#[cfg(target_arch = "x86_64")]
use crate::simd::scan::{Avx2Lanes, Lanes16};
use crate::simd::SimdLevel;

/// Most output points per parallel task (and the points of every task of the shared
/// path's key search, whose sharing within a task does not depend on the layer's width).
/// It trades each task's set-up (its scratch, its pooled-sum tree, its share of a band's
/// key merge) against the balance of a band step's tasks over the threads.
pub(crate) const TASK_POINTS: usize = 32768;
/// Fewest output points per parallel task.
const MIN_TASK_POINTS: usize = 128;
/// Multiply-adds per neighbour pair at which tasks reach [`TASK_POINTS`] (WACO's 32→32):
/// wider layers get proportionally fewer points per task.
const TASK_PAIR_MACS: u64 = 1024;

/// Kernel geometry of one layer: per-axis offsets at the input tensor stride.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Kernel size per axis.
    pub k: usize,
    /// Per-axis offsets `a_i`, ascending; kernel index `κ = i_r + k·i_c`.
    pub offsets: Vec<i64>,
    /// Distance between consecutive offsets, `d·t` (≥ 1).
    pub step: u64,
    /// The offsets are consecutive multiples of the input tensor stride `t` (dilation 1), so
    /// every input point inside a window is a neighbour and a window holds at most `k` per
    /// kernel row.
    pub dense: bool,
}

impl Geometry {
    /// Offsets of MinkowskiEngine's `HYPER_CUBE` region: for odd `k`,
    /// `{−⌊k/2⌋, …, ⌊k/2⌋}·d·t`; for even `k`, `{0, …, k−1}·d·t`.
    pub fn new(k: usize, dilation: u64, t_in: u64) -> Self {
        let step = dilation * t_in;
        let lo = if k % 2 == 1 { -((k / 2) as i64) } else { 0 };
        let offsets = (0..k as i64).map(|i| (lo + i) * step as i64).collect();
        Self {
            k,
            offsets,
            step,
            dense: dilation == 1,
        }
    }

    /// MinkowskiEngine's pooling *stride map* (used when `kernel_size == stride > 1`): the
    /// neighbours of an output point `p` at tensor stride `s·t` are the input points of its
    /// cell, `p + {0, …, s−1}·t` per axis, whatever the dilation.
    pub fn cell(s: usize, t_in: u64) -> Self {
        let offsets = (0..s as i64).map(|i| i * t_in as i64).collect();
        Self {
            k: s,
            offsets,
            step: t_in,
            dense: true,
        }
    }

    /// Number of kernel offsets, `k²`.
    pub fn volume(&self) -> usize {
        self.k * self.k
    }
}

/// Output points per parallel task for a layer with `macs_per_pair` multiply-adds per
/// neighbour pair: [`TASK_POINTS`] for narrow layers, fewer for wide ones (down to
/// [`MIN_TASK_POINTS`]), so a band step of a 256-channel conv still has tens of tasks to
/// balance over the threads instead of a handful of long ones. Tasks only split the work:
/// results do not depend on them.
pub(crate) fn task_points(macs_per_pair: u64) -> usize {
    let scale = (macs_per_pair / TASK_PAIR_MACS).max(1);
    (TASK_POINTS / scale.min(TASK_POINTS as u64) as usize).max(MIN_TASK_POINTS)
}

/// Contiguous ranges of output rows (indices into `out.rows`) of balanced sizes, at most
/// about `points` points each (see [`task_points`]), and an even number of them from
/// [`SERIAL_POINTS`] points on. The split depends only on the coordinates and `points`,
/// never on the thread count.
pub(crate) fn tasks(out: &Coords, points: usize) -> Vec<std::ops::Range<usize>> {
    let n = out.len();
    let least = if n >= SERIAL_POINTS { 2 } else { 1 };
    // An even number of tasks from two on: three tasks on two threads leave one idle for a
    // third of the step (BENCHMARKS.md, "An even number of tasks per band step").
    let mut count = n.div_ceil(points.max(1)).max(least);
    if count > 1 {
        count = count.next_multiple_of(2);
    }
    // Task `t` ends at the row boundary nearest to `(t + 1)/count` of the points. (Cutting
    // after the first row that reaches `n/count` put every overshoot into the last task, and
    // long rows then left one worker with most of a step; measured in BENCHMARKS.md.)
    let rows = out.rows.len();
    let mut tasks = Vec::with_capacity(count);
    let mut first = 0;
    for t in 1..count {
        let target = n * t / count;
        // Boundaries `b` are row starts, `row_start[b]` points before row `b`.
        let above = out.row_start.partition_point(|&s| s < target);
        let nearest = if above > 0
            && target - out.row_start[above - 1] <= out.row_start[above.min(rows)] - target
        {
            above - 1
        } else {
            above
        };
        let end = nearest.clamp(first + 1, rows);
        if end >= rows {
            break;
        }
        tasks.push(first..end);
        first = end;
    }
    if first < rows {
        tasks.push(first..rows);
    }
    tasks
}

/// Output points below which a band step runs on the calling thread alone: waking the
/// other threads for each of a step's parallel loops costs more than they would save.
pub(crate) const SERIAL_POINTS: usize = 4096;

/// The `with_min_len` of a band step's parallel loops over `points` output points:
/// everything in one piece (run on the calling thread) below [`SERIAL_POINTS`], else 1.
/// Like [`tasks`], it only decides who runs what, never a value.
pub(crate) fn grain(points: usize) -> usize {
    if points < SERIAL_POINTS {
        usize::MAX
    } else {
        1
    }
}

/// The number of `(output point, neighbour)` pairs of the output rows `rows` of `out` over
/// `input`.
pub(crate) fn count_pairs(
    input: &Coords,
    out: &Coords,
    rows: std::ops::Range<usize>,
    geom: &Geometry,
    level: SimdLevel,
) -> u64 {
    let mut nb = Neighbours::new(input, geom, level);
    let mut pairs = 0u64;
    for ri in rows {
        nb.start_row(out.rows[ri]);
        nb.each_point(&out.cols[out.row_range(ri)], |_, list| {
            pairs += list.len() as u64
        });
    }
    pairs
}

/// Output points whose neighbours [`Neighbours::each_point`] finds per vector search call.
const SEARCH_CHUNK: usize = 256;

/// The neighbour pairs of a chunk of output points: point `i`'s pairs are
/// `pairs[ends[i - 1]..ends[i]]` (from 0 for the first).
#[derive(Debug, Default)]
struct PointPairs {
    pairs: Vec<(u32, u32)>,
    ends: Vec<u32>,
    /// The points' neighbour masks, when only those were asked for.
    masks: Vec<u32>,
}

impl PointPairs {
    #[inline]
    fn point(&self, i: usize) -> &[(u32, u32)] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.pairs[start..self.ends[i] as usize]
    }
}

/// Receives the neighbour pairs of consecutive output points from
/// [`Neighbours::each_point_into`].
pub(crate) trait PairSink {
    /// A `(κ, input point)` pair of the current point (in visiting order).
    fn pair(&mut self, kappa: u32, q: u32);
    /// The current point has all its pairs; later pairs belong to the next point.
    fn end_point(&mut self);
    /// A point whose only pair is `(κ, q)`: `pair` then `end_point`, or a shortcut.
    #[inline(always)]
    fn only_pair(&mut self, kappa: u32, q: u32) {
        self.pair(kappa, q);
        self.end_point();
    }
}

/// How a task searches neighbours: the layer's geometry, the instruction-set level of the
/// column searches and what to do with the layer group's memo (see `search_memo`).
#[derive(Clone, Copy)]
pub(crate) struct Search<'a> {
    pub geom: &'a Geometry,
    pub level: SimdLevel,
    pub memo: MemoUse<'a>,
    /// Every output point is an input point (a stride-1 layer), so the mask search may
    /// certify points alone in their window instead of searching them (see `lone`).
    pub centred: bool,
}

impl<'a> Search<'a> {
    /// Searches of `geom` at `level`, without a memo or certificates.
    pub fn new(geom: &'a Geometry, level: SimdLevel) -> Self {
        Self {
            geom,
            level,
            memo: MemoUse::Off,
            centred: false,
        }
    }

    /// Scratch for these searches over `input`.
    pub fn neighbours(&self, input: &'a Coords) -> Neighbours<'a> {
        Neighbours::new(input, self.geom, self.level).with_memo(self.memo)
    }
}

/// Per-task scratch for neighbour search.
pub(crate) struct Neighbours<'a> {
    input: &'a Coords,
    geom: &'a Geometry,
    /// Instruction-set level of the column searches (see `simd::scan`).
    level: SimdLevel,
    /// Kernel rows whose input row `R + a_r` is present: `(i_r, cursor, end)` into the
    /// input points of that row.
    cursors: Vec<(u32, usize, usize)>,
    /// The pairs of the current chunk of points.
    found: PointPairs,
    /// Index into `input.rows` where the search for the next output row starts.
    row_pos: usize,
    /// The block search's mask bits, for the search and for replays.
    bits: MaskBits,
    /// Per kernel row `i_r`, where the current output row's input row `R + a_r` starts
    /// (0 where it is absent): the block search's records are relative to it.
    bases: [u32; 5],
    /// What the block search finds, recorded for later layers (see `search_memo`).
    record: Option<MemoChunk>,
    /// A memo to take rows from, where the next row lookup starts in it, and the current
    /// row's chunk and points in it (when it holds the row).
    replay: Option<&'a SearchMemo>,
    replay_at: (usize, usize),
    replay_row: Option<(&'a MemoChunk, Range<usize>)>,
    /// Points whose neighbours came from the memo.
    #[cfg(test)]
    replayed: usize,
}

impl<'a> Neighbours<'a> {
    /// Scratch for searching `input` with geometry `geom`, with the column searches of
    /// `level` (lowered to what the CPU supports).
    pub fn new(input: &'a Coords, geom: &'a Geometry, level: SimdLevel) -> Self {
        Self {
            input,
            geom,
            level: level.min(SimdLevel::detect()),
            cursors: Vec::with_capacity(geom.k),
            found: PointPairs::default(),
            row_pos: 0,
            bits: MaskBits::new(geom.k.min(5)),
            bases: [0; 5],
            record: None,
            replay: None,
            replay_at: (0, 0),
            replay_row: None,
            #[cfg(test)]
            replayed: 0,
        }
    }

    /// These searches with their layer group's memo (see `search_memo`): recording what the
    /// block search finds, or taking the rows a memo holds from it. Only the block search
    /// records and replays; the other levels search as before.
    pub fn with_memo(mut self, memo: MemoUse<'a>) -> Self {
        if searches_in_blocks(self.geom, self.level) {
            match memo {
                MemoUse::Off => {}
                MemoUse::Record => self.record = Some(MemoChunk::new(self.geom.k)),
                MemoUse::Replay(m) => self.replay = Some(m),
            }
        }
        self
    }

    /// Room in the record (if any) for `points` points in `rows` output rows.
    pub fn reserve_record(&mut self, points: usize, rows: usize) {
        if let Some(memo) = &mut self.record {
            memo.reserve(points, rows);
        }
    }

    /// What these searches recorded (see [`with_memo`](Self::with_memo)).
    pub fn into_record(self) -> Option<MemoChunk> {
        self.record
    }

    /// Positions the per-kernel-row cursors for output row coordinate `row`. Output rows
    /// must be visited in ascending order: the input rows are found by a forward search
    /// from where the previous output row's first kernel row was found.
    pub fn start_row(&mut self, row: u32) {
        let rows = &self.input.rows;
        self.cursors.clear();
        let mut pos = self.row_pos;
        let mut first = true;
        for (ir, &a) in self.geom.offsets.iter().enumerate() {
            let Ok(t) = u32::try_from(i64::from(row) + a) else {
                continue;
            };
            // First input row >= t: a few linear steps (the usual case), then bisection.
            let mut steps = 0;
            while pos < rows.len() && rows[pos] < t {
                pos += 1;
                steps += 1;
                if steps == 4 {
                    pos += rows[pos..].partition_point(|&r| r < t);
                    break;
                }
            }
            if first {
                // The smallest valid target never decreases from one output row to the next.
                self.row_pos = pos;
                first = false;
            }
            if pos < rows.len() && rows[pos] == t {
                self.cursors.push((
                    ir as u32,
                    self.input.row_start[pos],
                    self.input.row_start[pos + 1],
                ));
            }
        }
        if self.record.is_some() || self.replay.is_some() {
            self.bases = [0; 5];
            for &(ir, start, _) in &self.cursors {
                self.bases[ir as usize] = start as u32;
            }
        }
        if let Some(memo) = &mut self.record {
            memo.start_row(row);
        }
        if let Some(memo) = self.replay {
            self.replay_row = memo.row(row, &mut self.replay_at);
        }
    }

    /// The offset of kernel row `ir` (along either axis).
    pub fn offset(&self, ir: usize) -> i64 {
        self.geom.offsets[ir]
    }

    /// The input rows of the current output row's window: `(i_r, first point, end)` for
    /// each kernel row `i_r` whose input row is present, before any [`each_point`](Self::each_point)
    /// call of the row.
    pub fn row_ranges(&self) -> &[(u32, usize, usize)] {
        &self.cursors
    }

    /// Calls `f(i, pairs)` for every output point `i` at column `cols[i]` of the current
    /// row with its `(κ, input point)` pairs in *visiting* order: by kernel row `i_r`
    /// ascending, then by column (`i_c`) ascending (a canonical order, fixed by the
    /// coordinates). `cols` ascend, and a later call for the same row continues to the
    /// right of this one.
    ///
    /// Per present kernel row, a cursor skips the input columns left of the point's window
    /// `[col + a_0, col + a_{k−1}]` (amortised over the row), then visits the columns inside
    /// it; a column `c` there is a neighbour iff `c − col − a_0` is a multiple of the offset
    /// step `d·t`, with `i_c` the quotient. On the AVX2 and AVX-512 levels the points of a dense
    /// kernel of up to 5 × 5 are found 16 at a time instead (see the module docs).
    pub fn each_point(&mut self, cols: &[u32], mut f: impl FnMut(usize, &[(u32, u32)])) {
        for (c, chunk) in cols.chunks(SEARCH_CHUNK).enumerate() {
            self.search(chunk);
            for i in 0..chunk.len() {
                f(c * SEARCH_CHUNK + i, self.found.point(i));
            }
        }
    }

    /// Hands the pairs of every output point at `cols` of the current row to `sink`: the
    /// pairs of a point in visiting order, then [`PairSink::end_point`] (points in the order
    /// of `cols`, same rules as [`each_point`](Self::each_point)). On the block search the
    /// pairs go from the masks straight to the sink, without a list between them.
    pub fn each_point_into<S: PairSink>(&mut self, cols: &[u32], sink: &mut S) {
        #[cfg(target_arch = "x86_64")]
        if searches_in_blocks(self.geom, self.level) {
            // A row the memo holds, asked for whole (as every caller does): replayed.
            if let Some((chunk, points)) = self.replay_row.take() {
                if points.len() == cols.len() {
                    #[cfg(test)]
                    {
                        self.replayed += points.len();
                    }
                    self.replay_into(chunk, points, sink);
                    return;
                }
            }
            for chunk in cols.chunks(SEARCH_CHUNK) {
                // SAFETY: `new` lowered the level to what the CPU supports; `blocks_fit`.
                unsafe { sink_in_blocks(self, chunk, sink) };
            }
            return;
        }
        self.each_point(cols, |_, list| {
            for &(kappa, q) in list {
                sink.pair(kappa, q);
            }
            sink.end_point();
        });
    }

    /// Calls `f(i, mask)` for every output point `i` at column `cols[i]` of the current row
    /// with its neighbour mask: bit `i_r·k + i_c` set when the input has a point at offset
    /// `(a_{i_r}, a_{i_c})` (the layout of `masks`); `k² ≤ 32`. Same order rules as
    /// [`each_point`](Self::each_point).
    pub fn each_mask(&mut self, cols: &[u32], mut f: impl FnMut(usize, u64)) {
        #[cfg(target_arch = "x86_64")]
        if searches_in_blocks(self.geom, self.level) {
            for (c, chunk) in cols.chunks(SEARCH_CHUNK).enumerate() {
                self.found.masks.clear();
                // SAFETY: `new` lowered the level to what the CPU supports; `blocks_fit`.
                unsafe { masks_in_blocks(self, chunk) };
                for (i, &m) in self.found.masks.iter().enumerate() {
                    f(c * SEARCH_CHUNK + i, u64::from(m));
                }
            }
            return;
        }
        let k = self.geom.k as u32;
        self.each_point(cols, |i, list| f(i, mask_of_list(list, k)));
    }

    /// Hands the points `points` of `chunk` (the current row's) to `sink`, 16 at a time as
    /// the block search that recorded them did (`sink_in_blocks`).
    fn replay_into<S: PairSink>(&self, chunk: &MemoChunk, points: Range<usize>, sink: &mut S) {
        let k = self.geom.k;
        let (mut masks, mut firsts) = ([0u32; 16], [[0u32; 16]; 5]);
        let mut p = points.start;
        while p < points.end {
            let n = (points.end - p).min(16);
            chunk.block(p, n, &self.bases[..k], &mut masks, &mut firsts[..k]);
            self.bits.emit(n, &masks, &firsts[..k], sink);
            p += n;
        }
    }

    /// Fills `found` with the pairs of the points at `cols`, with the searches of `level`.
    fn search(&mut self, cols: &[u32]) {
        self.found.pairs.clear();
        self.found.ends.clear();
        #[cfg(target_arch = "x86_64")]
        if searches_in_blocks(self.geom, self.level) {
            // SAFETY: `new` lowered the level to what the CPU supports; `blocks_fit`.
            unsafe { pairs_in_blocks(self, cols) };
            return;
        }
        search_scalar(self, cols);
    }

    /// The pairs of the output point at column `col` of the current row by the scalar
    /// cursor walk: the reference the tests hold the other levels to.
    #[cfg(test)]
    pub fn point(&mut self, col: u32) -> &[(u32, u32)] {
        self.found.pairs.clear();
        self.found.ends.clear();
        search_scalar(self, &[col]);
        self.found.point(0)
    }
}

/// The pairs of the points at `cols` into `nb.found`, by the block search.
///
/// # Safety
///
/// As [`sink_in_blocks`].
#[cfg(target_arch = "x86_64")]
unsafe fn pairs_in_blocks(nb: &mut Neighbours<'_>, cols: &[u32]) {
    let mut found = std::mem::take(&mut nb.found);
    // SAFETY: forwarded.
    unsafe { sink_in_blocks(nb, cols, &mut found) };
    nb.found = found;
}

/// A chunk's pair lists as a sink: each point's pairs, then its end.
impl PairSink for PointPairs {
    #[inline]
    fn pair(&mut self, kappa: u32, q: u32) {
        self.pairs.push((kappa, q));
    }

    #[inline]
    fn end_point(&mut self) {
        self.ends.push(self.pairs.len() as u32);
    }
}

/// The pairs of the points at `cols` into `sink`, by the block search.
///
/// # Safety
///
/// `nb.level` is AVX2 or AVX-512 and supported by the CPU; `blocks_fit(&nb.geom)`. (Compiled
/// for AVX2 and POPCNT, both levels' common part, so the mask decoding in the closures has
/// POPCNT.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn sink_in_blocks<S: PairSink>(nb: &mut Neighbours<'_>, cols: &[u32], sink: &mut S) {
    let (bits, bases) = (&nb.bits, &nb.bases[..nb.geom.k]);
    let mut record = nb.record.as_mut();
    let mut to_sink = |n: usize, masks: &[u32; 16], firsts: &[[u32; 16]]| {
        if let Some(memo) = record.as_mut() {
            memo.push_block(n, masks, firsts, bases);
        }
        bits.emit(n, masks, firsts, sink);
    };
    // SAFETY: forwarded.
    unsafe {
        blocks::<true>(
            nb.level,
            nb.input,
            nb.geom,
            &mut nb.cursors,
            cols,
            &mut to_sink,
        )
    }
}

/// The neighbour masks of the points at `cols` into `nb.found.masks`, by the block search.
///
/// # Safety
///
/// As [`sink_in_blocks`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn masks_in_blocks(nb: &mut Neighbours<'_>, cols: &[u32]) {
    let masks_out = &mut nb.found.masks;
    let mut to_masks =
        |n: usize, masks: &[u32; 16], _: &[[u32; 16]]| masks_out.extend_from_slice(&masks[..n]);
    // SAFETY: forwarded.
    unsafe {
        blocks::<false>(
            nb.level,
            nb.input,
            nb.geom,
            &mut nb.cursors,
            cols,
            &mut to_masks,
        )
    }
}

/// [`Neighbours::search`] with the scalar cursor walk (see [`Neighbours::each_point`]).
fn search_scalar(nb: &mut Neighbours<'_>, cols: &[u32]) {
    let k = nb.geom.k as u32;
    let step = nb.geom.step;
    let span = step * u64::from(k - 1);
    let all: &[u32] = &nb.input.cols;
    let found = &mut nb.found;
    for &col in cols {
        let lo = i64::from(col) + nb.geom.offsets[0];
        for cursor in nb.cursors.iter_mut() {
            let (ir, pos, end) = *cursor;
            let row = &all[pos..end];
            let skip = row.iter().take_while(|&&v| i64::from(v) < lo).count();
            cursor.1 = pos + skip;
            for (j, &v) in (pos + skip..).zip(&row[skip..]) {
                // `v >= lo`, so the difference is the distance into the window.
                let diff = (i64::from(v) - lo) as u64;
                if diff > span {
                    break;
                }
                // Columns are multiples of the tensor stride, not of the dilation: check both.
                let ic = if step.is_power_of_two() {
                    if diff & (step - 1) != 0 {
                        continue;
                    }
                    diff >> step.trailing_zeros()
                } else if diff.is_multiple_of(step) {
                    diff / step
                } else {
                    continue;
                };
                // ic < k because diff <= span.
                found.pairs.push((ir + k * ic as u32, j as u32));
            }
        }
        found.ends.push(found.pairs.len() as u32);
    }
}

/// Per bit `i_r·k + i_c` of a neighbour mask: its κ, its kernel row `i_r`, and the bits
/// before it in its kernel row, so that decoding a mask takes table reads rather than a
/// division by `k` per pair.
struct MaskBits {
    kappa: [u32; 32],
    row: [u32; 32],
    below: [u32; 32],
}

impl MaskBits {
    /// The table of kernel size `k` (`k² ≤ 32`).
    fn new(k: usize) -> Self {
        let k = k as u32;
        let mut t = Self {
            kappa: [0; 32],
            row: [0; 32],
            below: [0; 32],
        };
        for b in 0..(k * k).min(32) {
            let (ir, ic) = (b / k, b % k);
            t.kappa[b as usize] = ir + k * ic;
            t.row[b as usize] = ir;
            t.below[b as usize] = ((1u32 << ic) - 1) << (ir * k);
        }
        t
    }

    /// The pairs of neighbour mask `m` of lane `j`, in visiting order: `(κ, input point)`
    /// with the point found from the first neighbour of its kernel row in that lane
    /// (`firsts[i_r][j]`) and the bits below it in the row.
    #[inline(always)]
    fn decode(&self, m: u32, j: usize, firsts: &[[u32; 16]], mut pair: impl FnMut(u32, u32)) {
        let mut rest = m;
        while rest != 0 {
            let b = rest.trailing_zeros() as usize & 31;
            rest &= rest - 1;
            let first = firsts[self.row[b] as usize][j];
            pair(self.kappa[b], first + (m & self.below[b]).count_ones());
        }
    }

    /// Hands a block's `n` points (masks and firsts as [`decode`](Self::decode) takes them)
    /// to `sink`, each point's pairs in visiting order then its end.
    #[inline(always)]
    fn emit<S: PairSink>(&self, n: usize, masks: &[u32; 16], firsts: &[[u32; 16]], sink: &mut S) {
        for (j, &m) in masks.iter().enumerate().take(n) {
            if m != 0 && m & (m - 1) == 0 {
                // One pair: no neighbours below it in its kernel row.
                let b = m.trailing_zeros() as usize & 31;
                sink.only_pair(self.kappa[b], firsts[self.row[b] as usize][j]);
            } else {
                self.decode(m, j, firsts, |kappa, q| sink.pair(kappa, q));
                sink.end_point();
            }
        }
    }
}

/// The block search (see [`blocks_search`]) on `level`.
///
/// # Safety
///
/// `level` is AVX2 or AVX-512 and supported by the CPU; `blocks_fit(geom)`; `cursors` from
/// [`Neighbours::start_row`] over `input`.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn blocks<const FIRSTS: bool>(
    level: SimdLevel,
    input: &Coords,
    geom: &Geometry,
    cursors: &mut [(u32, usize, usize)],
    cols: &[u32],
    emit: &mut impl FnMut(usize, &[u32; 16], &[[u32; 16]]),
) {
    // SAFETY: forwarded; the level decides which vectors the CPU can run.
    unsafe {
        if level == SimdLevel::Avx512 {
            blocks_avx512::<FIRSTS>(input, geom, cursors, cols, emit)
        } else {
            blocks_avx2::<FIRSTS>(input, geom, cursors, cols, emit)
        }
    }
}

/// Generates the per-level entry of the block search: [`blocks_search`] compiled for the
/// level's instruction set with its vectors, one instance per kernel size.
macro_rules! blocks_level {
    ($(#[$doc:meta])* $name:ident, $features:literal, $lanes:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The CPU supports the level; `blocks_fit(geom)`; `cursors` from
        /// [`Neighbours::start_row`] over `input`.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn $name<const FIRSTS: bool>(
            input: &Coords,
            geom: &Geometry,
            cursors: &mut [(u32, usize, usize)],
            cols: &[u32],
            emit: &mut impl FnMut(usize, &[u32; 16], &[[u32; 16]]),
        ) {
            type V = $lanes;
            // SAFETY: forwarded; `geom.k` is the kernel size.
            unsafe {
                match geom.k {
                    1 => blocks_search::<1, FIRSTS, V>(input, geom, cursors, cols, emit),
                    2 => blocks_search::<2, FIRSTS, V>(input, geom, cursors, cols, emit),
                    3 => blocks_search::<3, FIRSTS, V>(input, geom, cursors, cols, emit),
                    4 => blocks_search::<4, FIRSTS, V>(input, geom, cursors, cols, emit),
                    _ => blocks_search::<5, FIRSTS, V>(input, geom, cursors, cols, emit),
                }
            }
        }
    };
}

blocks_level!(
    /// The block search with AVX-512 F (one 512-bit vector per block).
    blocks_avx512,
    "avx512f,popcnt",
    std::arch::x86_64::__m512i
);
blocks_level!(
    /// The block search with AVX2 (two 256-bit vectors per block).
    blocks_avx2,
    "avx2,popcnt",
    Avx2Lanes
);

/// The block search (see the module docs): the output points at `cols` (ascending, of the
/// row the `cursors` were set for) taken 16 at a time; each present kernel row's columns
/// within reach of the 16 windows are compared once with all of them in vector lanes
/// (`V::window_block`, see `simd::scan`), which gives every point's neighbour mask (bit
/// `i_r·K + i_c`, visiting order) and, with `FIRSTS`, per kernel row the index of its first
/// neighbour. `emit(n, masks, firsts)` gets each block's `n` points (`firsts[i_r][j]` for
/// kernel row `i_r` and lane `j`; zeros without `FIRSTS`). Inlined into each level's entry,
/// so the vectors are that level's.
///
/// # Safety
///
/// The CPU supports `V`'s level; `blocks_fit(geom)` and `geom.k == K`; `cursors` from
/// [`Neighbours::start_row`] over `input`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn blocks_search<const K: usize, const FIRSTS: bool, V: Lanes16>(
    input: &Coords,
    geom: &Geometry,
    cursors: &mut [(u32, usize, usize)],
    cols: &[u32],
    emit: &mut impl FnMut(usize, &[u32; 16], &[[u32; 16]]),
) {
    let all: &[u32] = &input.cols;
    let span = (geom.step * (K as u64 - 1)) as u32;
    let shift = geom.step.trailing_zeros();
    let a0 = geom.offsets[0] as i32;
    for block in cols.chunks(16) {
        let mut buf = [0u32; 16];
        buf[..block.len()].copy_from_slice(block);
        let bounds = (block[0] as i32 + a0, block[block.len() - 1] as i32 + a0);
        let mut masks = [0u32; 16];
        let mut firsts = [[0u32; 16]; K];
        // SAFETY: the CPU supports `V`'s level (caller contract); cursor positions are at
        // most their row's end; columns and `a0` fit `i32` with room for `span`
        // (`blocks_fit`), and the block's columns ascend.
        unsafe {
            let lo = V::windows(&buf, a0);
            let mut mask = V::zero();
            for cursor in cursors.iter_mut() {
                let (ir, pos, end) = *cursor;
                let row = &all[..end];
                let (next, first, bits) =
                    V::window_block::<FIRSTS>(row, pos, lo, bounds, block.len(), span, shift);
                mask = mask.or_shifted(bits, ir * K as u32);
                if FIRSTS {
                    first.store(&mut firsts[ir as usize]);
                }
                cursor.1 = next;
            }
            mask.store(&mut masks);
        }
        emit(block.len(), &masks, &firsts);
    }
}

/// Whether [`Neighbours`] of `level` find the neighbours of `geom` 16 points at a time
/// (and hand out neighbour masks without building pair lists).
pub(crate) fn searches_in_blocks(geom: &Geometry, level: SimdLevel) -> bool {
    cfg!(target_arch = "x86_64")
        && level.min(SimdLevel::detect()) >= SimdLevel::Avx2
        && blocks_fit(geom)
}

/// Whether [`blocks_search`] handles a geometry: dense, at most 5 offsets per axis
/// (a mask of `k²` bits fits a lane), a power-of-two step, and offsets small enough that a
/// window's bounds fit `i32` lanes.
fn blocks_fit(geom: &Geometry) -> bool {
    geom.dense && geom.k <= 5 && geom.step.is_power_of_two() && geom.step * geom.k as u64 <= 1 << 29
}

/// Mask bit of kernel index `kappa`.
#[inline]
pub(crate) fn mask_bit(kappa: u32, k: u32) -> u32 {
    (kappa % k) * k + kappa / k
}

/// The mask of a neighbour list `(κ, point)`.
#[inline]
pub(crate) fn mask_of_list(list: &[(u32, u32)], k: u32) -> u64 {
    list.iter()
        .fold(0u64, |m, &(kappa, _)| m | (1u64 << mask_bit(kappa, k)))
}

/// The kernel indices of a mask, ascending.
pub(crate) fn mask_kappas(mask: u64, k: u32) -> impl Iterator<Item = u32> {
    (0..k).flat_map(move |ic| {
        (0..k).filter_map(move |ir| (mask >> (ir * k + ic) & 1 == 1).then_some(ir + k * ic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::CsrPattern;

    #[test]
    fn geometry_offsets() {
        assert_eq!(Geometry::new(3, 1, 1).offsets, vec![-1, 0, 1]);
        assert_eq!(Geometry::new(5, 1, 1).offsets, vec![-2, -1, 0, 1, 2]);
        assert_eq!(Geometry::new(3, 1, 2).offsets, vec![-2, 0, 2]);
        assert_eq!(Geometry::new(2, 1, 4).offsets, vec![0, 4]);
        assert_eq!(Geometry::new(3, 2, 2).offsets, vec![-4, 0, 4]);
    }

    #[test]
    fn neighbours_in_visiting_order() {
        // Points (0,0), (0,1), (1,0); query output point (0,0) with a 3x3 kernel.
        let p = CsrPattern::new(2, 2, vec![0, 2, 3], vec![0, 1, 0]).expect("valid");
        let c = Coords::from_pattern(&p);
        let g = Geometry::new(3, 1, 1);
        let mut n = Neighbours::new(&c, &g, SimdLevel::Scalar);
        n.start_row(0);
        // κ = i_r + 3·i_c; offset (0,0) → κ 4, (0,+1) → κ 7, (+1,0) → κ 5. Visiting order:
        // kernel row i_r = 1 (offset 0) first: κ 4, κ 7; then i_r = 2: κ 5.
        assert_eq!(n.point(0), &[(4, 0), (7, 1), (5, 2)]);
        // Output point (0,1): (0,-1) → κ 1 (pt 0), (0,0) → κ 4 (pt 1), (+1,-1) → κ 2 (pt 2).
        assert_eq!(n.point(1), &[(1, 0), (4, 1), (2, 2)]);
    }

    /// Collects each point's pairs (the last list is the point in progress).
    struct Collect(Vec<Vec<(u32, u32)>>);

    impl PairSink for Collect {
        fn pair(&mut self, kappa: u32, q: u32) {
            self.0
                .last_mut()
                .expect("a point in progress")
                .push((kappa, q));
        }
        fn end_point(&mut self) {
            self.0.push(Vec::new());
        }
    }

    /// A banded pattern: long rows, windows overlapping many points.
    fn banded_pattern() -> CsrPattern {
        let n = 300usize;
        let mut rp = vec![0];
        let mut ci = Vec::new();
        for r in 0..n {
            ci.extend((r.saturating_sub(40)..(r + 40).min(n)).map(|c| c as u32));
            rp.push(ci.len());
        }
        CsrPattern::new(n, n, rp, ci).expect("valid")
    }

    /// Columns up to the largest the pattern allows, where window ends pass `i32::MAX`.
    fn edge_pattern() -> CsrPattern {
        let (n, top) = (60usize, i32::MAX as u32 - 1);
        let mut rp = vec![0];
        let mut ci = Vec::new();
        for r in 0..n {
            ci.extend((0..40u32).map(|i| top - 600 + i * 15 + (r as u32 * 7) % 13));
            ci.push(top - (r as u32 % 3));
            rp.push(ci.len());
        }
        CsrPattern::new(n, i32::MAX as usize, rp, ci).expect("valid")
    }

    /// The kernel sizes, dilations and strides the searches are checked on.
    const SEARCH_CASES: [(usize, u64, u64); 9] = [
        (1, 1, 1),
        (2, 1, 2),
        (3, 1, 1),
        (3, 1, 2),
        (3, 2, 1),
        (4, 1, 1),
        (5, 1, 1),
        (5, 1, 2),
        (7, 1, 1),
    ];

    /// The reference: the pairs of every point of `out` over `input`, row by row, from the
    /// scalar search's `point`.
    fn reference_pairs(input: &Coords, out: &Coords, geom: &Geometry) -> Vec<Vec<(u32, u32)>> {
        let mut reference = Neighbours::new(input, geom, SimdLevel::Scalar);
        let mut want = Vec::new();
        for (ri, &row) in out.rows.iter().enumerate() {
            reference.start_row(row);
            for pi in out.row_range(ri) {
                want.push(reference.point(out.cols[pi]).to_vec());
            }
        }
        want
    }

    /// Checks `each_point`, `each_point_into` and (for `k² ≤ 32`) `each_mask` of `level`
    /// against the reference pairs `want`, with every row split over two calls; `what`
    /// names the case. Returns the number of pairs checked.
    fn check_searches(
        input: &Coords,
        out: &Coords,
        geom: &Geometry,
        level: SimdLevel,
        want: &[Vec<(u32, u32)>],
        what: &str,
    ) -> u64 {
        let k = geom.k;
        let mut nb = Neighbours::new(input, geom, level);
        let mut nm = Neighbours::new(input, geom, level);
        let mut ns = Neighbours::new(input, geom, level);
        let (mut got, mut masks) = (Vec::new(), Vec::new());
        let mut sunk = Collect(vec![Vec::new()]);
        for (ri, &row) in out.rows.iter().enumerate() {
            nb.start_row(row);
            nm.start_row(row);
            ns.start_row(row);
            let cols = &out.cols[out.row_range(ri)];
            // Rows in two calls (a cut inside a vector block when long enough).
            let cut = cols.len() / 3;
            for part in [&cols[..cut], &cols[cut..]] {
                nb.each_point(part, |_, list| got.push(list.to_vec()));
                ns.each_point_into(part, &mut sunk);
                if k * k <= 32 {
                    nm.each_mask(part, |_, m| masks.push(m));
                }
            }
        }
        assert_eq!(got, want, "pairs, {what}");
        sunk.0.pop();
        assert_eq!(sunk.0, want, "pairs through a sink, {what}");
        if k * k <= 32 {
            let want_masks: Vec<u64> = want.iter().map(|l| mask_of_list(l, k as u32)).collect();
            assert_eq!(masks, want_masks, "masks, {what}");
        }
        got.iter().map(|l| l.len() as u64).sum::<u64>()
    }

    /// `each_point`, `each_point_into` and `each_mask` on every supported level give the
    /// scalar reference's
    /// pairs (`point`) and their masks, for dense and dilated kernels of sizes 1 to 5, strides
    /// 1 and 2 at several tensor strides, on a random, an R-MAT and a banded pattern (long
    /// rows, windows overlapping many points), with rows split over several calls.
    #[test]
    fn searches_agree_with_the_reference() {
        use crate::featurize::tests::{random_pattern, rmat};
        let mut checked = 0u64;
        for p in [
            random_pattern(400, 5, 3),
            rmat(10, 6000, 4),
            banded_pattern(),
            edge_pattern(),
        ] {
            let mut input = Coords::from_pattern(&p);
            for t_in in [1u64, 2, 4] {
                if t_in > 1 {
                    input = input.strided(0..input.rows.len(), t_in);
                }
                for (k, dilation, stride) in SEARCH_CASES {
                    let geom = Geometry::new(k, dilation, t_in);
                    let out = if stride == 1 {
                        input.clone()
                    } else {
                        input.strided(0..input.rows.len(), t_in * stride)
                    };
                    let want = reference_pairs(&input, &out, &geom);
                    for level in SimdLevel::supported() {
                        let what = format!("{level}, k {k} d {dilation} s {stride} t {t_in}");
                        checked += check_searches(&input, &out, &geom, level, &want, &what);
                    }
                }
            }
        }
        assert!(
            checked > 1_000_000,
            "the test must see many pairs: {checked}"
        );
    }

    /// Searches recorded over one window and replayed over another that holds the same
    /// rows at other positions (as a later layer's window does) give the reference pairs,
    /// every point replayed, for dense kernels of sizes 1 to 5 at tensor strides 1 and 2.
    #[test]
    fn replayed_searches_give_the_reference_pairs() {
        use crate::featurize::tests::rmat;
        let levels = SimdLevel::supported().filter(|&l| l >= SimdLevel::Avx2);
        let mut replayed = 0;
        for level in levels {
            for p in [rmat(10, 6000, 4), banded_pattern()] {
                let full = Coords::from_pattern(&p);
                for (k, t) in [(1, 1), (2, 1), (3, 1), (3, 2), (5, 1)] {
                    let input = full.strided(0..full.rows.len(), t);
                    let geom = Geometry::new(k, 1, t);
                    // The first layer: every row of the window, recorded.
                    let mut first =
                        Neighbours::new(&input, &geom, level).with_memo(MemoUse::Record);
                    let mut sunk = Collect(vec![Vec::new()]);
                    for (ri, &row) in input.rows.iter().enumerate() {
                        first.start_row(row);
                        first.each_point_into(&input.cols[input.row_range(ri)], &mut sunk);
                    }
                    let mut memo = SearchMemo::default();
                    memo.append(first.into_record().expect("recorded"));
                    // A later layer's window: the rows from a third of the way down, and the
                    // rows whose neighbour rows all lie in it.
                    let reach = geom.offsets[k - 1] as u32;
                    let lo = input.rows[input.rows.len() / 3];
                    let window = input.copy_rows(input.rows_between(i64::from(lo), i64::MAX));
                    let out = window.copy_rows(window.rows_between(
                        i64::from(lo + reach),
                        i64::from(window.rows[window.rows.len() - 1] - reach),
                    ));
                    let want = reference_pairs(&window, &out, &geom);
                    let mut later =
                        Neighbours::new(&window, &geom, level).with_memo(MemoUse::Replay(&memo));
                    let mut got = Collect(vec![Vec::new()]);
                    for (ri, &row) in out.rows.iter().enumerate() {
                        later.start_row(row);
                        later.each_point_into(&out.cols[out.row_range(ri)], &mut got);
                    }
                    got.0.pop();
                    assert_eq!(got.0, want, "{level}, k {k}, t {t}");
                    assert_eq!(later.replayed, out.len(), "{level}, k {k}, t {t}");
                    replayed += later.replayed;
                }
            }
        }
        if SimdLevel::detect() >= SimdLevel::Avx2 {
            assert!(
                replayed > 10_000,
                "the test must replay many points: {replayed}"
            );
        }
    }

    #[test]
    fn tasks_cover_rows() {
        let nnz_rows = 5000;
        let rp: Vec<usize> = (0..=nnz_rows).collect();
        let ci = vec![0u32; nnz_rows];
        let p = CsrPattern::new(nnz_rows, 1, rp, ci).expect("valid");
        let c = Coords::from_pattern(&p);
        let t = tasks(&c, TASK_POINTS);
        assert_eq!(t.first().map(|r| r.start), Some(0));
        assert_eq!(t.last().map(|r| r.end), Some(nnz_rows));
        assert!(t.windows(2).all(|w| w[0].end == w[1].start));
        // 5000 points, one per row: at least two tasks from `SERIAL_POINTS` on, balanced.
        assert_eq!(t, vec![0..2500, 2500..5000]);
        // 5 tasks of 1000 would do; an even number is made: 6 of at most 834.
        let many = tasks(&c, 1000);
        assert_eq!(many.len(), 6);
        assert!(many.iter().all(|r| (830..=834).contains(&r.len())));
        // Below `SERIAL_POINTS`, one task; and `grain` keeps it on the calling thread.
        let small = Coords::from_pattern(
            &CsrPattern::new(100, 1, (0..=100).collect(), vec![0; 100]).expect("valid"),
        );
        assert_eq!(tasks(&small, TASK_POINTS), vec![0..100]);
        assert_eq!(grain(100), usize::MAX);
        assert_eq!(grain(SERIAL_POINTS), 1);
    }

    #[test]
    fn tasks_of_long_rows_stay_balanced() {
        // 20 rows of 1 900 points (a deep layer of a uniform matrix) in tasks of at most
        // 8 192 points: 6 tasks of about 6 333 points, each cut within half a row of its
        // share of the points, so each task within a row of 6 333 (cutting after the first
        // row past the share gave five tasks of 7 600 and none for the sixth).
        let (rows, len) = (20usize, 1900usize);
        let row_ptr: Vec<usize> = (0..=rows).map(|r| r * len).collect();
        let cols: Vec<u32> = (0..rows).flat_map(|_| 0..len as u32).collect();
        let p = CsrPattern::new(rows, len, row_ptr, cols).expect("valid");
        let c = Coords::from_pattern(&p);
        let t = tasks(&c, 8192);
        assert_eq!(t.len(), 6);
        assert_eq!(t.first().map(|r| r.start), Some(0));
        assert_eq!(t.last().map(|r| r.end), Some(rows));
        assert!(t.windows(2).all(|w| w[0].end == w[1].start));
        let share = rows * len / t.len();
        for r in &t {
            let pts = c.points_of(r.clone()).len();
            assert!(pts.abs_diff(share) <= len, "{r:?}: {pts} points");
        }
    }
}
