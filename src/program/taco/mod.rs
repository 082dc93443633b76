//! TACO programs: what a WACO SuperSchedule becomes in stock TACO.
//!
//! A SuperSchedule's split is a **data repacking**, not TACO's loop `split()` (WACO's
//! `code_generator`: `FormatScheduler::split` and `ExecutionManager::gen_command` in
//! `nullplay/Workload-Aware-Co-Optimization`). Splitting axis `x` by `s` replaces the mode `x`
//! of every tensor by two modes `x1 = x / X0` and `x0 = x % X0` with `X0 = min(s, dim)`, so the
//! sparse matrix becomes a 4-mode tensor `A(i1,i0,k1,k0)`, stored level by level in the loop
//! order; the dense operands are the same row-major arrays seen as 3- or 4-mode tensors. The
//! expression is written over the split variables and TACO's `split()` is never used:
//!
//! | SuperSchedule | [`TacoProgram`] |
//! |---|---|
//! | `isplit = s` | modes `i1` (extent ⌈rows/I0⌉), `i0` (extent `I0 = min(s, rows)`) in every tensor that has `i` |
//! | a split of 1, or a split covering the whole axis | one mode `i` (the extent-1 loop is dropped; WACO drops `s = 1`) |
//! | loop order | `A`'s levels in loop order (`freorder`), `-s=reorder(…)` |
//! | flags `x1f x0f y1f y0f` | `A`'s level formats (`d` dense, `s` compressed); for SDDMM also the result's |
//! | a loop dense in every tensor | `-s=bound(v,vb,extent,MaxExact)` (WACO's `gen_sched`) |
//! | `paridx` | `-s=parallelize(v,CPUThread,NoRaces\|Atomics)` (`Atomics` when `v` is not an output mode) |
//! | `parnum`, `parchunk` | `-nthreads=` all cores of this machine (WACO's 48 was its core count), `-schedule=dynamic,chunk` |
//!
//! Every form starts from TACO's own loop order (`reorderLoopsTopologically`, which the `taco`
//! CLI and `Tensor::compile()` apply; `concretize()` alone nests the result's modes first, an
//! inner-product order that runs CSR SpMM several times slower) and then applies the commands.
//!
//! SDDMM writes a sparse result with `A`'s layout; stock TACO parallelizes that only with
//! `-s=assemble(C,Insert)`, which every SDDMM program carries (WACO patched TACO's output
//! instead). The toolchain's default is TACO's own CSR program ([`TacoProgram::csr`]):
//! `-f=A:ds -s=parallelize(i,CPUThread,NoRaces)`, dynamic chunk 32 (SpMV 128), no `bound`.
//!
//! Forms: [`TacoProgram::command_line`] (the stock `taco` CLI), [`TacoProgram::cpp_snippet`]
//! (TACO's C++ API), and [`TacoProgram::pack`] (the repacked `pos`/`crd`/`vals` arrays of the
//! sparse tensor, ready for a `taco_tensor_t`). [`TacoProgram::layout`] sizes a layout before
//! anything is allocated: dense levels under sparse ones store zeros, and a layout with more
//! than [`TacoOptions::max_positions_per_nonzero`] positions per nonzero (WACO's 20, "Pack Too
//! Large" in `format_schedule.hpp`) is refused with
//! [`ErrorKind::LayoutTooLarge`](crate::ErrorKind::LayoutTooLarge).
//!
//! # Example
//! ```
//! use dashrank::program::taco::{TacoOptions, TacoProgram};
//! use dashrank::schedule::space::{MatrixShape, SuperSchedule};
//! use dashrank::Kernel;
//! let line = "16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16";
//! let s = SuperSchedule::parse(Kernel::SpMM, line)?;
//! let opts = TacoOptions { threads: Some(2), ..TacoOptions::default() };
//! let p = TacoProgram::from_superschedule(&s, &MatrixShape::new(1000, 200, 5000), &opts)?;
//! assert_eq!(p.expression(), "C(i1,i0,j)=A(k,i1,i0)*B(k,j)"); // ksplit 256 covers k
//! assert_eq!(
//!     p.command_line(),
//!     "taco \"C(i1,i0,j)=A(k,i1,i0)*B(k,j)\" -f=C:ddd -f=A:sds -f=B:dd -t=C:float \
//!      -t=A:float -t=B:float -d=C:63,16,256 -d=A:200,63,16 -d=B:200,256 \
//!      -s=\"bound(i1,i1b,63,MaxExact)\" -s=\"bound(j,jb,256,MaxExact)\" \
//!      -s=\"reorder(k,i1b,i0,jb)\" -s=\"parallelize(i1b,CPUThread,NoRaces)\" \
//!      -nthreads=2 -schedule=dynamic,16"
//! );
//! # Ok::<(), dashrank::Error>(())
//! ```

