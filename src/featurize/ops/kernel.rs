//! Inner loops of the conv and max-pool layers, per task of whole output rows.
//!
//! The conv loop is the hot path of the whole library. It has two forms:
//!
//! - **Tiled** (`cin ≥ 4`): the task's output points are taken in tiles of 64; the tile's
//!   `(output, input)` neighbour pairs are bucketed by kernel offset κ, and for κ ascending
//!   each bucket is multiplied by `W[κ]` as a small GEMM, 6 pairs at a time, with a
//!   register-blocked micro-kernel (6 rows × 16 output channels of accumulators; input rows
//!   are read in place, outputs accumulate in the tile's block of the layer output). Every
//!   weight row loaded serves 6 products instead of 1.
//! - **Pointwise** (`cin < 4`, e.g. the first WACO layer with `cin = 1`): one output point
//!   at a time, `acc[0..Cout]` held in registers in blocks of 32, 8 and 1 channels, over the
//!   point's neighbours in visiting order.
//!
//! Both end with the bias and the fused ReLU. On x86-64 CPUs with AVX2 and FMA the same code
//! is compiled a second time with those features enabled (using fused multiply-add, and
//! intrinsics for the widest blocks) and chosen at run time; the choice depends only on the
//! CPU, never on the thread count. The summation order of every output value depends only
//! on the coordinates (see `FeaturizerGraph`'s `# Determinism`).

use std::ops::Range;

use crate::featurize::coords::Coords;
use crate::featurize::rulebook::{Geometry, Neighbours};

/// Borrowed inputs of one conv layer.
pub(crate) struct ConvArgs<'a> {
    pub input: &'a Coords,
    pub in_feats: &'a [f32],
    pub cin: usize,
    pub out: &'a Coords,
    pub geom: &'a Geometry,
    /// `[K, cin, cout]` row-major.
    pub weights: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub cout: usize,
    /// Clamp the output at 0 (fused ReLU).
    pub relu: bool,
}

/// Whether the AVX2+FMA variant is usable on this CPU.
#[inline]
fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Computes the conv output of output rows `rows` into `dst` (their `[n, cout]` block).
pub(crate) fn conv_task(args: &ConvArgs<'_>, rows: Range<usize>, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        unsafe { conv_task_avx2(args, rows, dst) };
        return;
    }
    conv_task_impl::<false>(args, rows, dst);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn conv_task_avx2(args: &ConvArgs<'_>, rows: Range<usize>, dst: &mut [f32]) {
    conv_task_impl::<true>(args, rows, dst);
}

#[inline(always)]
fn conv_task_impl<const FMA: bool>(args: &ConvArgs<'_>, rows: Range<usize>, dst: &mut [f32]) {
    if args.cin >= TILED_MIN_CIN {
        conv_tiled::<FMA>(args, rows, dst);
    } else {
        conv_pointwise::<FMA>(args, rows, dst);
    }
}

/// Output points per tile of the tiled path (at most 64: tiles track rows in a `u64`).
const TILE_POINTS: usize = 64;
const _: () = assert!(TILE_POINTS <= 64);
/// Rows of one micro-kernel call (pairs sharing a kernel offset).
const MR: usize = 6;
/// Smallest `cin` that takes the tiled path; below it a pair is too little work to pay for
/// loading and storing its output row once per kernel offset.
const TILED_MIN_CIN: usize = 4;

/// Small-`cin` path: one output point at a time, the accumulator in registers, over the
/// point's neighbours in visiting order (kernel row, then column).
#[inline(always)]
fn conv_pointwise<const FMA: bool>(args: &ConvArgs<'_>, rows: Range<usize>, dst: &mut [f32]) {
    let out = args.out;
    let cout = args.cout;
    let mut nb = Neighbours::new(args.input, args.geom);
    let base = out.row_start[rows.start];
    for ri in rows {
        nb.start_row(out.rows[ri]);
        for p in out.row_range(ri) {
            let list = nb.point_unsorted(out.cols[p]);
            let acc = &mut dst[(p - base) * cout..][..cout];
            accumulate::<FMA>(acc, list, args);
            epilogue::<FMA>(acc, args);
        }
    }
}

