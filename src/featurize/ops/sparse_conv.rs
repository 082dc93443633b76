//! `SparseConv`: MinkowskiEngine-style sparse convolution (2-D, hyper-cube kernel).
//!
//! # Arithmetic
//!
//! An output row is `Σ_κ p_κ + bias` then the fused ReLU, where the sum runs over the
//! row's neighbour pairs in ascending κ (the first product taken as is, the next ones added
//! one at a time; no pair gives 0) and each product `p_κ = x · W[κ]` is one fused
//! multiply-add chain over the input channels in ascending order starting from +0.0 (the
//! `simd::conv` micro-kernel). That is the whole definition: it does not depend on how rows
//! are shared, tiled, banded or threaded, nor on the SIMD level.
//!
//! # Evaluation
//!
//! Per task, products whose input row is shared (used by several points, so the same
//! `(κ, row)` product can serve several output rows) are computed once into a product table;
//! the others are computed in tiles of up to 256 output rows (at most 256 KiB), bucketed by κ, by the
//! micro-kernel reading the input rows in place, `MR` rows per call, and added straight into
//! the output rows. The two give the same bits for a product, so the split is only a matter
//! of speed.

use rayon::prelude::*;

use super::{
    out_stride, window_attrs, BuildCtx, Built, Op, Part, Reach, RowProducts, Stencil, ValueType,
};
use crate::error::Result;
use std::ops::Range;

use crate::featurize::coords::Coords;
use crate::featurize::jobs::TaskJobs;
use crate::featurize::rulebook::Geometry;
use crate::featurize::rulebook::{Neighbours, PairSink};
use crate::featurize::search_memo::{MemoChunk, MemoUse};
use crate::featurize::window::Window;
use crate::simd::conv::{pack_weights, GemmArgs, FRESH};
use crate::simd::kernels::Kernels;
use crate::simd::prefetch_row_l1;

/// A validated sparse convolution layer.
#[derive(Debug, Clone)]
pub(crate) struct SparseConv {
    /// Window and strides.
    pub reach: Reach,
    /// Input channels.
    pub cin: usize,
    /// Output channels.
    pub cout: usize,
    /// `[K, cin, cout]`: per kernel index κ, its `[cin, cout]` slice in the micro-kernel's
    /// panel layout ([`pack_weights`]).
    pub weights: Vec<f32>,
    /// `[cout]`.
    pub bias: Option<Vec<f32>>,
    /// Apply ReLU to the output (set by the ReLU fusion pass).
    pub relu: bool,
}

/// Builds a `SparseConv` node: inputs `x` (sparse), `W` `[k², Cin, Cout]`, optional bias
/// `[Cout]`.
pub(super) fn build(ctx: &BuildCtx<'_>) -> Result<Built> {
    ctx.input_count(2, 3)?;
    let (k, s, d) = window_attrs(ctx)?;
    let (x, cin, t_in) = ctx.sparse_value(0)?;
    let w = ctx.initializer(1, "weight")?;
    let kk = k * k;
    if w.dims.len() != 3 || w.dims[0] != kk || w.dims[1] != cin || w.dims[2] == 0 {
        return Err(ctx.err(format!(
            "weight '{}' has shape {:?}, expected [kernel_size² = {kk}, Cin = {cin}, Cout > 0]",
            ctx.node.inputs[1], w.dims
        )));
    }
    let cout = w.dims[2];
    let mut inits = vec![ctx.node.inputs[1].clone()];
    let bias = if ctx.node.inputs.len() > 2 && !ctx.node.inputs[2].is_empty() {
        let b = ctx.initializer(2, "bias")?;
        if b.dims != [cout] {
            return Err(ctx.err(format!(
                "bias '{}' has shape {:?}, expected [Cout = {cout}]",
                ctx.node.inputs[2], b.dims
            )));
        }
        inits.push(ctx.node.inputs[2].clone());
        Some(b.data.clone())
    } else {
        None
    };
    let t_out = out_stride(ctx, t_in, s)?;
    Ok(Built {
        op: Op::Stencil(Box::new(SparseConv {
            reach: Reach {
                geom: Geometry::new(k, d, t_in),
                stride: s,
                t_in,
                t_out,
            },
            cin,
            cout,
            weights: w
                .data
                .chunks_exact((cin * cout).max(1))
                .flat_map(|slice| pack_weights(slice, cin, cout))
                .collect(),
            bias,
            relu: false,
        })),
        value_inputs: vec![x],
        initializers: inits,
        output: ValueType::Sparse {
            channels: cout,
            stride: t_out,
        },
    })
}