mod command;
mod pack;
mod render;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use command::{AssembleStrategy, BoundType, OutputRaceStrategy, ParallelUnit, TacoCommand};
pub use pack::{LevelSize, PackedLevel, PackedTensor, TacoLayout};

use crate::error::{Error, Result};
use crate::schedule::space::{space_error, Kernel, LevelFormat, MatrixShape, SuperSchedule};

/// Positions per nonzero a repacked layout may hold (WACO's `limit = nnz*20`).
pub const DEFAULT_MAX_POSITIONS_PER_NONZERO: u32 = 20;

/// Extent of the dense axis of SpMM and SDDMM (WACO's drivers: `N = 256`).
pub const DEFAULT_DENSE_EXTENT: u32 = 256;

/// How schedules become programs on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TacoOptions {
    /// OpenMP threads of the program; `None`: every core the calling thread may run on
    /// (`std::thread::available_parallelism`, which honours its CPU affinity: in a thread that
    /// OpenMP has bound to one core, pass the count explicitly). A SuperSchedule's `parnum` is the thread count
    /// of the machine the model learned from, and is not used.
    pub threads: Option<u32>,
    /// Extent of the dense axis (`j` of SpMM, `k` of SDDMM).
    pub dense_extent: u32,
    /// Largest layout accepted, in positions per nonzero of the matrix (never below what
    /// TACO's CSR needs).
    pub max_positions_per_nonzero: u32,
}

impl Default for TacoOptions {
    fn default() -> Self {
        Self {
            threads: None,
            dense_extent: DEFAULT_DENSE_EXTENT,
            max_positions_per_nonzero: DEFAULT_MAX_POSITIONS_PER_NONZERO,
        }
    }
}

impl TacoOptions {
    /// The thread count programs get: [`Self::threads`] or every core.
    pub fn resolved_threads(&self) -> u32 {
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        })
    }
}

/// Which part of its axis a loop variable walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AxisPart {
    /// The whole axis: coordinate `x`.
    Whole,
    /// The outer part of a split: `x / inner`.
    Outer,
    /// The inner part of a split: `x % inner`.
    Inner,
}

/// One index variable of a program: a mode of one or more tensors and a loop.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoopVar {
    /// Its name (`i`, `i1`, `i0`, …).
    pub name: String,
    /// The axis it belongs to (`i`, `j` or `k`).
    pub axis: char,
    /// The part of the axis it walks.
    pub part: AxisPart,
    /// Its extent (the mode's dimension).
    pub extent: u32,
    /// The inner extent of the split (`X0`); the axis extent for [`AxisPart::Whole`].
    pub inner: u32,
}

impl LoopVar {
    /// This variable's coordinate for axis coordinate `x`.
    pub fn coordinate(&self, x: u32) -> u32 {
        match self.part {
            AxisPart::Whole => x,
            AxisPart::Outer => x / self.inner,
            AxisPart::Inner => x % self.inner,
        }
    }
}

/// One tensor of a program: its modes in storage order and a format per level.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TacoTensor {
    /// `C` (result), `A` (the sparse matrix), `B`, `D`.
    pub name: String,
    /// Its modes, in storage order (the level order; mode ordering is the identity).
    pub vars: Vec<LoopVar>,
    /// Format of each level.
    pub levels: Vec<LevelFormat>,
}

impl TacoTensor {
    /// Dimensions, in storage order.
    pub fn dims(&self) -> Vec<u32> {
        self.vars.iter().map(|v| v.extent).collect()
    }

    /// True when some level is compressed.
    pub fn is_sparse(&self) -> bool {
        self.levels.contains(&LevelFormat::Compressed)
    }

    /// TACO's format letters (`dsds`).
    pub fn format_letters(&self) -> String {
        self.levels.iter().map(|l| l.letter()).collect()
    }

    /// The level of variable `name`, if this tensor has it.
    pub fn level_of(&self, name: &str) -> Option<usize> {
        self.vars.iter().position(|v| v.name == name)
    }
}

