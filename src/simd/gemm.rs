//! Dense-layer kernels of the native head engine: `out[r] += x[r] · W` over row batches.
//!
//! # Layout
//!
//! Weights are packed k-major: `w[k * out_stride + o]` is the weight from input `k` to output
//! `o`, with `out_stride` a multiple of [`LANES`] and the padding columns zero. Activations
//! are row-major with a row stride that is also a multiple of [`LANES`]; only the first `k`
//! columns of an input row are read.
//!
//! # Accumulation order (the determinism contract)
//!
//! Every output value is computed as
//!
//! ```text
//! acc = out[r][o]                       // the initial value the caller wrote
//! for k in 0..K (ascending): acc = fma(x[r][k], w[k][o], acc)
//! out[r][o] = relu ? max(acc, 0) : acc
//! ```
//!
//! with a fused multiply-add at every step. Vector lanes run over *outputs* `o`, never over
//! `k`, so the order is the same whatever the vector width (scalar with [`f32::mul_add`],
//! AVX2, AVX-512), the row tiling and the batch size: a row's result depends only on that
//! row's inputs. The tests force every level the CPU has and compare bits.

use super::SimdLevel;

/// Vector lanes the layouts are padded to (one AVX-512 register of `f32`).
pub const LANES: usize = 16;

/// Rounds `n` up to a multiple of [`LANES`].
pub fn padded(n: usize) -> usize {
    n.div_ceil(LANES) * LANES
}

/// Shape of one accumulate call.
#[derive(Debug, Clone, Copy)]
pub struct GemmShape {
    /// Rows in the batch.
    pub rows: usize,
    /// Inputs per row (columns of `x` read; rows of `w`).
    pub k: usize,
    /// Row stride of `x`.
    pub x_stride: usize,
    /// Row stride of `out` and of the packed weights (a multiple of [`LANES`]).
    pub out_stride: usize,
}

/// `out[r][0..out_stride] += x[r][0..k] · w` for every row, then ReLU if asked, in the order
/// of the module docs.
///
/// # Panics
///
/// If a slice is shorter than the shape implies or `out_stride` is not a multiple of
/// [`LANES`] (internal invariants of the engine, checked once per call).
pub fn accumulate(
    level: SimdLevel,
    shape: GemmShape,
    x: &[f32],
    w: &[f32],
    out: &mut [f32],
    relu: bool,
) {
    let GemmShape {
        rows,
        k,
        x_stride,
        out_stride,
    } = shape;
    assert!(
        out_stride.is_multiple_of(LANES),
        "out_stride must be padded"
    );
    assert!(w.len() >= k * out_stride, "weights too short");
    assert!(out.len() >= rows * out_stride, "output too short");
    if rows > 0 {
        assert!(
            x_stride >= k && x.len() >= (rows - 1) * x_stride + k,
            "input too short"
        );
    }
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 if SimdLevel::Avx512.is_supported() => {
            // SAFETY: the CPU supports AVX-512 F and FMA (checked); bounds asserted above.
            unsafe { x86::accumulate_avx512(shape, x, w, out, relu) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 if SimdLevel::Avx2.is_supported() => {
            // SAFETY: the CPU supports AVX2 and FMA (checked); bounds asserted above.
            unsafe { x86::accumulate_avx2(shape, x, w, out, relu) }
        }
        _ => accumulate_scalar(shape, x, w, out, relu),
    }
}

fn accumulate_scalar(shape: GemmShape, x: &[f32], w: &[f32], out: &mut [f32], relu: bool) {
    let GemmShape {
        rows,
        k,
        x_stride,
        out_stride,
    } = shape;
    for r in 0..rows {
        let xr = &x[r * x_stride..r * x_stride + k];
        let or = &mut out[r * out_stride..(r + 1) * out_stride];
        for (kk, &xv) in xr.iter().enumerate() {
            let wr = &w[kk * out_stride..(kk + 1) * out_stride];
            for (o, &wv) in or.iter_mut().zip(wr) {
                *o = xv.mul_add(wv, *o);
            }
        }
        if relu {
            relu_in_place(or);
        }
    }
}

/// `v = max(v, 0)` elementwise (a NaN stays NaN on every level).
pub fn relu_in_place(v: &mut [f32]) {
    for x in v {
        // `max` would turn NaN into 0; keep NaN so a bad value is never hidden.
        if *x < 0.0 {
            *x = 0.0;
        }
    }
}

/// `v = max(v, 0)` elementwise, compiled for `level` (NaN stays NaN).
pub fn relu(level: SimdLevel, v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if level >= SimdLevel::Avx512 && SimdLevel::Avx512.is_supported() {
            // SAFETY: the CPU supports AVX-512 F (checked).
            unsafe { x86::relu_avx512(v) };
            return;
        }
    }
    let _ = level;
    relu_in_place(v);
}

