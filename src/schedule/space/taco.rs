//! CPU / TACO: WACO SuperSchedule lines as typed data, and a WACO-style CPU space.
//!
//! Evidence (repository `nullplay/Workload-Aware-Co-Optimization`):
//! - `WACO/training_data_generator/{SpMM,SDDMM,SpMV}_SuperSchedule_Generator.py` — the token
//!   order of a line, the value lists and the loop-order filters [`TacoSpace::waco`] copies;
//! - `code_generator/{spmm,sddmm,spmv}.cc` — how a line is read (`ss >> isplit >> …`), that a
//!   format flag `0` means `COMPRESSED` and `1` `UNCOMPRESSED`, that the flags name the levels
//!   `x1 x0 y1 y0` of the sparse matrix `A(x, y)`, and the fixed-CSR baseline each driver
//!   times first (`M.parallelize("i", 48, 32)` for SpMM/SDDMM, `(…, 48, 128)` for SpMV);
//! - `code_generator/include/execution_manager.hpp` and `format_schedule.hpp` — how the line
//!   becomes a TACO program (see [`crate::program::taco`]).
//!
//! | kernel | expression (WACO names) | split tokens | loop names | `A`'s modes |
//! |---|---|---|---|---|
//! | SpMM | `C(i,j) = A(i,k) * B(k,j)` | `isplit ksplit jsplit` | `i1 i0 k1 k0 j1 j0` | `i, k` |
//! | SDDMM | `C(i,j) = A(i,j) * B(i,k) * D(k,j)` | `isplit jsplit ksplit` | `i1 i0 j1 j0 k1 k0` | `i, j` |
//! | SpMV | `C(i) = A(i,k) * B(k)` | `isplit ksplit` | `i1 i0 k1 k0` | `i, k` |
//!
//! `x1` is the outer and `x0` the inner loop of axis `x` split by `xsplit` (the inner extent).

use std::fmt;

use std::ops::Range;

use super::{parse_u32, space_error, Kernel, MatrixShape, ScheduleSpace, ShapeStatuses};
use crate::error::Result;
use crate::schedule::split_measured;

/// The facts of WACO's SuperSchedule format for each kernel (SpMM and SDDMM lines have 16
/// tokens, SpMV lines 13): index names, split axes, the modes of `A`, the output.
impl Kernel {
    /// The split axes in line order (`isplit ksplit jsplit` for SpMM).
    pub fn split_axes(self) -> &'static [char] {
        match self {
            Kernel::SpMM => &['i', 'k', 'j'],
            Kernel::SDDMM => &['i', 'j', 'k'],
            Kernel::SpMV => &['i', 'k'],
        }
    }

    /// The two modes of the sparse matrix `A` (row axis, column axis).
    pub fn sparse_axes(self) -> [char; 2] {
        match self {
            Kernel::SpMM | Kernel::SpMV => ['i', 'k'],
            Kernel::SDDMM => ['i', 'j'],
        }
    }

    /// The axes of the output tensor (parallelizing another axis races).
    pub fn output_axes(self) -> &'static [char] {
        match self {
            Kernel::SpMM | Kernel::SDDMM => &['i', 'j'],
            Kernel::SpMV => &['i'],
        }
    }

    /// The dense axis (not a mode of `A`), if any: SpMM `j`, SDDMM `k`.
    pub fn dense_axis(self) -> Option<char> {
        match self {
            Kernel::SpMM => Some('j'),
            Kernel::SDDMM => Some('k'),
            Kernel::SpMV => None,
        }
    }

    /// The loop names in canonical order (`i1 i0 k1 k0 j1 j0` for SpMM).
    pub fn loop_vars(self) -> Vec<String> {
        let mut vars = Vec::new();
        for a in self.split_axes() {
            vars.push(format!("{a}1"));
            vars.push(format!("{a}0"));
        }
        vars
    }

    /// Tokens in one line (without `= <ms>`).
    pub fn token_count(self) -> usize {
        let n = self.split_axes().len();
        n + 2 * n + 4 + 3
    }

    /// OpenMP chunk of WACO's fixed-CSR baseline (`spmm.cc`/`sddmm.cc`: 32, `spmv.cc`: 128).
    pub fn default_chunk(self) -> u32 {
        match self {
            Kernel::SpMM | Kernel::SDDMM => 32,
            Kernel::SpMV => 128,
        }
    }
}