/// A complete stock-TACO program for one kernel, one matrix shape and one schedule (see the
/// module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TacoProgram {
    kernel: Kernel,
    tensors: Vec<TacoTensor>,
    commands: Vec<TacoCommand>,
    threads: u32,
    chunk: u32,
}

impl TacoProgram {
    /// The program of a SuperSchedule for a matrix of this shape.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) when the SuperSchedule fails
    /// [`SuperSchedule::validate`]; [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for an empty or oversized matrix or option.
    pub fn from_superschedule(
        s: &SuperSchedule,
        shape: &MatrixShape,
        options: &TacoOptions,
    ) -> Result<Self> {
        s.validate()?;
        let vars = SplitVars::new(s, shape, options)?;
        let order: Vec<LoopVar> = s.order.iter().filter_map(|n| vars.get(n)).collect();
        let [x, y] = s.kernel.sparse_axes();
        let sparse_vars: Vec<&LoopVar> = order
            .iter()
            .filter(|v| v.axis == x || v.axis == y)
            .collect();
        let sparse = TacoTensor {
            name: "A".to_owned(),
            vars: sparse_vars.iter().map(|v| (*v).clone()).collect(),
            levels: sparse_vars
                .iter()
                .map(|v| vars.format(s, &v.name))
                .collect(),
        };
        let tensors = kernel_tensors(s.kernel, &sparse, |a| vars.of_axis(a));
        let mut program = TacoProgram {
            kernel: s.kernel,
            tensors,
            commands: Vec::new(),
            threads: options.resolved_threads(),
            chunk: s.chunk,
        };
        let par_axis = s.par_index.chars().next().unwrap_or('i');
        let par = vars
            .get(&s.par_index)
            .or_else(|| vars.of_axis(par_axis).into_iter().next())
            .ok_or_else(|| space_error("paridx", &s.par_index, "not a loop of this kernel"))?;
        program.commands = program.waco_commands(&order, &par.name);
        Ok(program)
    }

    /// TACO's own CSR program, the toolchain default: `A` stored `ds`, TACO's loop order, the
    /// row loop parallel (`NoRaces`) with the kernel's dynamic chunk
    /// ([`Kernel::default_chunk`]), no `bound`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty or
    /// oversized matrix or option.
    pub fn csr(kernel: Kernel, shape: &MatrixShape, options: &TacoOptions) -> Result<Self> {
        let whole = |axis: char| -> Result<LoopVar> {
            let extent = axis_extent(kernel, axis, shape, options)?;
            Ok(LoopVar {
                name: axis.to_string(),
                axis,
                part: AxisPart::Whole,
                extent,
                inner: extent,
            })
        };
        let [x, y] = kernel.sparse_axes();
        let sparse = TacoTensor {
            name: "A".to_owned(),
            vars: vec![whole(x)?, whole(y)?],
            levels: vec![LevelFormat::Uncompressed, LevelFormat::Compressed],
        };
        let mut axes = Vec::new();
        for a in kernel.split_axes() {
            axes.push(whole(*a)?);
        }
        let tensors = kernel_tensors(kernel, &sparse, |a| {
            axes.iter().filter(|v| v.axis == a).cloned().collect()
        });
        let mut commands = Vec::new();
        if kernel == Kernel::SDDMM {
            commands.push(assemble_result());
        }
        commands.push(TacoCommand::Parallelize {
            index: x.to_string(),
            unit: ParallelUnit::CPUThread,
            races: OutputRaceStrategy::NoRaces,
        });
        Ok(TacoProgram {
            kernel,
            tensors,
            commands,
            threads: options.resolved_threads(),
            chunk: kernel.default_chunk(),
        })
    }

    /// The kernel.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The tensors: the result first, then the operands in expression order (`A` second).
    pub fn tensors(&self) -> &[TacoTensor] {
        &self.tensors
    }

    /// The sparse matrix `A`.
    pub fn sparse(&self) -> &TacoTensor {
        &self.tensors[1]
    }

    /// The scheduling commands, in the order they apply.
    pub fn commands(&self) -> &[TacoCommand] {
        &self.commands
    }

    /// OpenMP threads (`-nthreads=`, `taco_set_num_threads`).
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// Chunk of the dynamic OpenMP schedule (`-schedule=dynamic,chunk`).
    pub fn chunk(&self) -> u32 {
        self.chunk
    }

