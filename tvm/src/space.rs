//! Whole schedule spaces from Python: embed a CSR matrix once (`dashrank.Matrix`), enumerate
//! any registered toolchain space for it and prepare it for a head (`dashrank.PreparedSpace`),
//! rank it with the default always reported, render candidates in the toolchain's form, and
//! tune it with a Python measure function. Argument conversion only: the workflow is
//! [`dashrank::workflow`].

use tvm_ffi::derive::{Object, ObjectRef};
use tvm_ffi::{
    Any, Array, Function, Object, ObjectArc, Result, String as FfiString, Tensor, TensorView,
};

use dashrank::model::MatrixEmbedding;
use dashrank::rank::{CandidateStatus, SpaceCandidates};
use dashrank::schedule::space::{
    AnyConfig, AnySpace, MatrixShape, SpaceOptions, TacoSpace, Target,
};
use dashrank::tune::{tune, MeasureRequest, Measured, Measurer, ToolchainOps, TuneOptions};
use dashrank::workflow;
use dashrank::CostModel;

use super::convert::{csr_pattern, size, tensor_from_slice, value_error, OrTvm};
use super::DashrankModel;

/// The object behind a `dashrank.Matrix` handle.
#[repr(C)]
#[derive(Object)]
#[type_key = "dashrank.Matrix"]
#[type_register]
#[type_final]
pub struct MatrixObj {
    object: Object,
    embedding: MatrixEmbedding,
    shape: MatrixShape,
}

/// A matrix embedded by one model, with its shape (type key `dashrank.Matrix`).
#[repr(C)]
#[derive(ObjectRef, Clone)]
pub struct DashrankMatrix {
    data: ObjectArc<MatrixObj>,
}

/// The object behind a `dashrank.PreparedSpace` handle.
#[repr(C)]
#[derive(Object)]
#[type_key = "dashrank.PreparedSpace"]
#[type_register]
#[type_final]
pub struct PreparedObj {
    object: Object,
    model: DashrankModel,
    matrix: DashrankMatrix,
    candidates: SpaceCandidates<AnyConfig>,
}

/// A space enumerated for one matrix and prepared for one head of one model (type key
/// `dashrank.PreparedSpace`); it keeps its model and matrix alive.
#[repr(C)]
#[derive(ObjectRef, Clone)]
pub struct DashrankPrepared {
    data: ObjectArc<PreparedObj>,
}

/// `dashrank_embed_csr(model, indptr, indices, nrows: int, ncols: int) -> dashrank.Matrix`.
pub(super) fn embed_csr(
    model: DashrankModel,
    indptr: TensorView,
    indices: TensorView,
    nrows: i64,
    ncols: i64,
) -> Result<DashrankMatrix> {
    let pattern = csr_pattern(&indptr, &indices, nrows, ncols)?;
    let embedding = model.model().embed_matrix(&pattern).tvm()?;
    Ok(DashrankMatrix {
        data: ObjectArc::new(MatrixObj {
            object: Object::new(),
            embedding,
            shape: MatrixShape::from(&pattern),
        }),
    })
}

/// `dashrank_prepare_space(model, matrix, space: str, head: str, feat_size: int,
/// max_split: int) -> dashrank.PreparedSpace`.
///
/// `space` is a registered name (`taco-spmm`, …, `sparsetir-sddmm`); `head` "" picks the
/// model's one head for it; `feat_size` 0 is SparseTIR's default (128); `max_split` > 0 cuts a
/// TACO space's split and chunk lists ([`TacoSpace::waco_up_to`]).
pub(super) fn prepare_space(
    model: DashrankModel,
    matrix: DashrankMatrix,
    space: FfiString,
    head: FfiString,
    feat_size: i64,
    max_split: i64,
) -> Result<DashrankPrepared> {
    let feat = u32::try_from(size(feat_size, "feat_size")?)
        .map_err(|_| value_error(&format!("feat_size out of range: {feat_size}")))?;
    let max_split = u32::try_from(size(max_split, "max_split")?)
        .map_err(|_| value_error(&format!("max_split out of range: {max_split}")))?;
    let options = SpaceOptions {
        feat_size: if feat == 0 { 128 } else { feat },
        ..SpaceOptions::default()
    };
    let mut any = AnySpace::from_name(space.as_str(), &options).tvm()?;
    if max_split > 0 && any.target() == Target::CpuTaco {
        any = AnySpace::from(TacoSpace::waco_up_to(any.kernel(), max_split, max_split));
    }
    let head = (!head.as_str().is_empty()).then_some(head.as_str());
    let candidates = workflow::prepare(model.model(), head, &any, &matrix.data.shape).tvm()?;
    Ok(DashrankPrepared {
        data: ObjectArc::new(PreparedObj {
            object: Object::new(),
            model,
            matrix,
            candidates,
        }),
    })
}

