//! GPU / SparseTIR: a concrete 288-configuration space per kernel over strip-mining, loop
//! order, thread binding and unrolling.
//!
//! The papers give only the size ("approximately 300 configurations for SparseTIR", COGNATE
//! §4) and the parameter kinds (Table 1: strip-mining, reordering, binding, unrolling;
//! appendix B). The concrete space is ours, built on SparseTIR's own schedules
//! (`uwsampl/SparseTIR`):
//!
//! **SpMM** — `examples/spmm/bench_spmm_naive.py` (`csrmm`, CSR, feature size `F`): the row
//! loop is split `i → (i1 blockIdx.x, i2 threadIdx.y)` by `ty` (`sch.split(i, [None, 8])`),
//! the feature loop `k → (k1, k2, k3)` = (`foo`, `foi`, `fi`) with `k2` the coarsening factor
//! `cwm` and `k3` the 32 lanes of `threadIdx.x`; `reorder(foo, fi, j, foi)`, `bind(foo,
//! "blockIdx.y")`, `unroll(foi)`. Space: `row_tile` (ty) ∈ {1,2,4,8,16,32} × `thread_x` ∈
//! {16,32} × `coarsen` (cwm) ∈ {1,2,4} × order (`j` outside or inside `k2`) × `k1` bound to
//! `blockIdx.y` or serial × unroll `k2` on/off = 6·2·3·2·2·2 = **288**.
//!
//! **SDDMM** — `examples/sddmm/bench_sddmm.py`: the fused nonzero loop is split
//! `(joo blockIdx.x, joi threadIdx.y, ji)` by `ty` and `group_size`, the feature loop
//! `(ko, kio threadIdx.x, kii)` by `tx` and `vec_size`, `sch.reorder(ko, ji)`, `ji`, `ko`,
//! `kii` unrolled. SparseTIR itself sweeps ty {1,2,4,8} × tx {8,16,32} × vec {1,2,4} × group
//! {1,2,4}. Space: `row_tile` (ty) ∈ {1,2,4,8} × `thread_x` (tx) ∈ {8,16,32} × `coarsen`
//! (vec) ∈ {1,2,4} × `group` ∈ {1,2} × order (`ko` outside or inside `ji`) × unroll on/off
//! = 4·3·3·2·2·2 = **288** (group 4 dropped to stay near 300 with order and unrolling added;
//! `k1` is never bound).
//!
//! Validity (per candidate, for feature size `F`): threads per block `row_tile · thread_x ≤
//! 1024` (CUDA); SpMM: `thread_x · coarsen` divides `F` (`num_tiles = F // cwm // 32` must be
//! a whole number ≥ 1); SDDMM: `thread_x · coarsen ≤ F` (SparseTIR's `continue`); SDDMM has
//! no `k1` binding and SpMM no `group`.
//!
//! Defaults: SpMM is `bench_spmm_naive.py`'s schedule (ty 8, 32 lanes, cwm 2 — 1 when
//! `F < 64` —, `j` outside `k2`, `k1` on `blockIdx.y`, unrolled). SDDMM has no fixed schedule
//! in SparseTIR (it sweeps); ours is its loop structure with ty 4, tx 32 (the largest value
//! with `tx ≤ F`), vec 1, group 1, `ko` outside `ji`, unrolled.
//!
//! Configurations read and write as JSON (serde), e.g.
//! `{"kernel":"spmm","row_tile":8,"thread_x":32,"coarsen":2,"group":1,
//! "order":"reduction_outer","bind_k1":true,"unroll":true}`.

use serde::{Deserialize, Serialize};

use super::{space_error, unsupported, Kernel, MatrixShape, ScheduleSpace, Target};
use crate::error::{Error, Result};

/// Where the reduction loop sits relative to the feature loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuLoopOrder {
    /// SparseTIR's order. SpMM: `i1 i2 k1 k3 j k2` (`j` outside the coarsening loop);
    /// SDDMM: `i1 i2 k1 j k2 k3` (`ko` outside `ji`).
    ReductionOuter,
    /// The swapped order. SpMM: `i1 i2 k1 k3 k2 j`; SDDMM: `i1 i2 j k1 k2 k3`.
    ReductionInner,
}

