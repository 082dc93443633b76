//! Coordinate sets of sparse values: row-bucketed, sorted, and their strided images.
//!
//! A [`Coords`] holds the points of one sparse value in row-major order: the distinct row
//! coordinates ascending, and for each row its column coordinates ascending. A point's
//! index (its position in that order) indexes the `[n, C]` feature matrix. This layout makes
//! neighbour search a binary search over rows plus a merge walk over columns (see
//! [`rulebook`](super::rulebook)), with no hashing.
//!
//! Coordinates are `u32` (patterns are limited to `MAX_DIM = i32::MAX` rows and columns), and
//! the strided image of a coordinate is never larger than the coordinate, so they stay `u32`.

use rayon::prelude::*;

use crate::pattern::CsrPattern;

/// The points of a sparse value (or of a row band of it), sorted by `(row, col)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Coords {
    /// Distinct row coordinates, ascending.
    pub rows: Vec<u32>,
    /// `row_start[i]..row_start[i + 1]` are the points of `rows[i]`; `rows.len() + 1` entries.
    pub row_start: Vec<usize>,
    /// Column coordinate of every point, ascending within a row.
    pub cols: Vec<u32>,
}

impl Coords {
    /// No points.
    pub fn empty() -> Self {
        Self {
            rows: Vec::new(),
            row_start: vec![0],
            cols: Vec::new(),
        }
    }

    /// The points of a whole pattern: one per stored entry, in CSR order.
    #[cfg(test)]
    pub fn from_pattern(p: &CsrPattern) -> Self {
        Self::from_pattern_rows(p, 0..p.nrows())
    }

    /// The points of the pattern rows `rows`, in CSR order; costs the entries of the band
    /// (the pattern stores only its non-empty rows).
    pub fn from_pattern_rows(p: &CsrPattern, rows: std::ops::Range<usize>) -> Self {
        let idx = p.nonempty_index_range(rows);
        let starts = p.row_starts();
        let base = starts[idx.start];
        let mut out = Self::empty();
        out.cols
            .extend_from_slice(&p.col_idx()[base..starts[idx.end]]);
        out.rows.extend_from_slice(&p.nonempty_rows()[idx.clone()]);
        out.row_start
            .extend(starts[idx.start + 1..=idx.end].iter().map(|&e| e - base));
        out
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.cols.len()
    }

    /// Bytes held (for memory accounting).
    pub fn bytes(&self) -> usize {
        self.rows.capacity() * 4 + self.row_start.capacity() * 8 + self.cols.capacity() * 4
    }