/// `dashrank_space_summary(prepared) -> [space: str, head: str, candidates: int, ranked: int,
/// default_index: int]`.
pub(super) fn space_summary(prepared: DashrankPrepared) -> Result<Array<Any>> {
    let c = &prepared.data.candidates;
    Ok(Array::new(vec![
        Any::from(FfiString::from(c.space_name())),
        Any::from(FfiString::from(c.head())),
        Any::from(c.len() as i64),
        Any::from(c.ranked_count() as i64),
        Any::from(c.default_index() as i64),
    ]))
}

/// `dashrank_space_lines(prepared) -> Array[str]`: every candidate's line, as the head parses it.
pub(super) fn space_lines(prepared: DashrankPrepared) -> Result<Array<FfiString>> {
    let c = &prepared.data.candidates;
    Ok((0..c.len())
        .map(|i| FfiString::from(c.line(i).unwrap_or_default().as_str()))
        .collect())
}

/// `dashrank_space_states(prepared) -> [state: Tensor[int64], duplicate_of: Tensor[int64]]`:
/// per candidate 0 valid, 1 duplicate (of `duplicate_of`, else -1), 2 invalid for this
/// matrix, 3 rejected by the head's schema (the C API's `DASHRANK_CANDIDATE_*`).
pub(super) fn space_states(prepared: DashrankPrepared) -> Result<Array<Tensor>> {
    let c = &prepared.data.candidates;
    let (mut state, mut of) = (Vec::with_capacity(c.len()), Vec::with_capacity(c.len()));
    for i in 0..c.len() {
        let (s, d) = match c.status(i) {
            Some(CandidateStatus::Valid) => (0, -1),
            Some(CandidateStatus::Duplicate { of }) => (1, of as i64),
            Some(CandidateStatus::InvalidForMatrix { .. }) => (2, -1),
            Some(CandidateStatus::InvalidSchedule(_)) | None => (3, -1),
        };
        state.push(s);
        of.push(d);
    }
    Ok(Array::new(vec![
        tensor_from_slice(&state)?,
        tensor_from_slice(&of)?,
    ]))
}

/// `dashrank_space_message(prepared, index: int) -> str`: the candidate's status in words.
pub(super) fn space_message(prepared: DashrankPrepared, index: i64) -> Result<FfiString> {
    let c = &prepared.data.candidates;
    let i = index_in(c, index)?;
    let status = c.status(i).ok_or_else(|| out_of_range(c, index))?;
    Ok(FfiString::from(workflow::status_text(status).as_str()))
}

/// `dashrank_space_render(prepared, index: int, matrix_name: str) -> str`: the candidate in
/// its toolchain's form (TACO commands, SPADE CSV row, SparseTIR JSON).
pub(super) fn space_render(
    prepared: DashrankPrepared,
    index: i64,
    matrix_name: FfiString,
) -> Result<FfiString> {
    let c = &prepared.data.candidates;
    let text = c.render(index_in(c, index)?, matrix_name.as_str()).tvm()?;
    Ok(FfiString::from(text.as_str()))
}

