//! `SparseGlobalAvgPool`: per-channel mean over all points → dense `[1, C]`.
//!
//! The executor accumulates the sum band by band in a fixed binary tree over the rows
//! (`tree_sum`), in `f64`, then divides by the number of points and rounds to `f32`. An
//! empty value (no points) pools to zeros.

use super::{BuildCtx, Built, Op, ValueType};
use crate::error::Result;

/// Builds a `SparseGlobalAvgPool` node: one sparse input, dense output of equal width.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(1, 1)?;
    ctx.only_attributes(&[])?;
    let (x, channels, _) = ctx.sparse_value(0)?;
    Ok(Built {
        op: Op::GlobalAvgPool,
        value_inputs: vec![x],
        initializers: vec![],
        output: ValueType::Dense { channels },
    })
}