/// Output rows per tile: 256, or fewer for layers wider than 256 channels (at most 256 KiB
/// of output, at least 16 rows), so the tile stays in L2 while every κ adds to it and each
/// κ bucket fills the micro-kernel's 12-row groups. (With 32 KiB tiles, the 32 rows of a
/// 256-channel tile left ~17 rows per κ, one full group and one part-empty one: the
/// full-size DASH featurizer ran 18 % slower on pf2177.)
fn tile_rows(cout: usize) -> usize {
    (262144 / (4 * cout.max(1))).clamp(16, 256)
}

impl Stencil for SparseConv {
    fn op_type(&self) -> &'static str {
        "SparseConv"
    }

    fn reach(&self) -> &Reach {
        &self.reach
    }

    fn cin(&self) -> usize {
        self.cin
    }

    fn cout(&self) -> usize {
        self.cout
    }

    fn fuse_relu(&mut self) -> bool {
        self.relu = true;
        true
    }

    fn macs_per_pair(&self) -> u64 {
        (self.cin * self.cout) as u64
    }

    fn wants_products(&self) -> bool {
        true
    }

    fn row_products(
        &self,
        input: &Window<'_>,
        rows: &[u32],
        wanted: &[Vec<u32>],
        grain: usize,
        k: &Kernels,
    ) -> Option<Vec<f32>> {
        let (cin, cout) = (self.cin, self.cout);
        let volume = self.reach.geom.volume();
        let mut table = vec![0.0f32; volume * rows.len() * cout];
        if rows.is_empty() {
            return Some(table);
        }
        const CHUNK: usize = 240;
        table
            .par_chunks_mut(rows.len() * cout)
            .zip(wanted)
            .enumerate()
            .with_min_len(grain)
            .for_each(|(kappa, (block, wanted))| {
                let w = &self.weights[kappa * cin * cout..][..cin * cout];
                block
                    .par_chunks_mut(CHUNK * cout)
                    .enumerate()
                    .with_min_len(grain)
                    .for_each(|(c, dst)| {
                        // The wanted rows of this chunk, `[c·CHUNK, (c + 1)·CHUNK)`.
                        let first = (c * CHUNK) as u32;
                        let lo = wanted.partition_point(|&i| i < first);
                        let hi = wanted.partition_point(|&i| i < first + CHUNK as u32);
                        let ids: Vec<u32> =
                            wanted[lo..hi].iter().map(|&i| rows[i as usize]).collect();
                        let offs: Vec<usize> = wanted[lo..hi]
                            .iter()
                            .map(|&i| ((i - first) as usize * cout) | FRESH)
                            .collect();
                        (k.gemm)(GemmArgs {
                            x: &input.table,
                            rows: &ids,
                            w,
                            cout,
                            dst,
                            offs: &offs,
                        });
                    });
            });
        Some(table)
    }

    fn hot_products(&self, jobs: &TaskJobs, input: &Window<'_>, k: &Kernels) -> Vec<f32> {
        self.shared_products(jobs, input, k)
    }

    fn compute(
        &self,
        part: &Part<'_>,
        input: &Window<'_>,
        shared: Option<&RowProducts>,
        out: &mut [f32],
        k: &Kernels,
    ) -> u64 {
        let cout = self.cout;
        let jobs = part.jobs;
        let mut sc = Scratch::new(self.reach.geom.volume(), cout);
        let mut multiplied = 0;
        for (t, tile) in out.chunks_mut(sc.tile_n * cout).enumerate() {
            let first = part.range.start + t * sc.tile_n;
            let n = tile.len() / cout;
            let pairs = jobs.starts[first] as usize..jobs.starts[first + n] as usize;
            let mut o = 0u32;
            prefetch_row_l1(&tile[..cout]);
            for i in pairs {
                while jobs.starts[first + o as usize + 1] as usize <= i {
                    o += 1;
                    // The tile's products write the row once the buckets are full: without
                    // this, each output row's first write waits on memory.
                    prefetch_row_l1(&tile[o as usize * cout..][..cout]);
                }
                let (kappa, id) = jobs.pairs[i];
                let slot = jobs.slots.get(i).copied().unwrap_or(u32::MAX);
                sc.buckets[kappa as usize].push((o, id, slot));
            }
            multiplied += self.tile(&mut sc, tile, input, shared, part.hot, k);
        }
        multiplied
    }

    fn compute_direct(
        &self,
        input: &Window<'_>,
        out: &Coords,
        rows: Range<usize>,
        dst: &mut [f32],
        memo: MemoUse<'_>,
        k: &Kernels,
    ) -> (u64, Option<MemoChunk>) {
        let mut nb = Neighbours::new(&input.coords, &self.reach.geom, k.level).with_memo(memo);
        nb.reserve_record(out.points_of(rows.clone()).len(), rows.len());
        let mut sink = DirectTiles::new(self, input, dst, k);
        for ri in rows {
            nb.start_row(out.rows[ri]);
            nb.each_point_into(&out.cols[out.row_range(ri)], &mut sink);
        }
        (sink.pairs, nb.into_record())
    }
}

