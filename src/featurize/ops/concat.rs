//! `Concat` (default ONNX domain) of dense `[1, C]` values along axis 1.

use super::{BuildCtx, Built, DenseOp, Op, ValueType};
use crate::error::Result;
use crate::featurize::spec::AttrValue;

/// Concatenation of dense rows.
#[derive(Debug, Clone)]
pub(crate) struct Concat;

/// Builds a `Concat` node: one or more dense inputs, attribute `axis` = 1 (or -1).
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.only_attributes(&["axis"])?;
    match ctx.node.attributes.get("axis") {
        None => return Err(ctx.err("missing attribute 'axis'")),
        Some(AttrValue::Int(1 | -1)) => {}
        Some(other) => {
            return Err(ctx.err(format!(
                "attribute 'axis' must be 1 (features of dense [1, C] values), found {other:?}"
            )))
        }
    }
    if ctx.node.inputs.is_empty() {
        return Err(ctx.err("expected at least 1 input, found 0"));
    }
    let mut names = Vec::new();
    let mut channels = 0;
    for i in 0..ctx.node.inputs.len() {
        match ctx.value(i)? {
            (name, ValueType::Dense { channels: c }) => {
                channels += c;
                names.push(name);
            }
            (name, ValueType::Sparse { .. }) => {
                return Err(ctx.err(format!(
                    "input {i} '{name}' is sparse, expected a dense [1, C] value (pool it first)"
                )))
            }
        }
    }
    Ok(Built {
        op: Op::Dense(Box::new(Concat)),
        value_inputs: names,
        initializers: vec![],
        output: ValueType::Dense { channels },
    })
}

impl DenseOp for Concat {
    fn run(&self, inputs: &[&[f32]]) -> Vec<f32> {
        inputs.concat()
    }
}
