//! `SparseReLU`: `max(x, 0)` per feature, coordinates unchanged.

use rayon::prelude::*;

use super::{sparse, BuildCtx, Built, Features, Op, Value};
use crate::error::Result;

/// Builds a `SparseReLU` node: one sparse input, no attributes.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(1, 1)?;
    ctx.only_attributes(&[])?;
    let (x, channels, stride) = ctx.sparse_value(0)?;
    Ok(Built {
        op: Op::Relu,
        value_inputs: vec![x],
        initializers: vec![],
        output: super::ValueType::Sparse { channels, stride },
    })
}

/// Runs ReLU, in place when the input is owned (its last use).
pub(super) fn run(node: &str, inputs: &[&Value], owned: Option<Value>) -> Result<Value> {
    let mut v = match owned {
        Some(Value::Sparse(s)) => s,
        _ => sparse(node, inputs, 0)?.clone(),
    };
    v.sums = None; // the features change
    let feats = match &mut v.feats {
        Features::Dense(f) => f,
        Features::Memo(m) => &mut m.table,
    };
    feats.par_chunks_mut(1 << 14).for_each(|chunk| {
        for x in chunk {
            if *x < 0.0 {
                *x = 0.0;
            }
        }
    });
    Ok(Value::Sparse(v))
}
