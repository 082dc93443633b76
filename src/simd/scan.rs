//! Window search over sorted columns: the vector kernel of the featurizer's neighbour search.
//!
//! The neighbour search (`featurize::rulebook`) walks, for every output point, a cursor per
//! kernel row through that input row's sorted columns: skip the columns left of the point's
//! window, then take the ones inside it. Both steps end on a comparison that depends on the
//! data, so a point costs a mispredicted branch or two per kernel row, and each cursor's
//! next step waits on the last one.
//!
//! [`Lanes16::window_block`] turns the search around: it takes 16 output windows in vector
//! lanes (one 512-bit vector on AVX-512, two 256-bit ones on AVX2, [`Avx2Lanes`]) and
//! compares each column of the input row once with all 16, accumulating per lane how many
//! columns lie left of the window (the index of its first neighbour) and which window
//! positions hold a column (its neighbour mask). The branches then depend on the rows, not
//! on the points; the columns are taken in runs of four with no branch between them while a
//! whole run lies within the windows' reach, so a kernel row has fewer loop exits to
//! predict. (A per-point vector search, 16 columns per comparison instead of one, was
//! measured too: it lengthens each cursor's dependency chain and lost to the scalar walk on
//! AVX-512 and AVX2; BENCHMARKS.md keeps the numbers.) The scalar level keeps the cursor
//! walk.
//!
//! Its results are indices and bit masks, not arithmetic: every level finds the same
//! neighbours (`featurize::rulebook`'s tests compare the levels pair for pair).

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2Lanes, Lanes16};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Sixteen 32-bit lanes in the vectors of one SIMD level: one `__m512i` on AVX-512,
    /// two `__m256i` on AVX2 ([`Avx2Lanes`]). The methods are `#[inline(always)]` without
    /// target features of their own, so they must be called (and get inlined) from a
    /// function compiled for the level.
    pub(crate) trait Lanes16: Copy {
        /// The lanes `cols[j] + a0` (wrapping).
        ///
        /// # Safety
        ///
        /// The CPU supports the level.
        unsafe fn windows(cols: &[u32; 16], a0: i32) -> Self;

        /// All lanes zero.
        ///
        /// # Safety
        ///
        /// As [`windows`](Self::windows).
        unsafe fn zero() -> Self;

        /// `self | (bits << at)` lane by lane.
        ///
        /// # Safety
        ///
        /// As [`windows`](Self::windows).
        unsafe fn or_shifted(self, bits: Self, at: u32) -> Self;

        /// Stores the lanes.
        ///
        /// # Safety
        ///
        /// As [`windows`](Self::windows).
        unsafe fn store(self, out: &mut [u32; 16]);

        /// One kernel row's part of 16 output windows at once: lanes `..n` of `lo` hold the
        /// windows' first columns `lo_j` (ascending; a window is `[lo_j, lo_j + span]`),
        /// `lo_min` and `lo_max` are the first and last of them, and the columns of `row` from
        /// `from` on are scanned once, up to the last window's end, each compared with all
        /// 16 windows. Returns the index of the first column `≥ lo_max` (a valid `from` for
        /// the next block), per lane the occupancy bits of the window (bit
        /// `(c − lo_j) >> shift` for every column `c` inside it) and, with `FIRSTS`, per
        /// lane the index of the row's first column `≥ lo_j` (zero lanes without). Lanes from
        /// `n` on hold unspecified values. Columns before `from` must be left of `lo_min`.
        ///
        /// # Safety
        ///
        /// The CPU supports the level; `1 ≤ n ≤ 16`; `from ≤ row.len() < 2^32`; columns at
        /// most `i32::MAX`; `lo_j ≥ −2^30` and `span < 2^30` (so `c − lo_j` fits `u32` for
        /// every column; a window's end may pass `i32::MAX`).
        unsafe fn window_block<const FIRSTS: bool>(
            row: &[u32],
            from: usize,
            lo: Self,
            bounds: (i32, i32),
            n: usize,
            span: u32,
            shift: u32,
        ) -> (usize, Self, Self);
    }

    /// Columns a window search takes per loop iteration while a whole run lies inside the
    /// windows' reach (the rest go one at a time): fewer loop exits to predict on rows of
    /// varying length. Runs that would reach past the windows (wasted comparisons, masked)
    /// lost more on rows of constant length, banded matrices, than they gained on the others.
    const RUN: usize = 4;

    /// A window search's walk from index `$i` of `$row`: whole [`RUN`]s of columns while a
    /// run's last column is within `$hi_max` (no branch between their columns), then the
    /// rest one at a time while within it; `$step!(c)` for each column `c`. (A macro rather
    /// than a function taking a closure: the closure would not inherit the level's target
    /// features.)
    macro_rules! scan_columns {
        ($row:expr, $i:ident, $hi_max:expr, $step:ident) => {
            let (row, hi_max): (&[u32], i64) = ($row, $hi_max);
            while $i + RUN <= row.len() && i64::from(row[$i + RUN - 1]) <= hi_max {
                for &c in &row[$i..$i + RUN] {
                    $step!(c);
                }
                $i += RUN;
            }
            while $i < row.len() && i64::from(row[$i]) <= hi_max {
                $step!(row[$i]);
                $i += 1;
            }
        };
    }

    /// `from` advanced by whole [`RUN`]s of columns left of `lo_min` (or of 0).
    #[inline(always)]
    fn skip_runs(row: &[u32], from: usize, lo_min: i32) -> usize {
        let floor = lo_min.max(0) as u32;
        let mut start = from;
        while start + RUN <= row.len() && row[start + RUN - 1] < floor {
            start += RUN;
        }
        start
    }

    impl Lanes16 for __m512i {
        #[inline(always)]
        unsafe fn windows(cols: &[u32; 16], a0: i32) -> Self {
            // SAFETY: AVX-512 F (caller contract); 16 lanes read.
            unsafe {
                _mm512_add_epi32(
                    _mm512_loadu_si512(cols.as_ptr().cast()),
                    _mm512_set1_epi32(a0),
                )
            }
        }

        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: AVX-512 F (caller contract).
            unsafe { _mm512_setzero_si512() }
        }

        #[inline(always)]
        unsafe fn or_shifted(self, bits: Self, at: u32) -> Self {
            // SAFETY: AVX-512 F (caller contract).
            unsafe { _mm512_or_si512(self, _mm512_sll_epi32(bits, _mm_cvtsi32_si128(at as i32))) }
        }

        #[inline(always)]
        unsafe fn store(self, out: &mut [u32; 16]) {
            // SAFETY: AVX-512 F (caller contract); 16 lanes written.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), self) }
        }

        #[inline(always)]
        unsafe fn window_block<const FIRSTS: bool>(
            row: &[u32],
            from: usize,
            lo: Self,
            (lo_min, lo_max): (i32, i32),
            n: usize,
            span: u32,
            shift: u32,
        ) -> (usize, Self, Self) {
            let lanes = (u32::MAX >> (32 - n)) as u16;
            let hi_max = i64::from(lo_max) + i64::from(span);
            // SAFETY: AVX-512 F (caller contract).
            unsafe {
                let ones = _mm512_set1_epi32(1);
                let width = _mm512_set1_epi32(span as i32);
                let count = _mm_cvtsi32_si128(shift as i32);
                let mut below = _mm512_setzero_si512();
                let mut bits = _mm512_setzero_si512();
                let start = skip_runs(row, from, lo_min);
                let (mut next, mut i) = (start, start);
                // One column against the 16 windows (a macro: a closure would not inherit
                // the level's target features).
                macro_rules! step {
                    ($c:expr) => {{
                        let c: u32 = $c;
                        next += usize::from((c as i32) < lo_max);
                        let y = _mm512_set1_epi32(c as i32);
                        // `y − lo_j` as unsigned: the distance into window `j`, or above `span`
                        // (wrapped) when the column is left of it.
                        let d = _mm512_sub_epi32(y, lo);
                        let inside = _mm512_mask_cmple_epu32_mask(lanes, d, width);
                        let bit = _mm512_sllv_epi32(ones, _mm512_srl_epi32(d, count));
                        bits = _mm512_mask_or_epi32(bits, inside, bits, bit);
                        if FIRSTS {
                            let left = _mm512_mask_cmplt_epi32_mask(lanes, y, lo);
                            below = _mm512_mask_add_epi32(below, left, below, ones);
                        }
                    }};
                }
                scan_columns!(row, i, hi_max, step);
                // Indices are below 2^32: the lane sum wraps like `u32`.
                let first = if FIRSTS {
                    _mm512_add_epi32(below, _mm512_set1_epi32(start as u32 as i32))
                } else {
                    below
                };
                (next, first, bits)
            }
        }
    }

    /// Sixteen lanes as two AVX2 vectors (lanes 0–7, 8–15).
    #[derive(Clone, Copy)]
    pub(crate) struct Avx2Lanes(__m256i, __m256i);

    impl Lanes16 for Avx2Lanes {
        #[inline(always)]
        unsafe fn windows(cols: &[u32; 16], a0: i32) -> Self {
            // SAFETY: AVX2 (caller contract); 16 lanes read.
            unsafe {
                let a = _mm256_set1_epi32(a0);
                let p = cols.as_ptr();
                Avx2Lanes(
                    _mm256_add_epi32(_mm256_loadu_si256(p.cast()), a),
                    _mm256_add_epi32(_mm256_loadu_si256(p.add(8).cast()), a),
                )
            }
        }

        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: AVX2 (caller contract).
            unsafe { Avx2Lanes(_mm256_setzero_si256(), _mm256_setzero_si256()) }
        }

        #[inline(always)]
        unsafe fn or_shifted(self, bits: Self, at: u32) -> Self {
            // SAFETY: AVX2 (caller contract).
            unsafe {
                let at = _mm_cvtsi32_si128(at as i32);
                Avx2Lanes(
                    _mm256_or_si256(self.0, _mm256_sll_epi32(bits.0, at)),
                    _mm256_or_si256(self.1, _mm256_sll_epi32(bits.1, at)),
                )
            }
        }

        #[inline(always)]
        unsafe fn store(self, out: &mut [u32; 16]) {
            // SAFETY: AVX2 (caller contract); 16 lanes written.
            unsafe {
                let p = out.as_mut_ptr();
                _mm256_storeu_si256(p.cast(), self.0);
                _mm256_storeu_si256(p.add(8).cast(), self.1);
            }
        }

        /// As on AVX-512, with the unsigned comparison `d ≤ span` as `min(d, span) == d` and
        /// the columns left of a window counted by subtracting the all-ones lanes of a
        /// signed comparison.
        #[inline(always)]
        unsafe fn window_block<const FIRSTS: bool>(
            row: &[u32],
            from: usize,
            lo: Self,
            (lo_min, lo_max): (i32, i32),
            _n: usize,
            span: u32,
            shift: u32,
        ) -> (usize, Self, Self) {
            let hi_max = i64::from(lo_max) + i64::from(span);
            // SAFETY: AVX2 (caller contract).
            unsafe {
                let ones = _mm256_set1_epi32(1);
                let width = _mm256_set1_epi32(span as i32);
                let count = _mm_cvtsi32_si128(shift as i32);
                let (mut below_a, mut below_b) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                let (mut bits_a, mut bits_b) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                let start = skip_runs(row, from, lo_min);
                let (mut next, mut i) = (start, start);
                macro_rules! step {
                    ($c:expr) => {{
                        let c: u32 = $c;
                        next += usize::from((c as i32) < lo_max);
                        let y = _mm256_set1_epi32(c as i32);
                        let (d_a, d_b) = (_mm256_sub_epi32(y, lo.0), _mm256_sub_epi32(y, lo.1));
                        let in_a = _mm256_cmpeq_epi32(_mm256_min_epu32(d_a, width), d_a);
                        let in_b = _mm256_cmpeq_epi32(_mm256_min_epu32(d_b, width), d_b);
                        let bit_a = _mm256_sllv_epi32(ones, _mm256_srl_epi32(d_a, count));
                        let bit_b = _mm256_sllv_epi32(ones, _mm256_srl_epi32(d_b, count));
                        bits_a = _mm256_or_si256(bits_a, _mm256_and_si256(in_a, bit_a));
                        bits_b = _mm256_or_si256(bits_b, _mm256_and_si256(in_b, bit_b));
                        if FIRSTS {
                            // Lanes with `lo_j > y` are −1: subtracting them counts the column.
                            below_a = _mm256_sub_epi32(below_a, _mm256_cmpgt_epi32(lo.0, y));
                            below_b = _mm256_sub_epi32(below_b, _mm256_cmpgt_epi32(lo.1, y));
                        }
                    }};
                }
                scan_columns!(row, i, hi_max, step);
                let first = if FIRSTS {
                    let base = _mm256_set1_epi32(start as u32 as i32);
                    Avx2Lanes(
                        _mm256_add_epi32(below_a, base),
                        _mm256_add_epi32(below_b, base),
                    )
                } else {
                    Avx2Lanes(below_a, below_b)
                };
                (next, first, Avx2Lanes(bits_a, bits_b))
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::arch::x86_64::__m512i;

    use super::*;
    use crate::simd::SimdLevel;

    /// One block through `V`'s kernel, lanes read back; checks the cursor it returns and
    /// that the masks do not depend on `FIRSTS`.
    ///
    /// # Safety
    ///
    /// The CPU supports `V`'s level (the callers below are compiled for it).
    #[inline(always)]
    unsafe fn block<V: Lanes16>(
        row: &[u32],
        from: usize,
        lo: &[i32],
        span: u32,
        shift: u32,
    ) -> (Vec<u32>, Vec<u32>) {
        let mut buf = [0u32; 16];
        for (b, &l) in buf.iter_mut().zip(lo) {
            *b = l as u32;
        }
        let n = lo.len();
        let (mut first, mut bits, mut bits2) = ([0u32; 16], [0u32; 16], [0u32; 16]);
        // SAFETY: the caller's contract; the test keeps the kernels' bounds.
        unsafe {
            let v = V::windows(&buf, 0);
            let bounds = (lo[0], lo[n - 1]);
            let (next, f, b) = V::window_block::<true>(row, from, v, bounds, n, span, shift);
            let (_, _, b2) = V::window_block::<false>(row, from, v, bounds, n, span, shift);
            assert_eq!(
                next,
                row.partition_point(|&c| (c as i32) < bounds.1),
                "next cursor"
            );
            f.store(&mut first);
            V::zero().or_shifted(b, 0).store(&mut bits);
            b2.store(&mut bits2);
        }
        assert_eq!(bits[..n], bits2[..n], "masks without first indices");
        (first[..n].to_vec(), bits[..n].to_vec())
    }

    #[target_feature(enable = "avx512f,popcnt")]
    fn block_avx512(row: &[u32], from: usize, lo: &[i32], sh: (u32, u32)) -> (Vec<u32>, Vec<u32>) {
        // SAFETY: compiled for AVX-512 F.
        unsafe { block::<__m512i>(row, from, lo, sh.0, sh.1) }
    }

    #[target_feature(enable = "avx2,popcnt")]
    fn block_avx2(row: &[u32], from: usize, lo: &[i32], sh: (u32, u32)) -> (Vec<u32>, Vec<u32>) {
        // SAFETY: compiled for AVX2.
        unsafe { block::<Avx2Lanes>(row, from, lo, sh.0, sh.1) }
    }

    /// Every lane gets the first index at or after its window and the window's occupancy, as
    /// a plain scan computes them: windows left of, inside and beyond the row, negative
    /// bounds, the largest column, every lane count, strides 1 and 4.
    #[test]
    fn block_matches_a_plain_scan() {
        let levels: Vec<SimdLevel> = SimdLevel::supported()
            .filter(|&l| l >= SimdLevel::Avx2)
            .collect();
        if levels.is_empty() {
            return;
        }
        let mut seed = 11u64;
        let mut next = move |n: u32| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32 % n
        };
        let mut checked = 0;
        for shift in [0u32, 2] {
            let t = 1u32 << shift;
            for len in [0usize, 1, 5, 17, 40] {
                let mut row: Vec<u32> = Vec::new();
                let mut c = next(3) * t;
                for _ in 0..len {
                    row.push(c);
                    c += t * (1 + next(3));
                }
                if len == 40 {
                    *row.last_mut().expect("non-empty") = (i32::MAX as u32) / t * t;
                }
                for lanes in [1usize, 7, 16] {
                    for span_k in [1u32, 3, 5] {
                        let span = (span_k - 1) * t;
                        let top = row.last().copied().unwrap_or(0) as i64;
                        let mut lo: Vec<i32> = Vec::new();
                        let mut v = -(2 * t as i64) + i64::from(next(4) * t);
                        for _ in 0..lanes {
                            lo.push(v.min(i64::from(i32::MAX) - i64::from(span)) as i32);
                            v += i64::from(t * next(3));
                        }
                        lo.sort_unstable();
                        if lanes == 16 && len == 40 {
                            lo[15] = (top - i64::from(span)).max(i64::from(lo[14])) as i32;
                        }
                        // A `from` left of every window: the scan's own skip.
                        let from = row
                            .partition_point(|&c| i64::from(c) < i64::from(lo[0]))
                            .saturating_sub(1);
                        for &level in &levels {
                            // SAFETY: this CPU has `level` (`levels` holds supported ones).
                            let (first, bits) = unsafe {
                                if level == SimdLevel::Avx512 {
                                    block_avx512(&row, from, &lo, (span, shift))
                                } else {
                                    block_avx2(&row, from, &lo, (span, shift))
                                }
                            };
                            for (j, &l) in lo.iter().enumerate() {
                                let want_first =
                                    row.partition_point(|&c| i64::from(c) < i64::from(l)) as u32;
                                let want_bits = row
                                    .iter()
                                    .map(|&c| i64::from(c) - i64::from(l))
                                    .filter(|&d| (0..=i64::from(span)).contains(&d))
                                    .fold(0u32, |b, d| b | 1 << (d >> shift));
                                assert_eq!(
                                    (first[j], bits[j]),
                                    (want_first, want_bits),
                                    "{level}: len {len} lanes {lanes} span {span} lane {j} lo {l}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 500);
    }
}
