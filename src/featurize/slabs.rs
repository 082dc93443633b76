//! Slabs: the pattern's rows cut into a few ranges that independent runs featurize side by
//! side on the threads, their pooled sums joined afterwards.
//!
//! A run's threads otherwise meet at every parallel loop of every band step: hundreds of
//! short loops per layer, each ending with one thread waiting for the other, plus the serial
//! parts between them. A slab run streams its own rows through the whole layer stack, so the
//! threads only meet at the end. Every value is defined by the coordinates alone (see
//! [`FeaturizerGraph`](super::FeaturizerGraph)'s `# Determinism`), so a slab computes its
//! rows exactly as a single run does, provided it also reads the rows around it that its
//! rows depend on: a slab pooling the pattern rows `[lo, hi)` is fed the rows
//! `[lo − back, hi + ahead)` ([`Plan::slab_margins`]), computes every layer over them, and
//! pools only the output rows in `[lo, hi)`. Slab bounds are multiples of every tensor
//! stride, so no output row straddles two slabs, and the pooled sums' fixed tree
//! (`tree_sum`) joins the slabs' partial sums into the same bits as one run's.
//!
//! The margins are recomputed by both neighbouring slabs (WACO's 14 layers on a 2 M-row
//! matrix: about 8 k rows behind and 16 k ahead, about 1 % of a half), which is why a
//! matrix is only cut when each slab is many times its margins. Where margins are narrow
//! (stride-1 stacks such as DASH's), up to [`SLABS_PER_THREAD`] slabs per thread are cut
//! and handed to whichever thread is free, which evens out work that is not spread like
//! the entries (a dense corner of an R-MAT matrix holds most of DASH's distinct rows).

use super::plan::Plan;
use crate::pattern::CsrPattern;

/// Fewest pattern entries per slab: below it the margins and a second run's set-up cost
/// more than the threads' meetings they save.
pub(crate) const SLAB_MIN_ENTRIES: usize = 1 << 20;

/// Slab rows per margin row at least (the recomputed margins stay a small part of a slab).
const SLAB_ROWS_PER_MARGIN: usize = 16;

/// Most slabs per thread, when their margins allow.
const SLABS_PER_THREAD: usize = 4;

/// Slabs beyond one per thread only while all the margins together stay within this share
/// of the rows.
const MARGIN_SHARE_PERCENT: u64 = 3;

/// The pattern rows one run pools, and the rows it is fed to compute them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slab {
    /// First pooled pattern row.
    pub lo: i64,
    /// End of the pooled rows (`i64::MAX`: to the end).
    pub hi: i64,
    /// The pattern rows fed to the run, `[lo − back, hi + ahead)` within the matrix.
    pub feed: (usize, usize),
}

impl Slab {
    /// The whole pattern: every row fed and pooled.
    pub fn whole(pattern: &CsrPattern) -> Self {
        Self {
            lo: 0,
            hi: i64::MAX,
            feed: (0, pattern.nrows()),
        }
    }

    /// Whether output row coordinate `row` is pooled by this slab.
    #[inline]
    pub fn pools(&self, row: u32) -> bool {
        (self.lo..self.hi).contains(&i64::from(row))
    }

    /// Whether this slab pools every row.
    pub fn is_whole(&self) -> bool {
        self.lo == 0 && self.hi == i64::MAX
    }
}

impl Plan {
    /// How many pattern rows before and after its pooled rows a slab must be fed so that
    /// every pooled row of every layer is computed as in a single run: walking the stencil
    /// steps backwards from the pooled values, a step whose output rows are needed in
    /// `[lo − b, hi + a)` needs its input rows in `[lo − b + reach_back, hi + a + lag)`.
    pub(crate) fn slab_margins(&self) -> (i64, i64) {
        let mut need: Vec<Option<(i64, i64)>> =
            self.pooled.iter().map(|&p| p.then_some((0, 0))).collect();
        for step in self.stencils.iter().rev() {
            let Some((back, ahead)) = need[step.output] else {
                continue;
            };
            let reach = step.op.reach();
            let wanted = (back - reach.reach_back(), ahead + reach.lag());
            let x = &mut need[step.input];
            *x = Some(x.map_or(wanted, |(b, a)| (b.max(wanted.0), a.max(wanted.1))));
        }
        need[self.input_slot].unwrap_or((0, 0))
    }

