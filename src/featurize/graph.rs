//! [`FeaturizerGraph`]: a validated, typed featurizer graph, and its execution.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use super::coords::Coords;
use super::ops::{
    registry, BufferPool, BuildCtx, Features, Memo, Op, SparseValue, Value, ValueType,
};
use super::spec::GraphSpec;
use crate::error::{Error, Result};
use crate::pattern::CsrPattern;
use crate::simd::SimdLevel;

/// Options for [`FeaturizerGraph::run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeaturizeOptions {
    /// Worker threads. `None` runs in the current rayon context (the global pool, i.e. all
    /// cores, unless the caller is inside `ThreadPool::install`); `Some(n)` runs in a pool of
    /// `n` threads, created once per distinct `n` and reused. `Some(0)` is an error.
    pub threads: Option<usize>,
    /// Instruction-set level of the kernels ([`SimdLevel::best`] by default). Every level
    /// gives bit-identical features.
    pub simd: SimdLevel,
}

/// One node of the execution plan.
#[derive(Debug, Clone)]
struct Step {
    /// Node name for errors.
    name: String,
    op: Op,
    /// Value slots read, in order.
    inputs: Vec<usize>,
    /// Slot written.
    output: usize,
    /// Whether this step is the last reader of `inputs[0]` (so an in-place op may take it).
    consumes_first: bool,
    /// Slots to free after this step (their last reader).
    release: Vec<usize>,
}

/// A validated featurizer graph: typed nodes with their weights as plain arrays.
///
/// Built from a [`GraphSpec`] (which `model::bundle` decodes from the bundle's featurizer
/// ONNX file, or which tests write by hand) by [`from_spec`](Self::from_spec); run on a
/// pattern by [`run`](Self::run). Semantics are those of `docs/bundle-format.md` §3.1
/// (MinkowskiEngine 0.5, 2-D, one batch): the graph input is one point per stored entry at
/// `(row, col)`, tensor stride 1, one channel of value 1.0.
///
/// # Determinism
///
/// `run` returns bit-identical results for any thread count on a given machine. Every
/// output point of a conv layer is computed by one task; tasks are ranges of whole output
/// rows fixed by the coordinates alone, and so is everything inside a task.
///
/// A conv reading a *memo* value (the pattern itself, whose points all carry 1.0, and conv
/// outputs with few distinct receptive fields; see `ops::memo`) computes each distinct
/// output row once from its key — the neighbours' `(κ, row id)` in visiting order — as the
/// sum, starting from 0 in key order, of per-row products `table[id] · W[κ]` (each one sum
/// over input channels in ascending order), then the bias. Row ids are numbered in
/// first-occurrence order over tasks in task order. A conv reading dense features:
///
/// - with `Cin ≥ 4` (tiled path), the task's points are split into consecutive tiles of 64
///   points; each output value is one sum, starting from 0, over the present neighbours in
///   ascending kernel index κ (`κ = i_r + k·i_c`, row offset fastest) and within one κ over
///   input channels in ascending order; then the bias is added;
/// - with `Cin < 4` (pointwise path), the neighbours are taken in visiting order (kernel row
///   `i_r` ascending, then column), and the products go to two partial sums — even and odd
///   input channels, or for `Cin = 1` even- and odd-position neighbours — that are added at
///   the end, then the bias.
///
/// Global average pooling sums in `f64` per channel: for a memo value, each distinct row
/// times its point count in row order; over the conv tasks' blocks in point order, then
/// the block sums in task order, when it reads a dense conv output (the conv sums its
/// output right after writing it); otherwise over fixed chunks of 4096 points, then
/// the chunk sums in order. The only machine-dependent choice is the inner-loop variant:
/// on x86-64 CPUs with AVX2 and FMA the multiply-adds are fused, which can change the last
/// bits relative to other CPUs.
///
/// # Threads
///
/// `Send + Sync`, shared by reference across threads; `run` takes `&self`. The graph is
/// immutable after construction except for a pool of released layer feature buffers
/// (behind a mutex) that later layers and later runs reuse, which avoids re-faulting tens
/// of MB of fresh pages per layer. The pool keeps at most 4 buffers, the largest ones —
/// typically the 4 largest layer outputs of the last runs (`points × channels × 4` bytes
/// each; about 270 MB after a 725k-entry pattern with 32 channels) — until the graph is
/// dropped. Concurrent runs take
/// distinct buffers; buffer contents never affect results (every element is overwritten).
/// A clone starts with an empty pool.
#[derive(Debug, Clone)]
pub struct FeaturizerGraph {
    steps: Vec<Step>,
    n_slots: usize,
    input_slot: usize,
    output_slot: usize,
    output_dim: usize,
    /// Released layer buffers, reused by later layers and runs.
    pool: BufferPool,
    /// rayon pools for `threads: Some(n)`, created on first use and dropped with the graph
    /// (not process-wide statics, so an embedding host that releases its model frees them).
    thread_pools: Arc<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>>,
}

