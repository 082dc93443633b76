//! Matrices from Python: CSR, CSC and COO index arrays read in place (numpy arrays of
//! `int32`, `int64`, `uint32` or `uint64`; a strided array is copied first), dense numpy masks,
//! and matrix files. Each becomes the core's [`CsrPattern`], validated by the core.

use std::sync::Arc;

use dashrank::model::MatrixEmbedding;
use dashrank::pattern::{CsrIndex, CsrView};
use dashrank::{CsrPattern, Error, ErrorKind};
use numpy::{Element, PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::errors::OrPy;

/// A matrix embedded by one model: its embedding, its shape and its pattern (kept for the
/// TACO layout checks of `top_k` and `tune`).
#[pyclass(frozen, module = "dashrank", name = "Matrix")]
pub struct Matrix {
    pub(crate) embedding: MatrixEmbedding,
    pub(crate) pattern: Arc<CsrPattern>,
    pub(crate) name: String,
}

#[pymethods]
impl Matrix {
    /// Number of rows.
    #[getter]
    fn rows(&self) -> usize {
        self.pattern.nrows()
    }

    /// Number of columns.
    #[getter]
    fn cols(&self) -> usize {
        self.pattern.ncols()
    }

    /// Number of stored entries.
    #[getter]
    fn nnz(&self) -> usize {
        self.pattern.nnz()
    }

    /// `(rows, cols, nnz)`: what a space is enumerated for.
    #[getter]
    fn shape(&self) -> (usize, usize, usize) {
        (self.rows(), self.cols(), self.nnz())
    }

    /// The name TACO and SPADE candidates are rendered with (a file's stem, or what
    /// `embed(..., name=)` was given).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The model's embedding of the matrix (a copy, `float32`).
    #[getter]
    fn embedding<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        PyArray1::from_slice(py, self.embedding.values())
    }

    /// The featurizer's output the embedding was computed from (a copy, `float32`).
    #[getter]
    fn conv_features<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        PyArray1::from_slice(py, self.embedding.conv_features())
    }

    fn __repr__(&self) -> String {
        format!(
            "<dashrank.Matrix '{}': {} x {}, {} nonzeros>",
            self.name,
            self.rows(),
            self.cols(),
            self.nnz()
        )
    }
}

fn pattern_error(reason: String) -> PyErr {
    crate::errors::to_py(Error::new(ErrorKind::Pattern { line: None, reason }))
}

/// A one-dimensional numpy array of `I`, borrowed for the call; copied only when strided.
struct Ints<'py, I: Element> {
    array: numpy::PyReadonlyArray1<'py, I>,
    copy: Option<Vec<I>>,
}

impl<'py, I: Element + Copy> Ints<'py, I> {
    /// `None` when `value` is not a one-dimensional numpy array of `I`.
    fn of(value: &Bound<'py, PyAny>) -> PyResult<Option<Self>> {
        let Ok(a) = value.cast::<PyArray1<I>>() else {
            return Ok(None);
        };
        let array = a
            .try_readonly()
            .map_err(|e| PyTypeError::new_err(format!("an index array cannot be read: {e}")))?;
        let copy = (!array.is_contiguous()).then(|| array.as_array().iter().copied().collect());
        Ok(Some(Self { array, copy }))
    }

    fn slice(&self) -> PyResult<&[I]> {
        match &self.copy {
            Some(copy) => Ok(copy),
            None => Ok(self.array.as_slice()?),
        }
    }
}

/// Calls `$f::<I>(a, b, args…)` with the index type both arrays have.
macro_rules! with_index_type {
    ($a:expr, $b:expr, $f:ident ($($arg:expr),*)) => {{
        let (a, b) = ($a, $b);
        if let (Some(x), Some(y)) = (Ints::<i32>::of(a)?, Ints::<i32>::of(b)?) {
            $f::<i32>(x.slice()?, y.slice()?, $($arg),*)
        } else if let (Some(x), Some(y)) = (Ints::<i64>::of(a)?, Ints::<i64>::of(b)?) {
            $f::<i64>(x.slice()?, y.slice()?, $($arg),*)
        } else if let (Some(x), Some(y)) = (Ints::<u32>::of(a)?, Ints::<u32>::of(b)?) {
            $f::<u32>(x.slice()?, y.slice()?, $($arg),*)
        } else if let (Some(x), Some(y)) = (Ints::<u64>::of(a)?, Ints::<u64>::of(b)?) {
            $f::<u64>(x.slice()?, y.slice()?, $($arg),*)
        } else {
            Err(PyTypeError::new_err(format!(
                "index arrays must be one-dimensional numpy arrays of one dtype among int32, \
                 int64, uint32, uint64; got {} and {}",
                describe(a),
                describe(b)
            )))
        }
    }};
}

/// What an argument is, for a type error: a numpy array's dtype and dimensions, else its type.
fn describe(value: &Bound<'_, PyAny>) -> String {
    match value.cast::<numpy::PyUntypedArray>() {
        Ok(a) => format!("a {}-dimensional {} array", a.ndim(), a.dtype()),
        Err(_) => value
            .get_type()
            .name()
            .map_or_else(|_| "an object".to_owned(), |n| n.to_string()),
    }
}