/// Storage format of one level of the (split) sparse matrix: TACO's `d` or `s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LevelFormat {
    /// TACO `Compressed` (`s`); WACO flag `0`.
    Compressed,
    /// TACO `Dense` (`d`, WACO's `UNCOMPRESSED`); WACO flag `1`.
    Uncompressed,
}

impl LevelFormat {
    /// The WACO flag: 0 = Compressed, 1 = Uncompressed.
    pub fn flag(self) -> u8 {
        match self {
            LevelFormat::Compressed => 0,
            LevelFormat::Uncompressed => 1,
        }
    }

    /// From a WACO flag token.
    pub fn from_flag(field: &str, token: &str) -> Result<Self> {
        match token {
            "0" => Ok(LevelFormat::Compressed),
            "1" => Ok(LevelFormat::Uncompressed),
            _ => Err(space_error(field, token, "format flag must be 0 or 1")),
        }
    }

    /// The TACO level letter (`s` or `d`).
    pub fn letter(self) -> char {
        match self {
            LevelFormat::Compressed => 's',
            LevelFormat::Uncompressed => 'd',
        }
    }
}

/// One WACO SuperSchedule: splits, loop order, per-level formats of `A`, parallelization.
///
/// Built with [`SuperSchedule::parse`] or directly (then check with [`Self::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SuperSchedule {
    /// The kernel.
    pub kernel: Kernel,
    /// One inner extent per [`Kernel::split_axes`] entry, in line order.
    pub splits: Vec<u32>,
    /// The loop order: a permutation of [`Kernel::loop_vars`].
    pub order: Vec<String>,
    /// Formats of `A`'s split modes `x1 x0 y1 y0` for `A(x, y)` (line order of the flags).
    pub formats: [LevelFormat; 4],
    /// The parallelized loop (`i1` in the data; `j1` also for SDDMM).
    pub par_index: String,
    /// OpenMP threads (48 in WACO's data).
    pub threads: u32,
    /// OpenMP dynamic-schedule chunk size.
    pub chunk: u32,
}

impl SuperSchedule {
    /// Parses one line (an optional trailing `= <ms>` is ignored) and validates it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) naming the bad field.
    pub fn parse(kernel: Kernel, line: &str) -> Result<Self> {
        let (body, _) = split_measured(line);
        let t: Vec<&str> = body.split_whitespace().collect();
        if t.len() != kernel.token_count() {
            return Err(space_error(
                "line",
                body,
                format!(
                    "{} tokens, expected {} for {}",
                    t.len(),
                    kernel.token_count(),
                    kernel.as_str()
                ),
            ));
        }
        let n = kernel.split_axes().len();
        let mut splits = Vec::with_capacity(n);
        for (a, tok) in kernel.split_axes().iter().zip(&t) {
            splits.push(parse_u32(&format!("{a}split"), tok)?);
        }
        let order: Vec<String> = t[n..3 * n].iter().map(|s| (*s).to_owned()).collect();
        let [x, y] = kernel.sparse_axes();
        let names = [
            format!("{x}1f"),
            format!("{x}0f"),
            format!("{y}1f"),
            format!("{y}0f"),
        ];
        let mut formats = [LevelFormat::Compressed; 4];
        for (k, f) in formats.iter_mut().enumerate() {
            *f = LevelFormat::from_flag(&names[k], t[3 * n + k])?;
        }
        let p = 3 * n + 4;
        let s = SuperSchedule {
            kernel,
            splits,
            order,
            formats,
            par_index: t[p].to_owned(),
            threads: parse_u32("parnum", t[p + 1])?,
            chunk: parse_u32("parchunk", t[p + 2])?,
        };
        s.validate()?;
        Ok(s)
    }

