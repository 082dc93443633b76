//! Window search over sorted columns: the vector kernel of the featurizer's neighbour search.
//!
//! The neighbour search (`featurize::rulebook`) walks, for every output point, a cursor per
//! kernel row through that input row's sorted columns: skip the columns left of the point's
//! window, then take the ones inside it. Both steps end on a comparison that depends on the
//! data, so a point costs a mispredicted branch or two per kernel row, and each cursor's
//! next step waits on the last one.
//!
//! [`window_block16`] turns the search around on the AVX-512 level: it takes 16 output
//! windows in the lanes of a vector and compares each column of the input row once with all
//! 16, accumulating per lane how many columns lie left of the window (the index of its first
//! neighbour) and which window positions hold a column (its neighbour mask). The branches
//! then depend on the rows, not on the points. (A per-point vector search, 16 columns per
//! comparison instead of one, was measured too: it lengthens each cursor's dependency chain
//! and ran 25–60 % slower than the scalar walk on AVX-512 and AVX2, so the other levels keep
//! the scalar walk.)
//!
//! Its results are indices and bit masks, not arithmetic: every level finds the same
//! neighbours (`featurize::rulebook`'s tests compare the levels pair for pair).

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::window_block16;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// One kernel row's part of 16 output windows at once: lanes `lanes` of `lo` hold the
    /// windows' first columns `lo_j` (ascending, as `i32`; a window is `[lo_j, lo_j + span]`),
    /// `lo_min` and `lo_max` are the first and last lane's, and the columns of `row` from
    /// `from` on are scanned once, up to the last window's end, each compared with all 16
    /// windows. Returns the index of the first column `≥ lo_max` (a valid `from` for the next
    /// block), per lane the occupancy bits of the window (bit `(c − lo_j) >> shift` for every
    /// column `c` inside it) and, with `FIRSTS`, per lane the index of the row's first column
    /// `≥ lo_j` (zero lanes without). Columns before `from` must be left of `lo_min`.
    ///
    /// # Safety
    ///
    /// AVX-512 F available; `from ≤ row.len() < 2^32`; columns at most `i32::MAX`; `lo` ascends
    /// over `lanes` (a non-empty prefix of the 16 lanes), with `lo_j ≥ −2^30` and
    /// `span < 2^30` (so `c − lo_j` fits `u32` for every column; a window's end may pass
    /// `i32::MAX`).
    #[target_feature(enable = "avx512f,popcnt")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn window_block16<const FIRSTS: bool>(
        row: &[u32],
        from: usize,
        lo: __m512i,
        (lo_min, lo_max): (i32, i32),
        lanes: u16,
        span: u32,
        shift: u32,
    ) -> (usize, __m512i, __m512i) {
        let hi_max = i64::from(lo_max) + i64::from(span);
        // The caller's cursor is usually a few columns left of the first window.
        let floor = lo_min.max(0) as u32;
        let mut start = from;
        while start < row.len() && row[start] < floor {
            start += 1;
        }
        let ones = _mm512_set1_epi32(1);
        let width = _mm512_set1_epi32(span as i32);
        let count = _mm_cvtsi32_si128(shift as i32);
        let mut below = _mm512_setzero_si512();
        let mut bits = _mm512_setzero_si512();
        let mut next = start;
        let mut i = start;
        while i < row.len() && i64::from(row[i]) <= hi_max {
            let c = row[i];
            next += usize::from((c as i32) < lo_max);
            let y = _mm512_set1_epi32(c as i32);
            // `y − lo_j` as unsigned: the distance into window `j`, or above `span` (wrapped)
            // when the column is left of it.
            let d = _mm512_sub_epi32(y, lo);
            let inside = _mm512_mask_cmple_epu32_mask(lanes, d, width);
            let bit = _mm512_sllv_epi32(ones, _mm512_srl_epi32(d, count));
            bits = _mm512_mask_or_epi32(bits, inside, bits, bit);
            if FIRSTS {
                let left = _mm512_mask_cmplt_epi32_mask(lanes, y, lo);
                below = _mm512_mask_add_epi32(below, left, below, ones);
            }
            i += 1;
        }
        // Indices are below 2^32: the lane sum wraps like `u32`.
        let first = if FIRSTS {
            _mm512_add_epi32(below, _mm512_set1_epi32(start as u32 as i32))
        } else {
            below
        };
        (next, first, bits)
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::arch::x86_64::*;

    use super::*;
    use crate::simd::SimdLevel;

    /// One block through the kernel, lanes read back.
    #[target_feature(enable = "avx512f,popcnt")]
    fn block(row: &[u32], from: usize, lo: &[i32], span: u32, shift: u32) -> (Vec<u32>, Vec<u32>) {
        let mut buf = [0i32; 16];
        buf[..lo.len()].copy_from_slice(lo);
        let lanes = (u32::MAX >> (32 - lo.len())) as u16;
        let (mut first, mut bits) = ([0u32; 16], [0u32; 16]);
        // SAFETY: AVX-512 F is enabled here; the arrays hold 16 lanes; the caller keeps the
        // bounds of `window_block16`.
        unsafe {
            let v = _mm512_loadu_si512(buf.as_ptr().cast());
            let bounds = (lo[0], lo[lo.len() - 1]);
            let (next, f, b) = window_block16::<true>(row, from, v, bounds, lanes, span, shift);
            let (_, _, b2) = window_block16::<false>(row, from, v, bounds, lanes, span, shift);
            assert_eq!(
                next,
                row.partition_point(|&c| (c as i32) < bounds.1),
                "next cursor"
            );
            _mm512_storeu_si512(first.as_mut_ptr().cast(), f);
            _mm512_storeu_si512(bits.as_mut_ptr().cast(), b);
            let mut bits2 = [0u32; 16];
            _mm512_storeu_si512(bits2.as_mut_ptr().cast(), b2);
            assert_eq!(bits, bits2, "masks without first indices");
        }
        (first[..lo.len()].to_vec(), bits[..lo.len()].to_vec())
    }

    /// Every lane gets the first index at or after its window and the window's occupancy, as
    /// a plain scan computes them: windows left of, inside and beyond the row, negative
    /// bounds, the largest column, every lane count, strides 1 and 4.
    #[test]
    fn block_matches_a_plain_scan() {
        if !SimdLevel::Avx512.is_supported() {
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
                        // SAFETY: this CPU has AVX-512 (checked above).
                        let (first, bits) = unsafe { block(&row, from, &lo, span, shift) };
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
                                "len {len} lanes {lanes} span {span} lane {j} lo {l}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 500);
    }
}