impl FeaturizerGraph {
    /// Validates a graph description and builds the execution plan.
    ///
    /// Checks, each failing with [`ErrorKind::Featurize`](crate::ErrorKind::Featurize) naming
    /// the node (or `graph` for graph-level problems): exactly one graph input and one graph
    /// output; every node's `(domain, op_type)` is known; required attributes present and in
    /// range, no unknown attributes; weights and biases are initializers of the right shape
    /// (`[kernel_size², Cin, Cout]` with `Cin` the channels flowing in, `[Cout]`) with finite
    /// values; every value input is defined earlier (nodes are in topological order) and of
    /// the right kind (sparse or dense); each node has one output with a fresh name; every
    /// node output and every initializer is used; the graph output is dense.
    pub fn from_spec(spec: &GraphSpec) -> Result<Self> {
        let graph_err = |reason: String| Error::featurize("graph", reason);
        if spec.inputs.len() != 1 {
            return Err(graph_err(format!(
                "expected exactly 1 graph input (the pattern), found {}",
                spec.inputs.len()
            )));
        }
        if spec.outputs.len() != 1 {
            return Err(graph_err(format!(
                "expected exactly 1 graph output, found {}",
                spec.outputs.len()
            )));
        }
        let input_name = &spec.inputs[0];
        if spec.initializers.contains_key(input_name) {
            return Err(graph_err(format!(
                "graph input '{input_name}' is also an initializer"
            )));
        }

        let mut types: HashMap<String, ValueType> = HashMap::new();
        let mut slots: HashMap<String, usize> = HashMap::new();
        let mut producer: Vec<String> = Vec::new(); // node name per slot, for "unused" errors
        types.insert(
            input_name.clone(),
            ValueType::Sparse {
                channels: 1,
                stride: 1,
            },
        );
        slots.insert(input_name.clone(), 0);
        producer.push(format!("graph input '{input_name}'"));

        let mut used_inits: BTreeSet<String> = BTreeSet::new();
        let mut steps: Vec<Step> = Vec::new();
        for (i, node) in spec.nodes.iter().enumerate() {
            let name = if node.name.is_empty() {
                format!("#{i} {}", node.op_type)
            } else {
                node.name.clone()
            };
            let Some(builder) = registry().get(&(node.domain.as_str(), node.op_type.as_str()))
            else {
                let known_domain =
                    node.domain.is_empty() || node.domain == super::ops::SPARSE_DOMAIN;
                let reason = if known_domain {
                    format!(
                        "unknown op type '{}' in domain '{}'",
                        node.op_type, node.domain
                    )
                } else {
                    format!(
                        "unknown domain '{}' (op type '{}')",
                        node.domain, node.op_type
                    )
                };
                return Err(Error::featurize(name, reason));
            };
            let ctx = BuildCtx {
                node,
                name: &name,
                initializers: &spec.initializers,
                types: &types,
            };
            let built = builder(&ctx)?;
            if node.outputs.len() != 1 || node.outputs[0].is_empty() {
                return Err(Error::featurize(
                    name,
                    format!("expected exactly 1 named output, found {:?}", node.outputs),
                ));
            }
            let out = &node.outputs[0];
            if types.contains_key(out) || spec.initializers.contains_key(out) {
                return Err(Error::featurize(
                    name,
                    format!("output '{out}' is already defined"),
                ));
            }
            used_inits.extend(built.initializers);
            let inputs: Vec<usize> = built.value_inputs.iter().map(|n| slots[n]).collect();
            let slot = producer.len();
            producer.push(name.clone());
            types.insert(out.clone(), built.output);
            slots.insert(out.clone(), slot);
            steps.push(Step {
                name,
                op: built.op,
                inputs,
                output: slot,
                consumes_first: false,
                release: Vec::new(),
            });
        }

        let out_name = &spec.outputs[0];
        let (output_slot, output_dim) = match (slots.get(out_name), types.get(out_name)) {
            (Some(&s), Some(ValueType::Dense { channels })) => (s, *channels),
            (Some(_), Some(ValueType::Sparse { .. })) => {
                return Err(graph_err(format!(
                    "graph output '{out_name}' is sparse, expected a dense [1, F] value"
                )))
            }
            _ => {
                return Err(graph_err(format!(
                    "graph output '{out_name}' is not produced by any node"
                )))
            }
        };
        if let Some(unused) = spec.initializers.keys().find(|k| !used_inits.contains(*k)) {
            return Err(Error::featurize(
                unused.clone(),
                "initializer is not used by any node",
            ));
        }

        // Last reader of every slot; the graph output is never released.
        let n_slots = producer.len();
        let mut last: Vec<Option<usize>> = vec![None; n_slots];
        for (si, step) in steps.iter().enumerate() {
            for &s in &step.inputs {
                last[s] = Some(si);
            }
        }
        for (slot, l) in last.iter().enumerate() {
            if l.is_none() && slot != output_slot {
                return Err(Error::featurize(
                    producer[slot].clone(),
                    "output is not used by any node nor the graph output",
                ));
            }
        }
        // Fuse `SparseConv → SparseReLU` when the ReLU is the conv output's only reader.
        let mut readers = vec![0usize; n_slots];
        for step in &steps {
            for &s in &step.inputs {
                readers[s] += 1;
            }
        }
        let mut producer_step: Vec<Option<usize>> = vec![None; n_slots];
        for (si, step) in steps.iter().enumerate() {
            producer_step[step.output] = Some(si);
        }
        for j in 0..steps.len() {
            let s = steps[j].inputs.first().copied();
            let Some(s) = s else { continue };
            let fusable = matches!(steps[j].op, Op::Relu) && readers[s] == 1 && s != output_slot;
            if let (true, Some(i)) = (fusable, producer_step[s]) {
                if let Op::Conv(conv) = &mut steps[i].op {
                    conv.relu = true;
                    steps[j].op = Op::Forward;
                }
            }
        }
        // Let a conv sum its output in its own pass when a global average pool reads it,
        // directly or through the fused ReLU (`Forward` passes the value on unchanged).
        let mut pooled: Vec<bool> = vec![false; n_slots];
        for step in &steps {
            if matches!(step.op, Op::AvgPool) {
                pooled[step.inputs[0]] = true;
            }
        }
        for step in steps.iter().rev() {
            if matches!(step.op, Op::Forward) && pooled[step.output] {
                pooled[step.inputs[0]] = true;
            }
        }
        for step in &mut steps {
            if let Op::Conv(conv) = &mut step.op {
                conv.sums = pooled[step.output];
            }
        }
        for (si, step) in steps.iter_mut().enumerate() {
            let mut release: Vec<usize> = step
                .inputs
                .iter()
                .copied()
                .filter(|&s| last[s] == Some(si) && s != output_slot)
                .collect();
            release.sort_unstable();
            release.dedup();
            let first = step.inputs.first().copied();
            step.consumes_first = step.op.in_place()
                && first.is_some_and(|f| {
                    release.contains(&f) && step.inputs.iter().filter(|&&s| s == f).count() == 1
                });
            step.release = release;
        }
        Ok(Self {
            steps,
            n_slots,
            input_slot: 0,
            output_slot,
            output_dim,
            pool: BufferPool::default(),
            thread_pools: Arc::default(),
        })
    }

