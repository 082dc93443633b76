//! dashrank as an Apache TVM FFI module: `__tvm_ffi_dashrank_*` exports in
//! `libdashrank_tvm.so`, so that `tvm_ffi.load_module("libdashrank_tvm.so")` (SparseTIR/TVM users driving tuning from
//! Python) can load a model, rank schedule lines for a CSR matrix given as DLPack tensors, and
//! rank and tune any toolchain's whole space (TACO, SPADE, SparseTIR; [`space`]) with the
//! toolchain default always reported.
//!
//! A thin shell over the Rust API: every export only converts its arguments (DLPack tensors
//! are borrowed through [`CsrView`](dashrank::pattern::CsrView), results are returned as
//! one-dimensional CPU tensors owned by the caller) and maps dashrank errors to TVM error
//! kinds: `ValueError` for bad input (pattern, schedule, argument, unknown head),
//! `TypeError` for wrong dtypes, `RuntimeError` otherwise. The export macro catches panics
//! (raised as `InternalError`), so none crosses the boundary. See `docs/tvm.md`.

mod convert;
mod space;

use tvm_ffi::derive::{Object, ObjectRef};
use tvm_ffi::{
    tvm_ffi_dll_export_typed_func, Array, Object, ObjectArc, Result, String as FfiString, Tensor,
    TensorView,
};

use dashrank::model::ScorePolarity;
use dashrank::{CostModel, LoadOptions, Model};

use convert::{csr_pattern, size, tensor_from_slice, OrTvm};

/// The object behind a `dashrank.Model` handle.
#[repr(C)]
#[derive(Object)]
#[type_key = "dashrank.Model"]
#[type_register]
#[type_final]
pub struct ModelObj {
    object: Object,
    model: Model,
}

/// A loaded model as a TVM FFI object (type key `dashrank.Model`), freed when the last
/// reference (e.g. the Python handle) goes away.
#[repr(C)]
#[derive(ObjectRef, Clone)]
pub struct DashrankModel {
    data: ObjectArc<ModelObj>,
}

impl DashrankModel {
    pub(crate) fn model(&self) -> &Model {
        &self.data.model
    }
}

fn load(path: FfiString, options: LoadOptions) -> Result<DashrankModel> {
    let model = Model::load(path.as_str(), &options).tvm()?;
    Ok(DashrankModel {
        data: ObjectArc::new(ModelObj {
            object: Object::new(),
            model,
        }),
    })
}

/// `dashrank_load_model(path: str) -> dashrank.Model` with default options.
fn load_model(path: FfiString) -> Result<DashrankModel> {
    load(path, LoadOptions::default())
}

/// `dashrank_load_model_with(path: str, threads: int, deterministic: bool) -> dashrank.Model`;
/// `threads` 0 uses all cores.
fn load_model_with(path: FfiString, threads: i64, deterministic: bool) -> Result<DashrankModel> {
    let threads = size(threads, "threads")?;
    load(
        path,
        LoadOptions {
            threads: (threads > 0).then_some(threads),
            deterministic,
            ..LoadOptions::default()
        },
    )
}

/// `dashrank_model_heads(model) -> Array[str]`: head names, in bundle order.
fn model_heads(model: DashrankModel) -> Result<Array<FfiString>> {
    let info = model.model().info();
    Ok(info
        .heads
        .iter()
        .map(|h| FfiString::from(h.name.as_str()))
        .collect())
}

/// `dashrank_head_polarity(model, head: str) -> str`: `"lower_is_better"` or
/// `"higher_is_better"`.
fn head_polarity(model: DashrankModel, head: FfiString) -> Result<FfiString> {
    let info = model.model().info();
    let h = info.head(head.as_str()).tvm()?;
    Ok(FfiString::from(match h.polarity {
        ScorePolarity::LowerIsBetter => "lower_is_better",
        ScorePolarity::HigherIsBetter => "higher_is_better",
    }))
}

