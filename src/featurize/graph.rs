//! [`FeaturizerGraph`]: a validated, planned featurizer graph, and its options.

use std::sync::Arc;

use rayon::prelude::*;

use super::exec::{finish_slabs, FeaturizeStats, Run};
use super::memory::{BufferPool, Memory};
use super::plan::{Plan, CHUNK_BYTES};
use super::slabs::{self, SLAB_MIN_ENTRIES};
use super::spec::GraphSpec;
use super::{passes, validate};
use crate::error::{Error, Result};
use crate::pattern::CsrPattern;
use crate::pools::CallerPools;
use crate::simd::kernels::Kernels;
use crate::simd::SimdLevel;

/// Options for [`FeaturizerGraph::run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeaturizeOptions {
    /// Worker threads. `None` runs in the current rayon context (the global pool, i.e. all
    /// cores, unless the caller is inside `ThreadPool::install`); `Some(n)` runs in a pool of
    /// `n` threads, shared by every graph and model of the process that uses `n` (started on
    /// first use, ended when the last holder is dropped). `Some(0)` is an error.
    pub threads: Option<usize>,
    /// Instruction-set level of the kernels ([`SimdLevel::best`] by default). Every level
    /// gives bit-identical features.
    pub simd: SimdLevel,
    /// Most bytes of featurizer memory in use at once (row windows, feature tables,
    /// neighbour pairs; see the `plan` module docs for how it depends on the band size and
    /// the matrix width). A run that would need more fails with
    /// [`ErrorKind::Featurize`](crate::ErrorKind::Featurize) instead of exhausting the host.
    /// Default [`DEFAULT_MEMORY_BUDGET`](Self::DEFAULT_MEMORY_BUDGET); `usize::MAX` disables it.
    pub memory_budget: usize,
    /// Pattern entries per row band (of each slab, see [`FeaturizerGraph`]'s `# Threads`).
    /// `None` picks about 32 MiB of features of the widest layer per band, shared by the
    /// slabs that run side by side (96 Ki to 256 Ki entries); `Some(usize::MAX)` runs the
    /// whole pattern (each slab) as one band. Results do not depend on it. `Some(0)` is an
    /// error.
    pub band_entries: Option<usize>,
}

impl FeaturizeOptions {
    /// The default memory budget: 4 GiB.
    pub const DEFAULT_MEMORY_BUDGET: usize = 4 << 30;
}

impl Default for FeaturizeOptions {
    fn default() -> Self {
        Self {
            threads: None,
            simd: SimdLevel::default(),
            memory_budget: Self::DEFAULT_MEMORY_BUDGET,
            band_entries: None,
        }
    }
}

/// Sizes of the executor's work that tests shrink (results never depend on them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunKnobs {
    /// Bytes of output rows per direct-path call of a step.
    pub chunk_bytes: usize,
    /// Fewest pattern entries per slab (`slabs::SLAB_MIN_ENTRIES`).
    pub slab_min_entries: usize,
}

impl Default for RunKnobs {
    fn default() -> Self {
        Self {
            chunk_bytes: CHUNK_BYTES,
            slab_min_entries: SLAB_MIN_ENTRIES,
        }
    }
}

