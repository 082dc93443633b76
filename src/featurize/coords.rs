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

    /// Drops the rows before the row with index `first`, in place (the allocations are
    /// kept for the rows appended next).
    pub fn keep_rows_from(&mut self, first: usize) {
        let base = self.row_start[first];
        self.rows.drain(..first);
        self.cols.drain(..base);
        self.row_start.drain(..first);
        for s in &mut self.row_start {
            *s -= base;
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

    /// [`strided`](Self::strided) with the coordinate map `snap`.
    fn strided_by(&self, rows: std::ops::Range<usize>, snap: impl Fn(u32) -> u32 + Sync) -> Self {
        // Groups of consecutive input rows that snap to the same output row.
        let mut groups: Vec<(u32, usize, usize)> = Vec::new(); // (out row, first, end)
        for i in rows {
            let o = snap(self.rows[i]);
            match groups.last_mut() {
                Some(g) if g.0 == o => g.2 = i + 1,
                _ => groups.push((o, i, i + 1)),
            }
        }
        let parts: Vec<(Vec<u32>, Vec<usize>)> = groups
            .par_chunks(256)
            .map(|gs| self.merge_groups(gs, &snap))
            .collect();
        let mut row_start = Vec::with_capacity(groups.len() + 1);
        row_start.push(0);
        for (_, counts) in &parts {
            for &n in counts {
                row_start.push(row_start[row_start.len() - 1] + n);
            }
        }
        // One chunk's columns are the result as they are.
        let cols = if parts.len() == 1 {
            parts.into_iter().next().map(|p| p.0).unwrap_or_default()
        } else {
            let mut cols = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
            for (part, _) in &parts {
                cols.extend_from_slice(part);
            }
            cols
        };
        Self {
            rows: groups.iter().map(|g| g.0).collect(),
            row_start,
            cols,
        }
    }

    /// The merged, snapped columns of the row groups `gs` (`(out row, first, end)`), one
    /// group after the other, and each group's count. A group's merged columns are at most
    /// its points, so each group is merged into the buffer right after the previous one.
    fn merge_groups(
        &self,
        gs: &[(u32, usize, usize)],
        snap: &impl Fn(u32) -> u32,
    ) -> (Vec<u32>, Vec<usize>) {
        let row = |i: usize| &self.cols[self.row_range(i)];
        let points = gs
            .iter()
            .map(|&(_, first, end)| self.points_of(first..end).len())
            .sum();
        let mut cols = vec![0u32; points];
        let mut counts = Vec::with_capacity(gs.len());
        let (mut n, mut merged, mut tmp) = (0, Vec::new(), Vec::new());
        for &(_, first, end) in gs {
            let len = match end - first {
                1 => snap_dedup(&mut cols[n..], row(first), snap),
                // Two rows (a stride-2 layer's usual case): one merge.
                2 => merge2_dedup(&mut cols[n..], row(first), row(first + 1), snap),
                _ => {
                    // Snapping keeps each row sorted; merge the rows in turn.
                    merged.clear();
                    push_dedup(&mut merged, 0, row(first).iter().map(|&c| snap(c)));
                    for i in first + 1..end {
                        std::mem::swap(&mut merged, &mut tmp);
                        merged.clear();
                        let snapped = row(i).iter().map(|&c| snap(c));
                        merge_dedup(&mut merged, 0, &tmp, snapped);
                    }
                    cols[n..n + merged.len()].copy_from_slice(&merged);
                    merged.len()
                }
            };
            counts.push(len);
            n += len;
        }
        cols.truncate(n);
        (cols, counts)
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

/// Writes the snapped values of the sorted `a` to the front of `buf` without repeats and
/// returns their count (`buf` holds at least `a.len()` values; no step branches on the data,
/// as in [`merge2_dedup`]).
fn snap_dedup(buf: &mut [u32], a: &[u32], snap: impl Fn(u32) -> u32) -> usize {
    // Coordinates are below `i32::MAX`, so no snapped value equals the sentinel.
    let (mut last, mut n) = (u32::MAX, 0);
    for &c in a {
        let v = snap(c);
        buf[n] = v;
        n += usize::from(v != last);
        last = v;
    }
    n
}

/// Writes the sorted union of the snapped values of the sorted `a` and `b` to the front of
/// `buf` without repeats and returns its length (`buf` holds at least `a.len() + b.len()`
/// values; `snap` is monotone, so the snapped rows stay sorted). No step of the merge
/// branches on the data: each value is written, and kept by advancing the end only when it
/// differs from the last one kept (a repeat test that branched mispredicted on about every
/// other point of the deep layers). While both rows have a value after their heads, the
/// heads are kept in registers and both next values loaded before the comparison picks one,
/// so a step waits on a comparison and a select rather than on a load.
fn merge2_dedup(buf: &mut [u32], a: &[u32], b: &[u32], snap: impl Fn(u32) -> u32) -> usize {
    // Coordinates are below `i32::MAX`, so no snapped value equals the sentinel.
    let mut last = u32::MAX;
    let (mut i, mut j, mut n) = (0, 0, 0);
    if let (Some(&a0), Some(&b0)) = (a.first(), b.first()) {
        let (mut x, mut y) = (snap(a0), snap(b0));
        while i + 1 < a.len() && j + 1 < b.len() {
            let (next_x, next_y) = (snap(a[i + 1]), snap(b[j + 1]));
            let v = x.min(y);
            let (take_a, take_b) = (x <= y, y <= x);
            i += usize::from(take_a);
            j += usize::from(take_b);
            x = if take_a { next_x } else { x };
            y = if take_b { next_y } else { y };
            buf[n] = v;
            n += usize::from(v != last);
            last = v;
        }
    }
    while i < a.len() && j < b.len() {
        let (x, y) = (snap(a[i]), snap(b[j]));
        let v = x.min(y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
        buf[n] = v;
        n += usize::from(v != last);
        last = v;
    }
    for &c in a[i..].iter().chain(&b[j..]) {
        let v = snap(c);
        buf[n] = v;
        n += usize::from(v != last);
        last = v;
    }
    n
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
