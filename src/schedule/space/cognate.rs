//! COGNATE's unified configuration form: split sizes `(I, J, K)`, a 7-segment loop order,
//! and the platform-specific ("heterogeneous") fields the latent encoder sees.
//!
//! Evidence: COGNATE (seed 001) §3.2 and appendix E; DASH (seed 000) §3.3 (the same
//! formulas). Index roles follow the papers' kernels (§2.1): `D(i,k) = Σ_j A(i,j) B(j,k)` for
//! SpMM, so `i` = rows of `A`, `j` = columns of `A`, `k` = the dense dimension; SPADE's φ uses
//! the same roles for both kernels (column panels ↦ `J`, split ↦ `K`).
//!
//! # Segments and their numbers
//!
//! CPU strip-mining gives `{i1,i2,j1,j2,k1,k2}`, the GPU `{i1,i2,j,k1,k2,k3}`. The mappings π
//! add a dummy so every platform has the same seven segments:
//! - CPU (π_a1): `k3 = 1` placed right after `k2` (`Ω(k3) = Ω(k2) + 1`);
//! - GPU (π_a3): `j' = 1` placed right after `j` (`Ω(j') = Ω(j) + 1`);
//!
//! giving the segment list `(i1, i2, j1, j2, k1, k2, k3)` (GPU: `j ↦ j1`, `j' ↦ j2`), which
//! we number **1…7 in that order**. `loop_p` is the number of the segment executed at
//! position `p` (outermost first).
//!
//! # The worked example, step by step
//!
//! Raw SPADE row (appendix E): `144, 4, 1024, 1, 0, 0, 0` = name 144, row_panels 4,
//! column_panels 1024, split 1 (= 32, see [`spade`](super::spade)), barrier 0, bypass 0,
//! reorder 0.
//! 1. Splits: `I = 4` (row panels), `J = 1024` (column panels), `K = 32` (split). The
//!    formula in §3.2 reads `I ≈ p_col, J ≈ p_row`, but the papers' own mapped example has
//!    `i_split = 4` = row panels and `j_split = 1024` = column panels; we follow the example.
//! 2. ω from the barrier: `b = 0` → `[k2, i2, j2, i1, j1, k1]` (`b = 1` → `[k2, j2, i2, i1,
//!    j1, k1]`).
//! 3. π_a1 inserts `k3` right after `k2`: `[k2, k3, i2, j2, i1, j1, k1]`.
//! 4. Numbering `i1=1, i2=2, j1=3, j2=4, k1=5, k2=6, k3=7`: `[6, 7, 2, 4, 1, 3, 5]`.
//! 5. The heterogeneous flags are appended unchanged: barrier 0, bypass 0, reorder 0.
//!
//! Result `144, 4, 1024, 32, 6, 7, 2, 4, 1, 3, 5, 0, 0, 0` — exactly the papers' mapped row
//! (the inverse reading, "position of segment s", would give `5, 3, 6, 4, 7, 1, 2`, which is
//! not the papers' row, so the numbering above is the one they used).
//!
//! # CPU and GPU mappings (ours, documented choices)
//!
//! - **CPU / WACO** ([`SuperSchedule`]): WACO's `x1` (outer) / `x0` (inner) become `x1` /
//!   `x2`; axes are renamed by role — SpMM `i→i, k→j, j→k` (WACO's `k` is `A`'s column),
//!   SDDMM `i→i, j→j, k→k`; `I, J, K` are the inner extents of the renamed axes; `k3` is
//!   inserted after `k2`. Heterogeneous: the four format flags (line order), the parallel
//!   loop's segment number, thread count and chunk. SpMV is not mapped (no third axis).
//! - **GPU / SparseTIR** ([`GpuConfig`]): segments as in [`sparsetir`](super::sparsetir)
//!   (SpMM `i1 i2 k1 k3 j k2` or `… k2 j`; SDDMM `i1 i2 k1 j k2 k3` or `i1 i2 j k1 k2 k3`),
//!   `j'` inserted after `j`; `I = row_tile`, `J = 1` (`j' = 1`), `K = thread_x · coarsen`.
//!   Heterogeneous: thread_x, coarsen, group, bind_k1, unroll.