/// A validated featurizer graph: typed nodes with their weights as plain arrays, and the
/// plan that runs them.
///
/// Built from a [`GraphSpec`] (which `bundle::decode` decodes from the bundle's featurizer
/// ONNX file, or which tests write by hand) by [`from_spec`](Self::from_spec): validation,
/// then rewrite passes (ReLU fusion), then an execution plan. Run on a pattern by
/// [`run`](Self::run). Semantics are those of `docs/bundle-format.md` §3.1 (MinkowskiEngine
/// 0.5, 2-D, one batch): the graph input is one point per stored entry at `(row, col)`,
/// tensor stride 1, one channel of value 1.0.
///
/// # Streaming and memory
///
/// A run streams the pattern through the whole layer stack in bands of rows (see
/// [`FeaturizeOptions::band_entries`]), keeping of each layer only the rows later bands
/// still read, so its memory depends on the band size, the matrix width and the number of
/// slabs run at once (see `# Threads`), not on the number of entries; it is charged against
/// [`FeaturizeOptions::memory_budget`].
///
/// # Determinism
///
/// `run` returns bit-identical results for any thread count, any band size and any
/// [`SimdLevel`], on any machine. Every value is defined by the coordinates alone:
///
/// - a conv output row is `Σ_κ p_κ + bias`, then the fused ReLU: the sum over the point's
///   neighbours in ascending kernel index κ (`κ = i_r + k·i_c`, row offset fastest), the
///   first product taken as is and the others added in turn, where each product
///   `p_κ = x · W[κ]` is one fused multiply-add chain over the input channels in ascending
///   order starting from +0.0 (a point without neighbours gets `0 + bias`);
/// - a max-pool output row is its first neighbour's row, then the NaN-propagating
///   per-channel max with each further neighbour, neighbours in visiting order (kernel row
///   `i_r` ascending, then `i_c`);
/// - a global average pool is a per-channel `f64` sum in a fixed binary tree over the rows
///   (each row's points in column order), divided by the number of points, rounded to
///   `f32`.
///
/// Points whose neighbours carry the same rows (the pattern's points, which all carry 1.0,
/// and the many repeated receptive fields of real matrices) share one output row computed
/// once; that changes the work, not the values.
///
/// # Threads
///
/// A run uses the threads of its rayon pool (see [`FeaturizeOptions::threads`]) two ways. A
/// pattern of at least 2 Mi entries is cut into *slabs*, ranges of rows of about equal
/// work (entries, and two per non-empty row; at least 1 Mi entries each; one per thread, or
/// a few per thread when the layers read only a few rows around each point), which run side
/// by side, each streaming its rows (and the margin rows its rows depend on, recomputed by
/// both neighbours) through the whole layer stack; their pooled sums are joined at the end.
/// Within a run, every band step splits its work into parallel tasks. Slabs meet once;
/// tasks meet at every step. Each slab's run holds its own band windows, so a run cut into
/// `s` slabs holds up to `s` times the memory of one (all of it charged to the one budget).
///
/// `Send + Sync`, shared by reference across threads; `run` takes `&self`. The graph is
/// immutable after construction except for a pool of released feature tables (behind a
/// mutex) that later bands and runs reuse, which avoids page-faulting fresh multi-MB
/// allocations for every band. The pool holds at most 512 MiB while a run is going and at
/// most 64 MiB between runs. Concurrent runs take distinct buffers; buffer contents never
/// affect results. A clone starts with an empty pool.
#[derive(Debug, Clone)]
pub struct FeaturizerGraph {
    plan: Arc<Plan>,
    /// Released feature tables, reused by later bands and runs.
    pool: BufferPool,
    /// The shared rayon pools this graph has used (`threads: Some(n)`, one per calling
    /// thread), held while the graph lives: a host that releases its models frees them.
    thread_pools: Arc<CallerPools>,
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
        let mut ir = validate::validate(spec)?;
        passes::run_all(&mut ir);
        Ok(Self {
            plan: Arc::new(Plan::new(ir)),
            pool: BufferPool::default(),
            thread_pools: Arc::default(),
        })
    }

    /// Width `F` of the output feature vector.
    pub fn output_dim(&self) -> usize {
        self.plan.output_dim
    }

    /// Runs the featurizer on a pattern and returns the `F = output_dim()` features.
    ///
    /// An empty pattern (no stored entries) pools to zeros.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for `threads:
    /// Some(0)`, `band_entries: Some(0)`, a SIMD level the CPU lacks, or more than
    /// `u32::MAX - 1` entries; [`ErrorKind::Featurize`](crate::ErrorKind::Featurize) when the
    /// run would exceed the memory budget.
    pub fn run(&self, pattern: &CsrPattern, opts: &FeaturizeOptions) -> Result<Vec<f32>> {
        self.run_with_stats(pattern, opts).map(|(v, _)| v)
    }

    /// [`run`](Self::run), also returning the run's figures (peak memory, bands,
    /// dense-counted multiply-adds).
    pub fn run_with_stats(
        &self,
        pattern: &CsrPattern,
        opts: &FeaturizeOptions,
    ) -> Result<(Vec<f32>, FeaturizeStats)> {
        self.run_tuned(pattern, opts, RunKnobs::default())
    }

    /// [`run_with_stats`](Self::run_with_stats) with the executor's sizes set by `knobs`
    /// (tests shrink them to split every step, or every matrix into slabs).
    pub(crate) fn run_tuned(
        &self,
        pattern: &CsrPattern,
        opts: &FeaturizeOptions,
        knobs: RunKnobs,
    ) -> Result<(Vec<f32>, FeaturizeStats)> {
        if pattern.nnz() >= u32::MAX as usize {
            return Err(Error::invalid_argument(format!(
                "pattern has {} entries, the featurizer supports fewer than {}",
                pattern.nnz(),
                u32::MAX
            )));
        }
        if opts.band_entries == Some(0) {
            return Err(Error::invalid_argument("band_entries must be at least 1"));
        }
        let kernels = Kernels::for_level(opts.simd.require()?);
        let go = || {
            let result = self.run_slabs(pattern, opts, kernels, knobs);
            self.pool.trim();
            result
        };
        match opts.threads {
            None => go(),
            Some(0) => Err(Error::invalid_argument("threads must be at least 1")),
            Some(n) => self.thread_pools.install(n, go).map_err(|e| {
                Error::invalid_argument(format!("cannot start {n} featurizer threads: {e}"))
            })?,
        }
    }

    /// Runs the pattern as one run, or cut into slabs run side by side on the current
    /// rayon pool's threads (see `slabs`).
    fn run_slabs(
        &self,
        pattern: &CsrPattern,
        opts: &FeaturizeOptions,
        kernels: &'static Kernels,
        knobs: RunKnobs,
    ) -> Result<(Vec<f32>, FeaturizeStats)> {
        let mem = Memory::new(opts.memory_budget);
        let threads = rayon::current_num_threads();
        let slabs = slabs::split(&self.plan, pattern, threads, knobs.slab_min_entries);
        log::trace!("featurizer on {threads} thread(s), {} slab(s)", slabs.len());
        let side_by_side = slabs.len().min(threads);
        let band = opts
            .band_entries
            .unwrap_or_else(|| self.plan.auto_band(side_by_side));
        let run = |slab| {
            let mut run = Run::new(&self.plan, pattern, kernels, &self.pool, &mem).in_slab(slab);
            run.chunk_bytes = knobs.chunk_bytes;
            run
        };
        if let [slab] = slabs[..] {
            return run(slab).run(band);
        }
        // One task per slab, so each thread takes a slab of its own.
        let parts: Result<Vec<_>> = slabs
            .into_par_iter()
            .with_max_len(1)
            .map(|slab| run(slab).run_slab(band))
            .collect();
        finish_slabs(&self.plan, kernels, parts?)
    }

    /// The execution plan.
    #[cfg(test)]
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Bytes held by the buffer pool.
    #[cfg(test)]
    pub(crate) fn pool_bytes(&self) -> usize {
        self.pool.bytes()
    }
}
