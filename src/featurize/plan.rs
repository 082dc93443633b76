//! Third stage of building a graph: the execution plan.
//!
//! The plan orders the work of a run and owns what is fixed per graph: the stencil steps in
//! topological order (every band runs them all, in order), the global-average-pool taps and
//! the dense steps run after the last band, which stencil step is the last reader of each
//! sparse value (its window is cut down to the halo right after that step, so at most two
//! band-sized windows are alive at once), and the automatic band size.
//!
//! # Memory
//!
//! Each sparse value `v` (channels `C_v`, tensor stride `t_v`) holds, between bands, only its
//! halo: the rows its readers still need, at most `h_v = lag + reach-back` pattern rows of
//! the readers (in rows of `v`: `⌈h_v / t_v⌉ + 1`). While a band runs, the value being
//! computed and the one it reads hold the band's rows too. With `B` the pattern entries of
//! a band and `W` the number of columns, the live featurizer memory is therefore at most
//!
//! ```text
//!   Σ_v (4·C_v + 12) · H_v                 halos of all sparse values
//! + 2 · max_v (4·C_v + 13) · (B + H_v)     the value computed and the value it reads
//! + per-task scratch (neighbour pairs, 8 bytes per pair) of the band
//! + 4·(k + 1) bytes per point of a band      a stride-1 chain's recorded searches
//! ```
//!
//! where `H_v ≤ (⌈h_v / t_v⌉ + 1) · ⌈W / t_v⌉` points (a halo row holds at most `⌈W / t_v⌉`
//! points) — a function of the band size and the matrix width, not of the number of
//! entries. Rows are never split, so `B` is at least the longest pattern row. A run cut
//! into slabs (`slabs`) holds this once per slab, the slabs' runs being side by side.

use std::sync::Arc;

use super::ops::{DenseOp, Op, Stencil, ValueType};
use super::validate::Ir;

/// One stencil step.
#[derive(Debug, Clone)]
pub(crate) struct StencilStep {
    /// Node name.
    pub name: String,
    /// The op.
    pub op: Arc<dyn Stencil>,
    /// Sparse slot read.
    pub input: usize,
    /// Sparse slot written.
    pub output: usize,
}

/// One dense step (after the last band).
#[derive(Debug, Clone)]
pub(crate) struct DenseStep {
    /// The op.
    pub op: Arc<dyn DenseOp>,
    /// Dense slots read.
    pub inputs: Vec<usize>,
    /// Dense slot written.
    pub output: usize,
}

/// The execution plan of a graph.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Stencils in topological order.
    pub stencils: Vec<StencilStep>,
    /// `(sparse slot read, dense slot written)` of every global average pool.
    pub pools: Vec<(usize, usize)>,
    /// Dense steps in topological order.
    pub dense: Vec<DenseStep>,
    /// Type of every slot.
    pub types: Vec<ValueType>,
    /// Stencil steps reading each slot.
    pub readers: Vec<Vec<usize>>,
    /// Whether each slot is read by a global average pool.
    pub pooled: Vec<bool>,
    /// Sparse slots to cut down to their halo after each stencil step (their last reader).
    pub trim_after: Vec<Vec<usize>>,
    /// Per stencil step, the earlier step whose neighbour searches it replays (see
    /// `search_memo`): the first of a chain of stride-1 steps of one geometry, each reading
    /// the one before.
    pub search_source: Vec<Option<usize>>,
    /// Per stencil step, the steps that replay its searches (it records them when any do).
    pub search_readers: Vec<Vec<usize>>,
    /// Graph input slot (the pattern).
    pub input_slot: usize,
    /// Graph output slot.
    pub output_slot: usize,
    /// Width of the output.
    pub output_dim: usize,
    /// Most channels of any sparse value.
    pub max_channels: usize,
}

/// Bytes of features of the widest value in the bands of all slabs running side by side,
/// when [`FeaturizeOptions::band_entries`] is not set (see [`Plan::auto_band`]). It trades
/// the cuts between bands (fewer with larger bands) against the band tables staying in the
/// caches the slabs share.
///
/// [`FeaturizeOptions::band_entries`]: super::FeaturizeOptions::band_entries
pub(crate) const BAND_BYTES: usize = 32 << 20;
/// Bytes of output rows a step on the direct path computes per call (see `exec`): small
/// enough that the next layers read them from cache.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;
/// Fewest automatic band entries. It trades the band tables' size against what each cut
/// between bands costs: a key used on both sides of a cut is computed in each band, and the
/// keys of wide layers (DASH's 256 channels, which 32 MiB alone would cut every 32 Ki
/// entries) are the dearest to compute twice.
pub(crate) const MIN_BAND: usize = 96 << 10;
/// Most automatic band entries.
pub(crate) const MAX_BAND: usize = 1 << 18;