use std::ops::Range;

use super::{space_error, ColumnPanels, ShapeStatuses};
use super::{
    GpuConfig, GpuLoopOrder, Kernel, MatrixShape, ScheduleSpace, SpadeConfig, SuperSchedule,
};
use crate::error::Result;

/// The seven unified segments, in numbering order (segment `s` has number `s + 1`).
pub const SEGMENTS: [&str; 7] = ["i1", "i2", "j1", "j2", "k1", "k2", "k3"];

/// A configuration in COGNATE's unified form.
#[derive(Debug, Clone, PartialEq)]
pub struct Unified {
    /// `I`: the split of `i`.
    pub i_split: u32,
    /// `J`: the split of `j`.
    pub j_split: u32,
    /// `K`: the split of `k`.
    pub k_split: u32,
    /// `loop_1..loop_7`: the segment number (1…7, see [`SEGMENTS`]) at each position.
    pub order: [u8; 7],
    /// Platform-specific fields for the latent encoder, in a fixed order per platform.
    pub hetero: Vec<(String, i64)>,
}

impl Unified {
    /// Builds the unified form from segment names in execution order (outermost first).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) unless `order` is a permutation of
    /// [`SEGMENTS`].
    pub fn from_segments(
        splits: [u32; 3],
        order: &[&str],
        hetero: Vec<(String, i64)>,
    ) -> Result<Self> {
        let mut nums = [0u8; 7];
        let mut seen = [false; 7];
        if order.len() != 7 {
            return Err(space_error(
                "loop order",
                order.join(" "),
                "need 7 segments",
            ));
        }
        for (p, name) in order.iter().enumerate() {
            let s = SEGMENTS.iter().position(|x| x == name);
            match s {
                Some(s) if !seen[s] => {
                    seen[s] = true;
                    nums[p] = (s + 1) as u8;
                }
                _ => {
                    return Err(space_error(
                        "loop order",
                        order.join(" "),
                        format!("'{name}' is unknown or repeated"),
                    ))
                }
            }
        }
        Ok(Unified {
            i_split: splits[0],
            j_split: splits[1],
            k_split: splits[2],
            order: nums,
            hetero,
        })
    }

    /// The segment names in execution order.
    pub fn loop_names(&self) -> Vec<&'static str> {
        let name = |n: &u8| SEGMENTS.get(usize::from(*n).wrapping_sub(1)).copied();
        self.order.iter().map(|n| name(n).unwrap_or("?")).collect()
    }

    /// All values: `I J K loop_1..loop_7` then the heterogeneous values.
    pub fn values(&self) -> Vec<i64> {
        let mut v = vec![
            i64::from(self.i_split),
            i64::from(self.j_split),
            i64::from(self.k_split),
        ];
        v.extend(self.order.iter().map(|&n| i64::from(n)));
        v.extend(self.hetero.iter().map(|(_, x)| *x));
        v
    }

    /// The whitespace-separated line (what a unified-form schema parses).
    pub fn to_line(&self) -> String {
        let v: Vec<String> = self.values().iter().map(i64::to_string).collect();
        v.join(" ")
    }

    /// The papers' CSV row `name, i_split, j_split, k_split, loop_1..loop_7, <hetero>[, time]`.
    pub fn to_csv_row(&self, name: &str, time: Option<f64>) -> String {
        let mut f = vec![name.to_owned()];
        f.extend(self.values().iter().map(i64::to_string));
        if let Some(t) = time {
            f.push(t.to_string());
        }
        f.join(", ")
    }
}

/// A configuration that COGNATE's mapping functions (φ, π) can put into unified form.
pub trait ToUnified {
    /// The unified form.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) when the configuration has no
    /// unified form (e.g. an unresolved `NUM_MATRIX_COLS`, or SpMV).
    fn to_unified(&self) -> Result<Unified>;
}