/// The direct path's pair sink: each pair goes straight into the micro-kernel's row lists
/// of its κ (input table row, output row offset), the lowest κ of a point marked [`FRESH`]; a tile
/// of output rows is computed once its last point has its pairs. The kernel then sees
/// exactly the lists that bucketing the tile's pairs by κ gives (`SparseConv::tile`), so the
/// bits are the same.
struct DirectTiles<'a, 'x> {
    conv: &'a SparseConv,
    /// The input's feature rows and each input point's row id.
    table: &'x [f32],
    ids: &'x [u32],
    cout: usize,
    dst: &'a mut [f32],
    k: &'a Kernels,
    /// Output rows per tile.
    tile_n: usize,
    /// κ's list of the current tile's pairs, at `κ · tile_n` (a point has at most one pair
    /// per κ): their input table rows, their output row offsets, and its length.
    xs: Vec<u32>,
    offs: Vec<usize>,
    lens: Vec<usize>,
    /// Output points in `dst`.
    total: usize,
    /// Points of the current tile so far.
    o: usize,
    /// The current tile's first point.
    first: usize,
    /// The current point's lowest κ so far (`u32::MAX`: no pair yet) and the entry of
    /// that pair in `offs`.
    lowest: (u32, usize),
    /// Pairs of the computed tiles.
    pairs: u64,
}

impl<'a, 'x> DirectTiles<'a, 'x> {
    fn new(
        conv: &'a SparseConv,
        input: &'x Window<'x>,
        dst: &'a mut [f32],
        k: &'a Kernels,
    ) -> Self {
        let (volume, tile_n) = (conv.reach.geom.volume(), tile_rows(conv.cout));
        Self {
            conv,
            table: &input.table,
            ids: &input.ids,
            cout: conv.cout,
            total: dst.len() / conv.cout,
            dst,
            k,
            tile_n,
            xs: vec![0; volume * tile_n],
            offs: vec![0; volume * tile_n],
            lens: vec![0; volume],
            o: 0,
            first: 0,
            lowest: (u32::MAX, 0),
            pairs: 0,
        }
    }

    /// Computes the current tile from its row lists, κ ascending, then bias and ReLU.
    fn flush(&mut self) {
        let (conv, cout, tile_n) = (self.conv, self.cout, self.tile_n);
        let tile = &mut self.dst[self.first * cout..(self.first + self.o) * cout];
        for (kappa, len) in self.lens.iter_mut().enumerate() {
            if *len == 0 {
                continue;
            }
            self.pairs += *len as u64;
            let list = kappa * tile_n..kappa * tile_n + *len;
            (self.k.gemm)(GemmArgs {
                x: self.table,
                rows: &self.xs[list.clone()],
                w: &conv.weights[kappa * conv.cin * cout..][..conv.cin * cout],
                cout,
                dst: tile,
                offs: &self.offs[list],
            });
            *len = 0;
        }
        conv.epilogue(tile, self.k);
        self.first += self.o;
        self.o = 0;
    }
}

impl PairSink for DirectTiles<'_, '_> {
    #[inline(always)]
    fn pair(&mut self, kappa: u32, q: u32) {
        // No prefetch of the input row here: the micro-kernel asks for each group's rows
        // while the group before it computes, and a prefetch per pair made the sink wait
        // on the memory system (BENCHMARKS.md, §1, nineteenth pass).
        let id = self.ids[q as usize];
        let list = kappa as usize;
        let at = list * self.tile_n + self.lens[list];
        self.xs[at] = id;
        self.offs[at] = self.o * self.cout;
        self.lens[list] += 1;
        if kappa < self.lowest.0 {
            self.lowest = (kappa, at);
        }
    }

    #[inline]
    fn end_point(&mut self) {
        let cout = self.cout;
        let at = (self.first + self.o) * cout;
        match self.lowest {
            (u32::MAX, _) => self.dst[at..at + cout].fill(0.0), // no neighbour
            (_, entry) => {
                self.offs[entry] |= FRESH;
                // The tile's products write the row once its last point is found: without
                // this, each output row's first write waits on memory.
                prefetch_row_l1(&self.dst[at..at + cout]);
            }
        }
        self.lowest = (u32::MAX, 0);
        self.o += 1;
        if self.o == self.tile_n || self.first + self.o == self.total {
            self.flush();
        }
    }
}

