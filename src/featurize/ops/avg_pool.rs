//! `SparseGlobalAvgPool`: per-channel mean over all points → dense `[1, C]`.

use rayon::prelude::*;

use super::{BuildCtx, Built, Op, SparseValue, ValueType};
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
/// An empty value (no points) pools to zeros.
pub(super) fn run(x: &SparseValue) -> Vec<f32> {
    let c = x.channels;
    let n = x.coords.len();
    if n == 0 || c == 0 {
        return vec![0.0; c];
    }
    let partials: Vec<Vec<f64>> = x
        .feats
        .par_chunks(CHUNK_POINTS * c)
        .map(|chunk| {
            let mut s = vec![0.0f64; c];
            for row in chunk.chunks_exact(c) {
                for (a, &v) in s.iter_mut().zip(row) {
                    *a += f64::from(v);
                }
            }
            s
        })
        .collect();
    let mut total = vec![0.0f64; c];
    for p in &partials {
        for (t, v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total.iter().map(|t| (t / n as f64) as f32).collect()
}