/// Adds the bias and applies the fused ReLU to one output point.
#[inline(always)]
fn epilogue<const FMA: bool>(acc: &mut [f32], args: &ConvArgs<'_>) {
    if let Some(b) = args.bias {
        for (a, b) in acc.iter_mut().zip(b) {
            *a += *b;
        }
    }
    if args.relu {
        #[cfg(target_arch = "x86_64")]
        if FMA {
            // SAFETY: `FMA = true` is instantiated only inside `conv_task_avx2`, which runs
            // after `has_avx2_fma()` returned true.
            unsafe { relu_avx2(acc) };
            return;
        }
        for a in acc.iter_mut() {
            *a = if *a < 0.0 { 0.0 } else { *a };
        }
    }
}

/// `x = if x < 0 { 0 } else { x }` (NaN and −0 kept, as in `SparseReLU`) with `maxps(0, x)`,
/// which returns its second operand unless `0 > x`. Written out because LLVM turns the
/// scalar form into masked stores, which are slow on AMD CPUs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn relu_avx2(acc: &mut [f32]) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_max_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let zero = _mm256_setzero_ps();
    let mut chunks = acc.chunks_exact_mut(8);
    for c in &mut chunks {
        let p = c.as_mut_ptr();
        // SAFETY: `c` has 8 elements; unaligned load and store.
        unsafe { _mm256_storeu_ps(p, _mm256_max_ps(zero, _mm256_loadu_ps(p))) };
    }
    for a in chunks.into_remainder() {
        *a = if *a < 0.0 { 0.0 } else { *a };
    }
}

/// Tiled path: the task's output points are taken in tiles of [`TILE_POINTS`]; a tile's
/// `(output, input)` pairs are bucketed by kernel offset κ (in point order), then for κ
/// ascending each bucket is multiplied by `W[κ]` in groups of [`MR`] pairs with a
/// register-blocked micro-kernel (a small GEMM `[m, cin] × [cin, cout]` whose rows are read
/// in place from the input features) and added to the tile's outputs.
#[inline(always)]
fn conv_tiled<const FMA: bool>(a: &ConvArgs<'_>, rows: Range<usize>, dst: &mut [f32]) {
    let out = a.out;
    let cout = a.cout;
    let mut nb = Neighbours::new(a.input, a.geom);
    let mut buckets: Vec<Vec<(u32, u32)>> = (0..a.geom.volume())
        .map(|_| Vec::with_capacity(TILE_POINTS))
        .collect();
    let base = out.row_start[rows.start];
    let mut tile_start = 0; // local index of the tile's first point
    let mut n = 0; // points in the current tile
    for ri in rows {
        nb.start_row(out.rows[ri]);
        for p in out.row_range(ri) {
            for &(kappa, idx) in nb.point_unsorted(out.cols[p]) {
                buckets[kappa as usize].push((n as u32, idx));
            }
            n += 1;
            if n == TILE_POINTS {
                let tile = &mut dst[tile_start * cout..][..n * cout];
                tile_gemm::<FMA>(a, &mut buckets, tile);
                tile_start = p + 1 - base;
                n = 0;
            }
        }
    }
    if n > 0 {
        let tile = &mut dst[tile_start * cout..][..n * cout];
        tile_gemm::<FMA>(a, &mut buckets, tile);
    }
}

