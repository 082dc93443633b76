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

/// The points of a sparse value, sorted by `(row, col)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Coords {
    /// Distinct row coordinates, ascending.
    pub rows: Vec<u32>,
    /// `row_start[i]..row_start[i + 1]` are the points of `rows[i]`; `rows.len() + 1` entries.
    pub row_start: Vec<usize>,
    /// Column coordinate of every point, ascending within a row.
    pub cols: Vec<u32>,
}

impl Coords {
    /// The points of a pattern: one per stored entry, in CSR order.
    pub fn from_pattern(p: &CsrPattern) -> Self {
        // The pattern keeps the same layout (non-empty rows only).
        Self {
            rows: p.nonempty_rows().to_vec(),
            row_start: p.row_starts().to_vec(),
            cols: p.col_idx().to_vec(),
        }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.cols.len()
    }

    /// Point index range of the `i`-th distinct row.
    #[inline]
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.row_start[i]..self.row_start[i + 1]
    }

    /// The output coordinates of a layer with output tensor stride `t_out`:
    /// `{(⌊r/t_out⌋·t_out, ⌊c/t_out⌋·t_out)}` with duplicates merged, sorted.
    pub fn strided(&self, t_out: u64) -> Self {
        if t_out.is_power_of_two() {
            // The result is <= v, so it fits u32.
            let keep = !(t_out - 1);
            self.strided_by(|v| (u64::from(v) & keep) as u32)
        } else {
            self.strided_by(|v| ((u64::from(v) / t_out) * t_out) as u32)
        }
    }

    /// [`strided`](Self::strided) with the coordinate map `snap`.
    fn strided_by(&self, snap: impl Fn(u32) -> u32 + Sync) -> Self {
        // Groups of consecutive input rows that snap to the same output row.
        let mut groups: Vec<(u32, usize, usize)> = Vec::new(); // (out row, first, end) in self.rows
        for (i, &r) in self.rows.iter().enumerate() {
            let o = snap(r);
            match groups.last_mut() {
                Some(g) if g.0 == o => g.2 = i + 1,
                _ => groups.push((o, i, i + 1)),
            }
        }
        let merged: Vec<Vec<u32>> = groups
            .par_iter()
            .with_min_len(64)
            .map(|&(_, first, end)| {
                let mut acc: Vec<u32> = Vec::new();
                let mut tmp: Vec<u32> = Vec::new();
                for i in first..end {
                    let row = &self.cols[self.row_range(i)];
                    if acc.is_empty() {
                        acc.extend(row.iter().map(|&c| snap(c)));
                        acc.dedup();
                    } else {
                        merge_dedup(&acc, row.iter().map(|&c| snap(c)), &mut tmp);
                        std::mem::swap(&mut acc, &mut tmp);
                    }
                }
                acc
            })
            .collect();
        let total = merged.iter().map(Vec::len).sum();
        let mut cols = Vec::with_capacity(total);
        let mut rows = Vec::with_capacity(groups.len());
        let mut row_start = Vec::with_capacity(groups.len() + 1);
        row_start.push(0);
        for (g, m) in groups.iter().zip(&merged) {
            rows.push(g.0);
            cols.extend_from_slice(m);
            row_start.push(cols.len());
        }
        Self {
            rows,
            row_start,
            cols,
        }
    }
}

/// Merges sorted, duplicate-free `a` with the sorted (possibly repeating) `b` into `out`,
/// sorted and duplicate-free.
fn merge_dedup(a: &[u32], b: impl Iterator<Item = u32>, out: &mut Vec<u32>) {
    out.clear();
    let mut i = 0;
    for v in b {
        while i < a.len() && a[i] < v {
            out.push(a[i]);
            i += 1;
        }
        if i < a.len() && a[i] == v {
            i += 1;
        }
        if out.last() != Some(&v) {
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
        let s2 = c.strided(2);
        assert_eq!(points(&s2), vec![(0, 0), (0, 6), (2, 2), (4, 2)]);
        let s4 = s2.strided(4);
        assert_eq!(points(&s4), vec![(0, 0), (0, 4), (4, 0)]);
    }

    #[test]
    fn merge_dedup_works() {
        let mut out = Vec::new();
        merge_dedup(&[1, 4, 9], [0, 0, 4, 5, 5, 10].into_iter(), &mut out);
        assert_eq!(out, vec![0, 1, 4, 5, 9, 10]);
    }
}