    /// Point index range of the `i`-th distinct row.
    #[inline]
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.row_start[i]..self.row_start[i + 1]
    }

    /// Point index range of the rows with indices `rows`.
    pub fn points_of(&self, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
        self.row_start[rows.start]..self.row_start[rows.end]
    }

    /// Indices of the rows whose coordinate lies in `[lo, hi)`.
    pub fn rows_between(&self, lo: i64, hi: i64) -> std::ops::Range<usize> {
        let a = self.rows.partition_point(|&r| i64::from(r) < lo);
        let b = a + self.rows[a..].partition_point(|&r| i64::from(r) < hi);
        a..b
    }

    /// A copy of the rows with indices `rows`.
    pub fn copy_rows(&self, rows: std::ops::Range<usize>) -> Self {
        let pts = self.points_of(rows.clone());
        let base = pts.start;
        Self {
            rows: self.rows[rows.clone()].to_vec(),
            row_start: self.row_start[rows.start..=rows.end]
                .iter()
                .map(|&s| s - base)
                .collect(),
            cols: self.cols[pts].to_vec(),
        }
    }

    /// Appends `other`, whose rows all lie after this one's.
    pub fn append(&mut self, other: &Coords) {
        debug_assert!(match (self.rows.last(), other.rows.first()) {
            (Some(a), Some(b)) => a < b,
            _ => true,
        });
        let base = self.cols.len();
        self.rows.extend_from_slice(&other.rows);
        self.row_start
            .extend(other.row_start[1..].iter().map(|&s| s + base));
        self.cols.extend_from_slice(&other.cols);
    }

    /// The output coordinates of a layer with output tensor stride `t_out` over the rows
    /// with indices `rows`: `{(⌊r/t_out⌋·t_out, ⌊c/t_out⌋·t_out)}` with duplicates merged,
    /// sorted.
    pub fn strided(&self, rows: std::ops::Range<usize>, t_out: u64) -> Self {
        if t_out.is_power_of_two() {
            // The result is <= v, so it fits u32.
            let keep = !(t_out - 1);
            self.strided_by(rows, |v| (u64::from(v) & keep) as u32)
        } else {
            self.strided_by(rows, |v| ((u64::from(v) / t_out) * t_out) as u32)
        }
    }

    /// [`strided`](Self::strided) for a stride-2 layer (`t_out` a power of two, twice the
    /// input stride), with the [`Cells`] of the output points.
    pub fn strided_cells(&self, rows: std::ops::Range<usize>, t_out: u64) -> (Self, Cells) {
        debug_assert!(t_out.is_power_of_two() && (2..=1 << 31).contains(&t_out));
        let keep = !(t_out as u32 - 1);
        let half = (t_out / 2) as u32;
        let groups = self.row_groups(rows, |v| v & keep);
        let parts: Vec<(CellsOut, Vec<usize>)> = groups
            .par_chunks(256)
            .map(|gs| {
                let most = gs.iter().map(|g| self.points_of(g.1..g.2).len()).sum();
                let mut o = CellsOut {
                    cols: vec![0; most],
                    count: vec![0; most],
                    member: vec![0; most],
                    kappa: vec![0; most],
                    len: 0,
                };
                let mut counts = Vec::with_capacity(gs.len());
                for &(row, first, end) in gs {
                    debug_assert!(end - first <= 2, "a stride-2 cell spans two input rows");
                    let start = o.len;
                    let ra = self.row_range(first);
                    let rb = if end - first == 2 {
                        self.row_range(first + 1)
                    } else {
                        ra.end..ra.end
                    };
                    // Kernel row of each input row: 1 for the output row's own, 2 below it.
                    let ir = |i: usize| 1 + u8::from(self.rows[i] != row);
                    merge2_cells(
                        &mut o,
                        (&self.cols[ra.clone()], ra.start, ir(first)),
                        (&self.cols[rb.clone()], rb.start, ir(end - 1)),
                        keep,
                        half,
                    );
                    counts.push(o.len - start);
                }
                (o, counts)
            })
            .collect();
        let total = parts.iter().map(|p| p.0.len).sum();
        let mut cols = Vec::with_capacity(total);
        let mut cells = Cells {
            t_out: t_out as u32,
            count: Vec::with_capacity(total),
            member: Vec::with_capacity(total),
            kappa: Vec::with_capacity(total),
        };
        let mut row_start = Vec::with_capacity(groups.len() + 1);
        row_start.push(0);
        for (o, counts) in &parts {
            cols.extend_from_slice(&o.cols[..o.len]);
            cells.count.extend_from_slice(&o.count[..o.len]);
            cells.member.extend_from_slice(&o.member[..o.len]);
            cells.kappa.extend_from_slice(&o.kappa[..o.len]);
            for &n in counts {
                row_start.push(row_start[row_start.len() - 1] + n);
            }
        }
        let coords = Self {
            rows: groups.iter().map(|g| g.0).collect(),
            row_start,
            cols,
        };
        (coords, cells)
    }

    /// Of the points of about 256 rows spread over `rows`, the share whose next point in
    /// the row lies less than `gap` columns further: a cheap sign of structure (a banded or
    /// clustered matrix has most of its points next to another; a graph-like one, few).
    pub fn close_share(&self, rows: std::ops::Range<usize>, gap: u32) -> f64 {
        let every = (rows.len() / 256).max(1);
        let (mut close, mut points) = (0usize, 0usize);
        for i in rows.step_by(every) {
            let cols = &self.cols[self.row_range(i)];
            points += cols.len();
            close += cols.windows(2).filter(|w| w[1] - w[0] < gap).count();
        }
        close as f64 / points.max(1) as f64
    }

    /// The runs of consecutive rows among `rows` that `snap` maps to one output row, as
    /// `(output row, first row index, end row index)`.
    fn row_groups(
        &self,
        rows: std::ops::Range<usize>,
        snap: impl Fn(u32) -> u32,
    ) -> Vec<(u32, usize, usize)> {
        let mut groups: Vec<(u32, usize, usize)> = Vec::new();
        for i in rows {
            let o = snap(self.rows[i]);
            match groups.last_mut() {
                Some(g) if g.0 == o => g.2 = i + 1,
                _ => groups.push((o, i, i + 1)),
            }
        }
        groups
    }

    /// [`strided`](Self::strided) with the coordinate map `snap`.
    fn strided_by(&self, rows: std::ops::Range<usize>, snap: impl Fn(u32) -> u32 + Sync) -> Self {
        let groups = self.row_groups(rows, &snap);
        // Per chunk of groups: the merged columns and each group's count.
        let parts: Vec<(Vec<u32>, Vec<usize>)> = groups
            .par_chunks(256)
            .map(|gs| {
                let mut cols: Vec<u32> = Vec::new();
                let mut counts = Vec::with_capacity(gs.len());
                let mut tmp: Vec<u32> = Vec::new();
                for &(_, first, end) in gs {
                    let start = cols.len();
                    if end - first == 2 {
                        // Two rows (a stride-2 layer's usual case): one merge.
                        merge2_dedup(
                            &mut cols,
                            &self.cols[self.row_range(first)],
                            &self.cols[self.row_range(first + 1)],
                            &snap,
                        );
                        counts.push(cols.len() - start);
                        continue;
                    }
                    // Snapping keeps each row sorted; merge the rows in turn.
                    push_dedup(
                        &mut cols,
                        start,
                        self.cols[self.row_range(first)].iter().map(|&c| snap(c)),
                    );
                    for i in first + 1..end {
                        tmp.clear();
                        tmp.extend_from_slice(&cols[start..]);
                        cols.truncate(start);
                        merge_dedup(
                            &mut cols,
                            start,
                            &tmp,
                            self.cols[self.row_range(i)].iter().map(|&c| snap(c)),
                        );
                    }
                    counts.push(cols.len() - start);
                }
                (cols, counts)
            })
            .collect();
        let total = parts.iter().map(|p| p.0.len()).sum();
        let mut cols = Vec::with_capacity(total);
        let mut row_start = Vec::with_capacity(groups.len() + 1);
        row_start.push(0);
        for (part, counts) in &parts {
            cols.extend_from_slice(part);
            for &n in counts {
                row_start.push(row_start[row_start.len() - 1] + n);
            }
        }
        Self {
            rows: groups.iter().map(|g| g.0).collect(),
            row_start,
            cols,
        }
    }
}

