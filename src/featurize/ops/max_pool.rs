//! `SparseMaxPool`: per-channel max over the kernel window (MinkowskiEngine semantics).

use std::sync::Arc;

use rayon::prelude::*;

use super::kernel::{max_pool_task, split_by_tasks};
use super::{out_stride, window_attrs, BuildCtx, Built, Features, Op, SparseValue, ValueType};
use crate::error::Result;
use crate::featurize::rulebook::{tasks, Geometry};

/// A validated max-pooling layer.
#[derive(Debug, Clone)]
pub(crate) struct MaxPool {
    /// Window geometry at the input tensor stride.
    pub geom: Geometry,
    /// Layer stride.
    pub stride: u64,
    /// Output tensor stride.
    pub t_out: u64,
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
        op: Op::MaxPool(MaxPool {
            geom,
            stride: s,
            t_out,
        }),
        value_inputs: vec![x],
        initializers: vec![],
        output: ValueType::Sparse {
            channels,
            stride: t_out,
        },
    })
}

impl MaxPool {
    /// Runs the layer. Every output point has a neighbour: configurations where it could
    /// lack one are rejected when the graph is built.
    pub fn run(&self, _node: &str, x: &SparseValue) -> Result<SparseValue> {
        let coords = if self.stride == 1 {
            Arc::clone(&x.coords)
        } else {
            Arc::new(x.coords.strided(self.t_out))
        };
        let c = x.channels;
        let mut feats = vec![0.0f32; coords.len() * c];
        let tasks = tasks(&coords);
        let blocks = split_by_tasks(&mut feats, &coords, &tasks, c);
        let in_feats = x.dense();
        tasks.into_par_iter().zip(blocks).for_each(|(rows, dst)| {
            max_pool_task(&x.coords, &in_feats, c, &coords, &self.geom, rows, dst)
        });
        Ok(SparseValue {
            coords,
            feats: Features::Dense(feats),
            channels: c,
            sums: None,
        })
    }
}
