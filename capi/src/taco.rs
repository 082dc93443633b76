//! TACO programs from C: a candidate (or a SuperSchedule line, or TACO's CSR) as a stock-TACO
//! program (`dashrank_taco_program`), its text forms and its structure for the TACO C++ API,
//! and the matrix repacked for it (`dashrank_taco_packed`, the arrays of a `taco_tensor_t`).
//! `include/dashrank_taco.hpp` builds TACO tensors, statement and kernel from these.

use std::ffi::c_char;

use dashrank::pattern::{CsrIndex, CsrView};
use dashrank::program::taco::{PackedLevel, PackedTensor, TacoCommand, TacoOptions, TacoProgram};
use dashrank::rank::SpaceCandidates;
use dashrank::schedule::space::{AnyConfig, LevelFormat, MatrixShape, SuperSchedule};

use super::boundary::{guard, try_mut, try_ref, try_str, write_str, Failure, FfiResult};
use super::handle::{box_into_handle, free_box_handle, try_handle, Castable, OwnershipBox};
use super::space::{
    dashrank_space_candidates, to_kernel, DASHRANK_KERNEL_SDDMM, DASHRANK_KERNEL_SPMM,
    DASHRANK_KERNEL_SPMV,
};
use super::status::dashrank_status;
use super::DASHRANK_ABI_VERSION;

/// Largest tensor order and argument count in the fixed-size info structs.
pub const DASHRANK_TACO_MAX_ORDER: usize = 8;
/// Size of the name buffers in the info structs (names are NUL-terminated).
pub const DASHRANK_TACO_NAME_LEN: usize = 32;

/// A TACO level format: dense (`d`).
pub const DASHRANK_TACO_DENSE: u32 = 0;
/// A TACO level format: compressed (`s`).
pub const DASHRANK_TACO_COMPRESSED: u32 = 1;

/// `dashrank_taco_command_info.kind`: `bound(index, bound, extent, kind)`.
pub const DASHRANK_TACO_BOUND: u32 = 0;
/// `dashrank_taco_command_info.kind`: `reorder(v1, …, vn)`.
pub const DASHRANK_TACO_REORDER: u32 = 1;
/// `dashrank_taco_command_info.kind`: `parallelize(index, unit, races)`.
pub const DASHRANK_TACO_PARALLELIZE: u32 = 2;
/// `dashrank_taco_command_info.kind`: `assemble(tensor, strategy)`.
pub const DASHRANK_TACO_ASSEMBLE: u32 = 3;

/// How schedules become TACO programs. Initialise with `dashrank_taco_options_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dashrank_taco_options {
    /// Set by `dashrank_taco_options_init` to `DASHRANK_ABI_VERSION`; checked on use.
    pub abi_version: u32,
    /// OpenMP threads of the programs; 0 (default) uses every core the calling thread may run
    /// on (its CPU affinity: a thread OpenMP has bound sees one; `dashrank_taco.hpp` passes
    /// `omp_get_num_procs()` instead).
    pub threads: u32,
    /// Extent of the dense axis of SpMM and SDDMM (default 256, WACO's `N`).
    pub dense_extent: u32,
    /// Largest repacked layout, in positions per nonzero (default 20, WACO's limit).
    pub max_positions_per_nonzero: u32,
}

/// A stock-TACO program for one matrix shape (opaque): see `docs/taco.md`.
///
/// Owned by the caller, freed with `dashrank_taco_program_free`. Immutable: any number of
/// threads may read one handle at once.
pub struct dashrank_taco_program {
    _private: [u8; 0],
}

impl Castable for dashrank_taco_program {
    type Ownership = OwnershipBox;
    type RustType = TacoProgram;
}

/// The sparse matrix repacked for a program (opaque): the `pos`/`crd` arrays of each level
/// and the values, as a `taco_tensor_t` points to them.
///
/// Owned by the caller, freed with `dashrank_taco_packed_free`; the arrays it lends live as
/// long as the handle. Immutable.
pub struct dashrank_taco_packed {
    _private: [u8; 0],
}

impl Castable for dashrank_taco_packed {
    type Ownership = OwnershipBox;
    type RustType = PackedTensor;
}