    /// `bound`, `reorder`, (`assemble`,) `parallelize` as WACO's `gen_sched` writes them.
    fn waco_commands(&self, order: &[LoopVar], par: &str) -> Vec<TacoCommand> {
        let mut commands = Vec::new();
        let mut loop_names = Vec::with_capacity(order.len());
        let mut par_name = par.to_owned();
        for v in order {
            // Stock TACO's `bound` beside `assemble` emits C that does not compile (SDDMM).
            if self.kernel == Kernel::SDDMM || !self.dense_everywhere(&v.name) {
                loop_names.push(v.name.clone());
                continue;
            }
            let bound = format!("{}b", v.name);
            if v.name == par {
                par_name.clone_from(&bound);
            }
            commands.push(TacoCommand::Bound {
                index: v.name.clone(),
                bound: bound.clone(),
                extent: v.extent,
                kind: BoundType::MaxExact,
            });
            loop_names.push(bound);
        }
        commands.push(TacoCommand::Reorder(loop_names));
        if self.kernel == Kernel::SDDMM {
            commands.push(assemble_result());
        }
        let output_axis = self.tensors[0].vars.iter().any(|v| v.name == par);
        commands.push(TacoCommand::Parallelize {
            index: par_name,
            unit: ParallelUnit::CPUThread,
            races: if output_axis {
                OutputRaceStrategy::NoRaces
            } else {
                OutputRaceStrategy::Atomics
            },
        });
        commands
    }

    /// Why stock TACO (2b8ece4c) cannot build this program, if it cannot: it assembles a
    /// sparse result (SDDMM's `C`, with `assemble(C,Insert)`) only from one dense level above
    /// one compressed level, with every reduction loop inside both (otherwise it stops at
    /// "ungrouped insertion" or emits C that does not compile). WACO patched TACO's output for
    /// the rest.
    pub fn stock_taco_limit(&self) -> Option<String> {
        if self.kernel != Kernel::SDDMM {
            return None;
        }
        let result = &self.tensors[0];
        if result.levels != [LevelFormat::Uncompressed, LevelFormat::Compressed] {
            return Some(format!(
                "stock TACO assembles a sparse result only as one dense level above one \
                 compressed level, not {}",
                result.format_letters()
            ));
        }
        let order = self.loop_order();
        let last_output = order.iter().rposition(|v| result.level_of(v).is_some());
        let first_reduction = order.iter().position(|v| result.level_of(v).is_none());
        match (last_output, first_reduction) {
            (Some(o), Some(r)) if r < o => Some(
                "stock TACO assembles a sparse result only with the reduction loops innermost"
                    .to_owned(),
            ),
            _ => None,
        }
    }

    /// The loop order: `reorder`'s variables (bound names mapped back), else TACO's own
    /// (the result's modes, then the reduction variables in operand order).
    pub fn loop_order(&self) -> Vec<String> {
        let bound_of = |name: &str| {
            self.commands.iter().find_map(|c| match c {
                TacoCommand::Bound { index, bound, .. } if bound == name => Some(index.clone()),
                _ => None,
            })
        };
        for c in &self.commands {
            if let TacoCommand::Reorder(v) = c {
                return v
                    .iter()
                    .map(|n| bound_of(n).unwrap_or_else(|| n.clone()))
                    .collect();
            }
        }
        let mut order: Vec<String> = Vec::new();
        for v in self.tensors.iter().flat_map(|t| t.vars.iter()) {
            if !order.contains(&v.name) {
                order.push(v.name.clone());
            }
        }
        order
    }

    /// Whether every tensor that has the variable stores it in a dense level.
    fn dense_everywhere(&self, name: &str) -> bool {
        self.tensors.iter().all(|t| {
            t.level_of(name)
                .is_none_or(|l| t.levels[l] == LevelFormat::Uncompressed)
        })
    }
}

fn assemble_result() -> TacoCommand {
    TacoCommand::Assemble {
        tensor: "C".to_owned(),
        strategy: AssembleStrategy::Insert,
    }
}