fn csr<I: CsrIndex>(
    indptr: &[I],
    indices: &[I],
    nrows: usize,
    ncols: usize,
) -> PyResult<CsrPattern> {
    Ok(CsrView::new(nrows, ncols, indptr, indices)
        .py()?
        .to_pattern())
}

/// A pattern from CSR arrays, checked by [`CsrView`].
pub(crate) fn from_csr(
    indptr: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    nrows: usize,
    ncols: usize,
) -> PyResult<CsrPattern> {
    with_index_type!(indptr, indices, csr(nrows, ncols))
}

fn csc<I: CsrIndex>(
    indptr: &[I],
    indices: &[I],
    nrows: usize,
    ncols: usize,
) -> PyResult<CsrPattern> {
    // The CSC arrays are the CSR arrays of the transpose: the core checks them as such.
    CsrView::new(ncols, nrows, indptr, indices).map_err(|e| match e.kind() {
        ErrorKind::Pattern { reason, .. } => pattern_error(format!(
            "CSC arrays (checked as the CSR arrays of the transpose: rows are columns): {reason}"
        )),
        _ => crate::errors::to_py(e),
    })?;
    let at = |v: I| v.to_usize().unwrap_or(usize::MAX);
    let mut coords = Vec::with_capacity(indices.len());
    for (c, w) in indptr.windows(2).enumerate() {
        for &r in &indices[at(w[0])..at(w[1])] {
            // Checked above: rows < nrows and columns < ncols, both at most MAX_DIM.
            coords.push((at(r) as u32, c as u32));
        }
    }
    CsrPattern::from_coordinates(nrows, ncols, coords).py()
}

/// A pattern from CSC arrays (checked by [`CsrView`] as the transpose's CSR arrays).
pub(crate) fn from_csc(
    indptr: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    nrows: usize,
    ncols: usize,
) -> PyResult<CsrPattern> {
    with_index_type!(indptr, indices, csc(nrows, ncols))
}

fn coo<I: CsrIndex>(row: &[I], col: &[I], nrows: usize, ncols: usize) -> PyResult<CsrPattern> {
    if row.len() != col.len() {
        return Err(pattern_error(format!(
            "COO arrays differ in length: {} rows, {} columns",
            row.len(),
            col.len()
        )));
    }
    let coord = |v: I, what: &str, pos: usize| {
        v.to_usize()
            .and_then(|u| u32::try_from(u).ok())
            .ok_or_else(|| {
                pattern_error(format!(
                    "{what} index {v} at position {pos} is negative or too large"
                ))
            })
    };
    let coords = row
        .iter()
        .zip(col)
        .enumerate()
        .map(|(pos, (&r, &c))| Ok((coord(r, "row", pos)?, coord(c, "column", pos)?)))
        .collect::<PyResult<Vec<_>>>()?;
    CsrPattern::from_coordinates(nrows, ncols, coords).py()
}

/// A pattern from COO coordinates (any order; repeated coordinates are one entry).
pub(crate) fn from_coo(
    row: &Bound<'_, PyAny>,
    col: &Bound<'_, PyAny>,
    nrows: usize,
    ncols: usize,
) -> PyResult<CsrPattern> {
    with_index_type!(row, col, coo(nrows, ncols))
}

/// The nonzero positions of a two-dimensional array of `T`, in any memory layout; `None`
/// when `mask` is not one.
fn dense<T: Element + PartialEq + Default>(
    mask: &Bound<'_, PyAny>,
) -> PyResult<Option<CsrPattern>> {
    let Ok(a) = mask.cast::<PyArray2<T>>() else {
        return Ok(None);
    };
    let ro = a
        .try_readonly()
        .map_err(|e| PyTypeError::new_err(format!("the mask cannot be read: {e}")))?;
    let view = ro.as_array();
    let (nrows, ncols) = view.dim();
    let zero = T::default();
    let mut row_ptr = Vec::with_capacity(nrows + 1);
    row_ptr.push(0);
    let mut col_idx = Vec::new();
    for row in view.outer_iter() {
        for (c, v) in row.iter().enumerate() {
            if *v != zero {
                // Dimensions past MAX_DIM (< u32::MAX) are refused by `CsrPattern::new`
                // before it reads a column.
                col_idx.push(c as u32);
            }
        }
        row_ptr.push(col_idx.len());
    }
    CsrPattern::new(nrows, ncols, row_ptr, col_idx)
        .py()
        .map(Some)
}

/// A pattern from a two-dimensional numpy array: every entry that is not zero (or `False`).
pub(crate) fn from_dense(mask: &Bound<'_, PyAny>) -> PyResult<CsrPattern> {
    macro_rules! first {
        ($($t:ty),*) => {
            $(if let Some(p) = dense::<$t>(mask)? { return Ok(p); })*
        };
    }
    first!(bool, f64, f32, i64, i32, i16, i8, u64, u32, u16, u8);
    Err(PyTypeError::new_err(format!(
        "a dense mask must be a two-dimensional numpy array of bool, integers or floats; got {}",
        describe(mask)
    )))
}