/// What a stride-2 image knows about each output point's *cell* (the input positions
/// `{R, R + t} × {C, C + t}` that snap to output point `(R, C)`, `t` the input stride): how
/// many input points it holds and one of them, with that point's kernel index in the output
/// point's 3 × 3 window (offsets `−t, 0, t`). Made by [`Coords::strided_cells`] alongside
/// the coordinates, it lets the key phase skip the neighbour walk for points found alone in
/// their window by [`Cells::lone`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Cells {
    /// Output tensor stride.
    pub t_out: u32,
    /// Input points in each output point's cell (1 to 4).
    pub count: Vec<u8>,
    /// One input point of each cell (its index in the input coordinates).
    pub member: Vec<u32>,
    /// `κ = i_r + 3·i_c` of `member` in its output point's window (`i_r, i_c ∈ {1, 2}`).
    pub kappa: Vec<u8>,
}

impl Cells {
    /// Bytes held (for memory accounting).
    pub fn bytes(&self) -> usize {
        self.count.capacity() + self.kappa.capacity() + self.member.capacity() * 4
    }

    /// Sets `lone[i]` for the `i`-th point of `out`'s rows `rows` (whose cells these are)
    /// when its 3 × 3 window holds exactly one input point, the cell's `member`, known
    /// without a neighbour search: its cell holds one point, the cell to its
    /// left holds none (no output point there) and neither do the two cells over the input
    /// row above its window (output row `R − t_out` has no point at `C − t_out` or `C`).
    /// Conservative: a point next to a cell whose points all lie outside its window is left
    /// unmarked, and so is every point of `out`'s first row (the row above may belong to an
    /// earlier band); unmarked points take the neighbour walk.
    ///
    /// Each row above is merged against its row below without a data-dependent branch.
    pub fn lone(&self, out: &Coords, rows: std::ops::Range<usize>, lone: &mut Vec<bool>) {
        let t_out = self.t_out;
        let base = out.row_start[rows.start];
        lone.clear();
        lone.resize(out.row_start[rows.end] - base, false);
        for ri in rows {
            if ri == 0 {
                continue;
            }
            let r = out.rows[ri];
            let below = &out.cols[out.row_range(ri)];
            let above: &[u32] = if r.checked_sub(t_out) == Some(out.rows[ri - 1]) {
                &out.cols[out.row_range(ri - 1)]
            } else {
                &[]
            };
            let first = out.row_start[ri];
            let (mut a, mut b) = (0usize, 0usize);
            // Query `q = C − t_out` (saturated at 0, which only adds a false "occupied" for
            // C = 0); the lower bound `f` of `q` in the row above is final when `b` moves on.
            while b < below.len() {
                let c = below[b];
                let q = c.saturating_sub(t_out);
                let f = above.get(a).copied().unwrap_or(u32::MAX);
                let lt = f < q;
                let covered = (f == q) | (f == c);
                let left = b > 0 && below[b - 1] == q;
                let p = first + b;
                lone[p - base] = (self.count[p] == 1) & !covered & !left;
                a += usize::from(lt);
                b += usize::from(!lt);
            }
        }
    }
}