/// Scores every line for the matrix: (the model, its scores in line order, NaN = invalid).
fn scores_for(
    model: &Model,
    indptr: &TensorView,
    indices: &TensorView,
    nrows: i64,
    ncols: i64,
    head: &FfiString,
    lines: &Array<FfiString>,
) -> Result<(dashrank::CandidateSet, dashrank::model::MatrixEmbedding)> {
    let pattern = csr_pattern(indptr, indices, nrows, ncols)?;
    let owned: Vec<FfiString> = lines.iter().collect();
    let lines: Vec<&str> = owned.iter().map(FfiString::as_str).collect();
    let candidates = model.prepare_candidates(head.as_str(), &lines).tvm()?;
    let matrix = model.embed_matrix(&pattern).tvm()?;
    Ok((candidates, matrix))
}

/// `dashrank_rank_csr(model, indptr, indices, nrows: int, ncols: int, head: str,
/// lines: Array[str], k: int) -> [indices: Tensor[int64], scores: Tensor[float32]]`.
///
/// The `k` best valid lines for the CSR pattern (`indptr`/`indices`: 1-D CPU tensors, both
/// `int32` or both `int64`), best first by the head's polarity, ties broken by position.
#[allow(clippy::too_many_arguments)] // the exported signature
fn rank_csr(
    model: DashrankModel,
    indptr: TensorView,
    indices: TensorView,
    nrows: i64,
    ncols: i64,
    head: FfiString,
    lines: Array<FfiString>,
    k: i64,
) -> Result<Array<Tensor>> {
    let k = size(k, "k")?;
    let m = model.model();
    let (candidates, matrix) = scores_for(m, &indptr, &indices, nrows, ncols, &head, &lines)?;
    let ranked = m.top_k(&matrix, &candidates, k).tvm()?;
    let index: Vec<i64> = ranked.iter().map(|r| r.index as i64).collect();
    let score: Vec<f32> = ranked.iter().map(|r| r.score).collect();
    Ok(Array::new(vec![
        tensor_from_slice(&index)?,
        tensor_from_slice(&score)?,
    ]))
}

/// `dashrank_score_csr(model, indptr, indices, nrows: int, ncols: int, head: str,
/// lines: Array[str]) -> Tensor[float32]`: one score per line, NaN for invalid lines.
fn score_csr(
    model: DashrankModel,
    indptr: TensorView,
    indices: TensorView,
    nrows: i64,
    ncols: i64,
    head: FfiString,
    lines: Array<FfiString>,
) -> Result<Tensor> {
    let m = model.model();
    let (candidates, matrix) = scores_for(m, &indptr, &indices, nrows, ncols, &head, &lines)?;
    let mut scores = vec![0.0f32; candidates.len()];
    m.score_into(&matrix, &candidates, &mut scores).tvm()?;
    tensor_from_slice(&scores)
}

/// `dashrank_panic_check(message: str)`: panics with `message`, on purpose. The test suite
/// (`ffi-examples/tvm/rank_spaces.py`) calls it to show that a Rust panic reaches Python as an
/// error naming it, and that the module keeps working: no panic crosses the boundary.
fn panic_check(message: FfiString) -> Result<i64> {
    panic!("dashrank_panic_check: {}", message.as_str())
}

tvm_ffi_dll_export_typed_func!(dashrank_panic_check, panic_check);
tvm_ffi_dll_export_typed_func!(dashrank_load_model, load_model);
tvm_ffi_dll_export_typed_func!(dashrank_load_model_with, load_model_with);
tvm_ffi_dll_export_typed_func!(dashrank_model_heads, model_heads);
tvm_ffi_dll_export_typed_func!(dashrank_head_polarity, head_polarity);
tvm_ffi_dll_export_typed_func!(dashrank_rank_csr, rank_csr);
tvm_ffi_dll_export_typed_func!(dashrank_score_csr, score_csr);
tvm_ffi_dll_export_typed_func!(dashrank_embed_csr, space::embed_csr);
tvm_ffi_dll_export_typed_func!(dashrank_prepare_space, space::prepare_space);
tvm_ffi_dll_export_typed_func!(dashrank_space_summary, space::space_summary);
tvm_ffi_dll_export_typed_func!(dashrank_space_lines, space::space_lines);
tvm_ffi_dll_export_typed_func!(dashrank_space_states, space::space_states);
tvm_ffi_dll_export_typed_func!(dashrank_space_message, space::space_message);
tvm_ffi_dll_export_typed_func!(dashrank_space_render, space::space_render);
tvm_ffi_dll_export_typed_func!(dashrank_space_rank, space::space_rank);
tvm_ffi_dll_export_typed_func!(dashrank_space_tune, space::space_tune);
