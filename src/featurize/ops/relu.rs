//! `SparseReLU`: `x = if 0 > x { 0 } else { x }` per feature (NaN and −0 kept), coordinates
//! unchanged. Usually fused into the conv before it by the `passes` module.

use super::{BuildCtx, Built, Op, Part, Reach, RowProducts, Stencil, ValueType};
use crate::error::Result;
use crate::featurize::rulebook::Geometry;
use crate::featurize::window::Window;
use crate::simd::kernels::Kernels;

/// A validated ReLU.
#[derive(Debug, Clone)]
pub(crate) struct Relu {
    reach: Reach,
    channels: usize,
}

/// Builds a `SparseReLU` node: one sparse input, no attributes.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(1, 1)?;
    ctx.only_attributes(&[])?;
    let (x, channels, stride) = ctx.sparse_value(0)?;
    Ok(Built {
        op: Op::Stencil(Box::new(Relu {
            reach: Reach {
                geom: Geometry::new(1, 1, stride),
                stride: 1,
                t_in: stride,
                t_out: stride,
            },
            channels,
        })),
        value_inputs: vec![x],
        initializers: vec![],
        output: ValueType::Sparse { channels, stride },
    })
}

impl Stencil for Relu {
    fn op_type(&self) -> &'static str {
        "SparseReLU"
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

    fn is_relu(&self) -> bool {
        true
    }

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
            match part.pairs(j) {
                [(_, id)] => row.copy_from_slice(input.row(*id)),
                _ => row.fill(0.0), // unreachable: every point is its own neighbour
            }
        }
        (k.relu)(out);
        0
    }
}