/// A program at a glance.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct dashrank_taco_program_info {
    /// `DASHRANK_KERNEL_*`.
    pub kernel: u32,
    /// Number of tensors (the result first, then the operands in expression order).
    pub tensors: usize,
    /// Number of scheduling commands.
    pub commands: usize,
    /// OpenMP threads (`taco_set_num_threads`).
    pub threads: u32,
    /// Chunk of the dynamic OpenMP schedule (`taco_set_parallel_schedule`).
    pub chunk: u32,
}

/// One tensor of a program: its modes in storage order (mode ordering is the identity).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dashrank_taco_tensor_info {
    /// `C`, `A`, `B` or `D`.
    pub name: [c_char; DASHRANK_TACO_NAME_LEN],
    /// Number of modes.
    pub order: usize,
    /// Index variable of each mode.
    pub vars: [[c_char; DASHRANK_TACO_NAME_LEN]; DASHRANK_TACO_MAX_ORDER],
    /// Dimension of each mode.
    pub dims: [u32; DASHRANK_TACO_MAX_ORDER],
    /// `DASHRANK_TACO_DENSE` or `DASHRANK_TACO_COMPRESSED` per level.
    pub formats: [u32; DASHRANK_TACO_MAX_ORDER],
}

/// One scheduling command of a program, with its arguments as the `taco` CLI spells them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dashrank_taco_command_info {
    /// `DASHRANK_TACO_BOUND`, `_REORDER`, `_PARALLELIZE` or `_ASSEMBLE`.
    pub kind: u32,
    /// Number of arguments.
    pub n_args: usize,
    /// The arguments (`bound`: index, bound, extent, BoundType; `parallelize`: index,
    /// ParallelUnit, OutputRaceStrategy; `assemble`: tensor, AssembleStrategy).
    pub args: [[c_char; DASHRANK_TACO_NAME_LEN]; DASHRANK_TACO_MAX_ORDER],
}

/// One level of a repacked tensor. The arrays belong to the `dashrank_taco_packed`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dashrank_taco_level {
    /// `DASHRANK_TACO_DENSE` or `DASHRANK_TACO_COMPRESSED`.
    pub format: u32,
    /// The level's dimension.
    pub dimension: u32,
    /// Compressed: the `pos` array (`pos_len` entries); dense: NULL.
    pub pos: *const i32,
    /// Length of `pos`.
    pub pos_len: usize,
    /// Compressed: the `crd` array (`crd_len` entries); dense: NULL.
    pub crd: *const i32,
    /// Length of `crd`.
    pub crd_len: usize,
}

/// Sets `options` to the defaults (every core, dense extent 256, 20 positions per nonzero).
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_options_init(
    options: *mut dashrank_taco_options,
) -> dashrank_status {
    guard(|| {
        let d = TacoOptions::default();
        *unsafe { try_mut(options, "options") }? = dashrank_taco_options {
            abi_version: DASHRANK_ABI_VERSION,
            threads: 0,
            dense_extent: d.dense_extent,
            max_positions_per_nonzero: d.max_positions_per_nonzero,
        };
        Ok(())
    })
}

/// The options behind a (possibly NULL) pointer: NULL means the defaults.
unsafe fn taco_options(o: *const dashrank_taco_options) -> FfiResult<TacoOptions> {
    if o.is_null() {
        return Ok(TacoOptions::default());
    }
    let o = unsafe { try_ref(o, "options") }?;
    if o.abi_version != DASHRANK_ABI_VERSION {
        return Err(Failure::new(
            dashrank_status::AbiMismatch,
            "dashrank_taco_options was not initialised by dashrank_taco_options_init",
        ));
    }
    Ok(TacoOptions {
        threads: (o.threads > 0).then_some(o.threads),
        dense_extent: o.dense_extent,
        max_positions_per_nonzero: o.max_positions_per_nonzero,
    })
}

/// The program of a SuperSchedule `line` (tokens as in WACO's data; a trailing `= ms` is
/// ignored) of `kernel` (`DASHRANK_KERNEL_*`) for an `nrows` × `ncols` matrix. `options` may be
/// NULL (defaults).
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_from_line(
    kernel: u32,
    line: *const c_char,
    nrows: usize,
    ncols: usize,
    options: *const dashrank_taco_options,
    out: *mut *mut dashrank_taco_program,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let s = SuperSchedule::parse(to_kernel(kernel)?, unsafe { try_str(line, "line") }?)?;
        let o = unsafe { taco_options(options) }?;
        let p = TacoProgram::from_superschedule(&s, &MatrixShape::new(nrows, ncols, 0), &o)?;
        *out = box_into_handle(p);
        Ok(())
    })
}

