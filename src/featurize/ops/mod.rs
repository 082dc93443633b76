//! Featurizer node types: a registry keyed by `(domain, op_type)`, one file per node type.
//!
//! Each node type provides a builder that validates a [`NodeSpec`] against the types of the
//! values flowing into it and returns a typed [`Op`] plus its output [`ValueType`]; and a
//! run function over [`Value`]s. Unknown `(domain, op_type)` pairs are load errors naming the
//! node; nothing stands in for an unknown op.

mod avg_pool;
mod concat;
mod kernel;
mod max_pool;
mod memo;
mod relu;
mod sparse_conv;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use super::coords::Coords;
use super::spec::{AttrValue, NodeSpec, TensorSpec};
use crate::error::{Error, Result};

pub(crate) use max_pool::MaxPool;
pub(crate) use memo::Memo;
pub(crate) use sparse_conv::SparseConv;

/// Domain of the sparse node types.
pub const SPARSE_DOMAIN: &str = "ai.dashrank.sparse";

/// Largest accepted `kernel_size`.
pub(crate) const MAX_KERNEL: i64 = 31;
/// Largest accepted `stride` and `dilation`.
pub(crate) const MAX_STRIDE: i64 = 1 << 16;
/// Largest tensor stride a value may reach.
pub(crate) const MAX_TENSOR_STRIDE: u64 = 1 << 40;

/// Static type of a value in the featurizer graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueType {
    /// A sparse tensor: coordinate set at `stride`, `[n, channels]` features.
    Sparse {
        /// Feature channels.
        channels: usize,
        /// Tensor stride of the coordinates.
        stride: u64,
    },
    /// A dense `[1, channels]` row.
    Dense {
        /// Feature channels.
        channels: usize,
    },
}

/// A sparse tensor at run time.
#[derive(Debug, Clone)]
pub(crate) struct SparseValue {
    /// The points (shared between values with the same coordinates, e.g. across ReLU).
    pub coords: Arc<Coords>,
    /// The features of the points.
    pub feats: Features,
    /// Feature channels.
    pub channels: usize,
    /// Per-channel sums of `feats` over all points in `f64`, when the conv that produced the
    /// value computed them in its output pass for a `SparseGlobalAvgPool` reading it (see
    /// [`SparseConv::sums`]); `None` otherwise. An op that changes `feats` resets it.
    pub sums: Option<Vec<f64>>,
}

/// The `[n, channels]` features of a sparse value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Features {
    /// `[n, channels]`, row-major.
    Dense(Vec<f32>),
    /// One row per distinct receptive field (see [`memo`]).
    Memo(Memo),
}

impl SparseValue {
    /// The `[n, channels]` features, expanded from the memo table if needed.
    pub fn dense(&self) -> Cow<'_, [f32]> {
        match &self.feats {
            Features::Dense(v) => Cow::Borrowed(v),
            Features::Memo(m) => {
                let mut v = vec![0.0; self.coords.len() * self.channels];
                m.expand(self.channels, &mut v);
                Cow::Owned(v)
            }
        }
    }

    /// Hands a dense feature buffer back to `pool`.
    pub fn release(self, pool: &BufferPool) {
        if let Features::Dense(v) = self.feats {
            pool.give(v);
        }
    }
}

/// A value at run time.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// Sparse tensor.
    Sparse(SparseValue),
    /// Dense `[1, C]` row.
    Dense(Vec<f32>),
}

/// A validated node operation.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `SparseConv`.
    Conv(SparseConv),
    /// `SparseReLU`.
    Relu,
    /// `SparseMaxPool`.
    MaxPool(MaxPool),
    /// `SparseGlobalAvgPool`.
    AvgPool,
    /// `Concat` along axis 1.
    Concat,
    /// Passes its input through (a `SparseReLU` fused into the conv before it).
    Forward,
}

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

type Builder = fn(&BuildCtx<'_>) -> Result<Built>;

/// The registry of node types, keyed by `(domain, op_type)`.
pub(crate) fn registry() -> &'static HashMap<(&'static str, &'static str), Builder> {
    static REGISTRY: OnceLock<HashMap<(&'static str, &'static str), Builder>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut reg: HashMap<(&'static str, &'static str), Builder> = HashMap::new();
        reg.insert((SPARSE_DOMAIN, "SparseConv"), sparse_conv::build);
        reg.insert((SPARSE_DOMAIN, "SparseReLU"), relu::build);
        reg.insert((SPARSE_DOMAIN, "SparseMaxPool"), max_pool::build);
        reg.insert((SPARSE_DOMAIN, "SparseGlobalAvgPool"), avg_pool::build);
        reg.insert(("", "Concat"), concat::build);
        reg
    })
}

