//! `SparseConv`: MinkowskiEngine-style sparse convolution (2-D, hyper-cube kernel).

use std::sync::Arc;

use rayon::prelude::*;

use super::avg_pool::{add_partials, chunk_sum};
use super::kernel::{conv_task, split_by_tasks, ConvArgs};
use super::{
    memo, out_stride, window_attrs, BufferPool, BuildCtx, Built, Features, Op, SparseValue,
    ValueType,
};
use crate::error::Result;
use crate::featurize::coords::Coords;
use crate::featurize::rulebook::{tasks, Geometry};

/// A validated sparse convolution layer.
#[derive(Debug, Clone)]
pub(crate) struct SparseConv {
    /// Kernel geometry at the input tensor stride.
    pub geom: Geometry,
    /// Layer stride (1 keeps the input coordinates).
    pub stride: u64,
    /// Output tensor stride.
    pub t_out: u64,
    /// Input channels.
    pub cin: usize,
    /// Output channels.
    pub cout: usize,
    /// `[K, cin, cout]` row-major.
    pub weights: Vec<f32>,
    /// `[cout]`.
    pub bias: Option<Vec<f32>>,
    /// Apply ReLU to the output (set when the graph's only reader of this conv is a
    /// `SparseReLU`, which is then fused away).
    pub relu: bool,
    /// Also return the per-channel sums of the output ([`SparseValue::sums`]), computed by
    /// each task right after writing its block while it is still in cache (set when a
    /// `SparseGlobalAvgPool` reads this conv's output, directly or through the fused ReLU).
    pub sums: bool,
}

/// Builds a `SparseConv` node: inputs `x` (sparse), `W` `[k², Cin, Cout]`, optional bias
/// `[Cout]`.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(2, 3)?;
    let (k, s, d) = window_attrs(ctx)?;
    let (x, cin, t_in) = ctx.sparse_value(0)?;
    let w = ctx.initializer(1, "weight")?;
    let kk = k * k;
    if w.dims.len() != 3 || w.dims[0] != kk || w.dims[1] != cin || w.dims[2] == 0 {
        return Err(ctx.err(format!(
            "weight '{}' has shape {:?}, expected [kernel_size² = {kk}, Cin = {cin}, Cout > 0]",
            ctx.node.inputs[1], w.dims
        )));
    }
    let cout = w.dims[2];
    let mut inits = vec![ctx.node.inputs[1].clone()];
    let bias = if ctx.node.inputs.len() > 2 && !ctx.node.inputs[2].is_empty() {
        let b = ctx.initializer(2, "bias")?;
        if b.dims != [cout] {
            return Err(ctx.err(format!(
                "bias '{}' has shape {:?}, expected [Cout = {cout}]",
                ctx.node.inputs[2], b.dims
            )));
        }
        inits.push(ctx.node.inputs[2].clone());
        Some(b.data.clone())
    } else {
        None
    };
    let t_out = out_stride(ctx, t_in, s)?;
    Ok(Built {
        op: Op::Conv(SparseConv {
            geom: Geometry::new(k, d, t_in),
            stride: s,
            t_out,
            cin,
            cout,
            weights: w.data.clone(),
            bias,
            relu: false,
            sums: false,
        }),
        value_inputs: vec![x],
        initializers: inits,
        output: ValueType::Sparse {
            channels: cout,
            stride: t_out,
        },
    })
}

impl SparseConv {
    /// Runs the layer with a fresh buffer pool (tests).
    #[cfg(test)]
    pub fn run(&self, node: &str, x: &SparseValue) -> Result<SparseValue> {
        self.run_with(node, x, &BufferPool::default())
    }

    /// Runs the layer with its output buffer taken from `pool`. A memo input goes through
    /// [`memo::conv`] when its per-row products are cheaper than a direct conv; otherwise it
    /// is expanded first.
    pub fn run_with(&self, _node: &str, x: &SparseValue, pool: &BufferPool) -> Result<SparseValue> {
        let coords = if self.stride == 1 {
            Arc::clone(&x.coords)
        } else {
            Arc::new(x.coords.strided(self.t_out))
        };
        match &x.feats {
            Features::Memo(m)
                if memo::worth_it(m, self.cin, self.geom.volume(), x.coords.len()) =>
            {
                Ok(memo::conv(self, x, m, coords, pool))
            }
            Features::Memo(m) => {
                let mut dense = pool.take(x.coords.len() * self.cin);
                m.expand(self.cin, &mut dense);
                let y = self.run_dense(x, &dense, coords, pool);
                pool.give(dense);
                Ok(y)
            }
            Features::Dense(f) => Ok(self.run_dense(x, f, coords, pool)),
        }
    }

    /// The direct conv: per output point over its neighbour pairs (see [`conv_task`]).
    fn run_dense(
        &self,
        x: &SparseValue,
        in_feats: &[f32],
        coords: Arc<Coords>,
        pool: &BufferPool,
    ) -> SparseValue {
        // Every element is written by the conv tasks, so stale contents are fine.
        let mut feats = pool.take(coords.len() * self.cout);
        let args = ConvArgs {
            input: &x.coords,
            in_feats,
            cin: self.cin,
            out: &coords,
            geom: &self.geom,
            weights: &self.weights,
            bias: self.bias.as_deref(),
            cout: self.cout,
            relu: self.relu,
        };
        let tasks = tasks(&coords);
        let blocks = split_by_tasks(&mut feats, &coords, &tasks, self.cout);
        let cout = self.cout;
        let want_sums = self.sums && cout > 0;
        let partials: Vec<Option<Vec<f64>>> = tasks
            .into_par_iter()
            .zip(blocks)
            .map(|(rows, dst)| {
                conv_task(&args, rows, dst);
                want_sums.then(|| chunk_sum(dst, cout))
            })
            .collect();
        let sums = want_sums.then(|| add_partials(partials.iter().flatten(), cout));
        SparseValue {
            coords,
            feats: Features::Dense(feats),
            channels: cout,
            sums,
        }
    }
}
