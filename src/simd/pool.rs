//! Lane-wise row kernels of the featurizer: ReLU, bias, max pooling, row sums and the `f64`
//! sums of global average pooling.
//!
//! Every operation here treats each channel as its own lane (no reduction across lanes), so
//! the vector versions perform exactly the scalar operations and give the same bits. Each
//! body is written once (`#[inline(always)]`) and compiled three times: plain, and inside a
//! `#[target_feature]` function for AVX2 and for AVX-512, where LLVM vectorizes it. `relu`
//! and `max_into` have their own AVX2 version, the same lane operations written with
//! intrinsics, because LLVM compiles their selects into AVX2 masked stores there (slow on
//! AMD Zen 3); `lanewise_kernels_agree_bit_for_bit` checks every level against the scalar one.
//!
//! Semantics (per lane):
//!
//! - `relu`: `x = if 0 > x { 0 } else { x }` — NaN and −0 are kept (`maxps(0, x)`).
//! - `max_into`: `d = if s > d || s is NaN { s } else { d }` — NaN-propagating; for
//!   non-NaN values the result does not depend on the order of the operands.
//! - `add`: `d = d + s`; `bias`: each row `r = r + b`; `bias_relu`: `bias` then `relu`.
//! - `sum_f64`: `acc = acc + f64(s)` (or `acc = f64(s)` for the first row).
//! - `sum_rows_f64`: `acc = f64(r₀) + f64(r₁) + …` over table rows in order.
//! - `add_f64`: `acc = acc + s`.