/// Inserts `dummy` right after `after` (π: `Ω(dummy) = Ω(after) + 1`).
fn insert_after<'a>(order: &mut Vec<&'a str>, after: &str, dummy: &'a str) {
    let p = order
        .iter()
        .position(|x| *x == after)
        .map_or(order.len(), |p| p + 1);
    order.insert(p, dummy);
}

/// φ for SPADE (see the module docs for the derivation). Resolve `NUM_MATRIX_COLS` first
/// ([`SpadeConfig::resolve`]).
impl ToUnified for SpadeConfig {
    fn to_unified(&self) -> Result<Unified> {
        let ColumnPanels::Fixed(cols) = self.column_panels else {
            return Err(space_error(
                "column_panels",
                self.column_panels,
                "substitute NUM_MATRIX_COLS (SpadeConfig::resolve) before mapping",
            ));
        };
        let mut omega = if self.barrier {
            vec!["k2", "j2", "i2", "i1", "j1", "k1"]
        } else {
            vec!["k2", "i2", "j2", "i1", "j1", "k1"]
        };
        insert_after(&mut omega, "k2", "k3");
        let hetero = vec![
            ("barrier".to_owned(), i64::from(self.barrier)),
            ("bypass".to_owned(), i64::from(self.bypass)),
            ("reorder".to_owned(), i64::from(self.reorder)),
        ];
        Unified::from_segments([self.row_panels, cols, self.split], &omega, hetero)
    }
}

/// π_a1 for WACO SuperSchedules (SpMM and SDDMM).
impl ToUnified for SuperSchedule {
    fn to_unified(&self) -> Result<Unified> {
        self.validate()?;
        // WACO axis → unified axis, by role (module docs).
        let role: &[(char, char)] = match self.kernel {
            Kernel::SpMM => &[('i', 'i'), ('k', 'j'), ('j', 'k')],
            Kernel::SDDMM => &[('i', 'i'), ('j', 'j'), ('k', 'k')],
            Kernel::SpMV => {
                return Err(space_error(
                    "kernel",
                    "spmv",
                    "COGNATE maps SpMM and SDDMM only",
                ))
            }
        };
        let to_unified = |w: char| role.iter().find(|(a, _)| *a == w).map(|(_, u)| *u);
        let seg = |name: &str| -> Option<&'static str> {
            let mut c = name.chars();
            let u = to_unified(c.next()?)?;
            let inner = c.next()? == '0';
            let i = SEGMENTS.iter().position(|s| s.starts_with(u))? + usize::from(inner);
            SEGMENTS.get(i).copied()
        };
        let mut omega = Vec::with_capacity(7);
        for v in &self.order {
            omega.push(seg(v).ok_or_else(|| space_error("order", v, "unknown loop"))?);
        }
        insert_after(&mut omega, "k2", "k3");
        let split_for = |u: char| {
            let w = role.iter().find(|(_, x)| *x == u).map_or('?', |(a, _)| *a);
            self.split_of(w)
        };
        let [x, y] = self.kernel.sparse_axes();
        let flag_names = [
            format!("{x}1f"),
            format!("{x}0f"),
            format!("{y}1f"),
            format!("{y}0f"),
        ];
        let mut hetero: Vec<(String, i64)> = flag_names
            .into_iter()
            .zip(self.formats)
            .map(|(n, f)| (n, i64::from(f.flag())))
            .collect();
        let par = seg(&self.par_index)
            .and_then(|s| SEGMENTS.iter().position(|x| *x == s))
            .map_or(0, |p| p as i64 + 1);
        hetero.push(("paridx".to_owned(), par));
        hetero.push(("parnum".to_owned(), i64::from(self.threads)));
        hetero.push(("parchunk".to_owned(), i64::from(self.chunk)));
        Unified::from_segments(
            [split_for('i'), split_for('j'), split_for('k')],
            &omega,
            hetero,
        )
    }
}