/// `tile[o] = Σ_κ Σ_{(o, i) in buckets[κ]} in[i] · W[κ]` (κ ascending, input channels
/// ascending within κ, one sum per output), then bias and ReLU; clears the buckets.
#[inline(always)]
fn tile_gemm<const FMA: bool>(a: &ConvArgs<'_>, buckets: &mut [Vec<(u32, u32)>], tile: &mut [f32]) {
    let (cin, cout) = (a.cin, a.cout);
    // Bit `o`: tile row `o` holds a partial sum (else it is stale and read as 0).
    let mut started: u64 = 0;
    for (kappa, pairs) in buckets.iter_mut().enumerate() {
        let w = &a.weights[kappa * cin * cout..][..cin * cout];
        for group in pairs.chunks(MR) {
            let x = a.in_feats;
            match group.len() {
                6 => {
                    group_gemm::<6, FMA>(tile, group, x, w, cin, cout, |o| started & (1 << o) == 0)
                }
                5 => {
                    group_gemm::<5, FMA>(tile, group, x, w, cin, cout, |o| started & (1 << o) == 0)
                }
                4 => {
                    group_gemm::<4, FMA>(tile, group, x, w, cin, cout, |o| started & (1 << o) == 0)
                }
                3 => {
                    group_gemm::<3, FMA>(tile, group, x, w, cin, cout, |o| started & (1 << o) == 0)
                }
                2 => {
                    group_gemm::<2, FMA>(tile, group, x, w, cin, cout, |o| started & (1 << o) == 0)
                }
                _ => {
                    group_gemm::<1, FMA>(tile, group, x, w, cin, cout, |o| started & (1 << o) == 0)
                }
            }
            for &(o, _) in group {
                started |= 1 << o;
            }
        }
        pairs.clear();
    }
    for (o, acc) in tile.chunks_exact_mut(cout).enumerate() {
        if started & (1 << o) == 0 {
            acc.fill(0.0); // no neighbour
        }
        epilogue::<FMA>(acc, a);
    }
}

/// `tile[o_r] += x[i_r] · w` for the `M` pairs `(o_r, i_r)` of `group` (distinct `o_r`), in
/// blocks of 16, 8 and 1 output channels; a row with `fresh(o_r)` starts from 0 instead of
/// its stale contents.
#[inline(always)]
fn group_gemm<const M: usize, const FMA: bool>(
    tile: &mut [f32],
    group: &[(u32, u32)],
    x: &[f32],
    w: &[f32],
    cin: usize,
    cout: usize,
    fresh: impl Fn(u32) -> bool,
) {
    let Ok(group) = <&[(u32, u32); M]>::try_from(group) else {
        unreachable!("group of M pairs")
    };
    // Bounds checks once per group; the micro-kernels index within these rows.
    let rows = Rows::<M> {
        xs: std::array::from_fn(|r| &x[group[r].1 as usize * cin..][..cin]),
        os: std::array::from_fn(|r| group[r].0 as usize * cout),
        fresh: std::array::from_fn(|r| fresh(group[r].0)),
    };
    assert!(rows.os.iter().all(|&o| o + cout <= tile.len()) && w.len() == cin * cout);
    let mut j0 = 0;
    while j0 + 16 <= cout {
        #[cfg(target_arch = "x86_64")]
        if FMA {
            // SAFETY: `FMA = true` is instantiated only inside `conv_task_avx2`, which runs
            // after `has_avx2_fma()` returned true; rows and offsets are in bounds (asserted
            // above, `j0 + 16 <= cout`).
            unsafe { micro16_avx2::<M>(tile, &rows, w, cin, cout, j0) };
            j0 += 16;
            continue;
        }
        micro::<M, 16, FMA>(tile, &rows, w, cin, cout, j0);
        j0 += 16;
    }
    while j0 + 8 <= cout {
        micro::<M, 8, FMA>(tile, &rows, w, cin, cout, j0);
        j0 += 8;
    }
    while j0 < cout {
        micro::<M, 1, FMA>(tile, &rows, w, cin, cout, j0);
        j0 += 1;
    }
}

/// The `M` rows of one micro-kernel call: input rows, offsets of the output rows in the
/// tile, and which output rows start from 0.
struct Rows<'x, const M: usize> {
    xs: [&'x [f32]; M],
    os: [usize; M],
    fresh: [bool; M],
}