    /// Checks the shape-independent rules: split extents are powers of two (WACO's format
    /// splitting works on coordinate bits, `format_schedule.hpp`), the order is a permutation
    /// of the kernel's loop names with every `x1` before its `x0` (all three generators'
    /// `filter`), the parallel loop is an outer loop `x1`, threads and chunk are ≥ 1.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) naming the bad field.
    pub fn validate(&self) -> Result<()> {
        let axes = self.kernel.split_axes();
        if self.splits.len() != axes.len() {
            return Err(space_error(
                "splits",
                format!("{:?}", self.splits),
                format!("expected {} split extents", axes.len()),
            ));
        }
        for (a, s) in axes.iter().zip(&self.splits) {
            if !s.is_power_of_two() {
                return Err(space_error(
                    &format!("{a}split"),
                    s,
                    "must be a power of two",
                ));
            }
        }
        let vars = self.kernel.loop_vars();
        let mut sorted = self.order.clone();
        sorted.sort();
        let mut want = vars.clone();
        want.sort();
        if sorted != want {
            return Err(space_error(
                "order",
                self.order.join(" "),
                format!("must be a permutation of {}", vars.join(" ")),
            ));
        }
        for a in axes {
            if self.position(&format!("{a}1")) > self.position(&format!("{a}0")) {
                return Err(space_error(
                    "order",
                    self.order.join(" "),
                    format!("{a}1 must come before {a}0"),
                ));
            }
        }
        let outer = self.par_index.ends_with('1') && vars.contains(&self.par_index);
        if !outer {
            return Err(space_error(
                "paridx",
                &self.par_index,
                "must be an outer loop name (x1)",
            ));
        }
        if self.threads == 0 {
            return Err(space_error("parnum", 0, "must be at least 1"));
        }
        if self.chunk == 0 {
            return Err(space_error("parchunk", 0, "must be at least 1"));
        }
        Ok(())
    }

    /// Position of loop `var` in the order (`usize::MAX` if absent).
    pub fn position(&self, var: &str) -> usize {
        self.order
            .iter()
            .position(|v| v == var)
            .unwrap_or(usize::MAX)
    }

    /// The split extent of `axis` (1 if the kernel has no such axis).
    pub fn split_of(&self, axis: char) -> u32 {
        let axes = self.kernel.split_axes();
        let i = axes.iter().position(|a| *a == axis);
        i.and_then(|i| self.splits.get(i).copied()).unwrap_or(1)
    }

    /// The SuperSchedules one step away, by the rules of `space` (the parallel loop it
    /// picks): each split doubled or halved, each pair of adjacent loops swapped, each format
    /// flag flipped, the chunk doubled or halved. Only structurally valid ones
    /// ([`Self::validate`]); whether `space` enumerates them is for the caller to check.
    pub fn neighbours(&self, space: &TacoSpace) -> Vec<SuperSchedule> {
        let mut out = Vec::new();
        for i in 0..self.splits.len() {
            for s in [self.splits[i].saturating_mul(2), self.splits[i] / 2] {
                let mut n = self.clone();
                n.splits[i] = s;
                out.push(n);
            }
        }
        for p in 1..self.order.len() {
            let mut n = self.clone();
            n.order.swap(p - 1, p);
            n.par_index = space.par_index_for(&n.order);
            out.push(n);
        }
        for f in 0..self.formats.len() {
            let mut n = self.clone();
            n.formats[f] = match n.formats[f] {
                LevelFormat::Compressed => LevelFormat::Uncompressed,
                LevelFormat::Uncompressed => LevelFormat::Compressed,
            };
            out.push(n);
        }
        for c in [self.chunk.saturating_mul(2), self.chunk / 2] {
            let mut n = self.clone();
            n.chunk = c;
            out.push(n);
        }
        out.retain(|n| n != self && n.validate().is_ok());
        out
    }

