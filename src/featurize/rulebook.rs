//! Neighbour search ("rulebook") for conv and pool layers, in pull form.
//!
//! For each output point `p` the layer needs the list of `(κ, input point)` pairs with
//! `p + offset(κ)` present in the input, in a canonical order (*visiting order*: kernel row,
//! then column). Rather than materialising a
//! global rulebook, [`Neighbours`] produces that list per output point on the fly: for an
//! output row `R` it locates each input row `R + a_r` by binary search once, then walks the
//! output row's columns left to right with one monotone cursor per kernel row, so each
//! output point costs `O(k²)` comparisons. Work is split into [`tasks`] of whole output rows
//! that depend only on the output coordinates and the layer (never on the thread count).

use super::coords::Coords;

/// Most output points per parallel task (and the points of every task of the shared
/// path's key search, whose sharing within a task does not depend on the layer's width).
pub(crate) const TASK_POINTS: usize = 8192;
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
}

impl Geometry {
    /// Offsets of MinkowskiEngine's `HYPER_CUBE` region: for odd `k`,
    /// `{−⌊k/2⌋, …, ⌊k/2⌋}·d·t`; for even `k`, `{0, …, k−1}·d·t`.
    pub fn new(k: usize, dilation: u64, t_in: u64) -> Self {
        let step = dilation * t_in;
        let lo = if k % 2 == 1 { -((k / 2) as i64) } else { 0 };
        let offsets = (0..k as i64).map(|i| (lo + i) * step as i64).collect();
        Self { k, offsets, step }
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
/// about `points` points each (see [`task_points`]), and at least two from
/// [`SERIAL_POINTS`] points on. The split depends only on the coordinates and `points`,
/// never on the thread count.
pub(crate) fn tasks(out: &Coords, points: usize) -> Vec<std::ops::Range<usize>> {
    let n = out.len();
    let least = if n >= SERIAL_POINTS { 2 } else { 1 };
    let per = n.div_ceil(n.div_ceil(points.max(1)).max(least)).max(1);
    let mut tasks = Vec::new();
    let mut first = 0;
    for i in 0..out.rows.len() {
        if out.row_start[i + 1] - out.row_start[first] >= per {
            tasks.push(first..i + 1);
            first = i + 1;
        }
    }
    if first < out.rows.len() {
        tasks.push(first..out.rows.len());
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

/// Per-task scratch for neighbour search.
pub(crate) struct Neighbours<'a> {
    input: &'a Coords,
    geom: &'a Geometry,
    /// Kernel rows whose input row `R + a_r` is present: `(i_r, cursor, end)` into the
    /// input points of that row.
    cursors: Vec<(u32, usize, usize)>,
    /// The current point's `(κ, input point)` pairs, κ ascending.
    list: Vec<(u32, u32)>,
    /// Index into `input.rows` where the search for the next output row starts.
    row_pos: usize,
}

impl<'a> Neighbours<'a> {
    /// Scratch for searching `input` with geometry `geom`.
    pub fn new(input: &'a Coords, geom: &'a Geometry) -> Self {
        Self {
            input,
            geom,
            cursors: Vec::with_capacity(geom.k),
            list: Vec::with_capacity(geom.volume()),
            row_pos: 0,
        }
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
    }

    /// The offset of kernel row `ir` (along either axis).
    pub fn offset(&self, ir: usize) -> i64 {
        self.geom.offsets[ir]
    }

    /// The input rows of the current output row's window: `(i_r, first point, end)` for
    /// each kernel row `i_r` whose input row is present, before any [`point`](Self::point)
    /// call of the row.
    pub fn row_ranges(&self) -> &[(u32, usize, usize)] {
        &self.cursors
    }

    /// The `(κ, input point)` pairs of the output point at column `col` of the current row,
    /// in *visiting* order: by kernel row `i_r` ascending, then by column (`i_c`) ascending
    /// (a canonical order, fixed by the coordinates). Columns must be visited in ascending
    /// order within a row.
    ///
    /// Per present kernel row, the cursor skips input columns left of the window
    /// `[col + a_0, col + a_{k−1}]` (amortised over the row), then only the columns inside
    /// the window are visited; a column `c` there is a neighbour iff `c − col − a_0` is a
    /// multiple of the offset step `d·t`, with `i_c` the quotient.
    #[inline]
    pub fn point(&mut self, col: u32) -> &[(u32, u32)] {
        let k = self.geom.k as u32;
        let step = self.geom.step;
        let span = step * u64::from(k - 1);
        let cols: &[u32] = &self.input.cols;
        let lo = i64::from(col) + self.geom.offsets[0];
        self.list.clear();
        for cursor in self.cursors.iter_mut() {
            let (ir, pos, end) = *cursor;
            let row = &cols[pos..end];
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
                self.list.push((ir + k * ic as u32, j as u32));
            }
        }
        &self.list
    }
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
        let mut n = Neighbours::new(&c, &g);
        n.start_row(0);
        // κ = i_r + 3·i_c; offset (0,0) → κ 4, (0,+1) → κ 7, (+1,0) → κ 5. Visiting order:
        // kernel row i_r = 1 (offset 0) first: κ 4, κ 7; then i_r = 2: κ 5.
        assert_eq!(n.point(0), &[(4, 0), (7, 1), (5, 2)]);
        // Output point (0,1): (0,-1) → κ 1 (pt 0), (0,0) → κ 4 (pt 1), (+1,-1) → κ 2 (pt 2).
        assert_eq!(n.point(1), &[(1, 0), (4, 1), (2, 2)]);
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
        let many = tasks(&c, 1000);
        assert_eq!(many.len(), 5);
        assert!(many.iter().all(|r| r.len() == 1000));
        // Below `SERIAL_POINTS`, one task; and `grain` keeps it on the calling thread.
        let small = Coords::from_pattern(
            &CsrPattern::new(100, 1, (0..=100).collect(), vec![0; 100]).expect("valid"),
        );
        assert_eq!(tasks(&small, TASK_POINTS), vec![0..100]);
        assert_eq!(grain(100), usize::MAX);
        assert_eq!(grain(SERIAL_POINTS), 1);
    }
}