/// π_a3 for SparseTIR configurations.
impl ToUnified for GpuConfig {
    fn to_unified(&self) -> Result<Unified> {
        // GPU segment j is unified j1, the dummy j' is j2.
        let mut omega: Vec<&str> = match (self.kernel, self.order) {
            (Kernel::SpMM, GpuLoopOrder::ReductionOuter) => {
                vec!["i1", "i2", "k1", "k3", "j1", "k2"]
            }
            (Kernel::SpMM, GpuLoopOrder::ReductionInner) => {
                vec!["i1", "i2", "k1", "k3", "k2", "j1"]
            }
            (Kernel::SDDMM, GpuLoopOrder::ReductionOuter) => {
                vec!["i1", "i2", "k1", "j1", "k2", "k3"]
            }
            (Kernel::SDDMM, GpuLoopOrder::ReductionInner) => {
                vec!["i1", "i2", "j1", "k1", "k2", "k3"]
            }
            (Kernel::SpMV, _) => {
                return Err(space_error(
                    "kernel",
                    self.kernel,
                    "SparseTIR has no SpMV space",
                ))
            }
        };
        insert_after(&mut omega, "j1", "j2");
        let hetero = vec![
            ("thread_x".to_owned(), i64::from(self.thread_x)),
            ("coarsen".to_owned(), i64::from(self.coarsen)),
            ("group".to_owned(), i64::from(self.group)),
            ("bind_k1".to_owned(), i64::from(self.bind_k1)),
            ("unroll".to_owned(), i64::from(self.unroll)),
        ];
        let k = self.thread_x.saturating_mul(self.coarsen);
        Unified::from_segments([self.row_tile, 1, k], &omega, hetero)
    }
}

/// A space whose lines are the unified form of its configurations (for COGNATE/DASH heads
/// whose schema parses unified lines). Enumeration, default and validity are the wrapped
/// space's; a configuration without a unified form is invalid, and its line is empty (the
/// model then reports that candidate alone as unparsable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped<S>(pub S);

impl<S> ScheduleSpace for Mapped<S>
where
    S: ScheduleSpace,
    S::Config: ToUnified,
{
    type Config = S::Config;

    fn name(&self) -> String {
        format!("{}-unified", self.0.name())
    }

    fn enumerate(&self, shape: &MatrixShape) -> Vec<S::Config> {
        self.0.enumerate(shape)
    }

    fn default_config(&self, shape: &MatrixShape) -> S::Config {
        self.0.default_config(shape)
    }

    fn validate(&self, config: &S::Config, shape: &MatrixShape) -> Result<()> {
        self.0.validate(config, shape)?;
        config.to_unified().map(|_| ())
    }

    fn to_line(&self, config: &S::Config) -> String {
        config.to_unified().map(|u| u.to_line()).unwrap_or_default()
    }

    fn duplicate_key(&self, config: &S::Config, shape: &MatrixShape) -> String {
        self.0.duplicate_key(config, shape)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn configs_into(&self, range: Range<usize>, shape: &MatrixShape, out: &mut Vec<S::Config>) {
        self.0.configs_into(range, shape, out);
    }

    fn line_depends_on_shape(&self, index: usize) -> bool {
        self.0.line_depends_on_shape(index)
    }

    fn default_index(&self, shape: &MatrixShape) -> Option<usize> {
        self.0.default_index(shape)
    }

    fn index_of(&self, config: &S::Config, shape: &MatrixShape) -> Option<usize> {
        self.0.index_of(config, shape)
    }

    /// The wrapped space's statuses. A configuration without a unified form (none of the
    /// registered spaces has one) is not marked here: its empty line is rejected by the
    /// model's schema instead.
    fn shape_statuses(&self, shape: &MatrixShape) -> ShapeStatuses {
        self.0.shape_statuses(shape)
    }
}