    /// The line, tokens separated by single spaces, without a time.
    pub fn to_line(&self) -> String {
        let mut t: Vec<String> = self.splits.iter().map(u32::to_string).collect();
        t.extend(self.order.iter().cloned());
        t.extend(self.formats.iter().map(|f| f.flag().to_string()));
        t.push(self.par_index.clone());
        t.push(self.threads.to_string());
        t.push(self.chunk.to_string());
        t.join(" ")
    }
}

impl fmt::Display for SuperSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_line())
    }
}

/// A WACO-style CPU space: split lists × the loop orders WACO's generator allows × all
/// per-level formats × chunk sizes, for one kernel.
///
/// Enumeration order (deterministic): splits (nested, line order, each list in the given
/// order) → loop orders (lexicographic over permutations of [`Kernel::loop_vars`],
/// filtered) → format flags counted in binary (`x1f` most significant) → chunks.
///
/// Sizes of [`TacoSpace::waco`]: SpMM 6·6·(3·6 + 5·20)·16·9 = 611 712; SDDMM
/// 6·6·(3·6 + 5·30)·15·6 = 544 320; SpMV 6·6·6·16·9 = 31 104 (orders per dense split: 6 below 8, else 20 for SpMM and 30 for SDDMM; checked by tests). These are
/// the spaces WACO *sampled* 100 lines per matrix from; ranking all of them per matrix is
/// what WACO's HNSW search avoids — shrink the lists for exhaustive ranking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TacoSpace {
    /// The kernel.
    pub kernel: Kernel,
    /// Candidate extents per split axis, in line order.
    pub splits: Vec<Vec<u32>>,
    /// Candidate OpenMP chunk sizes.
    pub chunks: Vec<u32>,
    /// OpenMP threads (fixed).
    pub threads: u32,
    /// Extent of the dense axis (WACO's drivers use `N = 256`); bounds its split.
    pub dense_dim: u32,
}

fn pow2_upto(max: u32) -> Vec<u32> {
    (0..32)
        .map(|p| 1u32 << p)
        .take_while(|v| *v <= max)
        .collect()
}

impl TacoSpace {
    /// The space of WACO's generators (the random phase of
    /// `{SpMM,SDDMM,SpMV}_SuperSchedule_Generator.py`): row/column splits 1…32, dense split
    /// 1…128, 48 threads, chunks 1…256 (SpMM, SpMV) or 1…32 (SDDMM). SpMV's generator draws
    /// splits below the matrix size; here they are 1…32 so the space is shape-independent.
    pub fn waco(kernel: Kernel) -> Self {
        let small = pow2_upto(32);
        let splits = match kernel {
            Kernel::SpMM | Kernel::SDDMM => vec![small.clone(), small, pow2_upto(128)],
            Kernel::SpMV => vec![small.clone(), small],
        };
        let chunks = match kernel {
            Kernel::SDDMM => pow2_upto(32),
            _ => pow2_upto(256),
        };
        TacoSpace {
            kernel,
            splits,
            chunks,
            threads: 48,
            dense_dim: 256,
        }
    }

    /// [`TacoSpace::waco`] with every value list cut at a bound: split extents (and the dense
    /// split) at most `max_split`, chunks at most `max_chunk` (each list keeps at least 1).
    /// For quick exhaustive runs: `waco_up_to(SpMM, 4, 4)` has 3·3·3 split choices, 6 loop
    /// orders each, 16 formats and 3 chunks (7 776 configurations).
    ///
    /// ```
    /// use dashrank::schedule::space::{MatrixShape, ScheduleSpace, TacoSpace};
    /// use dashrank::Kernel;
    /// let space = TacoSpace::waco_up_to(Kernel::SpMM, 4, 4);
    /// assert_eq!(space.enumerate(&MatrixShape::new(8, 8, 8)).len(), 7776);
    /// ```
    pub fn waco_up_to(kernel: Kernel, max_split: u32, max_chunk: u32) -> Self {
        let mut s = Self::waco(kernel);
        for list in &mut s.splits {
            list.retain(|&v| v <= max_split.max(1));
        }
        s.chunks.retain(|&v| v <= max_chunk.max(1));
        s
    }