/// Appends the sorted values `vals` to `out`, skipping repeats of the values appended since
/// `start`.
#[inline]
fn push_dedup(out: &mut Vec<u32>, start: usize, vals: impl Iterator<Item = u32>) {
    for v in vals {
        if out.len() == start || out[out.len() - 1] != v {
            out.push(v);
        }
    }
}

/// Appends the sorted union of the snapped values of the sorted `a` and `b` to `out`,
/// without repeats (`snap` is monotone, so the snapped rows stay sorted). The merge step
/// has no data-dependent branch but the repeat test.
fn merge2_dedup(out: &mut Vec<u32>, a: &[u32], b: &[u32], snap: impl Fn(u32) -> u32) {
    out.reserve(a.len() + b.len());
    // Coordinates are below `i32::MAX`, so no snapped value equals the sentinel.
    let mut last = u32::MAX;
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (snap(a[i]), snap(b[j]));
        let v = x.min(y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
        if v != last {
            out.push(v);
            last = v;
        }
    }
    for &c in a[i..].iter().chain(&b[j..]) {
        let v = snap(c);
        if v != last {
            out.push(v);
            last = v;
        }
    }
}

/// Output of [`merge2_cells`]: the output columns and their [`Cells`] fields, written from
/// `len` on into buffers sized for the most output points a chunk of groups can make.
struct CellsOut {
    cols: Vec<u32>,
    count: Vec<u8>,
    member: Vec<u32>,
    kappa: Vec<u8>,
    len: usize,
}

/// [`merge2_dedup`] of two input rows of one stride-2 output row, each given as
/// `(columns, index of its first point, kernel row)`, snapping by `& keep`; also records
/// the [`Cells`] of the output points (`half` is the input stride). As in `merge2_dedup`,
/// the merge step has no data-dependent branch but the repeat test.
fn merge2_cells(
    o: &mut CellsOut,
    (a, a_first, a_ir): (&[u32], usize, u8),
    (b, b_first, b_ir): (&[u32], usize, u8),
    keep: u32,
    half: u32,
) {
    let kappa = |ir: u8, col: u32| ir + 3 + 3 * u8::from(col & half != 0);
    // Output point `len - 1` is the current cell; its count grows in place.
    let first = o.len;
    let mut len = o.len;
    // Coordinates are below `i32::MAX`, so no snapped value equals the sentinel.
    let mut last = u32::MAX;
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (ca, cb) = (a[i], b[j]);
        let (x, y) = (ca & keep, cb & keep);
        let v = x.min(y);
        let (ta, tb) = (x <= y, y <= x);
        if v != last {
            let (q, k) = if ta {
                (a_first + i, kappa(a_ir, ca))
            } else {
                (b_first + j, kappa(b_ir, cb))
            };
            o.cols[len] = v;
            o.member[len] = q as u32;
            o.kappa[len] = k;
            o.count[len] = 0;
            len += 1;
            last = v;
        }
        o.count[len - 1] += u8::from(ta) + u8::from(tb);
        i += usize::from(ta);
        j += usize::from(tb);
    }
    for (rest, at, ir) in [(&a[i..], a_first + i, a_ir), (&b[j..], b_first + j, b_ir)] {
        for (q, &c) in (at..).zip(rest) {
            let v = c & keep;
            if v != last {
                o.cols[len] = v;
                o.member[len] = q as u32;
                o.kappa[len] = kappa(ir, c);
                o.count[len] = 0;
                len += 1;
                last = v;
            }
            o.count[len - 1] += 1;
        }
    }
    debug_assert!(len > first || a.is_empty() && b.is_empty());
    o.len = len;
}