    /// The least common multiple of every value's tensor stride: slab bounds at its
    /// multiples split no output row of any layer.
    pub(crate) fn stride_lcm(&self) -> u64 {
        (0..self.types.len()).fold(1, |l, s| {
            let t = self.stride(s).max(1);
            l / gcd(l, t) * t
        })
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The slabs of `pattern` for `threads` threads: one per thread, or up to
/// [`SLABS_PER_THREAD`] per thread while the margins stay within [`MARGIN_SHARE_PERCENT`] of
/// the rows, of about equal work (see [`cut_rows`]), each with at least `min_entries`
/// entries and many times its margins in rows; a single whole slab for one thread or a
/// pattern too small to cut.
pub(crate) fn split(
    plan: &Plan,
    pattern: &CsrPattern,
    threads: usize,
    min_entries: usize,
) -> Vec<Slab> {
    let whole = vec![Slab::whole(pattern)];
    if threads < 2 {
        return whole;
    }
    let (back, ahead) = plan.slab_margins();
    let align = plan.stride_lcm();
    let nrows = pattern.nrows() as u64;
    let margin = (back + ahead).max(1) as u64;
    let by_entries = pattern.nnz() / min_entries.max(1);
    let by_rows = nrows / (SLAB_ROWS_PER_MARGIN as u64 * margin).max(align);
    let by_margins = (nrows * MARGIN_SHARE_PERCENT / 100 / margin) as usize;
    let count = (SLABS_PER_THREAD * threads)
        .min(by_margins)
        .max(threads)
        .min(by_entries)
        .min(by_rows as usize);
    if count < 2 || align > nrows {
        return whole;
    }
    let bounds = cut_rows(pattern, count, align);
    if bounds.len() < 3 {
        return whole;
    }
    bounds
        .windows(2)
        .map(|w| {
            let (lo, hi) = (w[0], w[1]);
            let last = hi >= nrows;
            Slab {
                lo: lo as i64,
                hi: if last { i64::MAX } else { hi as i64 },
                feed: (
                    (lo as i64 - back).max(0) as usize,
                    if last {
                        nrows as usize
                    } else {
                        (hi as i64 + ahead).min(nrows as i64) as usize
                    },
                ),
            }
        })
        .collect()
}

/// What a non-empty pattern row weighs in a slab's work beside its entries, in entries. The
/// layers after the first coarsen the pattern, and the points of sparse rows merge later
/// than those of dense ones, so of two slabs of equal entries the one with more rows has
/// more points to compute (R-MAT 10 M on WACO: 42 against 35 M points over the layers).
/// Too small and the sparse slab finishes last; too large and the dense one does
/// (BENCHMARKS.md, "Slabs weighed by rows").
const ROW_WEIGHT_IN_ENTRIES: usize = 2;

/// Row bounds `0 = b_0 < b_1 < … = nrows` of up to `count` ranges of about equal work
/// (entries plus [`ROW_WEIGHT_IN_ENTRIES`] per non-empty row), the inner bounds multiples of
/// `align`.
fn cut_rows(pattern: &CsrPattern, count: usize, align: u64) -> Vec<u64> {
    let (rows, starts) = (pattern.nonempty_rows(), pattern.row_starts());
    // The work before non-empty row `i`, which grows with `i`.
    let work = |i: usize| starts[i] + ROW_WEIGHT_IN_ENTRIES * i;
    let total = work(rows.len());
    let nrows = pattern.nrows() as u64;
    let mut bounds = vec![0u64];
    for s in 1..count {
        // The first non-empty row at or past the share, rounded to a multiple of `align`.
        let share = total * s / count;
        let (mut i, mut end) = (0, rows.len());
        while i < end {
            let mid = (i + end) / 2;
            if work(mid) < share {
                i = mid + 1;
            } else {
                end = mid;
            }
        }
        let Some(&row) = rows.get(i) else { break };
        let b = u64::from(row) / align * align;
        if b > *bounds.last().unwrap_or(&0) && b < nrows {
            bounds.push(b);
        }
    }
    bounds.push(nrows);
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::featurize::tests::{rmat, waco_like};
    use crate::featurize::FeaturizerGraph;

    #[test]
    fn margins_follow_the_layers() {
        // 1 → 32 k5 s1, then 3 × k3 s2: back 2 + 1 + 2 + 4, ahead 2 + 1 + 3 + 7 (each
        // strided layer reads up to its own cell's end, t_out − 1 rows ahead).
        let g = FeaturizerGraph::from_spec(&waco_like(8, 3, 1)).expect("valid");
        let plan = g.plan();
        assert_eq!(plan.stride_lcm(), 8);
        assert_eq!(plan.slab_margins(), (9, 13));
    }

    #[test]
    fn cuts_weigh_rows_beside_entries() {
        // 100 rows of 10 entries, then 900 rows of one: 1 900 entries and 1 000 rows, so
        // half the work (1 950) is reached at row 100 + (1 950 − 1 200) / 3 = 350, where
        // half the entries alone would cut at row 95.
        let mut row_ptr = vec![0usize];
        let mut cols = Vec::new();
        for r in 0..1000usize {
            let n = if r < 100 { 10 } else { 1 };
            cols.extend((0..n).map(|c| ((r + 7 * c) % 1000) as u32));
            cols[row_ptr[r]..].sort_unstable();
            row_ptr.push(cols.len());
        }
        let p = CsrPattern::new(1000, 1000, row_ptr, cols).expect("valid");
        assert_eq!(ROW_WEIGHT_IN_ENTRIES, 2);
        assert_eq!(cut_rows(&p, 2, 1), vec![0, 350, 1000]);
        assert_eq!(cut_rows(&p, 2, 64), vec![0, 320, 1000]);
    }

    #[test]
    fn slabs_cover_the_rows_once_at_aligned_bounds() {
        let p = rmat(16, 400_000, 3);
        let g = FeaturizerGraph::from_spec(&waco_like(8, 4, 1)).expect("valid");
        let plan = g.plan();
        // Narrow margins: up to four slabs per thread.
        let slabs = split(plan, &p, 3, 1000);
        assert_eq!(slabs.len(), 12, "{slabs:?}");
        assert_eq!(slabs[0].lo, 0);
        assert_eq!(slabs[11].hi, i64::MAX);
        let (back, ahead) = plan.slab_margins();
        for w in slabs.windows(2) {
            assert_eq!(w[0].hi, w[1].lo);
            assert_eq!(w[1].lo % plan.stride_lcm() as i64, 0);
            assert_eq!(w[0].feed.1 as i64, w[0].hi + ahead);
            assert_eq!(w[1].feed.0 as i64, w[1].lo - back);
        }
        // Entries for two slabs only; margins too wide for more than one per thread.
        assert_eq!(split(plan, &p, 3, 150_000).len(), 2);
        let deep = FeaturizerGraph::from_spec(&waco_like(8, 9, 1)).expect("valid");
        let (back, ahead) = deep.plan().slab_margins();
        assert!(
            (back + ahead) * 100 * 2 > 3 * (1 << 16),
            "margins {back} + {ahead}"
        );
        assert_eq!(split(deep.plan(), &p, 2, 1000).len(), 2);
        // Too few entries or one thread: one whole slab.
        assert_eq!(split(plan, &p, 1, 1000), vec![Slab::whole(&p)]);
        assert_eq!(split(plan, &p, 4, 1 << 30), vec![Slab::whole(&p)]);
    }
}
