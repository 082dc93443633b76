//! Candidate sets (schedule lines prepared for a head) and toolchain spaces (prepared once,
//! enumerated per matrix shape) as Python objects.

use std::sync::{Arc, Mutex};

use dashrank::rank::{CandidateStatus, PreparedSpace, SpaceCandidates};
use dashrank::schedule::space::{AnyConfig, MatrixShape};
use dashrank::workflow::status_text;
use dashrank::{CandidateSet, Model};
use numpy::PyArray1;
use pyo3::prelude::*;

use crate::errors::{invalid, OrPy};

/// A status as a small integer: 0 valid, 1 duplicate, 2 invalid for the matrix, 3 rejected by
/// the model's schema (`dashrank.Status`, and the C ABI's `DASHRANK_CANDIDATE_*`).
pub(crate) fn status_code(status: Option<CandidateStatus<'_>>) -> i8 {
    match status {
        Some(CandidateStatus::Valid) => 0,
        Some(CandidateStatus::Duplicate { .. }) => 1,
        Some(CandidateStatus::InvalidForMatrix { .. }) => 2,
        Some(CandidateStatus::InvalidSchedule(_)) | None => 3,
    }
}

fn index_in(index: usize, len: usize) -> PyResult<usize> {
    if index < len {
        Ok(index)
    } else {
        Err(invalid(format!(
            "candidate index {index} out of range ({len} candidates)"
        )))
    }
}

/// Schedule lines prepared for one head of one model: parsed, validated, encoded and
/// embedded once, reusable for any matrix. A line the head's schema rejects stays in the set
/// with its error and scores NaN.
#[pyclass(frozen, module = "dashrank", name = "Candidates")]
pub struct Candidates {
    pub(crate) set: CandidateSet,
    /// The lines as given, without a `= ms` suffix.
    pub(crate) lines: Vec<String>,
}

#[pymethods]
impl Candidates {
    fn __len__(&self) -> usize {
        self.set.len()
    }

    /// The head the lines were prepared for.
    #[getter]
    fn head(&self) -> &str {
        self.set.head()
    }

    /// The lines, in order, without their `= ms` suffixes.
    #[getter]
    fn lines(&self) -> Vec<String> {
        self.lines.clone()
    }

    /// How many lines the schema accepted.
    #[getter]
    fn valid_count(&self) -> usize {
        self.set.valid_count()
    }

    /// Per line, the runtime in milliseconds given after `=` (WACO's collected files), NaN
    /// where none was given.
    #[getter]
    fn measured_ms<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        let ms: Vec<f64> = self
            .set
            .measured_ms()
            .into_iter()
            .map(|m| m.unwrap_or(f64::NAN))
            .collect();
        PyArray1::from_vec(py, ms)
    }

    /// Per line, its status code (see `dashrank.Status`): 0 valid, 3 rejected by the schema.
    #[getter]
    fn status_codes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i8>> {
        let codes: Vec<i8> = (0..self.set.len())
            .map(|i| status_code(self.set.status(i)))
            .collect();
        PyArray1::from_vec(py, codes)
    }

    /// The rejected lines: `(index, message)` pairs, in order.
    #[getter]
    fn errors(&self) -> Vec<(usize, String)> {
        self.set.errors().map(|(i, e)| (i, e.to_string())).collect()
    }

    /// Line `index`'s status in words: `valid`, or `rejected by the schema: …`.
    fn status(&self, index: usize) -> PyResult<String> {
        let i = index_in(index, self.set.len())?;
        Ok(self.set.status(i).map_or_else(String::new, status_text))
    }

    fn __repr__(&self) -> String {
        format!(
            "<dashrank.Candidates for {}: {} lines, {} valid>",
            self.set.head(),
            self.set.len(),
            self.set.valid_count()
        )
    }
}

/// A toolchain's schedule space, prepared once for one head of one model; enumerated for a
/// matrix shape when it is ranked (cheap: only the shape's statuses are computed).
#[pyclass(frozen, module = "dashrank", name = "Space")]
pub struct Space {
    pub(crate) model: Arc<Model>,
    pub(crate) prepared: Arc<PreparedSpace<AnyConfig>>,
    pub(crate) target: String,
    pub(crate) kernel: String,
    /// The space for the shape given to `prepare_space`, if any.
    pub(crate) shaped: Option<Arc<SpaceCandidates<AnyConfig>>>,
    /// The space for the shape last ranked.
    pub(crate) last: Mutex<Option<Arc<SpaceCandidates<AnyConfig>>>>,
}

