//! Inner loops of the conv and max-pool layers, per task of whole output rows.
//!
//! The conv loop is the hot path of the whole library. For each output point it takes the
//! neighbour list (κ ascending, from [`Neighbours`]) and accumulates
//! `acc[0..Cout] += x[ci] · W[κ][ci][0..Cout]` with the accumulator held in registers, in
//! blocks of 32, 8 and 1 output channels. On x86-64 CPUs with AVX2 and FMA the same code is
//! compiled a second time with those features enabled (using fused multiply-add) and chosen
//! at run time; the choice depends only on the CPU, never on the thread count.

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
    let out = args.out;
    let cout = args.cout;
    let mut nb = Neighbours::new(args.input, args.geom);
    let base = out.row_start[rows.start];
    for ri in rows {
        nb.start_row(out.rows[ri]);
        for p in out.row_range(ri) {
            let list = nb.point(out.cols[p]);
            let acc = &mut dst[(p - base) * cout..][..cout];
            accumulate::<FMA>(acc, list, args);
            if let Some(b) = args.bias {
                for (a, b) in acc.iter_mut().zip(b) {
                    *a += *b;
                }
            }
            if args.relu {
                for a in acc.iter_mut() {
                    if *a < 0.0 {
                        *a = 0.0;
                    }
                }
            }
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

/// `acc = Σ_{(κ, i) in list} in[i] · W[κ]`, κ ascending, `ci` ascending within κ.
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
/// even and one over odd input channels (each in κ-then-channel order), which are added
/// once at the end; two independent chains keep the FMA units busy.
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
/// registers (the array form gets spilled). Same operations in the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block32_avx2(dst: &mut [f32], list: &[(u32, u32)], a: &ConvArgs<'_>, j0: usize) {
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