/// One SparseTIR configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuConfig {
    /// The kernel.
    pub kernel: Kernel,
    /// Rows (SpMM) or nonzero groups (SDDMM) per block: the `threadIdx.y` extent (`i2`).
    pub row_tile: u32,
    /// `threadIdx.x` extent over the feature dimension (`k3` SpMM, `kio` SDDMM).
    pub thread_x: u32,
    /// Feature elements per thread: SpMM coarsening `cwm` (`k2`), SDDMM `vec_size` (`kii`).
    pub coarsen: u32,
    /// SDDMM nonzeros per thread row (`ji`, `group_size`); 1 for SpMM.
    pub group: u32,
    /// Loop order.
    pub order: GpuLoopOrder,
    /// SpMM: the outer feature loop `k1` is bound to `blockIdx.y` (else serial). SDDMM: false.
    pub bind_k1: bool,
    /// Unroll the per-thread inner loops (`k2` SpMM; `ji`, `ko`, `kii` SDDMM).
    pub unroll: bool,
}

impl GpuConfig {
    /// Parses one configuration from JSON.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) for malformed JSON or fields.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(json_error)
    }

    /// The configuration as compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a JSON array of configurations.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) for malformed JSON or fields.
    pub fn list_from_json(json: &str) -> Result<Vec<Self>> {
        serde_json::from_str(json).map_err(json_error)
    }

    /// A JSON array of configurations.
    pub fn list_to_json(configs: &[Self]) -> String {
        serde_json::to_string(configs).unwrap_or_default()
    }
}

fn json_error(e: serde_json::Error) -> Error {
    space_error("sparsetir json", e.to_string(), "malformed configuration").with_source(e)
}

/// The SparseTIR space for one kernel and feature size (dense columns of SpMM's `B`, the
/// reduction length of SDDMM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseTirSpace {
    kernel: GpuKernel,
    feat_size: u32,
}

/// The kernels with a SparseTIR space (a [`Kernel`] without SpMV, so matches are total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GpuKernel {
    Spmm,
    Sddmm,
}

impl GpuKernel {
    fn kernel(self) -> Kernel {
        match self {
            GpuKernel::Spmm => Kernel::SpMM,
            GpuKernel::Sddmm => Kernel::SDDMM,
        }
    }
}

impl SparseTirSpace {
    /// The kernels SparseTIR has a space for.
    pub const KERNELS: [Kernel; 2] = [Kernel::SpMM, Kernel::SDDMM];

    /// The space for `kernel` with feature size `feat_size` (dense columns of SpMM's `B`, the
    /// reduction length of SDDMM; SparseTIR's examples sweep 32…512).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedKernel`](crate::ErrorKind::UnsupportedKernel) for SpMV.
    pub fn new(kernel: Kernel, feat_size: u32) -> Result<Self> {
        let kernel = match kernel {
            Kernel::SpMM => GpuKernel::Spmm,
            Kernel::SDDMM => GpuKernel::Sddmm,
            Kernel::SpMV => {
                return Err(unsupported(Target::GpuSparseTir, kernel, &Self::KERNELS));
            }
        };
        Ok(Self { kernel, feat_size })
    }

    /// The kernel.
    pub fn kernel(&self) -> Kernel {
        self.kernel.kernel()
    }

    /// The feature size `F`.
    pub fn feat_size(&self) -> u32 {
        self.feat_size
    }
}

const ORDERS: [GpuLoopOrder; 2] = [GpuLoopOrder::ReductionOuter, GpuLoopOrder::ReductionInner];

impl ScheduleSpace for SparseTirSpace {
    type Config = GpuConfig;

    fn name(&self) -> String {
        format!("sparsetir-{}", self.kernel())
    }

