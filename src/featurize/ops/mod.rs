//! Featurizer node types: one file per node type, one registration line each.
//!
//! A node type is a builder (`fn(&BuildCtx) -> Result<Built>`) registered under its
//! `(domain, op_type)` in [`registry`]. The builder validates the [`NodeSpec`] against the
//! types of the values flowing in and returns an [`Op`] in one of three roles:
//!
//! - [`Stencil`]: sparse → sparse over a kernel window (`SparseConv`, `SparseMaxPool`,
//!   `SparseReLU`). The executor streams row bands through stencils: it finds each output
//!   point's neighbours, gives points with the same receptive field one shared output row
//!   (see `jobs`), and asks the stencil only to [`compute`](Stencil::compute) those rows.
//! - [`Op::GlobalAvgPool`]: sparse → dense `[1, C]` mean, accumulated band by band.
//! - [`DenseOp`]: dense → dense (`Concat`), run once after the sparse part.
//!
//! Unknown `(domain, op_type)` pairs are load errors naming the node; nothing stands in for
//! an unknown op.
//!
//! [`NodeSpec`]: crate::featurize::spec::NodeSpec

mod avg_pool;
mod build;
mod concat;
mod max_pool;
mod relu;
mod sparse_conv;

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

pub(crate) use build::{out_stride, window_attrs, BuildCtx, Built};

use std::ops::Range;

use super::coords::Coords;
use super::jobs::{task_jobs, TaskJobs};
use super::rulebook::{Geometry, Search};
use super::search_memo::{MemoChunk, MemoUse};
use super::window::Window;
use crate::error::Result;
use crate::simd::kernels::Kernels;

/// Domain of the sparse node types.
pub const SPARSE_DOMAIN: &str = "ai.dashrank.sparse";

/// Largest accepted `kernel_size`.
pub(crate) const MAX_KERNEL: i64 = 31;
/// Largest accepted `stride` and `dilation`.
pub(crate) const MAX_STRIDE: i64 = 1 << 16;
/// Largest tensor stride a value may reach.
pub(crate) const MAX_TENSOR_STRIDE: u64 = 1 << 40;

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

/// A validated node operation, by role.
#[derive(Debug)]
pub(crate) enum Op {
    /// Sparse → sparse over a kernel window.
    Stencil(Box<dyn Stencil>),
    /// `SparseGlobalAvgPool`: sparse → dense mean.
    GlobalAvgPool,
    /// Dense → dense.
    Dense(Box<dyn DenseOp>),
}

/// Which input rows a stencil's output rows depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reach {
    /// Window offsets at the input tensor stride.
    pub geom: Geometry,
    /// Layer stride (1 keeps the input coordinates).
    pub stride: u64,
    /// Input tensor stride.
    pub t_in: u64,
    /// Output tensor stride, `t_in · stride`.
    pub t_out: u64,
}

impl Reach {
    /// Output rows below `h_in − lag` are final once every input row below `h_in` is: an
    /// output row `R` reads input rows up to `R + a_max` and, when strided, takes its
    /// coordinates from input rows `R .. R + t_out`.
    pub fn lag(&self) -> i64 {
        let a_max = self.geom.offsets.last().copied().unwrap_or(0).max(0);
        if self.stride == 1 {
            a_max
        } else {
            a_max.max(self.t_out as i64 - 1)
        }
    }

    /// Lowest input row an output row `R` reads, relative to `R` (≤ 0).
    pub fn reach_back(&self) -> i64 {
        self.geom.offsets.first().copied().unwrap_or(0).min(0)
    }
}

