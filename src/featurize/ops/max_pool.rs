//! `SparseMaxPool`: per-channel max over the kernel window (MinkowskiEngine semantics).
//!
//! An output row starts as its first neighbour's row and takes the NaN-propagating
//! per-channel max with each further one (`simd::pool`), neighbours in visiting order
//! (kernel row, then column; the order only matters for which NaN payload wins). Points
//! with the same neighbour rows share one output row like any stencil, so a max pool over
//! shared (memoized) rows produces shared rows without expanding them.

use super::{
    out_stride, window_attrs, BuildCtx, Built, Op, Part, Reach, RowProducts, Stencil, ValueType,
};
use crate::error::Result;
use crate::featurize::rulebook::Geometry;
use crate::featurize::window::Window;
use crate::simd::kernels::Kernels;

/// A validated max-pooling layer.
#[derive(Debug, Clone)]
pub(crate) struct MaxPool {
    /// Window and strides.
    pub reach: Reach,
    /// Channels (unchanged).
    pub channels: usize,
}

/// Builds a `SparseMaxPool` node: one sparse input, channels unchanged.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(1, 1)?;
    let (k, s, d) = window_attrs(ctx)?;
    let (x, channels, t_in) = ctx.sparse_value(0)?;
    let t_out = out_stride(ctx, t_in, s)?;
    let geom = if s > 1 && k as u64 == s {
        // MinkowskiEngine pools each input point into its own strided cell here.
        Geometry::cell(k, t_in)
    } else {
        let half = (k / 2) as u64;
        let covers_cell = if k % 2 == 1 {
            half + 1 >= s
        } else {
            k as u64 >= s
        };
        if !covers_cell {
            return Err(ctx.err(format!(
                "kernel_size {k} with stride {s} leaves output points without neighbours (need an odd kernel with kernel_size/2 >= stride-1, an even kernel >= stride, or kernel_size == stride)"
            )));
        }
        Geometry::new(k, d, t_in)
    };
    Ok(Built {
        op: Op::Stencil(Box::new(MaxPool {
            reach: Reach {
                geom,
                stride: s,
                t_in,
                t_out,
            },
            channels,
        })),
        value_inputs: vec![x],
        initializers: vec![],
        output: ValueType::Sparse {
            channels,
            stride: t_out,
        },
    })
}

impl Stencil for MaxPool {
    fn op_type(&self) -> &'static str {
        "SparseMaxPool"
    }

    fn reach(&self) -> &Reach {
        &self.reach
    }

    fn cin(&self) -> usize {
        self.channels
    }

    fn cout(&self) -> usize {
        self.channels
    }

    /// Every output point has a neighbour (configurations where one could lack it are
    /// rejected at build); a row without one would be 0.
    fn compute(
        &self,
        part: &Part<'_>,
        input: &Window<'_>,
        _products: Option<&RowProducts>,
        out: &mut [f32],
        k: &Kernels,
    ) -> u64 {
        let c = self.channels;
        for (j, row) in out.chunks_exact_mut(c).enumerate() {
            let Some((&(_, first), rest)) = part.pairs(j).split_first() else {
                row.fill(0.0);
                continue;
            };
            row.copy_from_slice(input.row(first));
            for &(_, id) in rest {
                (k.max_into)(row, input.row(id));
            }
        }
        0
    }
}
