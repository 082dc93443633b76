//! Micro-kernel of the featurizer's sparse convolutions: a few gathered input rows times one
//! weight slice, added into (or stored as) output rows.
//!
//! The kernel (one version per [`SimdLevel`](super::SimdLevel)) computes, for each input row
//! `x_r` (`cin` values each, any rows of one table) and the weight slice `w` (`[cin, cout]`,
//! in the panel layout of [`pack_weights`]), the product row `p_r[j] = Σ_ci x_r[ci]·w[ci][j]`
//! as **one fused multiply-add chain over `ci` ascending, starting from +0.0** — the same
//! operations on every level, since each output channel `j` is its own lane — and then writes
//! `dst_r = p_r` (its offset has the [`FRESH`] bit) or `dst_r = dst_r + p_r` (one rounding).
//! The rows are taken in groups of at most `MR` (see `group_rows`) and written in order, each
//! output row added to read right before it is written, so contributions of several rows (or
//! calls) to one output row are added in order.
//!
//! Register blocking differs per level and never changes the arithmetic of a lane:
//!
//! | level | rows per group (`MR`) | column blocks |
//! |---|---:|---|
//! | scalar | 1 | a panel's channels at a time, [`f32::mul_add`] |
//! | AVX2+FMA | 6 | 16 (two `ymm`), 8, then single lanes with scalar FMA |
//! | AVX-512 | 12 | 32 (two `zmm`), 16, then a masked block |
//!
//! Every column block lies inside one panel of the weight layout, so a block's weights are
//! one contiguous run read front to back. (Row-major slices of 256 columns put the 32 columns
//! a block reads 1 KiB apart, all in a few L1 sets, and the block re-read them from L2 for
//! each group of rows.)

#[cfg(test)]
thread_local! {
    /// Multiply-adds of every kernel call on this thread (tests check the featurizer's
    /// `computed_macs` against it).
    pub(crate) static GEMM_MACS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Offset flag: store the product instead of adding it.
pub(crate) const FRESH: usize = 1 << (usize::BITS - 1);

/// Arguments of one kernel call (see the module docs). Checked by [`GemmArgs::check`]
/// (shapes) and, for the rows, once per call with vector compares on AVX-512, per group of
/// rows on AVX2 ([`GemmArgs::check_group`]) and by slice indexing on the scalar level; the
/// kernels index within these bounds.
pub(crate) struct GemmArgs<'a> {
    /// Table of input rows of `cin` values each.
    pub x: &'a [f32],
    /// The input rows to multiply, as row indices into `x`.
    pub rows: &'a [u32],
    /// `[cin, cout]` in the panel layout of [`pack_weights`].
    pub w: &'a [f32],
    /// Output channels.
    pub cout: usize,
    /// Output buffer.
    pub dst: &'a mut [f32],
    /// Start of the output row of each input row in `dst`, plus [`FRESH`] to store it.
    pub offs: &'a [usize],
}

/// A kernel call's shape, from [`GemmArgs::check`].
#[derive(Clone, Copy)]
struct Shape {
    /// Input channels.
    cin: usize,
    /// Rows in the input table (`usize::MAX` when `cin` is 0: no row is read).
    table_rows: usize,
}

impl GemmArgs<'_> {
    /// The call's shape, after checking it (panics on a caller bug); each level checks the
    /// rows (see [`GemmArgs`]). Inlined into each kernel, so the checks are compiled with
    /// the kernel's instruction set.
    #[inline(always)]
    fn check(&self) -> Shape {
        assert_eq!(
            self.offs.len(),
            self.rows.len(),
            "one output row per input row"
        );
        assert!(self.cout > 0 && self.w.len().is_multiple_of(self.cout));
        let cin = self.w.len() / self.cout;
        let table_rows = self.x.len().checked_div(cin).unwrap_or(usize::MAX);
        #[cfg(test)]
        GEMM_MACS.with(|m| m.set(m.get() + (self.rows.len() * cin * self.cout) as u64));
        Shape { cin, table_rows }
    }

    /// Checks that rows `first..first + M` are in the input table and their output rows in
    /// `dst` (panics on a caller bug). Per group of rows rather than per call: a scalar fold
    /// over a whole call's list (a few dozen rows, too short for its vectorized loop) is a
    /// serial chain of compares that costs about as much as a group's products.
    #[inline(always)]
    fn check_group<const M: usize>(&self, first: usize, shape: Shape) {
        let rows: &[u32; M] = self.rows[first..first + M].try_into().expect("M rows");
        let offs: &[usize; M] = self.offs[first..first + M].try_into().expect("M rows");
        let rows_in = rows
            .iter()
            .fold(true, |ok, &r| ok & ((r as usize) < shape.table_rows));
        assert!(rows_in, "input rows in the table");
        let outs_in = offs.iter().fold(true, |ok, &o| {
            ok & ((o & !FRESH) + self.cout <= self.dst.len())
        });
        assert!(outs_in, "output rows in bounds");
    }
}

