//! `Concat` (default ONNX domain) of dense `[1, C]` values along axis 1.

use super::{BuildCtx, Built, Op, Value, ValueType};
use crate::error::{Error, Result};
use crate::featurize::spec::AttrValue;

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
        op: Op::Concat,
        value_inputs: names,
        initializers: vec![],
        output: ValueType::Dense { channels },
    })
}

/// Concatenates the dense inputs in order.
pub(super) fn run(node: &str, inputs: &[&Value]) -> Result<Value> {
    let mut out = Vec::new();
    for (i, v) in inputs.iter().enumerate() {
        match v {
            Value::Dense(d) => out.extend_from_slice(d),
            Value::Sparse(_) => {
                return Err(Error::featurize(
                    node,
                    format!("internal: input {i} is not dense"),
                ))
            }
        }
    }
    Ok(Value::Dense(out))
}