    /// Whether WACO's generator allows `order` given the dense split (`filter` in the
    /// generators): `x1` before `x0`; SpMM: `j1` after `i1`, and the dense loops `j1 j0` last
    /// if `jsplit < 8`, else `j0` last; SDDMM: the same for `k` (`lastk`).
    pub fn order_allowed(&self, order: &[String], dense_split: u32) -> bool {
        let pos = |v: &str| order.iter().position(|o| o == v).unwrap_or(usize::MAX);
        let axes = self.kernel.split_axes();
        if axes
            .iter()
            .any(|a| pos(&format!("{a}1")) > pos(&format!("{a}0")))
        {
            return false;
        }
        let Some(d) = self.kernel.dense_axis() else {
            return true;
        };
        let (d1, d0) = (pos(&format!("{d}1")), pos(&format!("{d}0")));
        let last = if dense_split < 8 {
            d1 == 4 && d0 == 5
        } else {
            d0 == 5
        };
        let spmm_rule = self.kernel != Kernel::SpMM || d1 > pos("i1");
        last && spmm_rule
    }

    /// The parallel loop WACO picks: SDDMM the first of `i1`/`j1` in the order, else `i1`.
    pub fn par_index_for(&self, order: &[String]) -> String {
        if self.kernel == Kernel::SDDMM {
            if let Some(v) = order.iter().find(|v| *v == "i1" || *v == "j1") {
                return v.clone();
            }
        }
        "i1".to_owned()
    }

    pub(super) fn all_orders(&self) -> Vec<Vec<String>> {
        let vars = self.kernel.loop_vars();
        let mut idx: Vec<usize> = (0..vars.len()).collect();
        let mut out = vec![idx.iter().map(|&i| vars[i].clone()).collect()];
        // Lexicographic next permutation over indices.
        while let Some(k) = (0..idx.len().saturating_sub(1))
            .rev()
            .find(|&k| idx[k] < idx[k + 1])
        {
            let Some(l) = (k + 1..idx.len()).rev().find(|&l| idx[k] < idx[l]) else {
                break;
            };
            idx.swap(k, l);
            idx[k + 1..].reverse();
            out.push(idx.iter().map(|&i| vars[i].clone()).collect());
        }
        out
    }

    pub(super) fn dense_split_index(&self) -> Option<usize> {
        let d = self.kernel.dense_axis()?;
        self.kernel.split_axes().iter().position(|a| *a == d)
    }

    /// Per split axis, the largest inner extent that still differs for this shape: the next
    /// power of two ≥ the axis extent (rows, columns, or [`TacoSpace::dense_dim`]).
    pub(super) fn split_caps(&self, shape: &MatrixShape) -> Vec<u32> {
        let [x, y] = self.kernel.sparse_axes();
        self.kernel
            .split_axes()
            .iter()
            .map(|a| {
                let dim = if *a == x {
                    shape.rows
                } else if *a == y {
                    shape.cols
                } else {
                    self.dense_dim as usize
                };
                u32::try_from(dim.max(1).next_power_of_two()).unwrap_or(u32::MAX)
            })
            .collect()
    }
}

impl ScheduleSpace for TacoSpace {
    type Config = SuperSchedule;

    fn name(&self) -> String {
        format!("taco-{}", self.kernel.as_str())
    }