    /// Width `F` of the output feature vector.
    pub fn output_dim(&self) -> usize {
        self.output_dim
    }

    /// Runs the featurizer on a pattern and returns the `F = output_dim()` features.
    ///
    /// An empty pattern (no stored entries) pools to zeros. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for `threads:
    /// Some(0)` or more than `u32::MAX - 1` entries.
    pub fn run(&self, pattern: &CsrPattern, opts: &FeaturizeOptions) -> Result<Vec<f32>> {
        if pattern.nnz() >= u32::MAX as usize {
            return Err(Error::invalid_argument(format!(
                "pattern has {} entries, the featurizer supports fewer than {}",
                pattern.nnz(),
                u32::MAX
            )));
        }
        match opts.threads {
            None => self.run_here(pattern),
            Some(0) => Err(Error::invalid_argument("threads must be at least 1")),
            Some(n) => self.thread_pool(n)?.install(|| self.run_here(pattern)),
        }
    }

    fn run_here(&self, pattern: &CsrPattern) -> Result<Vec<f32>> {
        let mut slots: Vec<Option<Value>> = vec![None; self.n_slots];
        let n = pattern.nnz();
        slots[self.input_slot] = Some(Value::Sparse(SparseValue {
            coords: Arc::new(Coords::from_pattern(pattern)),
            // Every point of the pattern carries the value 1.
            feats: Features::Memo(Memo::constant(n, vec![1.0])),
            channels: 1,
            sums: None,
        }));
        let result = self.run_steps(&mut slots);
        // Hand every remaining feature buffer back to the pool.
        for v in slots.into_iter().flatten() {
            if let Value::Sparse(s) = v {
                s.release(&self.pool);
            }
        }
        result
    }