/// Rows of the next group when `left` rows remain, at most `mr`: full groups, except that
/// the last `mr + 1` to `2·mr − 1` rows go as two groups of nearly equal size. A group of
/// fewer than four rows has fewer independent accumulator chains than the FMA units need,
/// so a tail of one or two rows would cost almost what a full group costs.
#[inline(always)]
fn group_rows(left: usize, mr: usize) -> usize {
    if left > mr && left < 2 * mr {
        left.div_ceil(2)
    } else {
        left.min(mr)
    }
}

/// Width of the weight layout's full panels: the AVX-512 kernel's widest column block.
const PANEL: usize = 32;

/// The panel of the weight layout (see [`pack_weights`]) holding output column `j` of a
/// slice of `cout` columns: its first column and its width.
#[inline(always)]
fn panel(cout: usize, j: usize) -> (usize, usize) {
    let full = cout / PANEL * PANEL;
    if j < full {
        (j / PANEL * PANEL, PANEL)
    } else if cout - full >= 16 && j < full + 16 {
        (full, 16)
    } else {
        let first = if cout - full >= 16 { full + 16 } else { full };
        (first, cout - first)
    }
}

/// Where a column block from `j0` starts in a panel-layout slice of `cin` rows, and the
/// distance from one of its rows to the next (its panel's width).
#[inline(always)]
fn block_at(cin: usize, cout: usize, j0: usize) -> (usize, usize) {
    let (first, width) = panel(cout, j0);
    (first * cin + j0 - first, width)
}

/// A `[cin, cout]` row-major weight slice in the micro-kernels' layout: its columns cut into
/// panels — 32 wide while 32 columns remain, then one of 16 if 16 remain, then the rest —
/// each stored `[cin, width]` row-major, panels in column order. Weight `(ci, j)` of the
/// panel from column `f` of width `b` is at `f·cin + ci·b + (j − f)`. Only where the
/// weights lie changes: every level's arithmetic is the same (see the module docs).
pub(crate) fn pack_weights(w: &[f32], cin: usize, cout: usize) -> Vec<f32> {
    assert_eq!(w.len(), cin * cout, "a [cin, cout] slice");
    let mut packed = Vec::with_capacity(w.len());
    let mut j0 = 0;
    while j0 < cout {
        let (_, width) = panel(cout, j0);
        for row in w.chunks_exact(cout) {
            packed.extend_from_slice(&row[j0..j0 + width]);
        }
        j0 += width;
    }
    packed
}

/// Rows per call of the AVX2 kernel.
pub(crate) const MR_AVX2: usize = 6;
/// Rows per call of the AVX-512 kernel.
pub(crate) const MR_AVX512: usize = 12;

/// Portable kernel: one output channel at a time, [`f32::mul_add`] over `ci` ascending.
pub(crate) fn gemm_scalar(a: GemmArgs<'_>) {
    let cin = a.check().cin;
    let cout = a.cout;
    let mut p = [0.0f32; PANEL];
    for (r, &row) in a.rows.iter().enumerate() {
        let x = &a.x[row as usize * cin..][..cin];
        let mut j0 = 0;
        while j0 < cout {
            let (start, nb) = block_at(cin, cout, j0);
            let p = &mut p[..nb];
            p.fill(0.0);
            for (ci, &xv) in x.iter().enumerate() {
                let wr = &a.w[start + ci * nb..][..nb];
                for (acc, &wv) in p.iter_mut().zip(wr) {
                    *acc = xv.mul_add(wv, *acc);
                }
            }
            let o = &mut a.dst[(a.offs[r] & !FRESH) + j0..][..nb];
            if a.offs[r] & FRESH != 0 {
                o.copy_from_slice(p);
            } else {
                for (d, &v) in o.iter_mut().zip(p.iter()) {
                    *d += v;
                }
            }
            j0 += nb;
        }
    }
}