/// Portable micro-kernel: `M` rows × `B` output channels starting at `j0`.
#[inline(always)]
fn micro<const M: usize, const B: usize, const FMA: bool>(
    tile: &mut [f32],
    rows: &Rows<'_, M>,
    w: &[f32],
    cin: usize,
    cout: usize,
    j0: usize,
) {
    let Rows { os, fresh, xs } = rows;
    let mut acc = [[0.0f32; B]; M];
    for r in 0..M {
        if !fresh[r] {
            acc[r].copy_from_slice(&tile[os[r] + j0..][..B]);
        }
    }
    for ci in 0..cin {
        let wr = &w[ci * cout + j0..][..B];
        for r in 0..M {
            let xv = xs[r][ci];
            for j in 0..B {
                acc[r][j] = madd::<FMA>(xv, wr[j], acc[r][j]);
            }
        }
    }
    for r in 0..M {
        tile[os[r] + j0..][..B].copy_from_slice(&acc[r]);
    }
}

/// [`micro`]`::<M, 16, true>` with AVX2 intrinsics (two 8-lane accumulators per row, kept in
/// registers). Same operations in the same order.
///
/// # Safety
///
/// The CPU must support AVX2 and FMA; `rows.os[r] + j0 + 16 <= tile.len()`, every
/// `rows.xs[r]` has `cin` elements, `w.len() == cin * cout` and `j0 + 16 <= cout`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn micro16_avx2<const M: usize>(
    tile: &mut [f32],
    rows: &Rows<'_, M>,
    w: &[f32],
    cin: usize,
    cout: usize,
    j0: usize,
) {
    use std::arch::x86_64::{
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let Rows { os, fresh, xs } = rows;
    debug_assert!(j0 + 16 <= cout && w.len() == cin * cout);
    debug_assert!(os.iter().all(|&o| o + j0 + 16 <= tile.len()));
    debug_assert!(xs.iter().all(|x| x.len() == cin));
    let t = tile.as_mut_ptr();
    let mut lo = [_mm256_setzero_ps(); M];
    let mut hi = [_mm256_setzero_ps(); M];
    for r in 0..M {
        if fresh[r] {
            continue;
        }
        // SAFETY: `os[r] + j0 + 16 <= tile.len()` (caller contract).
        unsafe {
            lo[r] = _mm256_loadu_ps(t.add(os[r] + j0));
            hi[r] = _mm256_loadu_ps(t.add(os[r] + j0 + 8));
        }
    }
    let xp: [*const f32; M] = std::array::from_fn(|r| xs[r].as_ptr());
    let mut wp = w.as_ptr().wrapping_add(j0);
    for ci in 0..cin {
        // SAFETY: `ci * cout + j0 + 16 <= cin * cout = w.len()` and `ci < cin = xs[r].len()`.
        unsafe {
            let w0 = _mm256_loadu_ps(wp);
            let w1 = _mm256_loadu_ps(wp.add(8));
            for r in 0..M {
                let xv = _mm256_set1_ps(*xp[r].add(ci));
                lo[r] = _mm256_fmadd_ps(xv, w0, lo[r]);
                hi[r] = _mm256_fmadd_ps(xv, w1, hi[r]);
            }
        }
        wp = wp.wrapping_add(cout);
    }
    for r in 0..M {
        // SAFETY: as for the loads above.
        unsafe {
            _mm256_storeu_ps(t.add(os[r] + j0), lo[r]);
            _mm256_storeu_ps(t.add(os[r] + j0 + 8), hi[r]);
        }
    }
}

#[inline(always)]
fn madd<const FMA: bool>(x: f32, w: f32, acc: f32) -> f32 {
    if FMA {
        x.mul_add(w, acc)
    } else {
        acc + x * w
    }
}

/// `acc = Σ_{(κ, i) in list} in[i] · W[κ]` in list order, `ci` ascending within a pair.
#[inline(always)]
fn accumulate<const FMA: bool>(acc: &mut [f32], list: &[(u32, u32)], a: &ConvArgs<'_>) {
    let cout = a.cout;
    let mut j0 = 0;
    while j0 + 32 <= cout {
        #[cfg(target_arch = "x86_64")]
        if FMA {
            // SAFETY: `FMA = true` is instantiated only inside `conv_task_avx2`, which runs
            // after `has_avx2_fma()` returned true.
            unsafe { block32_avx2(&mut acc[j0..j0 + 32], list, a, j0) };
            j0 += 32;
            continue;
        }
        block::<32, FMA>(&mut acc[j0..j0 + 32], list, a, j0);
        j0 += 32;
    }
    while j0 + 8 <= cout {
        block::<8, FMA>(&mut acc[j0..j0 + 8], list, a, j0);
        j0 += 8;
    }
    while j0 < cout {
        block::<1, FMA>(&mut acc[j0..j0 + 1], list, a, j0);
        j0 += 1;
    }
}

/// One block of `B` output channels. Products are summed into two partial sums, one over
/// even and one over odd input channels (each in list-then-channel order), which are added
/// once at the end; two independent chains keep the FMA units busy. With `cin = 1` the two
/// partial sums are over the even- and odd-position pairs of the list instead.
#[inline(always)]
fn block<const B: usize, const FMA: bool>(
    dst: &mut [f32],
    list: &[(u32, u32)],
    a: &ConvArgs<'_>,
    j0: usize,
) {
    let (cin, cout) = (a.cin, a.cout);
    let mut even = [0.0f32; B];
    let mut odd = [0.0f32; B];
    if cin == 1 {
        // One product per pair: the partial sums are over even- and odd-position pairs.
        let mut pairs = list.chunks_exact(2);
        for two in &mut pairs {
            let w0 = &a.weights[two[0].0 as usize * cout + j0..][..B];
            let w1 = &a.weights[two[1].0 as usize * cout + j0..][..B];
            let (x0, x1) = (a.in_feats[two[0].1 as usize], a.in_feats[two[1].1 as usize]);
            for j in 0..B {
                even[j] = madd::<FMA>(x0, w0[j], even[j]);
                odd[j] = madd::<FMA>(x1, w1[j], odd[j]);
            }
        }
        if let [(k0, i0)] = pairs.remainder() {
            let w0 = &a.weights[*k0 as usize * cout + j0..][..B];
            let x0 = a.in_feats[*i0 as usize];
            for j in 0..B {
                even[j] = madd::<FMA>(x0, w0[j], even[j]);
            }
        }
        for j in 0..B {
            dst[j] = even[j] + odd[j];
        }
        return;
    }
    for &(kappa, idx) in list {
        let x = &a.in_feats[idx as usize * cin..][..cin];
        let wk = &a.weights[kappa as usize * cin * cout..][..cin * cout];
        let mut pairs = x.chunks_exact(2);
        let mut ci = 0;
        for xs in &mut pairs {
            let w0 = &wk[ci * cout + j0..][..B];
            let w1 = &wk[(ci + 1) * cout + j0..][..B];
            for j in 0..B {
                even[j] = madd::<FMA>(xs[0], w0[j], even[j]);
                odd[j] = madd::<FMA>(xs[1], w1[j], odd[j]);
            }
            ci += 2;
        }
        if let [xv] = pairs.remainder() {
            let w0 = &wk[ci * cout + j0..][..B];
            for j in 0..B {
                even[j] = madd::<FMA>(*xv, w0[j], even[j]);
            }
        }
    }
    for j in 0..B {
        dst[j] = even[j] + odd[j];
    }
}

/// [`block`]`::<32, true>` written with AVX2 intrinsics so the 8 accumulators stay in
/// registers (the array form gets spilled). Same operations in the same order (including
/// the `cin = 1` case).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block32_avx2(dst: &mut [f32], mut list: &[(u32, u32)], a: &ConvArgs<'_>, j0: usize) {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };
    #[inline(always)]
    fn load(w: &[f32; 32], i: usize) -> __m256 {
        debug_assert!(i < 4);
        // SAFETY: `w` has 32 elements and `8 * i + 8 <= 32` for i < 4; unaligned load.
        unsafe { _mm256_loadu_ps(w.as_ptr().add(8 * (i & 3))) }
    }
    let (cin, cout) = (a.cin, a.cout);
    let mut e = [_mm256_setzero_ps(); 4];
    let mut o = [_mm256_setzero_ps(); 4];
    if cin == 1 {
        // One product per pair: alternate pairs between the two partial sums instead.
        let w = &a.weights[..a.geom.volume() * cout];
        let mut pairs = list.chunks_exact(2);
        for two in &mut pairs {
            let (k0, i0) = (two[0].0 as usize, two[0].1 as usize);
            let (k1, i1) = (two[1].0 as usize, two[1].1 as usize);
            let (Ok(w0), Ok(w1)) = (
                <&[f32; 32]>::try_from(&w[k0 * cout + j0..][..32]),
                <&[f32; 32]>::try_from(&w[k1 * cout + j0..][..32]),
            ) else {
                unreachable!("slices of length 32")
            };
            let (x0, x1) = (
                _mm256_set1_ps(a.in_feats[i0]),
                _mm256_set1_ps(a.in_feats[i1]),
            );
            for i in 0..4 {
                e[i] = _mm256_fmadd_ps(x0, load(w0, i), e[i]);
                o[i] = _mm256_fmadd_ps(x1, load(w1, i), o[i]);
            }
        }
        if let [(k0, i0)] = pairs.remainder() {
            let Ok(w0) = <&[f32; 32]>::try_from(&w[*k0 as usize * cout + j0..][..32]) else {
                unreachable!("slice of length 32")
            };
            let x0 = _mm256_set1_ps(a.in_feats[*i0 as usize]);
            for (i, acc) in e.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(x0, load(w0, i), *acc);
            }
        }
        list = &[];
    }
    for &(kappa, idx) in list {
        let x = &a.in_feats[idx as usize * cin..][..cin];
        let wk = &a.weights[kappa as usize * cin * cout..][..cin * cout];
        let mut ci = 0;
        while ci + 2 <= cin {
            let (Ok(w0), Ok(w1)) = (
                <&[f32; 32]>::try_from(&wk[ci * cout + j0..][..32]),
                <&[f32; 32]>::try_from(&wk[(ci + 1) * cout + j0..][..32]),
            ) else {
                unreachable!("slices of length 32")
            };
            let (x0, x1) = (_mm256_set1_ps(x[ci]), _mm256_set1_ps(x[ci + 1]));
            e[0] = _mm256_fmadd_ps(x0, load(w0, 0), e[0]);
            e[1] = _mm256_fmadd_ps(x0, load(w0, 1), e[1]);
            e[2] = _mm256_fmadd_ps(x0, load(w0, 2), e[2]);
            e[3] = _mm256_fmadd_ps(x0, load(w0, 3), e[3]);
            o[0] = _mm256_fmadd_ps(x1, load(w1, 0), o[0]);
            o[1] = _mm256_fmadd_ps(x1, load(w1, 1), o[1]);
            o[2] = _mm256_fmadd_ps(x1, load(w1, 2), o[2]);
            o[3] = _mm256_fmadd_ps(x1, load(w1, 3), o[3]);
            ci += 2;
        }
        if ci < cin {
            let Ok(w0) = <&[f32; 32]>::try_from(&wk[ci * cout + j0..][..32]) else {
                unreachable!("slice of length 32")
            };
            let x0 = _mm256_set1_ps(x[ci]);
            for (i, acc) in e.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(x0, load(w0, i), *acc);
            }
        }
    }
    let dst = &mut dst[..32];
    for i in 0..4 {
        let v = _mm256_add_ps(e[i], o[i]);
        // SAFETY: `dst` has 32 elements and `8 * i + 8 <= 32`; unaligned store.
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr().add(8 * i), v) };
    }
}