/// `dashrank_space_rank(prepared, k: int) -> [indices: Tensor[int64], scores:
/// Tensor[float32], ranks: Tensor[int64], is_default: Tensor[int64]]`: the `k` best, best
/// first, then the default if it is not among them; `ranks` are 1-based (0 = no score);
/// `is_default` is 1 for the default's entry, else 0.
pub(super) fn space_rank(prepared: DashrankPrepared, k: i64) -> Result<Array<Tensor>> {
    let p = &prepared.data;
    let top = p
        .model
        .model()
        .top_k_with_default(&p.matrix.data.embedding, &p.candidates, size(k, "k")?)
        .tvm()?;
    let index: Vec<i64> = top.entries.iter().map(|e| e.index as i64).collect();
    let score: Vec<f32> = top.entries.iter().map(|e| e.score).collect();
    let rank: Vec<i64> = top
        .entries
        .iter()
        .map(|e| e.rank.map_or(0, |r| r as i64 + 1))
        .collect();
    let default: Vec<i64> = top
        .entries
        .iter()
        .map(|e| i64::from(e.is_default))
        .collect();
    Ok(Array::new(vec![
        tensor_from_slice(&index)?,
        tensor_from_slice(&score)?,
        tensor_from_slice(&rank)?,
        tensor_from_slice(&default)?,
    ]))
}

/// `dashrank_space_tune(prepared, k: int, matrix_name: str, measure) -> [indices:
/// Tensor[int64], ms: Tensor[float64], best_index: int, speedup_over_default: float]`.
///
/// Calls `measure(index, toolchain_text, line, is_default)` on the top `k` (best first) then
/// the default; it returns the time in milliseconds, or `None` when the candidate failed
/// (skipped; so is a time that is not finite and >= 0). An exception in `measure` stops
/// tuning and is raised to the caller. `ms` is NaN for failed measurements; `best_index` is
/// -1 and the speedup NaN when nothing was measured.
pub(super) fn space_tune(
    prepared: DashrankPrepared,
    k: i64,
    matrix_name: FfiString,
    measure: Function,
) -> Result<Array<Any>> {
    let p = &prepared.data;
    let c = &p.candidates;
    let ops = ToolchainOps::new(c, matrix_name.as_str());
    let mut measurer = PythonMeasurer {
        measure,
        raised: None,
    };
    let options = TuneOptions::top_k(size(k, "k")?);
    let model = p.model.model();
    let tuned = tune(
        model,
        &p.matrix.data.embedding,
        c,
        &ops,
        &options,
        &mut measurer,
    )
    .tvm()?;
    if let Some(e) = measurer.raised {
        return Err(e);
    }
    let index: Vec<i64> = tuned.measurements.iter().map(|m| m.index as i64).collect();
    let ms: Vec<f64> = tuned
        .measurements
        .iter()
        .map(|m| m.ms().unwrap_or(f64::NAN))
        .collect();
    Ok(Array::new(vec![
        Any::from(tensor_from_slice(&index)?),
        Any::from(tensor_from_slice(&ms)?),
        Any::from(tuned.best_measurement().map_or(-1, |b| b.index as i64)),
        Any::from(tuned.speedup_over_default().unwrap_or(f64::NAN)),
    ]))
}

/// The Python `measure` function as a [`Measurer`]: `None` (or anything but a number) is a
/// failed measurement; an exception stops tuning (every later request fails at once) and is
/// raised once tuning returns.
struct PythonMeasurer {
    measure: Function,
    raised: Option<tvm_ffi::Error>,
}

impl Measurer for PythonMeasurer {
    fn measure(&mut self, r: &MeasureRequest<'_>) -> std::result::Result<Measured, String> {
        if self.raised.is_some() {
            return Err("an earlier measurement raised".to_owned());
        }
        let args = (
            r.index as i64,
            FfiString::from(r.program),
            FfiString::from(r.line),
            r.is_default,
        );
        match self.measure.call_tuple(args) {
            Ok(any) => any
                .try_as::<f64>()
                .or_else(|| any.try_as::<i64>().map(|v| v as f64))
                .map(Measured::ms)
                .ok_or_else(|| "measure returned no time".to_owned()),
            Err(e) => {
                self.raised = Some(e);
                Err("measure raised".to_owned())
            }
        }
    }
}

fn index_in(c: &SpaceCandidates<AnyConfig>, index: i64) -> Result<usize> {
    usize::try_from(index)
        .ok()
        .filter(|&i| i < c.len())
        .ok_or_else(|| out_of_range(c, index))
}

fn out_of_range(c: &SpaceCandidates<AnyConfig>, index: i64) -> tvm_ffi::Error {
    value_error(&format!(
        "candidate index {index} out of range ({} candidates)",
        c.len()
    ))
}