/// `dst = a (+ b)`, then ReLU if asked, elementwise (the same bits on every level: one add
/// per element).
pub fn sum_rows(level: SimdLevel, dst: &mut [f32], a: &[f32], b: Option<&[f32]>, relu: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if level >= SimdLevel::Avx512 && SimdLevel::Avx512.is_supported() {
            // SAFETY: the CPU supports AVX-512 F (checked).
            unsafe { x86::sum_rows_avx512(dst, a, b, relu) };
            return;
        }
        if level >= SimdLevel::Avx2 && SimdLevel::Avx2.is_supported() {
            // SAFETY: the CPU supports AVX2 (checked).
            unsafe { x86::sum_rows_avx2(dst, a, b, relu) };
            return;
        }
    }
    let _ = level;
    sum_rows_scalar(dst, a, b, relu);
}

/// [`sum_rows`] over `rows` rows of `stride` values: `out[r] = a (+ b[r])`, then ReLU if
/// asked (`b` rows `b_stride` apart). One dispatch for the whole block; the same bits as
/// [`sum_rows`] row by row on every level.
///
/// # Panics
///
/// If a slice is shorter than the shape implies.
pub fn sum_rows_block(
    level: SimdLevel,
    out: &mut [f32],
    stride: usize,
    a: &[f32],
    b: Option<(&[f32], usize)>,
    relu: bool,
) {
    let rows = out.len() / stride.max(1);
    assert!(a.len() >= stride, "broadcast row too short");
    if let Some((b, bs)) = b {
        assert!(
            rows == 0 || (bs >= stride && b.len() >= (rows - 1) * bs + stride),
            "rows too short"
        );
    }
    #[cfg(target_arch = "x86_64")]
    {
        if level >= SimdLevel::Avx512
            && SimdLevel::Avx512.is_supported()
            && stride.is_multiple_of(LANES)
        {
            // SAFETY: the CPU supports AVX-512 F (checked); lengths asserted above.
            unsafe { x86::sum_rows_block_avx512(out, stride, a, b, relu) };
            return;
        }
    }
    for (r, row) in out.chunks_exact_mut(stride).enumerate() {
        let b_row = b.map(|(b, bs)| &b[r * bs..r * bs + stride]);
        sum_rows(level, row, &a[..stride], b_row, relu);
    }
}

#[inline(always)]
fn sum_rows_scalar(dst: &mut [f32], a: &[f32], b: Option<&[f32]>, relu: bool) {
    match b {
        Some(b) => {
            for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
                *d = *x + *y;
            }
        }
        None => dst.copy_from_slice(&a[..dst.len()]),
    }
    if relu {
        relu_in_place(dst);
    }
}

/// `dst += src` elementwise (the same bits on every level).
pub fn add_in_place(level: SimdLevel, dst: &mut [f32], src: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if level >= SimdLevel::Avx512 && SimdLevel::Avx512.is_supported() {
            // SAFETY: the CPU supports AVX-512 F (checked).
            unsafe { x86::add_avx512(dst, src) };
            return;
        }
        if level >= SimdLevel::Avx2 && SimdLevel::Avx2.is_supported() {
            // SAFETY: the CPU supports AVX2 (checked).
            unsafe { x86::add_avx2(dst, src) };
            return;
        }
    }
    let _ = level;
    add_scalar(dst, src);
}