/// AVX2+FMA kernel.
///
/// Only reachable through [`super::kernels::Kernels::for_level`], which hands it out when
/// the CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
pub(crate) fn gemm_avx2(mut a: GemmArgs<'_>) {
    // SAFETY: this kernel is only handed out for CPUs with AVX2 and FMA
    // (`Kernels::for_level` checks `SimdLevel::is_supported`); it checks the bounds before it reads or writes a row.
    unsafe { x86::gemm_avx2(&mut a) }
}

/// AVX-512 kernel.
///
/// Only reachable through [`super::kernels::Kernels::for_level`], which hands it out when
/// the CPU supports AVX-512 F/BW/DQ/VL and FMA.
#[cfg(target_arch = "x86_64")]
pub(crate) fn gemm_avx512(mut a: GemmArgs<'_>) {
    // SAFETY: this kernel is only handed out for CPUs with AVX-512 and FMA
    // (`Kernels::for_level` checks `SimdLevel::is_supported`); it checks the bounds before it reads or writes a row.
    unsafe { x86::gemm_avx512(&mut a) }
}

// Register blocking indexes accumulator arrays by row and vector: index loops read best.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)]
mod x86 {
    use std::arch::x86_64::*;

    use super::{group_rows, GemmArgs, Shape, FRESH, MR_AVX2, MR_AVX512};

    /// Raw pointers of one group of `M` rows: input rows, weights, output rows, and which
    /// rows are stored rather than added.
    struct Ptrs<const M: usize> {
        xs: [*const f32; M],
        w: *const f32,
        outs: [*mut f32; M],
        fresh: u32,
    }

    impl<const M: usize> Ptrs<M> {
        /// The group of rows `first..first + M`.
        /// The group of rows `first..first + M`, whose rows have been checked (per call or
        /// per group). A plain loop over raw pointers, which the compiler keeps in registers
        /// (`array::from_fn` with indexing sent them through the stack; see BENCHMARKS.md).
        #[inline(always)]
        fn new(a: &mut GemmArgs<'_>, first: usize, shape: Shape) -> Self {
            assert!(first + M <= a.rows.len(), "rows of the group");
            let (x, dst) = (a.x.as_ptr(), a.dst.as_mut_ptr());
            let (rows, offs) = (a.rows[first..].as_ptr(), a.offs[first..].as_ptr());
            let mut p = Self {
                xs: [std::ptr::null(); M],
                w: a.w.as_ptr(),
                outs: [std::ptr::null_mut(); M],
                fresh: 0,
            };
            for r in 0..M {
                // SAFETY: `first + r < rows.len() == offs.len()` (asserted above, `check`).
                let (row, off) = unsafe { (*rows.add(r), *offs.add(r)) };
                // `(row + 1) · cin <= x.len()` and `(off & !FRESH) + cout <= dst.len()`
                // (checked by the caller).
                p.xs[r] = x.wrapping_add(row as usize * shape.cin);
                p.outs[r] = dst.wrapping_add(off & !FRESH);
                p.fresh |= u32::from(off & FRESH != 0) << r;
            }
            p
        }
    }