/// TACO's own CSR program of `kernel` for an `nrows` × `ncols` matrix (the default every
/// tuning compares against). `options` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_csr(
    kernel: u32,
    nrows: usize,
    ncols: usize,
    options: *const dashrank_taco_options,
    out: *mut *mut dashrank_taco_program,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let o = unsafe { taco_options(options) }?;
        let p = TacoProgram::csr(to_kernel(kernel)?, &MatrixShape::new(nrows, ncols, 0), &o)?;
        *out = box_into_handle(p);
        Ok(())
    })
}

/// The program of candidate `index` of a TACO space prepared for a matrix (the default is
/// TACO's CSR). `DASHRANK_STATUS_INVALID_ARGUMENT` for a space of another toolchain.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_from_candidate(
    candidates: *const dashrank_space_candidates,
    index: usize,
    options: *const dashrank_taco_options,
    out: *mut *mut dashrank_taco_program,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let c: &SpaceCandidates<AnyConfig> = unsafe { try_handle(candidates, "candidates") }?;
        if index >= c.len() {
            return Err(Failure::new(
                dashrank_status::IndexOutOfRange,
                format!("candidate index {index} is out of range (0..{})", c.len()),
            ));
        }
        let o = unsafe { taco_options(options) }?;
        *out = box_into_handle(c.taco_program(index, &o)?);
        Ok(())
    })
}

/// The program of a `taco` command line written by `dashrank_taco_program_command_line` (or
/// `dashrank rank --format taco`).
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_parse(
    command_line: *const c_char,
    out: *mut *mut dashrank_taco_program,
) -> dashrank_status {
    guard(|| {
        let out = unsafe { try_mut(out, "out") }?;
        *out = std::ptr::null_mut();
        let text = unsafe { try_str(command_line, "command_line") }?;
        *out = box_into_handle(TacoProgram::parse_command_line(text)?);
        Ok(())
    })
}

/// Frees a program and sets `*program` to NULL (NULL is ignored).
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_free(
    program: *mut *mut dashrank_taco_program,
) -> dashrank_status {
    guard(|| unsafe { free_box_handle(program, "program") })
}

/// The program as one stock `taco` command line. Size reporting and truncation as in
/// `dashrank_status_message`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_command_line(
    program: *const dashrank_taco_program,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    guard(|| {
        let p = unsafe { try_handle(program, "program") }?;
        unsafe { write_str(&p.command_line(), buf, len, needed) }
    })
}

/// The program in TACO's C++ API (`// fill:` marks where the operands get their values).
/// Size reporting and truncation as in `dashrank_status_message`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_cpp(
    program: *const dashrank_taco_program,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> dashrank_status {
    guard(|| {
        let p = unsafe { try_handle(program, "program") }?;
        unsafe { write_str(&p.cpp_snippet(), buf, len, needed) }
    })
}

/// Kernel, tensor and command counts, threads and chunk of a program.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_summary(
    program: *const dashrank_taco_program,
    out: *mut dashrank_taco_program_info,
) -> dashrank_status {
    guard(|| {
        let p = unsafe { try_handle(program, "program") }?;
        let out = unsafe { try_mut(out, "out") }?;
        *out = dashrank_taco_program_info {
            kernel: match p.kernel() {
                dashrank::Kernel::SpMM => DASHRANK_KERNEL_SPMM,
                dashrank::Kernel::SDDMM => DASHRANK_KERNEL_SDDMM,
                dashrank::Kernel::SpMV => DASHRANK_KERNEL_SPMV,
            },
            tensors: p.tensors().len(),
            commands: p.commands().len(),
            threads: p.threads(),
            chunk: p.chunk(),
        };
        Ok(())
    })
}