impl Space {
    /// The space for a matrix of `shape`: the one given to `prepare_space`, the last one
    /// ranked, or a new enumeration.
    pub(crate) fn for_shape(
        &self,
        shape: MatrixShape,
    ) -> dashrank::Result<Arc<SpaceCandidates<AnyConfig>>> {
        if let Some(s) = self.shaped.as_ref().filter(|s| s.shape() == shape) {
            return Ok(Arc::clone(s));
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = last.as_ref().filter(|s| s.shape() == shape) {
            return Ok(Arc::clone(s));
        }
        let fresh = Arc::new(self.model.space_candidates(&self.prepared, &shape)?);
        *last = Some(Arc::clone(&fresh));
        Ok(fresh)
    }

    fn shaped(&self) -> PyResult<&SpaceCandidates<AnyConfig>> {
        self.shaped.as_deref().ok_or_else(|| {
            invalid(
                "this space was prepared without a shape; pass shape= to prepare_space \
                 (a Matrix or (rows, cols, nnz)) to read its candidates",
            )
        })
    }
}

#[pymethods]
impl Space {
    /// Number of candidates: the space's configurations, plus the toolchain default when the
    /// enumeration lacks it (known once a shape is given).
    fn __len__(&self) -> usize {
        self.shaped
            .as_ref()
            .map_or(self.prepared.len(), |s| s.len())
    }

    /// The space's name, e.g. `taco-spmm`.
    #[getter]
    fn name(&self) -> &str {
        self.prepared.space_name()
    }

    /// The head that ranks it.
    #[getter]
    fn head(&self) -> &str {
        self.prepared.head()
    }

    /// The target (`cpu-taco`, `spade`, `gpu-sparsetir`).
    #[getter]
    fn target(&self) -> &str {
        &self.target
    }

    /// The kernel (`spmm`, `sddmm`, `spmv`).
    #[getter]
    fn kernel(&self) -> &str {
        &self.kernel
    }

    /// `(rows, cols, nnz)` given to `prepare_space`, or None.
    #[getter]
    fn shape(&self) -> Option<(usize, usize, usize)> {
        self.shaped.as_ref().map(|s| {
            let m = s.shape();
            (m.rows, m.cols, m.nnz)
        })
    }

    /// The toolchain default's index (needs a shape).
    #[getter]
    fn default_index(&self) -> PyResult<usize> {
        Ok(self.shaped()?.default_index())
    }

    /// How many candidates are ranked for the shape: valid and distinct (needs a shape).
    #[getter]
    fn ranked_count(&self) -> PyResult<usize> {
        Ok(self.shaped()?.ranked_count())
    }

    /// Candidate `index`'s line, as the head parses it (needs a shape).
    fn line(&self, index: usize) -> PyResult<String> {
        let s = self.shaped()?;
        Ok(s.line(index_in(index, s.len())?).unwrap_or_default())
    }

    /// Candidate `index`'s status for the shape in words: `valid`, `duplicate of #N`,
    /// `invalid for this matrix: …`, `rejected by the schema: …` (needs a shape).
    fn status(&self, index: usize) -> PyResult<String> {
        let s = self.shaped()?;
        let i = index_in(index, s.len())?;
        Ok(s.status(i).map_or_else(String::new, status_text))
    }

    /// Candidate `index` in its toolchain's form (TACO: a stock `taco` command line; SPADE: a
    /// CSV row starting with `matrix_name`; SparseTIR: JSON) for the shape (needs a shape).
    #[pyo3(signature = (index, matrix_name = "matrix"))]
    fn render(&self, index: usize, matrix_name: &str) -> PyResult<String> {
        let s = self.shaped()?;
        s.render(index_in(index, s.len())?, matrix_name).py()
    }

    fn __repr__(&self) -> String {
        let shape = self.shape().map_or_else(String::new, |(r, c, n)| {
            format!(", for {r} x {c} with {n} nonzeros")
        });
        format!(
            "<dashrank.Space {} ranked by {}: {} candidates{shape}>",
            self.name(),
            self.head(),
            self.__len__()
        )
    }
}