#[inline(always)]
fn add_scalar(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

/// One step of a row sum ([`apply_row_ops`]).
#[derive(Debug, Clone, Copy)]
pub enum RowOp<'a> {
    /// `out[i] += row[i]`.
    Add(&'a [f32]),
    /// `out[i] = fma(scale, row[i], out[i])`.
    Fma(f32, &'a [f32]),
}

impl RowOp<'_> {
    fn row(&self) -> &[f32] {
        match self {
            RowOp::Add(r) | RowOp::Fma(_, r) => r,
        }
    }
}

/// Applies `ops` to `out` in order, elementwise: each element sees exactly the scalar
/// sequence of adds and fused multiply-adds, so every level gives the same bits. The vector
/// levels keep a block of `out` in registers across all the ops (one load and one store per
/// element instead of one per op).
///
/// # Panics
///
/// If a row is shorter than `out`.
pub fn apply_row_ops(level: SimdLevel, out: &mut [f32], ops: &[RowOp<'_>]) {
    assert!(
        ops.iter().all(|op| op.row().len() >= out.len()),
        "row shorter than the output"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if level >= SimdLevel::Avx512 && SimdLevel::Avx512.is_supported() {
            // SAFETY: the CPU supports AVX-512 F and FMA (checked); lengths asserted above.
            unsafe { x86::row_ops_avx512(out, ops) };
            return;
        }
        if level >= SimdLevel::Avx2 && SimdLevel::Avx2.is_supported() {
            // SAFETY: the CPU supports AVX2 and FMA (checked); lengths asserted above.
            unsafe { x86::row_ops_avx2(out, ops) };
            return;
        }
    }
    let _ = level;
    row_ops_scalar(out, ops, 0);
}

/// [`apply_row_ops`] on `out[from..]`, one element at a time.
#[inline(always)]
fn row_ops_scalar(out: &mut [f32], ops: &[RowOp<'_>], from: usize) {
    for op in ops {
        match *op {
            RowOp::Add(row) => {
                for (o, t) in out[from..].iter_mut().zip(&row[from..]) {
                    *o += *t;
                }
            }
            RowOp::Fma(scale, row) => {
                for (o, t) in out[from..].iter_mut().zip(&row[from..]) {
                    *o = scale.mul_add(*t, *o);
                }
            }
        }
    }
}

/// `dst[i] = fma(scale, col[i], dst[i])` elementwise; the same bits on every level.
pub fn fma_in_place(level: SimdLevel, dst: &mut [f32], scale: f32, col: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if level >= SimdLevel::Avx2 && SimdLevel::Avx2.is_supported() {
        // SAFETY: the CPU supports AVX2 and FMA (checked).
        unsafe { x86::fma_avx2(dst, scale, col) };
        return;
    }
    let _ = level;
    fma_scalar(dst, scale, col);
}

#[inline(always)]
fn fma_scalar(dst: &mut [f32], scale: f32, col: &[f32]) {
    for (d, c) in dst.iter_mut().zip(col) {
        *d = scale.mul_add(*c, *d);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{GemmShape, LANES};

    /// Rows per register tile: AVX-512 holds 6 × 4 accumulators (24 of 32 registers), AVX2
    /// 4 × 2 (8 of 16).
    const TILE_ROWS: usize = 4;
    const TILE_ROWS_512: usize = 6;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn relu_avx512(v: &mut [f32]) {
        super::relu_in_place(v);
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sum_rows_avx512(
        dst: &mut [f32],
        a: &[f32],
        b: Option<&[f32]>,
        relu: bool,
    ) {
        super::sum_rows_scalar(dst, a, b, relu);
    }

    /// [`super::sum_rows_block`]: `stride` is a multiple of [`LANES`].
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sum_rows_block_avx512(
        out: &mut [f32],
        stride: usize,
        a: &[f32],
        b: Option<(&[f32], usize)>,
        relu: bool,
    ) {
        let rows = out.len() / stride;
        let op = out.as_mut_ptr();
        let ap = a.as_ptr();
        let zero = _mm512_setzero_ps();
        for r in 0..rows {
            let o = op.add(r * stride);
            let bp = b.map(|(b, bs)| b.as_ptr().add(r * bs));
            let mut c = 0;
            while c < stride {
                let mut v = _mm512_loadu_ps(ap.add(c));
                if let Some(bp) = bp {
                    v = _mm512_add_ps(v, _mm512_loadu_ps(bp.add(c)));
                }
                if relu {
                    // Keep lanes that are not < 0 (a NaN stays NaN), like `relu_in_place`.
                    let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, zero);
                    v = _mm512_mask_mov_ps(v, neg, zero);
                }
                _mm512_storeu_ps(o.add(c), v);
                c += LANES;
            }
        }
    }

    /// [`super::sum_rows_scalar`] with the ReLU as `maxps(0, x)` (keeps lanes that are not
    /// < 0, a NaN stays NaN) and every lane stored: compiled from the scalar body, the ReLU
    /// became AVX2 masked stores (`vmaskmovps`), slow on AMD Zen 3. A tail shorter than a
    /// register uses the one-lane instructions (a scalar loop would be vectorized the same
    /// way again).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_rows_avx2(dst: &mut [f32], a: &[f32], b: Option<&[f32]>, relu: bool) {
        let n = dst.len();
        assert!(
            a.len() >= n && b.is_none_or(|b| b.len() >= n),
            "rows too short"
        );
        let (dp, ap, bp) = (dst.as_mut_ptr(), a.as_ptr(), b.map(<[f32]>::as_ptr));
        let mut c = 0;
        while c + 8 <= n {
            let mut v = _mm256_loadu_ps(ap.add(c));
            if let Some(bp) = bp {
                v = _mm256_add_ps(v, _mm256_loadu_ps(bp.add(c)));
            }
            if relu {
                v = _mm256_max_ps(_mm256_setzero_ps(), v);
            }
            _mm256_storeu_ps(dp.add(c), v);
            c += 8;
        }
        while c < n {
            let mut v = _mm_load_ss(ap.add(c));
            if let Some(bp) = bp {
                v = _mm_add_ss(v, _mm_load_ss(bp.add(c)));
            }
            if relu {
                v = _mm_max_ss(_mm_setzero_ps(), v);
            }
            _mm_store_ss(dp.add(c), v);
            c += 1;
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn add_avx512(dst: &mut [f32], src: &[f32]) {
        super::add_scalar(dst, src);
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn add_avx2(dst: &mut [f32], src: &[f32]) {
        super::add_scalar(dst, src);
    }

    /// [`super::fma_scalar`] compiled with FMA (`mul_add` becomes one instruction).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fma_avx2(dst: &mut [f32], scale: f32, col: &[f32]) {
        super::fma_scalar(dst, scale, col);
    }

    /// [`super::apply_row_ops`] with blocks of 4 (then 1) registers held across the ops.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn row_ops_avx512(out: &mut [f32], ops: &[super::RowOp<'_>]) {
        let n = out.len();
        let op = out.as_mut_ptr();
        let mut c = 0;
        while c + 4 * LANES <= n {
            row_block512::<4>(op.add(c), ops, c);
            c += 4 * LANES;
        }
        while c + LANES <= n {
            row_block512::<1>(op.add(c), ops, c);
            c += LANES;
        }
        super::row_ops_scalar(out, ops, c);
    }

    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn row_block512<const V: usize>(out: *mut f32, ops: &[super::RowOp<'_>], c: usize) {
        let mut acc = [_mm512_setzero_ps(); V];
        for (v, a) in acc.iter_mut().enumerate() {
            *a = _mm512_loadu_ps(out.add(v * LANES));
        }
        for op in ops {
            match *op {
                super::RowOp::Add(row) => {
                    let p = row.as_ptr().add(c);
                    for (v, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_add_ps(*a, _mm512_loadu_ps(p.add(v * LANES)));
                    }
                }
                super::RowOp::Fma(scale, row) => {
                    let p = row.as_ptr().add(c);
                    let s = _mm512_set1_ps(scale);
                    for (v, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(s, _mm512_loadu_ps(p.add(v * LANES)), *a);
                    }
                }
            }
        }
        for (v, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add(v * LANES), *a);
        }
    }

    /// [`super::apply_row_ops`] with blocks of 4 (then 1) registers of 8 held across the ops.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_ops_avx2(out: &mut [f32], ops: &[super::RowOp<'_>]) {
        let n = out.len();
        let op = out.as_mut_ptr();
        let mut c = 0;
        while c + 32 <= n {
            row_block256::<4>(op.add(c), ops, c);
            c += 32;
        }
        while c + 8 <= n {
            row_block256::<1>(op.add(c), ops, c);
            c += 8;
        }
        super::row_ops_scalar(out, ops, c);
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn row_block256<const V: usize>(out: *mut f32, ops: &[super::RowOp<'_>], c: usize) {
        let mut acc = [_mm256_setzero_ps(); V];
        for (v, a) in acc.iter_mut().enumerate() {
            *a = _mm256_loadu_ps(out.add(v * 8));
        }
        for op in ops {
            match *op {
                super::RowOp::Add(row) => {
                    let p = row.as_ptr().add(c);
                    for (v, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_add_ps(*a, _mm256_loadu_ps(p.add(v * 8)));
                    }
                }
                super::RowOp::Fma(scale, row) => {
                    let p = row.as_ptr().add(c);
                    let s = _mm256_set1_ps(scale);
                    for (v, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(s, _mm256_loadu_ps(p.add(v * 8)), *a);
                    }
                }
            }
        }
        for (v, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(v * 8), *a);
        }
    }

    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn accumulate_avx512(
        shape: GemmShape,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        relu: bool,
    ) {
        let GemmShape {
            rows,
            k,
            x_stride,
            out_stride,
        } = shape;
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let op = out.as_mut_ptr();
        let mut r = 0;
        while r < rows {
            let tr = (rows - r).min(TILE_ROWS_512);
            let mut o = 0;
            while o < out_stride {
                // Up to 4 registers (64 outputs) per tile.
                let nv = ((out_stride - o) / LANES).min(4);
                macro_rules! go {
                    ($r:literal) => {
                        match nv {
                            4 => tile512::<$r, 4>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                            3 => tile512::<$r, 3>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                            2 => tile512::<$r, 2>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                            _ => tile512::<$r, 1>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                        }
                    };
                }
                match tr {
                    6 => go!(6),
                    5 => go!(5),
                    4 => go!(4),
                    3 => go!(3),
                    2 => go!(2),
                    _ => go!(1),
                }
                o += nv * LANES;
            }
            r += tr;
        }
    }

    /// One tile: rows `r..r+R`, outputs `o..o+16V`.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    unsafe fn tile512<const R: usize, const V: usize>(
        x: *const f32,
        w: *const f32,
        out: *mut f32,
        r: usize,
        o: usize,
        k: usize,
        x_stride: usize,
        out_stride: usize,
        relu: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        for (i, row) in acc.iter_mut().enumerate() {
            for (v, a) in row.iter_mut().enumerate() {
                *a = _mm512_loadu_ps(out.add((r + i) * out_stride + o + v * LANES));
            }
        }
        for kk in 0..k {
            let wrow = w.add(kk * out_stride + o);
            let mut wv = [_mm512_setzero_ps(); V];
            for (v, reg) in wv.iter_mut().enumerate() {
                *reg = _mm512_loadu_ps(wrow.add(v * LANES));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let xb = _mm512_set1_ps(*x.add((r + i) * x_stride + kk));
                for (a, wreg) in row.iter_mut().zip(wv.iter()) {
                    *a = _mm512_fmadd_ps(xb, *wreg, *a);
                }
            }
        }
        let zero = _mm512_setzero_ps();
        for (i, row) in acc.iter().enumerate() {
            for (v, a) in row.iter().enumerate() {
                let mut val = *a;
                if relu {
                    // max(NaN, 0) would hide a NaN: keep lanes that are not < 0.
                    let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(val, zero);
                    val = _mm512_mask_mov_ps(val, neg, zero);
                }
                _mm512_storeu_ps(out.add((r + i) * out_stride + o + v * LANES), val);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn accumulate_avx2(
        shape: GemmShape,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        relu: bool,
    ) {
        let GemmShape {
            rows,
            k,
            x_stride,
            out_stride,
        } = shape;
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let op = out.as_mut_ptr();
        let mut r = 0;
        while r < rows {
            let tr = (rows - r).min(TILE_ROWS);
            // 16 outputs (2 registers of 8) per tile; out_stride is a multiple of 16.
            let mut o = 0;
            while o < out_stride {
                match tr {
                    4 => tile256::<4>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                    3 => tile256::<3>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                    2 => tile256::<2>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                    _ => tile256::<1>(xp, wp, op, r, o, k, x_stride, out_stride, relu),
                }
                o += LANES;
            }
            r += tr;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    unsafe fn tile256<const R: usize>(
        x: *const f32,
        w: *const f32,
        out: *mut f32,
        r: usize,
        o: usize,
        k: usize,
        x_stride: usize,
        out_stride: usize,
        relu: bool,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for (i, row) in acc.iter_mut().enumerate() {
            let base = out.add((r + i) * out_stride + o);
            row[0] = _mm256_loadu_ps(base);
            row[1] = _mm256_loadu_ps(base.add(8));
        }
        for kk in 0..k {
            let wrow = w.add(kk * out_stride + o);
            let w0 = _mm256_loadu_ps(wrow);
            let w1 = _mm256_loadu_ps(wrow.add(8));
            for (i, row) in acc.iter_mut().enumerate() {
                let xb = _mm256_set1_ps(*x.add((r + i) * x_stride + kk));
                row[0] = _mm256_fmadd_ps(xb, w0, row[0]);
                row[1] = _mm256_fmadd_ps(xb, w1, row[1]);
            }
        }
        let zero = _mm256_setzero_ps();
        for (i, row) in acc.iter().enumerate() {
            let base = out.add((r + i) * out_stride + o);
            for (h, a) in row.iter().enumerate() {
                let mut val = *a;
                if relu {
                    let neg = _mm256_cmp_ps::<_CMP_LT_OQ>(val, zero);
                    val = _mm256_blendv_ps(val, zero, neg);
                }
                _mm256_storeu_ps(base.add(8 * h), val);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Every level gives the same bits, for every row count and width, and matches an f64
    /// reference to float32 rounding.
    #[test]
    fn levels_agree_bit_for_bit() {
        let mut seed = 7;
        for &(rows, k, outs) in &[
            (1, 1, 1),
            (5, 13, 7),
            (9, 128, 64),
            (4, 64, 1),
            (7, 37, 130),
            (33, 288, 128),
        ] {
            let os = padded(outs);
            let xs = k + 3;
            let x: Vec<f32> = (0..rows * xs).map(|_| lcg(&mut seed)).collect();
            let mut w = vec![0.0f32; k * os];
            for kk in 0..k {
                for o in 0..outs {
                    w[kk * os + o] = lcg(&mut seed);
                }
            }
            let init: Vec<f32> = (0..rows * os)
                .map(|i| if i % os < outs { lcg(&mut seed) } else { 0.0 })
                .collect();
            let shape = GemmShape {
                rows,
                k,
                x_stride: xs,
                out_stride: os,
            };
            for relu in [false, true] {
                let mut results = Vec::new();
                for level in SimdLevel::supported() {
                    let mut out = init.clone();
                    accumulate(level, shape, &x, &w, &mut out, relu);
                    results.push((level, out));
                }
                let (_, first) = &results[0];
                for (level, out) in &results[1..] {
                    let same = first
                        .iter()
                        .zip(out)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{level} differs from scalar for {rows}x{k}x{outs}");
                }
                // One row alone equals the same row inside the batch.
                if rows > 1 {
                    let mut alone = init[os..2 * os].to_vec();
                    let one = GemmShape { rows: 1, ..shape };
                    accumulate(SimdLevel::best(), one, &x[xs..], &w, &mut alone, relu);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&alone), bits(&first[os..2 * os]));
                }
                for r in 0..rows {
                    for o in 0..outs {
                        let mut e = init[r * os + o] as f64;
                        for kk in 0..k {
                            e += x[r * xs + kk] as f64 * w[kk * os + o] as f64;
                        }
                        if relu {
                            e = e.max(0.0);
                        }
                        let got = first[r * os + o] as f64;
                        assert!((got - e).abs() <= 1e-5 * (1.0 + k as f64), "{got} vs {e}");
                    }
                    for o in outs..os {
                        assert_eq!(first[r * os + o], 0.0, "padding stays zero");
                    }
                }
            }
        }
    }

    /// Row ops: every level gives the scalar bits, for widths with and without a tail.
    #[test]
    fn row_ops_levels_agree() {
        let mut seed = 11;
        for &n in &[1usize, 7, 16, 40, 64, 128, 131] {
            let rows: Vec<Vec<f32>> = (0..5)
                .map(|_| (0..n).map(|_| lcg(&mut seed)).collect())
                .collect();
            let ops = [
                RowOp::Add(&rows[0]),
                RowOp::Fma(0.37, &rows[1]),
                RowOp::Add(&rows[2]),
                RowOp::Fma(-3.0, &rows[3]),
                RowOp::Add(&rows[4]),
            ];
            let init: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let mut expect = init.clone();
            row_ops_scalar(&mut expect, &ops, 0);
            for level in SimdLevel::supported() {
                let mut out = init.clone();
                apply_row_ops(level, &mut out, &ops);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&out), bits(&expect), "{level}, width {n}");
            }
            // The scalar path is the plain sequence of adds and fmas.
            let mut by_hand = init.clone();
            for (i, o) in by_hand.iter_mut().enumerate() {
                *o += rows[0][i];
                *o = 0.37f32.mul_add(rows[1][i], *o);
                *o += rows[2][i];
                *o = (-3.0f32).mul_add(rows[3][i], *o);
                *o += rows[4][i];
            }
            assert_eq!(by_hand, expect);
        }
    }

    /// The block sum gives the row-by-row bits of the scalar code on every level (NaN kept,
    /// `-0.0` kept), for a stride of whole registers and one with a tail.
    #[test]
    fn sum_rows_block_agrees_with_rows() {
        for stride in [48, 45] {
            sum_rows_block_case(stride);
        }
    }

    fn sum_rows_block_case(stride: usize) {
        let mut seed = 5;
        let rows = 7;
        let mut a: Vec<f32> = (0..stride).map(|_| lcg(&mut seed)).collect();
        let mut b: Vec<f32> = (0..rows * 64).map(|_| lcg(&mut seed)).collect();
        b[3] = f32::NAN;
        b[70] = -0.0 - a[6];
        a[stride - 1] = -0.0;
        a[stride - 2] = f32::NAN;
        for relu in [false, true] {
            for with_b in [false, true] {
                let bb = with_b.then_some((&b[..], 64));
                let mut expect = vec![0.0f32; rows * stride];
                for (r, row) in expect.chunks_exact_mut(stride).enumerate() {
                    sum_rows_scalar(row, &a, bb.map(|(b, bs)| &b[r * bs..r * bs + stride]), relu);
                }
                for level in SimdLevel::supported() {
                    let mut out = vec![1.0f32; rows * stride];
                    sum_rows_block(level, &mut out, stride, &a, bb, relu);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let what = format!("{level} stride {stride} relu {relu} b {with_b}");
                    assert_eq!(bits(&out), bits(&expect), "{what}");
                }
            }
        }
    }

    #[test]
    fn relu_keeps_nan() {
        let mut v = [-1.0, 0.5, f32::NAN, -0.0];
        relu_in_place(&mut v);
        assert_eq!(v[0], 0.0);
        assert_eq!(v[1], 0.5);
        assert!(v[2].is_nan());
    }
}