/// Per stencil step, the step whose neighbour searches it can replay, and per step the
/// steps that replay its own: a stride-1 step reading the output of a stride-1 step of the
/// same geometry finds the same neighbours for the same points (its input points are that
/// step's input points), so it replays the searches of the chain's first step. A chain
/// starts after the graph input, whose searches give masks rather than pairs.
fn search_chains(
    stencils: &[StencilStep],
    input_slot: usize,
) -> (Vec<Option<usize>>, Vec<Vec<usize>>) {
    let mut source: Vec<Option<usize>> = vec![None; stencils.len()];
    let mut readers = vec![Vec::new(); stencils.len()];
    for (si, s) in stencils.iter().enumerate() {
        let Some(sp) = stencils[..si].iter().position(|p| p.output == s.input) else {
            continue;
        };
        let (p, rs) = (&stencils[sp], s.op.reach());
        let rp = p.op.reach();
        if rs.stride == 1 && rp.stride == 1 && rs.geom == rp.geom && p.input != input_slot {
            let root = source[sp].unwrap_or(sp);
            source[si] = Some(root);
            readers[root].push(si);
        }
    }
    (source, readers)
}

/// Per stencil step, the values to cut down after it: a value after its last stencil reader,
/// a value without stencil readers right after the step that produces it (the input, which
/// no step produces, is cut by the executor after it is fed).
fn trim_points(stencils: &[StencilStep], readers: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut trim_after = vec![Vec::new(); stencils.len()];
    for (slot, r) in readers.iter().enumerate() {
        match r.last() {
            Some(&last) => trim_after[last].push(slot),
            None => {
                if let Some(i) = stencils.iter().position(|s| s.output == slot) {
                    trim_after[i].push(slot);
                }
            }
        }
    }
    trim_after
}

impl Plan {
    /// The plan of a validated, rewritten graph.
    pub fn new(ir: Ir) -> Self {
        let n_slots = ir.types.len();
        let mut stencils = Vec::new();
        let mut pools = Vec::new();
        let mut dense = Vec::new();
        let mut readers = vec![Vec::new(); n_slots];
        let mut pooled = vec![false; n_slots];
        for node in ir.nodes {
            match node.op {
                Op::Stencil(op) => {
                    debug_assert_eq!(
                        ir.types[node.inputs[0]],
                        ValueType::Sparse {
                            channels: op.cin(),
                            stride: op.reach().t_in
                        }
                    );
                    readers[node.inputs[0]].push(stencils.len());
                    stencils.push(StencilStep {
                        name: node.name,
                        op: Arc::from(op),
                        input: node.inputs[0],
                        output: node.output,
                    });
                }
                Op::GlobalAvgPool => {
                    pooled[node.inputs[0]] = true;
                    pools.push((node.inputs[0], node.output));
                }
                Op::Dense(op) => dense.push(DenseStep {
                    op: Arc::from(op),
                    inputs: node.inputs,
                    output: node.output,
                }),
            }
        }
        let trim_after = trim_points(&stencils, &readers);
        let (search_source, search_readers) = search_chains(&stencils, ir.input_slot);
        let max_channels = ir
            .types
            .iter()
            .map(|t| match t {
                ValueType::Sparse { channels, .. } => *channels,
                ValueType::Dense { .. } => 0,
            })
            .max()
            .unwrap_or(1);
        let output_dim = match ir.types[ir.output_slot] {
            ValueType::Dense { channels } | ValueType::Sparse { channels, .. } => channels,
        };
        Self {
            stencils,
            pools,
            dense,
            types: ir.types,
            readers,
            pooled,
            trim_after,
            search_source,
            search_readers,
            input_slot: ir.input_slot,
            output_slot: ir.output_slot,
            output_dim,
            max_channels,
        }
    }

    /// Channels of a slot.
    pub fn channels(&self, slot: usize) -> usize {
        match self.types[slot] {
            ValueType::Dense { channels } | ValueType::Sparse { channels, .. } => channels,
        }
    }

    /// Tensor stride of a sparse slot (1 for dense ones).
    pub fn stride(&self, slot: usize) -> u64 {
        match self.types[slot] {
            ValueType::Sparse { stride, .. } => stride,
            ValueType::Dense { .. } => 1,
        }
    }

    /// Pattern entries per band when the options leave it open, for `side_by_side` slabs
    /// running at once: about [`BAND_BYTES`] of the widest value's features over all of
    /// them, within [`MIN_BAND`, `MAX_BAND`].
    pub fn auto_band(&self, side_by_side: usize) -> usize {
        let bytes = BAND_BYTES / side_by_side.max(1);
        (bytes / (4 * self.max_channels + 16)).clamp(MIN_BAND, MAX_BAND)
    }
}