/// The tensors of `kernel` (result first) around the sparse `A`; `vars(axis)` gives an
/// axis's variables in natural order (outer first) for the dense tensors.
fn kernel_tensors(
    kernel: Kernel,
    sparse: &TacoTensor,
    vars: impl Fn(char) -> Vec<LoopVar>,
) -> Vec<TacoTensor> {
    let dense = |name: &str, axes: &[char]| {
        let vs: Vec<LoopVar> = axes.iter().flat_map(|a| vars(*a)).collect();
        TacoTensor {
            name: name.to_owned(),
            levels: vec![LevelFormat::Uncompressed; vs.len()],
            vars: vs,
        }
    };
    match kernel {
        Kernel::SpMM => vec![
            dense("C", &['i', 'j']),
            sparse.clone(),
            dense("B", &['k', 'j']),
        ],
        Kernel::SDDMM => {
            let mut result = sparse.clone();
            result.name = "C".to_owned();
            vec![
                result,
                sparse.clone(),
                dense("B", &['i', 'k']),
                dense("D", &['j', 'k']),
            ]
        }
        Kernel::SpMV => vec![dense("C", &['i']), sparse.clone(), dense("B", &['k'])],
    }
}

/// The extent of `axis` for a matrix of `shape`: rows, columns or the dense extent.
fn axis_extent(
    kernel: Kernel,
    axis: char,
    shape: &MatrixShape,
    options: &TacoOptions,
) -> Result<u32> {
    let [x, y] = kernel.sparse_axes();
    let (what, n) = if axis == x {
        ("rows", shape.rows)
    } else if axis == y {
        ("columns", shape.cols)
    } else {
        ("dense extent", options.dense_extent as usize)
    };
    match u32::try_from(n) {
        Ok(e) if (1..=i32::MAX as u32).contains(&e) => Ok(e),
        _ => Err(Error::invalid_argument(format!(
            "a TACO program needs 1 to {} {what}, got {n}",
            i32::MAX
        ))),
    }
}

/// The variables a SuperSchedule's loop names become (extent-1 loops dropped), with the
/// format flag each inherits.
struct SplitVars {
    /// `(WACO loop name, variable, index of its format flag)`.
    named: Vec<(String, LoopVar, Option<usize>)>,
}

impl SplitVars {
    fn new(s: &SuperSchedule, shape: &MatrixShape, options: &TacoOptions) -> Result<Self> {
        let [x, y] = s.kernel.sparse_axes();
        let mut named = Vec::new();
        for &axis in s.kernel.split_axes() {
            let extent = axis_extent(s.kernel, axis, shape, options)?;
            let inner = s.split_of(axis).min(extent);
            let flag = |outer: bool| {
                let base = if axis == x {
                    Some(0)
                } else if axis == y {
                    Some(2)
                } else {
                    None
                };
                base.map(|b| b + usize::from(!outer))
            };
            let var = |name: String, part, extent, inner| LoopVar {
                name,
                axis,
                part,
                extent,
                inner,
            };
            if s.split_of(axis) == 1 || inner == extent {
                // The extent-1 loop (inner for a split of 1, outer for a covering split) goes;
                // the other one keeps its position in the order and its format flag.
                let keep_outer = s.split_of(axis) == 1;
                let waco = format!("{axis}{}", if keep_outer { 1 } else { 0 });
                let v = var(axis.to_string(), AxisPart::Whole, extent, extent);
                named.push((waco, v, flag(keep_outer)));
            } else {
                let outer = extent.div_ceil(inner);
                named.push((
                    format!("{axis}1"),
                    var(format!("{axis}1"), AxisPart::Outer, outer, inner),
                    flag(true),
                ));
                named.push((
                    format!("{axis}0"),
                    var(format!("{axis}0"), AxisPart::Inner, inner, inner),
                    flag(false),
                ));
            }
        }
        Ok(Self { named })
    }

    fn get(&self, waco_name: &str) -> Option<LoopVar> {
        self.named
            .iter()
            .find(|(n, _, _)| n == waco_name)
            .map(|(_, v, _)| v.clone())
    }

    fn of_axis(&self, axis: char) -> Vec<LoopVar> {
        self.named
            .iter()
            .filter(|(_, v, _)| v.axis == axis)
            .map(|(_, v, _)| v.clone())
            .collect()
    }

    fn format(&self, s: &SuperSchedule, var: &str) -> LevelFormat {
        self.named
            .iter()
            .find(|(_, v, _)| v.name == var)
            .and_then(|(_, _, f)| *f)
            .map_or(LevelFormat::Uncompressed, |f| s.formats[f])
    }
}