/// A sparse → sparse node computed row band by row band.
///
/// The executor owns coordinates, neighbour search, row sharing and memory; a stencil only
/// says which input rows its outputs read ([`reach`](Self::reach)) and computes output rows
/// from their neighbour lists ([`compute`](Self::compute)).
pub(crate) trait Stencil: fmt::Debug + Send + Sync {
    /// The `op_type` this stencil was built from (for traces).
    fn op_type(&self) -> &'static str;
    /// Window geometry and strides.
    fn reach(&self) -> &Reach;
    /// Input channels.
    fn cin(&self) -> usize;
    /// Output channels.
    fn cout(&self) -> usize;
    /// Whether this is a plain `SparseReLU` (a candidate for [`fuse_relu`](Self::fuse_relu)).
    fn is_relu(&self) -> bool {
        false
    }
    /// Rewrite hook: apply a ReLU to this stencil's output from now on. Returns whether the
    /// stencil can (then the ReLU node is removed).
    fn fuse_relu(&mut self) -> bool {
        false
    }
    /// Whether [`compute`](Self::compute) uses shared products (`TaskJobs::hot`): the
    /// executor then numbers the pairs whose input row is shared.
    fn wants_products(&self) -> bool {
        false
    }
    /// Multiply-adds per `(output, input)` neighbour pair of a direct evaluation (for the
    /// dense-counted GMAC figures of the benchmarks); 0 for stencils without products.
    fn macs_per_pair(&self) -> u64 {
        0
    }
    /// The products `input.row(rows[i]) · W[κ]` of the given input rows, for every κ and
    /// every `i` in `wanted[κ]` (ascending), at `[κ, i]` of a `[K, rows.len(), cout]` table,
    /// each exactly as [`compute`](Self::compute) would compute it (the other entries stay
    /// zero: no job reads them); `None` for stencils without products. `grain` is the
    /// `with_min_len` of its parallel loops (see `rulebook::grain`).
    fn row_products(
        &self,
        _input: &Window<'_>,
        _rows: &[u32],
        _wanted: &[Vec<u32>],
        _grain: usize,
        _k: &Kernels,
    ) -> Option<Vec<f32>> {
        None
    }
    /// The products of a job list's repeated pairs (`TaskJobs::hot`, in slot order), for
    /// [`Part::hot`]; empty for stencils without products.
    fn hot_products(&self, _jobs: &TaskJobs, _input: &Window<'_>, _k: &Kernels) -> Vec<f32> {
        Vec::new()
    }
    /// Computes output row `i` of `out` (`[part.range.len(), cout]`) from the neighbour
    /// pairs `(κ, input row id)` (in visiting order) of job `part.range.start + i` over the
    /// rows of `input`'s table, reading precomputed products from `products` and
    /// `part.hot` where it has them. Every element of `out` is written; its prior contents
    /// are unspecified. Returns the number of pairs it multiplied (each
    /// [`macs_per_pair`](Self::macs_per_pair) multiply-adds; the precomputed products not
    /// counted).
    fn compute(
        &self,
        part: &Part<'_>,
        input: &Window<'_>,
        products: Option<&RowProducts>,
        out: &mut [f32],
        k: &Kernels,
    ) -> u64;
    /// Computes one row per output point of the output rows `rows` of `out` into `dst`
    /// (`[points, cout]`, point order), every receptive field treated as distinct, exactly
    /// as [`compute`](Self::compute) would, its neighbour searches using their layer
    /// group's memo as `memo` says; returns the number of neighbour pairs and what the
    /// searches recorded. The input must not be constant.
    fn compute_direct(
        &self,
        input: &Window<'_>,
        out: &Coords,
        rows: Range<usize>,
        dst: &mut [f32],
        memo: MemoUse<'_>,
        k: &Kernels,
    ) -> (u64, Option<MemoChunk>) {
        direct_by_jobs(self, input, out, rows, dst, memo, k)
    }
}

/// A range of jobs of one list, computed as one unit of parallel work (a list is split into
/// several when its jobs are heavy, so that the threads stay balanced).
pub(crate) struct Part<'a> {
    /// The list.
    pub jobs: &'a TaskJobs,
    /// The jobs to compute.
    pub range: Range<usize>,
    /// The list's [`Stencil::hot_products`].
    pub hot: &'a [f32],
}

impl<'a> Part<'a> {
    /// All of `jobs`, without hot products.
    pub fn whole(jobs: &'a TaskJobs) -> Self {
        Self {
            jobs,
            range: 0..jobs.len(),
            hot: &[],
        }
    }

    /// The pairs of the part's `i`-th job.
    #[inline]
    pub fn pairs(&self, i: usize) -> &'a [(u32, u32)] {
        self.jobs.pairs(self.range.start + i)
    }
}

/// Products of a band step's shared input rows with the κ its jobs read them with (see
/// [`Stencil::row_products`]).
#[derive(Debug)]
pub(crate) struct RowProducts {
    /// Per input row id: its index among the rows with products, or `u32::MAX`.
    pub index: Vec<u32>,
    /// Number of rows with products.
    pub rows: usize,
    /// `[K, rows, cout]`: the products some job reads (see [`Stencil::row_products`]).
    pub table: Vec<f32>,
    /// Number of products computed.
    pub computed: u64,
}

impl RowProducts {
    /// The product of input row `id` with `W[κ]`, if computed.
    #[inline]
    pub fn get(&self, kappa: u32, id: u32, cout: usize) -> Option<&[f32]> {
        match self.index[id as usize] {
            u32::MAX => None,
            r => Some(&self.table[(kappa as usize * self.rows + r as usize) * cout..][..cout]),
        }
    }
}

/// Default [`Stencil::compute_direct`]: one unique job per point, then [`Stencil::compute`].
fn direct_by_jobs<S: Stencil + ?Sized>(
    s: &S,
    input: &Window<'_>,
    out: &Coords,
    rows: Range<usize>,
    dst: &mut [f32],
    memo: MemoUse<'_>,
    k: &Kernels,
) -> (u64, Option<MemoChunk>) {
    let search = Search {
        memo,
        ..Search::new(&s.reach().geom, k.level)
    };
    let mut ph = task_jobs(input, out, rows, search, None, false);
    s.compute(&Part::whole(&ph.unique), input, None, dst, k);
    (ph.point_pairs, ph.memo.take())
}

/// A dense → dense node, run once after all row bands.
pub(crate) trait DenseOp: fmt::Debug + Send + Sync {
    /// The output from the inputs (each `[1, C_i]`, type-checked at build).
    fn run(&self, inputs: &[&[f32]]) -> Vec<f32>;
}