    fn enumerate(&self, _shape: &MatrixShape) -> Vec<SuperSchedule> {
        let mut split_combos: Vec<Vec<u32>> = vec![Vec::new()];
        for list in &self.splits {
            let prev = std::mem::take(&mut split_combos);
            for p in &prev {
                for v in list {
                    let mut q = p.clone();
                    q.push(*v);
                    split_combos.push(q);
                }
            }
        }
        let orders = self.all_orders();
        let mut out = Vec::new();
        for splits in split_combos {
            let dense = self.dense_split_index().map_or(1, |i| splits[i]);
            for order in orders.iter().filter(|o| self.order_allowed(o, dense)) {
                for bits in 0u8..16 {
                    // SDDMM's generator skips an all-Uncompressed A.
                    if self.kernel == Kernel::SDDMM && bits == 15 {
                        continue;
                    }
                    let formats = [3, 2, 1, 0].map(|s| {
                        if bits >> s & 1 == 1 {
                            LevelFormat::Uncompressed
                        } else {
                            LevelFormat::Compressed
                        }
                    });
                    for &chunk in &self.chunks {
                        out.push(SuperSchedule {
                            kernel: self.kernel,
                            splits: splits.clone(),
                            order: order.clone(),
                            formats,
                            par_index: self.par_index_for(order),
                            threads: self.threads,
                            chunk,
                        });
                    }
                }
            }
        }
        out
    }

    /// TACO's default CSR schedule as WACO's drivers time it ("FixedCSR"): no split (all
    /// extents 1), natural loop order, `A` stored `i` Uncompressed / `k` (SDDMM: `j`)
    /// Compressed, `i1` parallel over the fixed thread count with the drivers' chunk
    /// ([`Kernel::default_chunk`]). The flags of the extent-1 inner levels (`i0f`, `k0f`)
    /// are ignored by the drivers; we write `1` (a dense level of extent 1 is the identity).
    fn default_config(&self, _shape: &MatrixShape) -> SuperSchedule {
        use LevelFormat::{Compressed as C, Uncompressed as U};
        SuperSchedule {
            kernel: self.kernel,
            splits: vec![1; self.kernel.split_axes().len()],
            order: self.kernel.loop_vars(),
            formats: [U, U, C, U],
            par_index: "i1".to_owned(),
            threads: self.threads,
            chunk: self.kernel.default_chunk(),
        }
    }

    /// Structural rules ([`SuperSchedule::validate`]) plus: the kernel matches the space.
    /// Splits larger than an axis are accepted (WACO clamps the inner extent to the axis,
    /// `format_schedule.hpp`), and reported as duplicates by [`Self::duplicate_key`].
    fn validate(&self, config: &SuperSchedule, _shape: &MatrixShape) -> Result<()> {
        if config.kernel != self.kernel {
            return Err(space_error(
                "kernel",
                config.kernel.as_str(),
                format!("space is for {}", self.kernel.as_str()),
            ));
        }
        config.validate()
    }

    fn to_line(&self, config: &SuperSchedule) -> String {
        config.to_line()
    }

    /// Splits are clamped to the next power of two ≥ the axis extent (rows, columns, or
    /// [`TacoSpace::dense_dim`]): WACO's format split keeps `min(split, dim)` as the inner
    /// extent, so larger splits behave identically.
    fn duplicate_key(&self, config: &SuperSchedule, shape: &MatrixShape) -> String {
        let mut c = config.clone();
        for (s, cap) in c.splits.iter_mut().zip(self.split_caps(shape)) {
            *s = (*s).min(cap);
        }
        c.to_line()
    }

    fn len(&self) -> usize {
        self.layout().len
    }

    fn configs_into(
        &self,
        range: Range<usize>,
        _shape: &MatrixShape,
        out: &mut Vec<SuperSchedule>,
    ) {
        self.configs_fast(range, out);
    }

    fn lines_into(&self, range: Range<usize>, _shape: &MatrixShape, out: &mut Vec<String>) {
        self.lines_fast(range, out);
    }

    fn default_index(&self, shape: &MatrixShape) -> Option<usize> {
        self.index_fast(&self.default_config(shape))
    }

    fn index_of(&self, config: &SuperSchedule, _shape: &MatrixShape) -> Option<usize> {
        self.index_fast(config)
    }

    /// Only duplicates (splits clamped to the matrix): every enumerated configuration passes
    /// [`Self::validate`].
    fn shape_statuses(&self, shape: &MatrixShape) -> ShapeStatuses {
        self.shape_statuses_fast(shape)
    }
}