/// Tensor `index` of a program (0 is the result).
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_tensor(
    program: *const dashrank_taco_program,
    index: usize,
    out: *mut dashrank_taco_tensor_info,
) -> dashrank_status {
    guard(|| {
        let p = unsafe { try_handle(program, "program") }?;
        let out = unsafe { try_mut(out, "out") }?;
        let t = p
            .tensors()
            .get(index)
            .ok_or_else(|| out_of_range("tensor", index, p.tensors().len()))?;
        let mut info = dashrank_taco_tensor_info {
            name: name_buf(&t.name)?,
            order: t.vars.len(),
            vars: [[0; DASHRANK_TACO_NAME_LEN]; DASHRANK_TACO_MAX_ORDER],
            dims: [0; DASHRANK_TACO_MAX_ORDER],
            formats: [0; DASHRANK_TACO_MAX_ORDER],
        };
        for (l, (v, f)) in t
            .vars
            .iter()
            .zip(&t.levels)
            .enumerate()
            .take(DASHRANK_TACO_MAX_ORDER)
        {
            info.vars[l] = name_buf(&v.name)?;
            info.dims[l] = v.extent;
            info.formats[l] = level_code(*f);
        }
        *out = info;
        Ok(())
    })
}

/// Scheduling command `index` of a program, in the order they apply.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_program_command(
    program: *const dashrank_taco_program,
    index: usize,
    out: *mut dashrank_taco_command_info,
) -> dashrank_status {
    guard(|| {
        let p = unsafe { try_handle(program, "program") }?;
        let out = unsafe { try_mut(out, "out") }?;
        let c = p
            .commands()
            .get(index)
            .ok_or_else(|| out_of_range("command", index, p.commands().len()))?;
        let (kind, args): (u32, Vec<String>) = match c {
            TacoCommand::Bound {
                index,
                bound,
                extent,
                kind,
            } => (
                DASHRANK_TACO_BOUND,
                vec![
                    index.clone(),
                    bound.clone(),
                    extent.to_string(),
                    kind.to_string(),
                ],
            ),
            TacoCommand::Reorder(v) => (DASHRANK_TACO_REORDER, v.clone()),
            TacoCommand::Parallelize { index, unit, races } => (
                DASHRANK_TACO_PARALLELIZE,
                vec![index.clone(), unit.to_string(), races.to_string()],
            ),
            TacoCommand::Assemble { tensor, strategy } => (
                DASHRANK_TACO_ASSEMBLE,
                vec![tensor.clone(), strategy.to_string()],
            ),
        };
        let mut info = dashrank_taco_command_info {
            kind,
            n_args: args.len().min(DASHRANK_TACO_MAX_ORDER),
            args: [[0; DASHRANK_TACO_NAME_LEN]; DASHRANK_TACO_MAX_ORDER],
        };
        for (slot, a) in info.args.iter_mut().zip(&args) {
            *slot = name_buf(a)?;
        }
        *out = info;
        Ok(())
    })
}

/// Repacks a CSR matrix (`int32` arrays, `values` in CSR order or NULL for ones) into the
/// program's sparse tensor. `DASHRANK_STATUS_LAYOUT_TOO_LARGE` when the layout exceeds the
/// options' limit (nothing large is allocated then); `DASHRANK_STATUS_INVALID_ARGUMENT`
/// when the matrix shape is not the program's. `options` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_pack_csr_i32(
    program: *const dashrank_taco_program,
    nrows: usize,
    ncols: usize,
    row_ptr: *const i32,
    col_idx: *const i32,
    values: *const f32,
    nnz: usize,
    options: *const dashrank_taco_options,
    out: *mut *mut dashrank_taco_packed,
) -> dashrank_status {
    guard(|| unsafe {
        pack_csr(
            program, nrows, ncols, row_ptr, col_idx, values, nnz, options, out,
        )
    })
}

