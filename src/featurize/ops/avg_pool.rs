//! `SparseGlobalAvgPool`: per-channel mean over all points → dense `[1, C]`.

use rayon::prelude::*;

use super::{BuildCtx, Built, Features, Op, SparseValue, ValueType};
use crate::error::Result;

/// Points per partial sum; fixed, so the summation order never depends on the thread count.
const CHUNK_POINTS: usize = 4096;

/// Builds a `SparseGlobalAvgPool` node: one sparse input, dense output of equal width.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(1, 1)?;
    ctx.only_attributes(&[])?;
    let (x, channels, _) = ctx.sparse_value(0)?;
    Ok(Built {
        op: Op::AvgPool,
        value_inputs: vec![x],
        initializers: vec![],
        output: ValueType::Dense { channels },
    })
}

/// Mean over all points, per channel, accumulated in `f64`: each chunk of
/// [`CHUNK_POINTS`] points is summed in point order, then the chunk sums in chunk order.
/// When the producing conv already summed its output (`x.sums`, per conv task in point
/// order, then the task sums in task order), those sums are used instead. An empty value
/// (no points) pools to zeros. A memo value sums each distinct row times its point count,
/// in row order.
pub(super) fn run(x: &SparseValue) -> Vec<f32> {
    let c = x.channels;
    let n = x.coords.len();
    if n == 0 || c == 0 {
        return vec![0.0; c];
    }
    let mean = |sums: &[f64]| sums.iter().map(|t| (t / n as f64) as f32).collect();
    if let Some(s) = x.sums.as_ref().filter(|s| s.len() == c) {
        return mean(s);
    }
    let feats = match &x.feats {
        Features::Dense(f) => f,
        Features::Memo(m) => return mean(&m.sums(c)),
    };
    let partials: Vec<Vec<f64>> = feats
        .par_chunks(CHUNK_POINTS * c)
        .map(|chunk| chunk_sum(chunk, c))
        .collect();
    mean(&add_partials(&partials, c))
}

/// Adds per-block channel sums in block order.
pub(super) fn add_partials<'p>(
    partials: impl IntoIterator<Item = &'p Vec<f64>>,
    c: usize,
) -> Vec<f64> {
    let mut total = vec![0.0f64; c];
    for p in partials {
        for (t, v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total
}

/// Per-channel sums of a `[m, c]` chunk, each in point order (starting from 0).
pub(super) fn chunk_sum(chunk: &[f32], c: usize) -> Vec<f64> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { chunk_sum_avx2(chunk, c) };
    }
    chunk_sum_impl(chunk, c)
}

/// [`chunk_sum_impl`] compiled with AVX2 (4-wide `f64` adds); the same additions in the
/// same order, so the same results.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn chunk_sum_avx2(chunk: &[f32], c: usize) -> Vec<f64> {
    chunk_sum_impl(chunk, c)
}

/// Channels in blocks of 32, 8 and 1, each block's sums held in registers over the rows.
#[inline(always)]
fn chunk_sum_impl(chunk: &[f32], c: usize) -> Vec<f64> {
    let mut s = vec![0.0f64; c];
    let mut j0 = 0;
    while j0 + 32 <= c {
        block_sum::<32>(chunk, c, j0, &mut s[j0..j0 + 32]);
        j0 += 32;
    }
    while j0 + 8 <= c {
        block_sum::<8>(chunk, c, j0, &mut s[j0..j0 + 8]);
        j0 += 8;
    }
    while j0 < c {
        block_sum::<1>(chunk, c, j0, &mut s[j0..j0 + 1]);
        j0 += 1;
    }
    s
}

#[inline(always)]
fn block_sum<const B: usize>(chunk: &[f32], c: usize, j0: usize, out: &mut [f64]) {
    let mut acc = [0.0f64; B];
    for row in chunk.chunks_exact(c) {
        let Ok(r) = <&[f32; B]>::try_from(&row[j0..j0 + B]) else {
            unreachable!("slice of length B")
        };
        for j in 0..B {
            acc[j] += f64::from(r[j]);
        }
    }
    out.copy_from_slice(&acc);
}