    /// The 288 configurations; order: row_tile → thread_x → coarsen → group → order →
    /// bind_k1 → unroll (each list ascending, `false` before `true`).
    fn enumerate(&self, _shape: &MatrixShape) -> Vec<GpuConfig> {
        let (rows, tx, groups, binds): (&[u32], &[u32], &[u32], &[bool]) = match self.kernel {
            GpuKernel::Spmm => (&[1, 2, 4, 8, 16, 32], &[16, 32], &[1], &[false, true]),
            GpuKernel::Sddmm => (&[1, 2, 4, 8], &[8, 16, 32], &[1, 2], &[false]),
        };
        let mut out = Vec::with_capacity(288);
        for &row_tile in rows {
            for &thread_x in tx {
                for coarsen in [1, 2, 4] {
                    for &group in groups {
                        for order in ORDERS {
                            for &bind_k1 in binds {
                                for unroll in [false, true] {
                                    out.push(GpuConfig {
                                        kernel: self.kernel(),
                                        row_tile,
                                        thread_x,
                                        coarsen,
                                        group,
                                        order,
                                        bind_k1,
                                        unroll,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    fn default_config(&self, _shape: &MatrixShape) -> GpuConfig {
        match self.kernel {
            GpuKernel::Spmm => GpuConfig {
                kernel: Kernel::SpMM,
                row_tile: 8,
                thread_x: 32,
                coarsen: if self.feat_size < 64 { 1 } else { 2 },
                group: 1,
                order: GpuLoopOrder::ReductionOuter,
                bind_k1: true,
                unroll: true,
            },
            GpuKernel::Sddmm => GpuConfig {
                kernel: Kernel::SDDMM,
                row_tile: 4,
                thread_x: [32, 16]
                    .into_iter()
                    .find(|&t| t <= self.feat_size)
                    .unwrap_or(8),
                coarsen: 1,
                group: 1,
                order: GpuLoopOrder::ReductionOuter,
                bind_k1: false,
                unroll: true,
            },
        }
    }

    fn validate(&self, c: &GpuConfig, _shape: &MatrixShape) -> Result<()> {
        if c.kernel != self.kernel() {
            return Err(space_error(
                "kernel",
                c.kernel,
                "wrong kernel for this space",
            ));
        }
        for (field, v) in [
            ("row_tile", c.row_tile),
            ("thread_x", c.thread_x),
            ("coarsen", c.coarsen),
            ("group", c.group),
        ] {
            if !v.is_power_of_two() {
                return Err(space_error(field, v, "must be a power of two ≥ 1"));
            }
        }
        let threads = u64::from(c.row_tile) * u64::from(c.thread_x);
        if threads > 1024 {
            return Err(space_error(
                "row_tile",
                c.row_tile,
                format!("{threads} threads per block exceed CUDA's 1024"),
            ));
        }
        let tile = c.thread_x.saturating_mul(c.coarsen);
        match self.kernel {
            GpuKernel::Spmm => {
                if self.feat_size == 0 || tile == 0 || !self.feat_size.is_multiple_of(tile) {
                    return Err(space_error(
                        "coarsen",
                        c.coarsen,
                        format!(
                            "thread_x·coarsen = {tile} must divide F = {}",
                            self.feat_size
                        ),
                    ));
                }
                if c.group != 1 {
                    return Err(space_error("group", c.group, "SpMM has no group loop"));
                }
            }
            GpuKernel::Sddmm => {
                if tile > self.feat_size {
                    return Err(space_error(
                        "coarsen",
                        c.coarsen,
                        format!("thread_x·vec = {tile} exceeds F = {}", self.feat_size),
                    ));
                }
                if c.bind_k1 {
                    return Err(space_error("bind_k1", 1, "SDDMM's ko loop is not bound"));
                }
            }
        }
        Ok(())
    }

    /// `row_tile thread_x coarsen group order bind_k1 unroll` (order 0 = reduction outer).
    fn to_line(&self, c: &GpuConfig) -> String {
        native_line(c)
    }
}

/// `row_tile thread_x coarsen group order bind_k1 unroll` (order 0 = reduction outer).
pub(crate) fn native_line(c: &GpuConfig) -> String {
    let order = u8::from(c.order == GpuLoopOrder::ReductionInner);
    format!(
        "{} {} {} {} {order} {} {}",
        c.row_tile,
        c.thread_x,
        c.coarsen,
        c.group,
        u8::from(c.bind_k1),
        u8::from(c.unroll)
    )
}
