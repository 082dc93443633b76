//! Certificates that a point of a stride-1 layer over the pattern is alone in its window, so
//! its neighbour search can be skipped.
//!
//! On an unstructured pattern almost every point of the first layer has no other input
//! point in its `k × k` window (uniform 10 M: 99.99 % on conv0), and finding that by the
//! neighbour search costs a search per kernel row for every point. [`LoneFilter`] instead
//! keeps a small table of counts over the input rows within reach of the current output row,
//! by column bucket (hashed into a fixed number of slots): a point whose window's buckets
//! hold one point in all is alone, because the point itself is one of them (every output
//! point of a stride-1 layer is an input point). Buckets are wider than the window and slots
//! are shared, so the table can only over-count: a point it does not certify is searched as
//! before, and a certified one has exactly the neighbour mask the search would find (its
//! own kernel offset), so results do not change.
//!
//! The same certificate for the stride-2 layers (whose one input point is the one that
//! snapped to the output point, found by a walk over the two rows that snap to its row) was
//! measured and dropped: on uniform 10 M it certified 95 % of their points, yet took longer
//! than the block search it replaced (BENCHMARKS.md, issue 36).

use super::coords::Coords;
use super::rulebook::Geometry;

/// Slots of the count table: it trades the chance that another bucket of the window's rows
/// shares a point's slot (which sends the point to the search) against the table's bytes
/// staying in L1.
const SLOTS: usize = 1 << 14;
/// Most input points within reach of an output row for which the table is read: beyond it
/// the slots it shares send most points to the search anyway.
const MOST_HELD: usize = 1024;
/// Output rows a task tries the filter on before judging whether it pays.
const TRIAL_ROWS: usize = 256;
/// The filter keeps paying while at least one output row in this many is certified whole
/// (a row it does not certify costs its counting on top of the search).
const ROWS_PER_CERTIFIED: usize = 4;

/// Per-task certificate of lone points of a stride-1 layer with a dilation-1 window and an
/// odd kernel (see the module docs). Output rows must be visited in ascending order.
pub(crate) struct LoneFilter<'a> {
    input: &'a Coords,
    /// Half the window's extent along either axis (`⌊k/2⌋·t`).
    reach: u32,
    /// `log2` of the bucket width, the smallest power of two ≥ `2·reach` (so a window
    /// spans at most two buckets).
    shift: u32,
    /// Points per slot over the input rows `lo..hi` (wrapping; exact while `held` is
    /// below `2^16`).
    counts: Vec<u16>,
    /// Input rows (indices into `input.rows`) counted in `counts`.
    lo: usize,
    hi: usize,
    /// Input points in rows `lo..hi`.
    held: usize,
    /// Output rows asked about, and those certified whole.
    rows_tried: usize,
    rows_certified: usize,
}

impl<'a> LoneFilter<'a> {
    /// A filter for `geom` over `input`, or `None` when the window is not one it certifies
    /// for (an even or dilated kernel).
    pub fn new(input: &'a Coords, geom: &Geometry) -> Option<Self> {
        if geom.k.is_multiple_of(2) || !geom.dense || geom.k < 3 {
            return None;
        }
        let reach = u32::try_from(geom.offsets[geom.k - 1]).ok()?;
        let shift = (2 * u64::from(reach)).next_power_of_two().trailing_zeros();
        Some(Self {
            input,
            reach,
            shift,
            counts: vec![0; SLOTS],
            lo: 0,
            hi: 0,
            held: 0,
            rows_tried: 0,
            rows_certified: 0,
        })
    }

    /// Whether every output point of row `row` at columns `cols` is alone in its window
    /// (rows in ascending order).
    pub fn row_alone(&mut self, row: u32, cols: &[u32]) -> bool {
        let all = self.start_row(row) && cols.iter().all(|&c| self.alone(c));
        self.rows_tried += 1;
        self.rows_certified += usize::from(all);
        all
    }

    /// Whether the filter certifies enough rows to pay for its counting: always during
    /// its first [`TRIAL_ROWS`] rows (a stencil-like pattern certifies none).
    pub fn pays(&self) -> bool {
        self.rows_tried < TRIAL_ROWS || self.rows_certified * ROWS_PER_CERTIFIED >= self.rows_tried
    }