/// Generates the three compiled versions of a lane-wise kernel body. An optional `avx2`
/// block replaces the body in the AVX2 version (with `std::arch::x86_64` in scope), for
/// kernels LLVM would vectorize badly there.
macro_rules! lanewise {
    ($(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $body:block) => {
        lanewise!(@emit $(#[$doc])* $name ( $($arg : $ty),* ) $body { body($($arg),*) });
    };
    ($(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $body:block avx2 $avx2:block) => {
        lanewise!(@emit $(#[$doc])* $name ( $($arg : $ty),* ) $body $avx2);
    };
    (@emit $(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $body:block $avx2:block) => {
        $(#[$doc])*
        pub(crate) mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[inline(always)]
            fn body($($arg: $ty),*) $body

            /// Portable version.
            pub(crate) fn scalar($($arg: $ty),*) {
                body($($arg),*)
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            #[allow(unused_imports)]
            fn avx2_impl($($arg: $ty),*) {
                use std::arch::x86_64::*;
                $avx2
            }

            /// AVX2 version; handed out only for CPUs with AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            pub(crate) fn avx2($($arg: $ty),*) {
                // SAFETY: only reachable through `Kernels::for_level`, which checks that the
                // CPU supports the level.
                unsafe { avx2_impl($($arg),*) }
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
            fn avx512_impl($($arg: $ty),*) {
                body($($arg),*)
            }

            /// AVX-512 version; handed out only for CPUs with AVX-512 F/BW/DQ/VL and FMA.
            #[cfg(target_arch = "x86_64")]
            pub(crate) fn avx512($($arg: $ty),*) {
                // SAFETY: as for `avx2`.
                unsafe { avx512_impl($($arg),*) }
            }
        }
    };
}

lanewise!(
    /// `x = if 0 > x { 0 } else { x }` over a buffer.
    relu(rows: &mut [f32]) {
        for x in rows.iter_mut() {
            *x = if 0.0 > *x { 0.0 } else { *x };
        }
    }
    // LLVM turns the loop above into AVX2 masked stores of the zeros (`vmaskmovps`), which
    // AMD Zen 3 runs at a fraction of a plain store's rate (ReLU was 3.7 % of a WACO run
    // there); `maxps(0, x)` is the same operation lane for lane, stored unconditionally.
    avx2 {
        let mut blocks = rows.chunks_exact_mut(8);
        for b in &mut blocks {
            // SAFETY: `b` has 8 lanes; AVX2 is enabled on this function.
            unsafe {
                let x = _mm256_loadu_ps(b.as_ptr());
                _mm256_storeu_ps(b.as_mut_ptr(), _mm256_max_ps(_mm256_setzero_ps(), x));
            }
        }
        for x in blocks.into_remainder() {
            // SAFETY: `x` is one valid `f32`; the same `maxps` on one lane (a scalar loop
            // here would be vectorized into masked stores again).
            unsafe {
                let v = _mm_max_ss(_mm_setzero_ps(), _mm_load_ss(x));
                _mm_store_ss(x, v);
            }
        }
    }
);

lanewise!(
    /// `d = d + s`.
    add(d: &mut [f32], s: &[f32]) {
        assert_eq!(d.len(), s.len());
        for (d, &s) in d.iter_mut().zip(s) {
            *d += s;
        }
    }
);

lanewise!(
    /// Every `b.len()`-wide row of `rows` plus `b`.
    bias(rows: &mut [f32], b: &[f32]) {
        if b.is_empty() {
            return;
        }
        for row in rows.chunks_exact_mut(b.len()) {
            for (d, &s) in row.iter_mut().zip(b) {
                *d += s;
            }
        }
    }
);

lanewise!(
    /// Every `b.len()`-wide row of `rows` plus `b`, then `x = if 0 > x { 0 } else { x }`:
    /// `bias` then `relu` in one pass, lane for lane the same operations.
    bias_relu(rows: &mut [f32], b: &[f32]) {
        if b.is_empty() {
            return;
        }
        for row in rows.chunks_exact_mut(b.len()) {
            for (d, &s) in row.iter_mut().zip(b) {
                let x = *d + s;
                *d = if 0.0 > x { 0.0 } else { x };
            }
        }
    }
    // As for `relu`: `maxps(0, x)` stored unconditionally, not a masked store.
    avx2 {
        let c = b.len();
        if c == 0 {
            return;
        }
        let full = c / 8 * 8;
        for row in rows.chunks_exact_mut(c) {
            for (db, sb) in row[..full].chunks_exact_mut(8).zip(b.chunks_exact(8)) {
                // SAFETY: both blocks have 8 lanes; AVX2 is enabled on this function.
                unsafe {
                    let x = _mm256_add_ps(_mm256_loadu_ps(db.as_ptr()), _mm256_loadu_ps(sb.as_ptr()));
                    _mm256_storeu_ps(db.as_mut_ptr(), _mm256_max_ps(_mm256_setzero_ps(), x));
                }
            }
            for (dx, sx) in row[full..].iter_mut().zip(&b[full..]) {
                // SAFETY: one valid `f32` each; the same add and `maxps` on one lane.
                unsafe {
                    let x = _mm_add_ss(_mm_load_ss(dx), _mm_load_ss(sx));
                    _mm_store_ss(dx, _mm_max_ss(_mm_setzero_ps(), x));
                }
            }
        }
    }
);

lanewise!(
    /// `d = if s > d || s is NaN { s } else { d }`.
    max_into(d: &mut [f32], s: &[f32]) {
        assert_eq!(d.len(), s.len());
        for (d, &s) in d.iter_mut().zip(s) {
            *d = if s > *d || s.is_nan() { s } else { *d };
        }
    }
    // As for `relu`, stored unconditionally: `maxps(s, d)` is `s > d ? s : d` and gives `d`
    // when either is NaN, so a NaN `s` is blended back in. (A blend of `d` itself is turned
    // back into a masked store by LLVM.)
    avx2 {
        assert_eq!(d.len(), s.len());
        let full = d.len() / 8 * 8;
        for (db, sb) in d[..full].chunks_exact_mut(8).zip(s.chunks_exact(8)) {
            // SAFETY: both blocks have 8 lanes; AVX2 is enabled on this function.
            unsafe {
                let (dv, sv) = (_mm256_loadu_ps(db.as_ptr()), _mm256_loadu_ps(sb.as_ptr()));
                let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(sv, sv);
                let max = _mm256_max_ps(sv, dv);
                _mm256_storeu_ps(db.as_mut_ptr(), _mm256_blendv_ps(max, sv, nan));
            }
        }
        for (dx, sx) in d[full..].iter_mut().zip(&s[full..]) {
            // SAFETY: one valid `f32` each; the same blend on one lane.
            unsafe {
                let (dv, sv) = (_mm_load_ss(dx), _mm_load_ss(sx));
                let nan = _mm_cmp_ss::<_CMP_UNORD_Q>(sv, sv);
                _mm_store_ss(dx, _mm_blendv_ps(_mm_max_ss(sv, dv), sv, nan));
            }
        }
    }
);

lanewise!(
    /// `acc = acc + f64(s)`, or `acc = f64(s)` when `first`.
    sum_f64(acc: &mut [f64], s: &[f32], first: bool) {
        assert_eq!(acc.len(), s.len());
        if first {
            for (a, &s) in acc.iter_mut().zip(s) {
                *a = f64::from(s);
            }
        } else {
            for (a, &s) in acc.iter_mut().zip(s) {
                *a += f64::from(s);
            }
        }
    }
);

lanewise!(
    /// `acc = Σ f64(row id)` over the `acc.len()`-wide rows `ids` of `table`, in order: the
    /// first converted, the next ones added (one row's points for global average pooling).
    sum_rows_f64(acc: &mut [f64], table: &[f32], ids: &[u32]) {
        sum_rows_in_blocks::<SUM_BLOCK>(acc, table, ids)
    }
    avx2 {
        // Sixteen `ymm` registers: the wide block's accumulators would spill.
        sum_rows_in_blocks::<32>(acc, table, ids)
    }
);

/// Widest block of `sum_rows_f64` (16 AVX-512 accumulators). Each pass over a leaf's rows
/// reads one block of each row, and the rows are gathered from anywhere in the table: wider
/// blocks make fewer passes, each reading longer runs of a row per wait on memory.
const SUM_BLOCK: usize = 128;

/// `sum_rows_f64` in blocks of at most `B` lanes (then 32, then the rest), each summed in a
/// local array (registers) over all the rows rather than through `acc` in memory once per
/// row; each lane's sum is the same.
#[inline(always)]
fn sum_rows_in_blocks<const B: usize>(acc: &mut [f64], table: &[f32], ids: &[u32]) {
    let c = acc.len();
    let mut j0 = 0;
    while c - j0 >= B {
        sum_block::<B>(&mut acc[j0..j0 + B], table, c, j0, ids);
        j0 += B;
    }
    while c - j0 >= 32 {
        sum_block::<32>(&mut acc[j0..j0 + 32], table, c, j0, ids);
        j0 += 32;
    }
    let Some((&first, rest)) = ids.split_first().filter(|_| j0 < c) else {
        return;
    };
    let lane = |id: u32| &table[id as usize * c + j0..][..c - j0];
    let acc = &mut acc[j0..];
    for (a, &v) in acc.iter_mut().zip(lane(first)) {
        *a = f64::from(v);
    }
    for &id in rest {
        for (a, &v) in acc.iter_mut().zip(lane(id)) {
            *a += f64::from(v);
        }
    }
}

/// Lanes `j0..j0 + N` of `sum_rows_f64` (rows of `c` lanes) into `acc`.
#[inline(always)]
fn sum_block<const N: usize>(acc: &mut [f64], table: &[f32], c: usize, j0: usize, ids: &[u32]) {
    let Some((&first, rest)) = ids.split_first() else {
        return;
    };
    let block = |id: u32| -> &[f32; N] {
        table[id as usize * c + j0..][..N]
            .try_into()
            .expect("N lanes")
    };
    let mut a: [f64; N] = block(first).map(f64::from);
    for &id in rest {
        let r = block(id);
        for k in 0..N {
            a[k] += f64::from(r[k]);
        }
    }
    acc.copy_from_slice(&a);
}

lanewise!(
    /// `acc = acc + s`.
    add_f64(acc: &mut [f64], s: &[f64]) {
        assert_eq!(acc.len(), s.len());
        for (a, &s) in acc.iter_mut().zip(s) {
            *a += s;
        }
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::SimdLevel;

    #[test]
    fn lanewise_kernels_agree_bit_for_bit() {
        let vals: Vec<f32> = (0..67)
            .map(|i| match i % 9 {
                0 => f32::NAN,
                1 => -0.0,
                2 => 0.0,
                3 => -1e-30,
                4 => f32::INFINITY,
                _ => ((i * 37 % 23) as f32 - 11.0) / 3.0,
            })
            .collect();
        let other: Vec<f32> = vals.iter().rev().copied().collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut want = None;
        for level in SimdLevel::supported() {
            let k = crate::simd::kernels::Kernels::for_level(level);
            let mut r = vals.clone();
            (k.relu)(&mut r);
            let mut m = vals.clone();
            (k.max_into)(&mut m, &other);
            let mut a = vals.clone();
            (k.add)(&mut a, &other);
            // `bias_relu` is `bias` then `relu`, for rows of 67 lanes (a tail on every level).
            let mut br = vals.repeat(3);
            (k.bias_relu)(&mut br, &other);
            let mut two = vals.repeat(3);
            (k.bias)(&mut two, &other);
            (k.relu)(&mut two);
            assert_eq!(bits(&br), bits(&two), "bias_relu, level {level}");
            let mut s = vec![0.0f64; 67];
            (k.sum_f64)(&mut s, &vals, true);
            (k.sum_f64)(&mut s, &other, false);
            let got = (
                bits(&r),
                bits(&m),
                bits(&a),
                s.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            );
            match &want {
                None => want = Some(got),
                Some(w) => assert_eq!(&got, w, "level {level}"),
            }
        }
        // `sum_rows_f64` on every level: each lane the in-order f64 sum of its rows, for
        // widths below, at and around the 32-lane blocks; no rows leave `acc` as it was.
        for c in [1usize, 31, 32, 33, 67, 96, 128, 161, 256, 300] {
            let table: Vec<f32> = (0..7 * c)
                .map(|i| vals[i % vals.len()] * (1.0 + i as f32 * 1e-3))
                .collect();
            let ids = [3u32, 0, 6, 3, 1];
            let want: Vec<u64> = (0..c)
                .map(|j| {
                    let mut a = f64::from(table[ids[0] as usize * c + j]);
                    for &id in &ids[1..] {
                        a += f64::from(table[id as usize * c + j]);
                    }
                    a.to_bits()
                })
                .collect();
            for level in SimdLevel::supported() {
                let k = crate::simd::kernels::Kernels::for_level(level);
                let mut acc = vec![7.0f64; c];
                (k.sum_rows_f64)(&mut acc, &table, &[]);
                assert!(acc.iter().all(|&a| a == 7.0), "width {c}, level {level}");
                (k.sum_rows_f64)(&mut acc, &table, &ids);
                let got: Vec<u64> = acc.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "width {c}, level {level}");
            }
        }
        // Semantics on the scalar level.
        let mut r = vec![f32::NAN, -0.0, -2.0, 3.0];
        relu::scalar(&mut r);
        assert!(r[0].is_nan() && r[1].to_bits() == (-0.0f32).to_bits());
        assert_eq!(&r[2..], &[0.0, 3.0]);
        let mut d = vec![1.0, f32::NAN, 2.0];
        max_into::scalar(&mut d, &[f32::NAN, 5.0, 1.0]);
        assert!(d[0].is_nan() && d[1].is_nan() && d[2] == 2.0);
    }
}