    /// Asks for the first cache lines (up to 256 bytes) of the input rows `from..from + n`
    /// (those that exist) while the current group computes: the rows are gathered from
    /// anywhere in the input table, so the hardware prefetchers cannot guess them. Into L2
    /// rather than L1, which measured faster where L1 is small (32 KiB on Zen 4): there the
    /// lines compete with the tile's output rows and the weights (BENCHMARKS.md, nineteenth
    /// pass).
    #[inline(always)]
    fn prefetch_rows(a: &GemmArgs<'_>, from: usize, n: usize, cin: usize) {
        let bytes = (cin * 4).min(256);
        let rows = a.rows.get(from..).unwrap_or_default();
        for &row in &rows[..rows.len().min(n)] {
            let p = a.x.as_ptr().wrapping_add(row as usize * cin).cast::<i8>();
            // SAFETY: `off < 4·cin`, inside the row; prefetching never faults.
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(p);
                let mut off = 64;
                while off < bytes {
                    _mm_prefetch::<_MM_HINT_T1>(p.add(off));
                    off += 64;
                }
            }
        }
    }

    // === AVX-512 ===

    /// # Safety
    ///
    /// AVX-512 F and FMA available. (The bounds are checked here, by [`GemmArgs::check`]
    /// and `check_rows_avx512`.)
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn gemm_avx512(a: &mut GemmArgs<'_>) {
        let shape = a.check();
        // SAFETY: AVX-512 F (caller contract).
        unsafe { check_rows_avx512(a, shape) };
        let mut first = 0;
        while first < a.rows.len() {
            let m = group_rows(a.rows.len() - first, MR_AVX512);
            prefetch_rows(a, first + m, MR_AVX512, shape.cin);
            // SAFETY (all arms): forwarded caller contract; rows `first..first + m` exist.
            unsafe {
                match m {
                    1 => rows512::<1>(a, first, shape),
                    2 => rows512::<2>(a, first, shape),
                    3 => rows512::<3>(a, first, shape),
                    4 => rows512::<4>(a, first, shape),
                    5 => rows512::<5>(a, first, shape),
                    6 => rows512::<6>(a, first, shape),
                    7 => rows512::<7>(a, first, shape),
                    8 => rows512::<8>(a, first, shape),
                    9 => rows512::<9>(a, first, shape),
                    10 => rows512::<10>(a, first, shape),
                    11 => rows512::<11>(a, first, shape),
                    _ => rows512::<12>(a, first, shape),
                }
            }
            first += m;
        }
    }

    /// Checks that every input row is in the table and every output row in `dst` (panics on
    /// a caller bug), sixteen rows and eight offsets per compare: a scalar fold over a call's
    /// few dozen rows is a serial chain that costs as much as a group's products.
    ///
    /// # Safety
    ///
    /// AVX-512 F available.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn check_rows_avx512(a: &GemmArgs<'_>, shape: Shape) {
        // Row ids are `u32`: a table of 2^32 rows or more holds every one.
        let rows_end = _mm512_set1_epi32(shape.table_rows.min(u32::MAX as usize) as u32 as i32);
        let all_rows_in = shape.table_rows > u32::MAX as usize;
        let mut out = 0u16;
        for block in a.rows.chunks(16) {
            let k = (u32::MAX >> (32 - block.len())) as __mmask16;
            // SAFETY: the lanes in `k` are inside `block`; masked-off lanes are not read.
            let v = unsafe { _mm512_maskz_loadu_epi32(k, block.as_ptr().cast()) };
            out |= _mm512_mask_cmpge_epu32_mask(k, v, rows_end);
        }
        assert!(all_rows_in || out == 0, "input rows in the table");
        // `(o & !FRESH) + cout <= dst.len()`, as `o & !FRESH <= dst.len() - cout`.
        let Some(last_start) = a.dst.len().checked_sub(a.cout) else {
            assert!(a.offs.is_empty(), "output rows in bounds");
            return;
        };
        let (last, strip) = (
            _mm512_set1_epi64(last_start as i64),
            _mm512_set1_epi64(!FRESH as i64),
        );
        let mut past = 0u8;
        for block in a.offs.chunks(8) {
            let k = (u32::MAX >> (32 - block.len())) as __mmask8;
            // SAFETY: as above.
            let v = unsafe { _mm512_maskz_loadu_epi64(k, block.as_ptr().cast()) };
            past |= _mm512_mask_cmpgt_epu64_mask(k, _mm512_and_si512(v, strip), last);
        }
        assert!(past == 0, "output rows in bounds");
    }

    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn rows512<const M: usize>(a: &mut GemmArgs<'_>, first: usize, shape: Shape) {
        let p = Ptrs::<M>::new(a, first, shape);
        let cin = shape.cin;
        let cout = a.cout;
        let mut j0 = 0;
        // SAFETY: every block reads weight columns and writes output columns `j0..j0 + 16·V`
        // (or the masked tail) below `cout`; rows are in bounds (caller contract).
        unsafe {
            while j0 + 32 <= cout {
                cols512::<M, 2>(&p, cin, cout, j0, 0xFFFF);
                j0 += 32;
            }
            if j0 + 16 <= cout {
                cols512::<M, 1>(&p, cin, cout, j0, 0xFFFF);
                j0 += 16;
            }
            if j0 < cout {
                let mask = ((1u32 << (cout - j0)) - 1) as __mmask16;
                cols512::<M, 1>(&p, cin, cout, j0, mask);
            }
        }
    }

    /// `M` rows × `16·V` columns from `j0`; with `V = 1`, only the lanes in `mask`.
    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn cols512<const M: usize, const V: usize>(
        p: &Ptrs<M>,
        cin: usize,
        cout: usize,
        j0: usize,
        mask: __mmask16,
    ) {
        let fresh = p.fresh;
        let mut acc = [[_mm512_setzero_ps(); V]; M];
        let (start, width) = super::block_at(cin, cout, j0);
        let mut wp = p.w.wrapping_add(start);
        for ci in 0..cin {
            // SAFETY: `ci < cin`; the block's panel row `ci` has `width` columns from `wp`,
            // `16·V <= width` or masked to it; input rows have `cin` values.
            unsafe {
                let wv: [__m512; V] =
                    std::array::from_fn(|v| _mm512_maskz_loadu_ps(mask, wp.add(16 * v)));
                for r in 0..M {
                    let xb = _mm512_set1_ps(*p.xs[r].add(ci));
                    for v in 0..V {
                        acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
                    }
                }
            }
            wp = wp.wrapping_add(width);
        }
        // Without a branch per row (whether a row is fresh follows the data): a fresh row's
        // lanes load nothing and keep the product; the others get `old + product`.
        for r in 0..M {
            let add = if fresh & (1 << r) != 0 { 0 } else { mask };
            for v in 0..V {
                // SAFETY: output row `r` has `cout` values from `outs[r]`; masked-off lanes
                // are not read.
                unsafe {
                    let o = p.outs[r].add(j0 + 16 * v);
                    let old = _mm512_maskz_loadu_ps(add, o);
                    let val = _mm512_mask_add_ps(acc[r][v], add, old, acc[r][v]);
                    _mm512_mask_storeu_ps(o, mask, val);
                }
            }
        }
    }

    // === AVX2 ===

    /// # Safety
    ///
    /// AVX2 and FMA available. (The bounds are checked here, by [`GemmArgs::check`] and,
    /// before each group of rows, [`GemmArgs::check_group`].)
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gemm_avx2(a: &mut GemmArgs<'_>) {
        let shape = a.check();
        let mut first = 0;
        while first < a.rows.len() {
            let m = group_rows(a.rows.len() - first, MR_AVX2);
            // SAFETY (all arms): forwarded caller contract; rows `first..first + m` exist.
            unsafe {
                match m {
                    1 => rows256::<1>(a, first, shape),
                    2 => rows256::<2>(a, first, shape),
                    3 => rows256::<3>(a, first, shape),
                    4 => rows256::<4>(a, first, shape),
                    5 => rows256::<5>(a, first, shape),
                    _ => rows256::<6>(a, first, shape),
                }
            }
            first += m;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn rows256<const M: usize>(a: &mut GemmArgs<'_>, first: usize, shape: Shape) {
        a.check_group::<M>(first, shape);
        let p = Ptrs::<M>::new(a, first, shape);
        let cin = shape.cin;
        let cout = a.cout;
        let mut j0 = 0;
        // SAFETY: as in `rows512`.
        unsafe {
            while j0 + 16 <= cout {
                cols256::<M, 2>(&p, cin, cout, j0);
                j0 += 16;
            }
            if j0 + 8 <= cout {
                cols256::<M, 1>(&p, cin, cout, j0);
                j0 += 8;
            }
        }
        for j in j0..cout {
            let (start, width) = super::block_at(cin, cout, j);
            for r in 0..M {
                let mut acc = 0.0f32;
                for ci in 0..cin {
                    // SAFETY: `ci < cin`; weight `(ci, j)` is at `start + ci·width`.
                    unsafe { acc = (*p.xs[r].add(ci)).mul_add(*p.w.add(start + ci * width), acc) };
                }
                // SAFETY: `j < cout`.
                unsafe {
                    let o = p.outs[r].add(j);
                    *o = if p.fresh & (1 << r) != 0 {
                        acc
                    } else {
                        *o + acc
                    };
                }
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn cols256<const M: usize, const V: usize>(
        p: &Ptrs<M>,
        cin: usize,
        cout: usize,
        j0: usize,
    ) {
        let fresh = p.fresh;
        let mut acc = [[_mm256_setzero_ps(); V]; M];
        let (start, width) = super::block_at(cin, cout, j0);
        let mut wp = p.w.wrapping_add(start);
        for ci in 0..cin {
            // SAFETY: `ci < cin`; the block's panel row `ci` has `width >= 8·V` columns from
            // `wp` (a block never crosses a panel).
            unsafe {
                let wv: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(8 * v)));
                for r in 0..M {
                    let xb = _mm256_set1_ps(*p.xs[r].add(ci));
                    for v in 0..V {
                        acc[r][v] = _mm256_fmadd_ps(xb, wv[v], acc[r][v]);
                    }
                }
            }
            wp = wp.wrapping_add(width);
        }
        // Without a branch per row, as on AVX-512: every row gets `old + product`, and a
        // fresh row's lanes take the product instead.
        for r in 0..M {
            let keep = _mm256_castsi256_ps(_mm256_set1_epi32(-((fresh >> r) as i32 & 1)));
            for v in 0..V {
                // SAFETY: output row `r` has `cout` values, `j0 + 8·V <= cout`.
                unsafe {
                    let o = p.outs[r].add(j0 + 8 * v);
                    let sum = _mm256_add_ps(_mm256_loadu_ps(o), acc[r][v]);
                    _mm256_storeu_ps(o, _mm256_blendv_ps(sum, acc[r][v], keep));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every weight lands where [`pack_weights`] says, in panels of 32, then 16, then the rest,
    /// and each kernel column block lies inside one panel.
    #[test]
    fn weights_pack_into_panels() {
        for (cin, cout) in [
            (1, 1),
            (3, 7),
            (2, 16),
            (2, 24),
            (5, 32),
            (4, 50),
            (3, 56),
            (2, 256),
        ] {
            let w: Vec<f32> = (0..cin * cout).map(|i| i as f32).collect();
            let packed = pack_weights(&w, cin, cout);
            assert_eq!(packed.len(), w.len());
            let mut widths = Vec::new();
            let mut j = 0;
            while j < cout {
                let (first, width) = panel(cout, j);
                assert_eq!(first, j, "panels tile the columns in order");
                widths.push(width);
                for ci in 0..cin {
                    for c in first..first + width {
                        assert_eq!(
                            packed[first * cin + ci * width + c - first],
                            w[ci * cout + c]
                        );
                    }
                }
                j += width;
            }
            let (full, rest) = (cout / 32, cout % 32);
            let mut want = vec![32; full];
            want.extend((rest >= 16).then_some(16));
            want.extend((rest % 16 > 0).then_some(rest % 16));
            assert_eq!(widths, want, "cout {cout}");
            // Each level's column blocks (AVX-512: 32s, a 16, a masked rest; AVX2: 16s, an
            // 8, single columns) lie inside one panel.
            let inside = |j0: usize, n: usize| {
                let (first, width) = panel(cout, j0);
                assert!(j0 + n <= first + width, "block of {n} at {j0} of {cout}");
            };
            for (wide, narrow) in [(32, 16), (16, 8)] {
                let mut j0 = 0;
                while j0 + wide <= cout {
                    inside(j0, wide);
                    j0 += wide;
                }
                if j0 + narrow <= cout {
                    inside(j0, narrow);
                    j0 += narrow;
                }
                if j0 < cout && wide == 32 {
                    inside(j0, cout - j0);
                }
                (j0..cout).for_each(|j| inside(j, 1));
            }
        }
    }
}