/// As `dashrank_taco_pack_csr_i32` with `int64` index arrays.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_pack_csr_i64(
    program: *const dashrank_taco_program,
    nrows: usize,
    ncols: usize,
    row_ptr: *const i64,
    col_idx: *const i64,
    values: *const f32,
    nnz: usize,
    options: *const dashrank_taco_options,
    out: *mut *mut dashrank_taco_packed,
) -> dashrank_status {
    guard(|| unsafe {
        pack_csr(
            program, nrows, ncols, row_ptr, col_idx, values, nnz, options, out,
        )
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn pack_csr<I: CsrIndex>(
    program: *const dashrank_taco_program,
    nrows: usize,
    ncols: usize,
    row_ptr: *const I,
    col_idx: *const I,
    values: *const f32,
    nnz: usize,
    options: *const dashrank_taco_options,
    out: *mut *mut dashrank_taco_packed,
) -> FfiResult {
    let out = unsafe { try_mut(out, "out") }?;
    *out = std::ptr::null_mut();
    let p = unsafe { try_handle(program, "program") }?;
    let rows_plus_one = nrows
        .checked_add(1)
        .ok_or_else(|| Failure::new(dashrank_status::InvalidArgument, "nrows is too large"))?;
    let row_ptr = unsafe { super::boundary::try_slice(row_ptr, rows_plus_one, "row_ptr") }?;
    let col_idx = unsafe { super::boundary::try_slice(col_idx, nnz, "col_idx") }?;
    let values = if values.is_null() {
        None
    } else {
        Some(unsafe { super::boundary::try_slice(values, nnz, "values") }?)
    };
    let o = unsafe { taco_options(options) }?;
    let pattern = CsrView::new(nrows, ncols, row_ptr, col_idx)?.to_pattern();
    *out = box_into_handle(p.pack(&pattern, values, &o)?);
    Ok(())
}

/// The number of levels of a packed tensor.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_packed_levels(
    packed: *const dashrank_taco_packed,
    levels: *mut usize,
) -> dashrank_status {
    guard(|| {
        let t = unsafe { try_handle(packed, "packed") }?;
        *unsafe { try_mut(levels, "levels") }? = t.levels.len();
        Ok(())
    })
}

/// Level `index` of a packed tensor (outermost first); the arrays live as long as `packed`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_packed_level(
    packed: *const dashrank_taco_packed,
    index: usize,
    out: *mut dashrank_taco_level,
) -> dashrank_status {
    guard(|| {
        let t = unsafe { try_handle(packed, "packed") }?;
        let out = unsafe { try_mut(out, "out") }?;
        let level = t
            .levels
            .get(index)
            .ok_or_else(|| out_of_range("level", index, t.levels.len()))?;
        *out = match level {
            PackedLevel::Dense { size } => dashrank_taco_level {
                format: DASHRANK_TACO_DENSE,
                dimension: *size,
                pos: std::ptr::null(),
                pos_len: 0,
                crd: std::ptr::null(),
                crd_len: 0,
            },
            PackedLevel::Compressed { pos, crd } => dashrank_taco_level {
                format: DASHRANK_TACO_COMPRESSED,
                dimension: t.dims[index],
                pos: pos.as_ptr(),
                pos_len: pos.len(),
                crd: crd.as_ptr(),
                crd_len: crd.len(),
            },
        };
        Ok(())
    })
}

/// The values of a packed tensor (one per position of its last level; zeros where no
/// nonzero lands); the array lives as long as `packed`.
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_packed_values(
    packed: *const dashrank_taco_packed,
    values: *mut *const f32,
    len: *mut usize,
) -> dashrank_status {
    guard(|| {
        let t = unsafe { try_handle(packed, "packed") }?;
        let values = unsafe { try_mut(values, "values") }?;
        let len = unsafe { try_mut(len, "len") }?;
        *values = t.vals.as_ptr();
        *len = t.vals.len();
        Ok(())
    })
}

/// Frees a packed tensor and sets `*packed` to NULL (NULL is ignored).
#[no_mangle]
pub unsafe extern "C" fn dashrank_taco_packed_free(
    packed: *mut *mut dashrank_taco_packed,
) -> dashrank_status {
    guard(|| unsafe { free_box_handle(packed, "packed") })
}

fn level_code(f: LevelFormat) -> u32 {
    match f {
        LevelFormat::Uncompressed => DASHRANK_TACO_DENSE,
        LevelFormat::Compressed => DASHRANK_TACO_COMPRESSED,
    }
}

fn name_buf(s: &str) -> FfiResult<[c_char; DASHRANK_TACO_NAME_LEN]> {
    if s.len() >= DASHRANK_TACO_NAME_LEN {
        return Err(Failure::new(
            dashrank_status::InvalidArgument,
            format!("name '{s}' is too long"),
        ));
    }
    let mut buf = [0 as c_char; DASHRANK_TACO_NAME_LEN];
    for (b, c) in buf.iter_mut().zip(s.bytes()) {
        *b = c as c_char;
    }
    Ok(buf)
}

fn out_of_range(what: &str, index: usize, len: usize) -> Failure {
    Failure::new(
        dashrank_status::IndexOutOfRange,
        format!("{what} index {index} is out of range (0..{len})"),
    )
}