/// Appends the merge of the sorted, repeat-free `a` and the sorted `b` to `out`, without
/// repeats.
fn merge_dedup(out: &mut Vec<u32>, start: usize, a: &[u32], b: impl Iterator<Item = u32>) {
    let mut i = 0;
    for v in b {
        while i < a.len() && a[i] < v {
            out.push(a[i]);
            i += 1;
        }
        if i < a.len() && a[i] == v {
            i += 1;
        }
        if out.len() == start || out[out.len() - 1] != v {
            out.push(v);
        }
    }
    out.extend_from_slice(&a[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(c: &Coords) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for i in 0..c.rows.len() {
            for p in c.row_range(i) {
                v.push((c.rows[i], c.cols[p]));
            }
        }
        v
    }

    #[test]
    fn strided_merges_and_sorts() {
        let p =
            CsrPattern::new(5, 8, vec![0, 2, 4, 4, 5, 6], vec![1, 6, 0, 7, 3, 2]).expect("valid");
        let c = Coords::from_pattern(&p);
        assert_eq!(
            points(&c),
            vec![(0, 1), (0, 6), (1, 0), (1, 7), (3, 3), (4, 2)]
        );
        let s2 = c.strided(0..c.rows.len(), 2);
        assert_eq!(points(&s2), vec![(0, 0), (0, 6), (2, 2), (4, 2)]);
        let s4 = s2.strided(0..s2.rows.len(), 4);
        assert_eq!(points(&s4), vec![(0, 0), (0, 4), (4, 0)]);
        // Bands: rows [0, 2) and [2, 5) strided separately, then appended.
        let mut a = c.strided(c.rows_between(0, 2), 2);
        a.append(&c.strided(c.rows_between(2, 5), 2));
        assert_eq!(a, s2);
        let mut b = Coords::from_pattern_rows(&p, 0..2);
        b.append(&Coords::from_pattern_rows(&p, 2..5).copy_rows(0..2));
        assert_eq!(b, c);
        assert_eq!(c.copy_rows(c.rows_between(1, 4)).rows, vec![1, 3]);
    }

    /// Strided images over groups of one to eight rows and partial row ranges match a
    /// set-based reference, for power-of-two and other strides, on full rows and on a
    /// graph-like pattern with many empty rows.
    #[test]
    fn strided_matches_a_set_reference() {
        use crate::featurize::tests::{random_pattern, rmat};
        for p in [random_pattern(3000, 6, 1), rmat(12, 12000, 2)] {
            check_strided(&Coords::from_pattern(&p), p.nrows() as u32);
        }
    }

    /// `strided_cells` gives `strided`'s coordinates, and every point `Cells::lone` marks
    /// has exactly the one neighbour pair `(κ, member)` that the cursor walk finds; the cell
    /// counts are the walk's pairs inside the cell. Over five stride-2 levels of a uniform
    /// pattern (mostly lone points) and an R-MAT one (clustered), whole and split in bands.
    #[test]
    fn lone_points_match_the_walk() {
        use crate::featurize::rulebook::{Geometry, Neighbours};
        use crate::featurize::tests::{random_pattern, rmat};
        for p in [random_pattern(40_000, 3, 7), rmat(14, 60_000, 3)] {
            let mut level = Coords::from_pattern(&p);
            for l in 1..=5u32 {
                let (t_in, t_out) = (1u64 << (l - 1), 1u64 << l);
                let all = 0..level.rows.len();
                let (out, cells) = level.strided_cells(all.clone(), t_out);
                assert_eq!(out, level.strided(all, t_out), "level {l}");
                assert_eq!(cells.count.len(), out.len());
                let mut lone = Vec::new();
                // The whole set, then two bands (rows below and from the middle).
                let mid = i64::from(out.rows[out.rows.len() / 2]);
                for (lo, hi) in [(0, i64::MAX), (0, mid), (mid, i64::MAX)] {
                    let band = level.strided_cells(level.rows_between(lo, hi), t_out);
                    let (bo, bc) = (&band.0, &band.1);
                    bc.lone(bo, 0..bo.rows.len(), &mut lone);
                    let geom = Geometry::new(3, 1, t_in);
                    let mut nb = Neighbours::new(&level, &geom);
                    let (mut marked, mut alone) = (0, 0);
                    for ri in 0..bo.rows.len() {
                        nb.start_row(bo.rows[ri]);
                        for q in bo.row_range(ri) {
                            let pairs = nb.point(bo.cols[q]);
                            // κ = i_r + 3·i_c; the cell is i_r, i_c ∈ {1, 2}.
                            let in_cell = pairs.iter().filter(|&&(k, _)| k % 3 > 0 && k / 3 > 0);
                            assert_eq!(in_cell.count(), usize::from(bc.count[q]), "level {l}");
                            alone += usize::from(pairs.len() == 1);
                            if lone[q] {
                                marked += 1;
                                let want = [(u32::from(bc.kappa[q]), bc.member[q])];
                                assert_eq!(pairs, want, "level {l}, point {q}");
                            }
                        }
                    }
                    // Conservative, but it finds most lone points of these patterns.
                    assert!(
                        marked <= alone && 2 * marked >= alone,
                        "level {l}: {marked} of {alone}"
                    );
                }
                level = out;
            }
        }
    }

    /// `close_share` tells a banded pattern from a scattered one.
    #[test]
    fn close_share_tells_structure() {
        let n = 3000;
        let rp: Vec<usize> = (0..=n).map(|i| 3 * i).collect();
        let ci: Vec<u32> = (0..n)
            .flat_map(|i| [i, i + 1, i + 2])
            .map(|c| c as u32)
            .collect();
        let banded = Coords::from_pattern(&CsrPattern::new(n, n + 2, rp, ci).expect("valid"));
        let all = 0..banded.rows.len();
        assert!((banded.close_share(all.clone(), 2) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(banded.close_share(all, 1), 0.0);
        // Four columns per row drawn from 100 000 (a multiplicative hash of the entry).
        let rp: Vec<usize> = (0..=n).map(|i| 4 * i).collect();
        let ci: Vec<u32> = (0..n as u64)
            .flat_map(|i| {
                let mut row: Vec<u32> = (0..4u64)
                    .map(|j| {
                        ((i * 4 + j).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32 % 100_000
                    })
                    .collect();
                row.sort_unstable();
                row
            })
            .collect();
        let scattered = Coords::from_pattern(&CsrPattern::new(n, 100_000, rp, ci).expect("valid"));
        assert!(scattered.close_share(0..scattered.rows.len(), 2) < 0.01);
    }

    fn check_strided(c: &Coords, nrows: u32) {
        for t in [2u64, 3, 4, 8] {
            for (lo, hi) in [(0, nrows), (1000, 2321)] {
                let want: std::collections::BTreeSet<(u32, u32)> = points(c)
                    .into_iter()
                    .filter(|&(r, _)| (lo..hi).contains(&r))
                    .map(|(r, q)| ((r as u64 / t * t) as u32, (q as u64 / t * t) as u32))
                    .collect();
                let want: Vec<(u32, u32)> = want.into_iter().collect();
                let got = points(&c.strided(c.rows_between(lo.into(), hi.into()), t));
                assert_eq!(got.len(), want.len(), "stride {t}, rows {lo}..{hi}");
                assert!(got == want, "stride {t}, rows {lo}..{hi}");
            }
        }
    }
}
