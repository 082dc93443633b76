//! Neighbour search ("rulebook") for conv and pool layers, in pull form.
//!
//! For each output point `p` the layer needs the list of `(κ, input point)` pairs with
//! `p + offset(κ)` present in the input, in **ascending κ**. Rather than materialising a
//! global rulebook, [`Neighbours`] produces that list per output point on the fly: for an
//! output row `R` it locates each input row `R + a_r` by binary search once, then walks the
//! output row's columns left to right with one monotone cursor per kernel row, so each
//! output point costs `O(k²)` comparisons. Work is split into [`tasks`] of whole output rows
//! that depend only on the output coordinates (never on the thread count).

use super::coords::Coords;

/// Target number of output points per parallel task.
const TASK_POINTS: usize = 2048;

/// Kernel geometry of one layer: per-axis offsets at the input tensor stride.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Kernel size per axis.
    pub k: usize,
    /// Per-axis offsets `a_i`, ascending; kernel index `κ = i_r + k·i_c`.
    pub offsets: Vec<i64>,
}

impl Geometry {
    /// Offsets of MinkowskiEngine's `HYPER_CUBE` region: for odd `k`,
    /// `{−⌊k/2⌋, …, ⌊k/2⌋}·d·t`; for even `k`, `{0, …, k−1}·d·t`.
    pub fn new(k: usize, dilation: u64, t_in: u64) -> Self {
        let step = (dilation * t_in) as i64;
        let lo = if k % 2 == 1 { -((k / 2) as i64) } else { 0 };
        let offsets = (0..k as i64).map(|i| (lo + i) * step).collect();
        Self { k, offsets }
    }

    /// Number of kernel offsets, `k²`.
    pub fn volume(&self) -> usize {
        self.k * self.k
    }
}

/// Contiguous ranges of output rows (indices into `out.rows`) with about
/// [`TASK_POINTS`] points each.
pub(crate) fn tasks(out: &Coords) -> Vec<std::ops::Range<usize>> {
    let mut tasks = Vec::new();
    let mut first = 0;
    for i in 0..out.rows.len() {
        if out.row_start[i + 1] - out.row_start[first] >= TASK_POINTS {
            tasks.push(first..i + 1);
            first = i + 1;
        }
    }
    if first < out.rows.len() {
        tasks.push(first..out.rows.len());
    }
    tasks
}

/// Per-task scratch for neighbour search.
pub(crate) struct Neighbours<'a> {
    input: &'a Coords,
    geom: &'a Geometry,
    /// Per kernel row: (cursor, end) into the input point range of row `R + a_r`, if present.
    cursors: Vec<Option<(usize, usize)>>,
    /// Input point by κ (`u32::MAX` if absent); reset after each point.
    by_kappa: Vec<u32>,
    /// The current point's `(κ, input point)` pairs, κ ascending.
    list: Vec<(u32, u32)>,
}

impl<'a> Neighbours<'a> {
    /// Scratch for searching `input` with geometry `geom`.
    pub fn new(input: &'a Coords, geom: &'a Geometry) -> Self {
        Self {
            input,
            geom,
            cursors: vec![None; geom.k],
            by_kappa: vec![u32::MAX; geom.volume()],
            list: Vec::with_capacity(geom.volume()),
        }
    }

    /// Positions the per-kernel-row cursors for output row coordinate `row`.
    pub fn start_row(&mut self, row: u32) {
        let rows = &self.input.rows;
        for (cur, &a) in self.cursors.iter_mut().zip(&self.geom.offsets) {
            let target = i64::from(row) + a;
            *cur = u32::try_from(target)
                .ok()
                .and_then(|t| rows.binary_search(&t).ok())
                .map(|i| (self.input.row_start[i], self.input.row_start[i + 1]));
        }
    }

    /// The `(κ, input point)` pairs of the output point at column `col` of the current row,
    /// κ ascending. Columns must be visited in ascending order within a row.
    pub fn point(&mut self, col: u32) -> &[(u32, u32)] {
        let k = self.geom.k;
        let offs = &self.geom.offsets;
        let cols = &self.input.cols;
        let c = i64::from(col);
        let first = c + offs[0];
        let mut any = false;
        for (ir, cur) in self.cursors.iter_mut().enumerate() {
            let Some((pos, end)) = cur else { continue };
            while *pos < *end && i64::from(cols[*pos]) < first {
                *pos += 1;
            }
            let mut j = *pos;
            for (ic, &a) in offs.iter().enumerate() {
                let target = c + a;
                while j < *end && i64::from(cols[j]) < target {
                    j += 1;
                }
                if j == *end {
                    break;
                }
                if i64::from(cols[j]) == target {
                    self.by_kappa[ir + k * ic] = j as u32;
                    any = true;
                }
            }
        }
        self.list.clear();
        if any {
            for (kappa, slot) in self.by_kappa.iter_mut().enumerate() {
                if *slot != u32::MAX {
                    self.list.push((kappa as u32, *slot));
                    *slot = u32::MAX;
                }
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
    fn neighbours_in_kappa_order() {
        // Points (0,0), (0,1), (1,0); query output point (0,0) with a 3x3 kernel.
        let p = CsrPattern::new(2, 2, vec![0, 2, 3], vec![0, 1, 0]).expect("valid");
        let c = Coords::from_pattern(&p);
        let g = Geometry::new(3, 1, 1);
        let mut n = Neighbours::new(&c, &g);
        n.start_row(0);
        // κ = i_r + 3·i_c; offset (0,0) → κ 4, (0,+1) → κ 7, (+1,0) → κ 5.
        assert_eq!(n.point(0), &[(4, 0), (5, 2), (7, 1)]);
        // Output point (0,1): (0,-1) → κ 1 (pt 0), (+1,-1) → κ 2 (pt 2), (0,0) → κ 4 (pt 1).
        assert_eq!(n.point(1), &[(1, 0), (2, 2), (4, 1)]);
    }

    #[test]
    fn tasks_cover_rows() {
        let nnz_rows = 5000;
        let rp: Vec<usize> = (0..=nnz_rows).collect();
        let ci = vec![0u32; nnz_rows];
        let p = CsrPattern::new(nnz_rows, 1, rp, ci).expect("valid");
        let c = Coords::from_pattern(&p);
        let t = tasks(&c);
        assert_eq!(t.first().map(|r| r.start), Some(0));
        assert_eq!(t.last().map(|r| r.end), Some(nnz_rows));
        assert!(t.windows(2).all(|w| w[0].end == w[1].start));
    }
}