    /// Moves the counted input rows to those within reach of output row `row`; returns
    /// whether [`alone`](Self::alone) can certify points of that row.
    fn start_row(&mut self, row: u32) -> bool {
        let rows = &self.input.rows;
        let (first, last) = (
            row.saturating_sub(self.reach),
            row.saturating_add(self.reach),
        );
        while self.lo < self.hi && rows[self.lo] < first {
            self.count_row(self.lo, false);
            self.lo += 1;
        }
        if self.lo == self.hi {
            // Nothing counted: jump over the rows out of reach without counting them.
            self.hi += rows[self.hi..].partition_point(|&r| r < first);
            self.lo = self.hi;
        }
        while self.hi < rows.len() && rows[self.hi] <= last {
            self.count_row(self.hi, true);
            self.hi += 1;
        }
        self.held <= MOST_HELD
    }

    /// Whether the output point at column `col` of the current row (an input point) has no
    /// other input point in its window. Only after a [`start_row`](Self::start_row) that
    /// returned `true`.
    #[inline]
    fn alone(&self, col: u32) -> bool {
        let first = col.saturating_sub(self.reach) >> self.shift;
        let last = col.saturating_add(self.reach) >> self.shift;
        let mut n = u32::from(self.counts[slot(first)]);
        if last != first {
            n += u32::from(self.counts[slot(last)]);
        }
        n == 1
    }

    /// Counts the points of input row `i` in (`add`) or out of the table.
    fn count_row(&mut self, i: usize, add: bool) {
        let range = self.input.row_range(i);
        let (delta, shift) = (if add { 1 } else { u16::MAX }, self.shift);
        if add {
            self.held += range.len();
        } else {
            self.held -= range.len();
        }
        for &c in &self.input.cols[range] {
            let s = slot(c >> shift);
            self.counts[s] = self.counts[s].wrapping_add(delta);
        }
    }
}

/// The count slot of column bucket `b` (a multiplicative hash, so that regular column
/// spacings do not all land in a few slots).
#[inline]
fn slot(b: u32) -> usize {
    (b.wrapping_mul(0x9E37_79B1) >> (32 - SLOTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::featurize::tests::{random_pattern, rmat, scattered};
    use std::collections::HashSet;

    /// Every point the filter certifies is alone in its window (checked against a set of the
    /// points), on scattered, graph-like and near-diagonal patterns, for 3 × 3 and 5 × 5
    /// windows at tensor strides 1 and 4; and on the scattered pattern it certifies nearly
    /// every lone point. Even and dilated kernels get no filter.
    #[test]
    fn certifies_exactly_lone_points() {
        let patterns = [
            ("scattered", scattered(20_000, 3, 1)),
            ("rmat", rmat(12, 20_000, 2)),
            ("diagonal", random_pattern(3000, 6, 3)),
        ];
        for (name, p) in &patterns {
            let base = Coords::from_pattern(p);
            for (k, t) in [(3usize, 1u64), (5, 1), (3, 4), (5, 4)] {
                let coords = base.strided(0..base.rows.len(), t);
                let geom = Geometry::new(k, 1, t);
                let reach = (k / 2) as i64 * t as i64;
                let set: HashSet<(i64, i64)> = (0..coords.rows.len())
                    .flat_map(|i| coords.row_range(i).map(move |q| (i, q)))
                    .map(|(i, q)| (i64::from(coords.rows[i]), i64::from(coords.cols[q])))
                    .collect();
                let alone = |r: i64, c: i64| {
                    (-reach..=reach).all(|dr| {
                        (-reach..=reach)
                            .all(|dc| (dr, dc) == (0, 0) || !set.contains(&(r + dr, c + dc)))
                    })
                };
                let mut f = LoneFilter::new(&coords, &geom).expect("odd dense kernel");
                let (mut lone, mut certified) = (0, 0);
                for i in 0..coords.rows.len() {
                    let row = coords.rows[i];
                    let readable = f.start_row(row);
                    for &c in &coords.cols[coords.row_range(i)] {
                        let truly = alone(row.into(), c.into());
                        let said = readable && f.alone(c);
                        assert!(truly || !said, "{name} k {k} t {t}: ({row}, {c}) not alone");
                        lone += usize::from(truly);
                        certified += usize::from(said);
                    }
                }
                if *name == "scattered" {
                    assert!(
                        certified * 100 >= lone * 95,
                        "k {k} t {t}: {certified} of {lone} lone points certified"
                    );
                }
            }
        }
        let coords = Coords::from_pattern(&patterns[0].1);
        assert!(LoneFilter::new(&coords, &Geometry::new(2, 1, 1)).is_none());
        assert!(LoneFilter::new(&coords, &Geometry::new(3, 2, 1)).is_none());
    }
}