/// Per-task scratch of the conv's tiles: pairs bucketed by κ, the micro-kernel's row lists,
/// and which tile rows hold a partial sum.
struct Scratch {
    tile_n: usize,
    buckets: Vec<Vec<(u32, u32, u32)>>,
    xs: Vec<u32>,
    offs: Vec<usize>,
    started: Vec<bool>,
}

impl Scratch {
    fn new(volume: usize, cout: usize) -> Self {
        let tile_n = tile_rows(cout);
        Self {
            tile_n,
            buckets: vec![Vec::new(); volume],
            xs: Vec::new(),
            offs: Vec::new(),
            started: vec![false; tile_n],
        }
    }
}

impl SparseConv {
    /// Computes a tile's rows from the pairs in `sc.buckets` (tile row, input row, product
    /// slot), κ ascending, then bias and ReLU; clears the buckets. Returns the number of
    /// pairs it multiplied.
    fn tile(
        &self,
        sc: &mut Scratch,
        tile: &mut [f32],
        input: &Window<'_>,
        shared: Option<&RowProducts>,
        products: &[f32],
        k: &Kernels,
    ) -> u64 {
        let cout = self.cout;
        let mut multiplied = 0;
        sc.started.fill(false);
        for (kappa, bucket) in sc.buckets.iter_mut().enumerate() {
            if bucket.is_empty() {
                continue;
            }
            let w = &self.weights[kappa * self.cin * cout..][..self.cin * cout];
            sc.xs.clear();
            sc.offs.clear();
            for &(o, id, slot) in bucket.iter() {
                let (dst, started) = (o as usize * cout, sc.started[o as usize]);
                let product = match shared {
                    Some(sp) => sp.get(kappa as u32, id, cout),
                    None if slot != u32::MAX => Some(&products[slot as usize * cout..][..cout]),
                    None => None,
                };
                match product {
                    Some(p) if started => (k.add)(&mut tile[dst..dst + cout], p),
                    Some(p) => tile[dst..dst + cout].copy_from_slice(p),
                    None => {
                        sc.xs.push(id);
                        sc.offs.push(if started { dst } else { dst | FRESH });
                    }
                }
            }
            if !sc.xs.is_empty() {
                multiplied += sc.xs.len() as u64;
                let args = GemmArgs {
                    x: &input.table,
                    rows: &sc.xs,
                    w,
                    cout,
                    dst: tile,
                    offs: &sc.offs,
                };
                (k.gemm)(args);
            }
            for &(o, _, _) in bucket.iter() {
                sc.started[o as usize] = true;
            }
            bucket.clear();
        }
        for (row, &s) in tile.chunks_exact_mut(cout).zip(&sc.started) {
            if !s {
                row.fill(0.0); // no neighbour
            }
        }
        self.epilogue(tile, k);
        multiplied
    }

    /// Bias and the fused ReLU over a tile's rows.
    fn epilogue(&self, tile: &mut [f32], k: &Kernels) {
        match (&self.bias, self.relu) {
            (Some(b), true) => (k.bias_relu)(tile, b),
            (Some(b), false) => (k.bias)(tile, b),
            (None, true) => (k.relu)(tile),
            (None, false) => {}
        }
    }

    /// The products `x[id] · W[κ]` of the task's shared pairs (`jobs.hot`, in slot order),
    /// `[slots, cout]`, each computed once.
    fn shared_products(&self, jobs: &TaskJobs, input: &Window<'_>, k: &Kernels) -> Vec<f32> {
        let (cin, cout) = (self.cin, self.cout);
        let mut products = vec![0.0f32; jobs.hot.len() * cout];
        if jobs.hot.is_empty() {
            return products;
        }
        let mut by_kappa: Vec<Vec<(u32, u32)>> = vec![Vec::new(); self.reach.geom.volume()];
        for (slot, &(kappa, id)) in jobs.hot.iter().enumerate() {
            by_kappa[kappa as usize].push((id, slot as u32));
        }
        for (kappa, list) in by_kappa.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let w = &self.weights[kappa * cin * cout..][..cin * cout];
            let rows: Vec<u32> = list.iter().map(|&(id, _)| id).collect();
            let offs: Vec<usize> = list
                .iter()
                .map(|&(_, slot)| (slot as usize * cout) | FRESH)
                .collect();
            (k.gemm)(GemmArgs {
                x: &input.table,
                rows: &rows,
                w,
                cout,
                dst: &mut products,
                offs: &offs,
            });
        }
        products
    }
}