/// Feature buffers kept for reuse by later layers and later runs of a graph.
///
/// Large layer outputs (tens of MB) would otherwise be fresh `mmap`s on every layer of
/// every run, and first-touch page faults cost about as much as the arithmetic. At most
/// [`BufferPool::MAX_BUFFERS`] buffers are kept (the largest ones), so a graph holds on to
/// roughly its largest few layer outputs between runs. A request is served only by a
/// buffer of about its size (so that repeated runs on one pattern find each layer's buffer
/// again at full length, without re-zeroing), otherwise by a fresh allocation.
#[derive(Default)]
pub(crate) struct BufferPool {
    bufs: Mutex<Vec<Vec<f32>>>,
}

impl BufferPool {
    /// Most buffers kept.
    pub const MAX_BUFFERS: usize = 4;

    /// A buffer of length `n` with **unspecified contents** (stale values from an earlier
    /// use): callers must overwrite all of it. Takes a pooled buffer with capacity in
    /// `n..=n + n/4`, preferring one whose length is already `≥ n`, else allocates.
    pub fn take(&self, n: usize) -> Vec<f32> {
        let pooled = {
            let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
            let fits = |v: &Vec<f32>| v.capacity() >= n && v.capacity() - n <= n / 4;
            let pick = (0..bufs.len())
                .filter(|&i| fits(&bufs[i]))
                .min_by_key(|&i| (bufs[i].len() < n, bufs[i].capacity()));
            pick.map(|i| bufs.swap_remove(i))
        };
        match pooled {
            Some(mut v) => {
                if v.len() >= n {
                    v.truncate(n);
                } else {
                    v.resize(n, 0.0);
                }
                v
            }
            None => vec![0.0; n],
        }
    }

    /// Returns a buffer to the pool (dropping the smallest one when over the limit).
    pub fn give(&self, v: Vec<f32>) {
        if v.capacity() == 0 {
            return;
        }
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        bufs.push(v);
        if bufs.len() > Self::MAX_BUFFERS {
            if let Some(i) = (0..bufs.len()).min_by_key(|&i| bufs[i].capacity()) {
                bufs.swap_remove(i);
            }
        }
    }
}

impl Clone for BufferPool {
    /// A clone starts with an empty pool.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.bufs.lock().map(|b| b.len()).unwrap_or(0);
        f.debug_struct("BufferPool").field("buffers", &n).finish()
    }
}

impl Op {
    /// Runs the op on its (already type-checked) inputs. `owned` is the first input when the
    /// graph lets this node consume it (last use), for in-place ops. Output feature buffers
    /// come from `pool`.
    pub fn run(
        &self,
        node: &str,
        inputs: &[&Value],
        owned: Option<Value>,
        pool: &BufferPool,
    ) -> Result<Value> {
        match self {
            Op::Conv(c) => c
                .run_with(node, sparse(node, inputs, 0)?, pool)
                .map(Value::Sparse),
            Op::Relu => relu::run(node, inputs, owned),
            Op::MaxPool(m) => m.run(node, sparse(node, inputs, 0)?).map(Value::Sparse),
            Op::AvgPool => Ok(Value::Dense(avg_pool::run(sparse(node, inputs, 0)?))),
            Op::Concat => concat::run(node, inputs),
            Op::Forward => match owned {
                Some(v) => Ok(v),
                None => Ok(Value::Sparse(sparse(node, inputs, 0)?.clone())),
            },
        }
    }

    /// Whether the op can reuse its first input's storage.
    pub fn in_place(&self) -> bool {
        matches!(self, Op::Relu | Op::Forward)
    }
}

/// Input `i` as a sparse value (the graph is type-checked at load, so a mismatch is an
/// internal error).
pub(crate) fn sparse<'v>(node: &str, inputs: &[&'v Value], i: usize) -> Result<&'v SparseValue> {
    match inputs.get(i) {
        Some(Value::Sparse(s)) => Ok(s),
        _ => Err(Error::featurize(
            node,
            format!("internal: input {i} is not a sparse value"),
        )),
    }
}

// === builder helpers ===

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