    fn run_steps(&self, slots: &mut [Option<Value>]) -> Result<Vec<f32>> {
        let trace = log::log_enabled!(log::Level::Trace);
        for step in &self.steps {
            let started = trace.then(std::time::Instant::now);
            let owned = if step.consumes_first {
                slots[step.inputs[0]].take()
            } else {
                None
            };
            let value = {
                let mut inputs: Vec<&Value> = Vec::with_capacity(step.inputs.len());
                for &s in &step.inputs {
                    if owned.is_some() && s == step.inputs[0] {
                        continue;
                    }
                    inputs.push(slots[s].as_ref().ok_or_else(|| {
                        Error::featurize(&step.name, format!("internal: value slot {s} is empty"))
                    })?);
                }
                step.op.run(&step.name, &inputs, owned, &self.pool)?
            };
            for &s in &step.release {
                if let Some(Value::Sparse(v)) = slots[s].take() {
                    v.release(&self.pool);
                }
            }
            if let Some(t) = started {
                log::trace!(
                    "featurizer step '{}': {:.3} ms",
                    step.name,
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
            slots[step.output] = Some(value);
        }
        match slots[self.output_slot].take() {
            Some(Value::Dense(v)) if v.len() == self.output_dim => Ok(v),
            _ => Err(Error::featurize(
                "graph",
                "internal: output value missing or mis-sized",
            )),
        }
    }
}

impl FeaturizerGraph {
    /// This graph's rayon pool of `n` threads, created on first use.
    fn thread_pool(&self, n: usize) -> Result<Arc<rayon::ThreadPool>> {
        let mut pools = self.thread_pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pools.get(&n) {
            return Ok(Arc::clone(p));
        }
        let p = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("dashrank-featurize-{i}"))
            .build()
            .map_err(|e| {
                Error::invalid_argument(format!("cannot start {n} featurizer threads: {e}"))
            })?;
        let p = Arc::new(p);
        pools.insert(n, Arc::clone(&p));
        Ok(p)
    }
}
