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
//! the others are computed in tiles of up to 64 output rows, bucketed by κ, by the
//! micro-kernel reading the input rows in place, `MR` rows per call, and added straight into
//! the output rows. The two give the same bits for a product, so the split is only a matter
//! of speed.

use super::{out_stride, window_attrs, BuildCtx, Built, Op, Reach, Stencil, ValueType};
use crate::error::Result;
use crate::featurize::jobs::TaskJobs;
use crate::featurize::rulebook::Geometry;
use crate::featurize::window::Window;
use crate::simd::conv::GemmArgs;
use crate::simd::kernels::Kernels;

/// A validated sparse convolution layer.
#[derive(Debug, Clone)]
pub(crate) struct SparseConv {
    /// Window and strides.
    pub reach: Reach,
    /// Input channels.
    pub cin: usize,
    /// Output channels.
    pub cout: usize,
    /// `[K, cin, cout]` row-major.
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
            weights: w.data.clone(),
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

/// Output rows per tile (tiles track started rows in a `u64`).
const TILE: usize = 64;

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

    fn compute(&self, jobs: &TaskJobs, input: &Window<'_>, out: &mut [f32], k: &Kernels) {
        let (cin, cout) = (self.cin, self.cout);
        let volume = self.reach.geom.volume();
        let w_of = |kappa: usize| &self.weights[kappa * cin * cout..][..cin * cout];
        let (hot, products) = self.shared_products(jobs, input, k);
        let mut buckets: Vec<Vec<(u32, u32, u32)>> = vec![Vec::new(); volume];
        let mut xs: Vec<&[f32]> = Vec::with_capacity(k.mr);
        let mut offs: Vec<usize> = Vec::with_capacity(k.mr);
        for (t, tile) in out.chunks_mut(TILE * cout).enumerate() {
            let first = t * TILE;
            let n = tile.len() / cout;
            for o in 0..n {
                for &(kappa, id) in jobs.pairs(first + o) {
                    let slot = if input.shared[id as usize] {
                        hot.get(pack(kappa, id)).unwrap_or(u32::MAX)
                    } else {
                        u32::MAX
                    };
                    buckets[kappa as usize].push((o as u32, id, slot));
                }
            }
            let mut started: u64 = 0;
            for (kappa, bucket) in buckets.iter_mut().enumerate() {
                if bucket.is_empty() {
                    continue;
                }
                let w = w_of(kappa);
                let mut fresh = 0u32;
                for &(o, id, slot) in bucket.iter() {
                    let dst = o as usize * cout;
                    if slot != u32::MAX {
                        let p = &products[slot as usize * cout..][..cout];
                        if started & (1 << o) == 0 {
                            tile[dst..dst + cout].copy_from_slice(p);
                        } else {
                            (k.add)(&mut tile[dst..dst + cout], p);
                        }
                        continue;
                    }
                    if started & (1 << o) == 0 {
                        fresh |= 1 << xs.len();
                    }
                    xs.push(input.row(id));
                    offs.push(dst);
                    if xs.len() == k.mr {
                        let args = GemmArgs {
                            xs: &xs,
                            w,
                            cout,
                            dst: tile,
                            offs: &offs,
                            fresh,
                        };
                        (k.gemm)(args);
                        xs.clear();
                        offs.clear();
                        fresh = 0;
                    }
                }
                if !xs.is_empty() {
                    (k.gemm)(GemmArgs {
                        xs: &xs,
                        w,
                        cout,
                        dst: tile,
                        offs: &offs,
                        fresh,
                    });
                    xs.clear();
                    offs.clear();
                }
                for &(o, _, _) in bucket.iter() {
                    started |= 1 << o;
                }
                bucket.clear();
            }
            for (o, row) in tile.chunks_exact_mut(cout).enumerate() {
                if started & (1 << o) == 0 {
                    row.fill(0.0); // no neighbour
                }
            }
            if let Some(b) = &self.bias {
                (k.bias)(tile, b);
            }
            if self.relu {
                (k.relu)(tile);
            }
        }
    }
}

impl SparseConv {
    /// The products `x[id] · W[κ]` of every pair of `jobs` whose input row is shared, each
    /// computed once: the slot of each pair, and the `[slots, cout]` table.
    fn shared_products(
        &self,
        jobs: &TaskJobs,
        input: &Window<'_>,
        k: &Kernels,
    ) -> (PairMap, Vec<f32>) {
        let (cin, cout) = (self.cin, self.cout);
        let mut hot = PairMap::default();
        let mut by_kappa: Vec<Vec<(u32, u32)>> = Vec::new(); // per κ: (id, slot)
        for &(kappa, id) in &jobs.pairs {
            if !input.shared[id as usize] {
                continue;
            }
            let (slot, new) = hot.insert(pack(kappa, id));
            if new {
                if by_kappa.is_empty() {
                    by_kappa = vec![Vec::new(); self.reach.geom.volume()];
                }
                by_kappa[kappa as usize].push((id, slot));
            }
        }
        let mut products = vec![0.0f32; hot.len() * cout];
        let mut xs: Vec<&[f32]> = Vec::with_capacity(k.mr);
        let mut offs: Vec<usize> = Vec::with_capacity(k.mr);
        for (kappa, list) in by_kappa.iter().enumerate() {
            let w = &self.weights[kappa * cin * cout..][..cin * cout];
            for group in list.chunks(k.mr) {
                xs.clear();
                offs.clear();
                xs.extend(group.iter().map(|&(id, _)| input.row(id)));
                offs.extend(group.iter().map(|&(_, slot)| slot as usize * cout));
                let fresh = (1u32 << group.len()) - 1;
                (k.gemm)(GemmArgs {
                    xs: &xs,
                    w,
                    cout,
                    dst: &mut products,
                    offs: &offs,
                    fresh,
                });
            }
        }
        (hot, products)
    }
}

#[inline]
fn pack(kappa: u32, id: u32) -> u64 {
    (u64::from(kappa) << 32) | u64::from(id)
}

/// `u64 → slot` map numbering keys in insertion order (open addressing).
#[derive(Default)]
pub(crate) struct PairMap {
    /// `(key, slot + 1)`; slot 0 = empty.
    table: Vec<(u64, u32)>,
    len: usize,
}

impl PairMap {
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn index(key: u64, mask: usize) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
    }

    /// The slot of `key`, if present.
    #[inline]
    fn get(&self, key: u64) -> Option<u32> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut i = Self::index(key, mask);
        loop {
            match self.table[i] {
                (_, 0) => return None,
                (k, s) if k == key => return Some(s - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The slot of `key`, inserting it if new, and whether it was new.
    fn insert(&mut self, key: u64) -> (u32, bool) {
        if (self.len + 1) * 2 > self.table.len() {
            let old = std::mem::take(&mut self.table);
            self.table = vec![(0, 0); (old.len() * 2).max(64)];
            let mask = self.table.len() - 1;
            for (k, s) in old.into_iter().filter(|e| e.1 != 0) {
                let mut i = Self::index(k, mask);
                while self.table[i].1 != 0 {
                    i = (i + 1) & mask;
                }
                self.table[i] = (k, s);
            }
        }
        let mask = self.table.len() - 1;
        let mut i = Self::index(key, mask);
        loop {
            match self.table[i] {
                (_, 0) => {
                    self.len += 1;
                    self.table[i] = (key, self.len as u32);
                    return (self.len as u32 - 1, true);
                }
                (k, s) if k == key => return (s - 1, false),
                _ => i = (i + 1) & mask,
            }
        }
    }
}