/// `P[κ][id] = table[id] · W[κ]` for every kernel offset `κ < volume` and table row
/// `id < u`, as `[volume, u, cout]`: each value one sum over the input channels in
/// ascending order, starting from 0 (the tiled path's micro-kernel, all rows fresh).
pub(crate) fn products(
    table: &[f32],
    u: usize,
    cin: usize,
    weights: &[f32],
    volume: usize,
    cout: usize,
) -> Vec<f32> {
    use rayon::prelude::*;
    /// Table rows per parallel chunk.
    const ROWS: usize = 256;
    let mut p = vec![0.0f32; volume * u * cout];
    if u == 0 || cout == 0 || cin == 0 {
        return p;
    }
    p.par_chunks_mut(u * cout)
        .enumerate()
        .for_each(|(kappa, block)| {
            let w = &weights[kappa * cin * cout..][..cin * cout];
            block
                .par_chunks_mut(ROWS * cout)
                .enumerate()
                .for_each(|(c, dst)| {
                    let first = (c * ROWS) as u32;
                    #[cfg(target_arch = "x86_64")]
                    if has_avx2_fma() {
                        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                        unsafe { rows_gemm_avx2(table, first, cin, w, cout, dst) };
                        return;
                    }
                    rows_gemm::<false>(table, first, cin, w, cout, dst);
                });
        });
    p
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn rows_gemm_avx2(x: &[f32], first: u32, cin: usize, w: &[f32], cout: usize, dst: &mut [f32]) {
    rows_gemm::<true>(x, first, cin, w, cout, dst);
}

/// `dst[o] = x[first + o] · w` for every row `o` of `dst` (`[m, cout]`).
#[inline(always)]
fn rows_gemm<const FMA: bool>(
    x: &[f32],
    first: u32,
    cin: usize,
    w: &[f32],
    cout: usize,
    dst: &mut [f32],
) {
    let m = (dst.len() / cout) as u32;
    let pairs: Vec<(u32, u32)> = (0..m).map(|o| (o, first + o)).collect();
    for group in pairs.chunks(MR) {
        match group.len() {
            6 => group_gemm::<6, FMA>(dst, group, x, w, cin, cout, |_| true),
            5 => group_gemm::<5, FMA>(dst, group, x, w, cin, cout, |_| true),
            4 => group_gemm::<4, FMA>(dst, group, x, w, cin, cout, |_| true),
            3 => group_gemm::<3, FMA>(dst, group, x, w, cin, cout, |_| true),
            2 => group_gemm::<2, FMA>(dst, group, x, w, cin, cout, |_| true),
            _ => group_gemm::<1, FMA>(dst, group, x, w, cin, cout, |_| true),
        }
    }
}

/// Computes max pooling of output rows `rows` into `dst`: per channel, the max over the
/// present neighbours; 0 for an output point with no neighbour (possible only when the
/// kernel is smaller than the stride).
pub(crate) fn max_pool_task(
    input: &Coords,
    in_feats: &[f32],
    channels: usize,
    out: &Coords,
    geom: &Geometry,
    rows: Range<usize>,
    dst: &mut [f32],
) {
    let mut nb = Neighbours::new(input, geom);
    let base = out.row_start[rows.start];
    for ri in rows {
        nb.start_row(out.rows[ri]);
        for p in out.row_range(ri) {
            let list = nb.point(out.cols[p]);
            let acc = &mut dst[(p - base) * channels..][..channels];
            let Some((&(_, first), rest)) = list.split_first() else {
                acc.fill(0.0);
                continue;
            };
            acc.copy_from_slice(&in_feats[first as usize * channels..][..channels]);
            for &(_, idx) in rest {
                let x = &in_feats[idx as usize * channels..][..channels];
                for (a, &v) in acc.iter_mut().zip(x) {
                    // NaN-propagating max, independent of operand order for non-NaN values.
                    if v > *a || v.is_nan() {
                        *a = v;
                    }
                }
            }
        }
    }
}

/// Splits `buf` (`[n, width]` for the points of `out`) into one mutable block per task.
pub(crate) fn split_by_tasks<'b>(
    mut buf: &'b mut [f32],
    out: &Coords,
    tasks: &[Range<usize>],
    width: usize,
) -> Vec<&'b mut [f32]> {
    let mut blocks = Vec::with_capacity(tasks.len());
    for t in tasks {
        let n = (out.row_start[t.end] - out.row_start[t.start]) * width;
        let (head, tail) = std::mem::take(&mut buf).split_at_mut(n);
        blocks.push(head);
        buf = tail;
    }
    blocks
}
