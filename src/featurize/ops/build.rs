//! What a node builder sees and the checks it uses: input counts, value and initializer
//! inputs, attributes.

use std::collections::{BTreeMap, HashMap};

use super::{Op, ValueType, MAX_KERNEL, MAX_STRIDE, MAX_TENSOR_STRIDE};
use crate::error::{Error, Result};
use crate::featurize::spec::{AttrValue, NodeSpec, TensorSpec};

/// What a builder sees: the node, its display name, the graph's initializers and the types
/// of the values defined so far.
pub(crate) struct BuildCtx<'a> {
    /// The node being built.
    pub node: &'a NodeSpec,
    /// Name used in errors (node name, or `#index op_type` when unnamed).
    pub name: &'a str,
    /// All initializers of the graph.
    pub initializers: &'a BTreeMap<String, TensorSpec>,
    /// Types of the values defined before this node.
    pub types: &'a HashMap<String, ValueType>,
}

/// A built node: its op, the names of its value (non-initializer) inputs in order, the
/// initializers it used, and its output type.
pub(crate) struct Built {
    pub op: Op,
    pub value_inputs: Vec<String>,
    pub initializers: Vec<String>,
    pub output: ValueType,
}

impl BuildCtx<'_> {
    /// An error at this node.
    pub fn err(&self, reason: impl Into<String>) -> Error {
        Error::featurize(self.name, reason)
    }

    /// Present (non-empty) input names.
    fn present_inputs(&self) -> Vec<&str> {
        self.node
            .inputs
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Checks the number of inputs (counting empty optional slots at the end as absent).
    pub fn input_count(&self, min: usize, max: usize) -> Result<()> {
        let n = self.node.inputs.len();
        let trailing_empty = self
            .node
            .inputs
            .iter()
            .rev()
            .take_while(|s| s.is_empty())
            .count();
        let n = n - trailing_empty;
        if n < min || n > max {
            let expected = if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            };
            return Err(self.err(format!("expected {expected} input(s), found {n}")));
        }
        if self.present_inputs().len() != n {
            return Err(
                self.err("an empty input name is only allowed for a trailing optional input")
            );
        }
        Ok(())
    }

    /// The type of value input `i`; errors if it is undefined or an initializer.
    pub fn value(&self, i: usize) -> Result<(String, ValueType)> {
        let name = &self.node.inputs[i];
        if let Some(t) = self.types.get(name) {
            return Ok((name.clone(), *t));
        }
        if self.initializers.contains_key(name) {
            return Err(self.err(format!(
                "input {i} '{name}' is an initializer, expected a value computed by the graph"
            )));
        }
        Err(self.err(format!(
            "input {i} '{name}' is not defined by the graph input or an earlier node"
        )))
    }

    /// Value input `i`, which must be sparse: `(name, channels, stride)`.
    pub fn sparse_value(&self, i: usize) -> Result<(String, usize, u64)> {
        match self.value(i)? {
            (name, ValueType::Sparse { channels, stride }) => Ok((name, channels, stride)),
            (name, ValueType::Dense { .. }) => Err(self.err(format!(
                "input {i} '{name}' is dense [1, C], expected a sparse value"
            ))),
        }
    }

    /// Initializer input `i`, with finite values and consistent data length.
    pub fn initializer(&self, i: usize, what: &str) -> Result<&TensorSpec> {
        let name = &self.node.inputs[i];
        let Some(t) = self.initializers.get(name) else {
            let why = if self.types.contains_key(name) {
                "is a computed value, expected an initializer"
            } else {
                "is not an initializer of the graph"
            };
            return Err(self.err(format!("{what} '{name}' {why}")));
        };
        let n: usize = t.dims.iter().product();
        if t.data.len() != n {
            return Err(self.err(format!(
                "{what} '{name}' has {} values but dims {:?} need {n}",
                t.data.len(),
                t.dims
            )));
        }
        if let Some(pos) = t.data.iter().position(|v| !v.is_finite()) {
            return Err(self.err(format!(
                "{what} '{name}' has a non-finite value {} at flat index {pos}",
                t.data[pos]
            )));
        }
        Ok(t)
    }

    /// Rejects attributes not in `allowed`.
    pub fn only_attributes(&self, allowed: &[&str]) -> Result<()> {
        if let Some(k) = self
            .node
            .attributes
            .keys()
            .find(|k| !allowed.contains(&k.as_str()))
        {
            return Err(self.err(format!("unknown attribute '{k}'")));
        }
        Ok(())
    }

    /// An integer attribute (an `Int`, or `Ints` whose entries are all equal, for 2-D
    /// isotropic kernels) in `1..=max`, or `default` when absent (`None` = required).
    pub fn int_attr(&self, key: &str, default: Option<i64>, max: i64) -> Result<i64> {
        let v = match self.node.attributes.get(key) {
            None => default.ok_or_else(|| self.err(format!("missing attribute '{key}'")))?,
            Some(AttrValue::Int(v)) => *v,
            Some(AttrValue::Ints(vs)) if !vs.is_empty() && vs.iter().all(|v| *v == vs[0]) => vs[0],
            Some(other) => {
                return Err(self.err(format!(
                    "attribute '{key}' must be an integer (or equal integers per axis), found {other:?}"
                )))
            }
        };
        if v < 1 || v > max {
            return Err(self.err(format!("attribute '{key}' = {v} is outside 1..={max}")));
        }
        Ok(v)
    }
}

/// Reads `kernel_size` (required), `stride` and `dilation` (default 1).
pub(crate) fn window_attrs(ctx: &BuildCtx<'_>) -> Result<(usize, u64, u64)> {
    ctx.only_attributes(&["kernel_size", "stride", "dilation"])?;
    let k = ctx.int_attr("kernel_size", None, MAX_KERNEL)?;
    let s = ctx.int_attr("stride", Some(1), MAX_STRIDE)?;
    let d = ctx.int_attr("dilation", Some(1), MAX_STRIDE)?;
    // All three are in 1..=2^16 now.
    Ok((k as usize, s as u64, d as u64))
}

/// The output tensor stride of a window op with stride `s` on input stride `t`.
pub(crate) fn out_stride(ctx: &BuildCtx<'_>, t: u64, s: u64) -> Result<u64> {
    match t.checked_mul(s) {
        Some(v) if v <= MAX_TENSOR_STRIDE => Ok(v),
        _ => Err(ctx.err(format!(
            "tensor stride {t} x stride {s} exceeds the limit {MAX_TENSOR_STRIDE}"
        ))),
    }
}
