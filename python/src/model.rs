//! The native `Model`: loading, facts, embedding (interruptible), preparing lines and spaces,
//! scoring and the top k. `dashrank/_model.py` gives it its Python signatures and docs.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashrank::model::MatrixEmbedding;
use dashrank::schedule::space::{AnySpace, MatrixShape, SpaceOptions, TacoSpace};
use dashrank::schedule::split_measured;
use dashrank::tune::ToolchainOps;
use dashrank::workflow::{self, SpaceRankReport};
use dashrank::{CostModel, CsrPattern, Kernel, LoadOptions, Model, Target};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::candidates::{status_code, Candidates, Space};
use crate::errors::{invalid, OrPy};
use crate::matrix::{self, Matrix};

/// Scores (NaN for a rejected line) and status codes, in candidate order.
type ScoresAndStatus<'py> = (Bound<'py, PyArray1<f32>>, Bound<'py, PyArray1<i8>>);

/// A candidate `top_k` passed over, and why.
type Passed = (usize, String);

/// A loaded model; `dashrank.Model` wraps it.
#[pyclass(frozen, module = "dashrank._native", name = "Model")]
pub struct NativeModel {
    pub(crate) model: Arc<Model>,
}

/// How often a waiting call looks for a pending signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Embeds `pattern` on a worker thread while this thread, detached from the interpreter,
/// checks for signals: a `KeyboardInterrupt` returns at once (the worker finishes on its
/// own and its result only fills the model's cache).
fn embed_interruptible(
    py: Python<'_>,
    model: &Arc<Model>,
    pattern: Arc<CsrPattern>,
) -> PyResult<MatrixEmbedding> {
    let (tx, rx) = mpsc::channel();
    let m = Arc::clone(model);
    std::thread::Builder::new()
        .name("dashrank-embed".into())
        .spawn(move || {
            let r =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.embed_matrix(&pattern)));
            let _ = tx.send(r);
        })
        .map_err(|e| invalid(format!("cannot start the embedding thread: {e}")))?;
    let mut rx = rx;
    loop {
        // The receiver goes to the detached closure and back (it is `Send`, not `Sync`).
        let (back, got) = py.detach(move || {
            let got = rx.recv_timeout(SIGNAL_POLL);
            (rx, got)
        });
        rx = back;
        match got {
            Ok(Ok(result)) => return result.py(),
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(invalid("the embedding thread ended without a result"))
            }
        }
    }
}

impl NativeModel {
    fn embed_pattern(&self, py: Python<'_>, pattern: CsrPattern, name: String) -> PyResult<Matrix> {
        let pattern = Arc::new(pattern);
        let embedding = embed_interruptible(py, &self.model, Arc::clone(&pattern))?;
        Ok(Matrix {
            embedding,
            pattern,
            name,
        })
    }

    /// The space prepared for `matrix`'s shape.
    fn space_for(
        &self,
        py: Python<'_>,
        matrix: &Matrix,
        space: &Space,
    ) -> PyResult<Arc<dashrank::SpaceCandidates<dashrank::schedule::space::AnyConfig>>> {
        let shape = MatrixShape::from(matrix.pattern.as_ref());
        py.detach(|| space.for_shape(shape)).py()
    }
}

#[pymethods]
impl NativeModel {
    #[new]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        threads: Option<usize>,
        deterministic: bool,
        matrix_cache: usize,
        allow_provenance_mismatch: bool,
    ) -> PyResult<Self> {
        let options = LoadOptions {
            threads,
            deterministic,
            matrix_cache_capacity: matrix_cache,
            allow_provenance_mismatch,
            ..LoadOptions::default()
        };
        let model = py.detach(|| Model::load(&path, &options)).py()?;
        Ok(Self {
            model: Arc::new(model),
        })
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::info::info_dict(py, self.model.info())
    }

    fn embed_path(&self, py: Python<'_>, path: PathBuf, name: String) -> PyResult<Matrix> {
        let pattern = py.detach(|| CsrPattern::read_file(&path)).py()?;
        self.embed_pattern(py, pattern, name)
    }

    fn embed_csr(
        &self,
        py: Python<'_>,
        indptr: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        nrows: usize,
        ncols: usize,
        name: String,
    ) -> PyResult<Matrix> {
        let pattern = matrix::from_csr(indptr, indices, nrows, ncols)?;
        self.embed_pattern(py, pattern, name)
    }

    fn embed_csc(
        &self,
        py: Python<'_>,
        indptr: &Bound<'_, PyAny>,
        indices: &Bound<'_, PyAny>,
        nrows: usize,
        ncols: usize,
        name: String,
    ) -> PyResult<Matrix> {
        let pattern = matrix::from_csc(indptr, indices, nrows, ncols)?;
        self.embed_pattern(py, pattern, name)
    }

    fn embed_coo(
        &self,
        py: Python<'_>,
        row: &Bound<'_, PyAny>,
        col: &Bound<'_, PyAny>,
        nrows: usize,
        ncols: usize,
        name: String,
    ) -> PyResult<Matrix> {
        let pattern = matrix::from_coo(row, col, nrows, ncols)?;
        self.embed_pattern(py, pattern, name)
    }

    fn embed_dense(
        &self,
        py: Python<'_>,
        mask: &Bound<'_, PyAny>,
        name: String,
    ) -> PyResult<Matrix> {
        let pattern = matrix::from_dense(mask)?;
        self.embed_pattern(py, pattern, name)
    }

    fn prepare(
        &self,
        py: Python<'_>,
        lines: Vec<String>,
        head: Option<&str>,
    ) -> PyResult<Candidates> {
        let info = self.model.info();
        let head = info.select_head(head, None, None).py()?.name.clone();
        let set = py
            .detach(|| self.model.prepare_candidates(&head, &lines))
            .py()?;
        let lines = lines
            .iter()
            .map(|l| split_measured(l).0.trim().to_owned())
            .collect();
        Ok(Candidates { set, lines })
    }

    #[allow(clippy::too_many_arguments)] // the keyword arguments of `Model.prepare_space`
    fn prepare_space(
        &self,
        py: Python<'_>,
        target: &str,
        kernel: Option<&str>,
        shape: Option<(usize, usize, usize)>,
        head: Option<&str>,
        feat_size: u32,
        max_split: Option<u32>,
    ) -> PyResult<Space> {
        let target: Target = target.parse().py()?;
        let kernel: Option<Kernel> = kernel.map(str::parse).transpose().py()?;
        let info = self.model.info();
        let h = info.select_head(head, Some(target), kernel).py()?;
        let options = SpaceOptions {
            feat_size,
            ..SpaceOptions::default()
        };
        let space = match (max_split, target) {
            (None, _) => AnySpace::new(target, h.kernel, &options).py()?,
            (Some(n), Target::CpuTaco) => AnySpace::from(TacoSpace::waco_up_to(h.kernel, n, n)),
            (Some(_), _) => {
                return Err(invalid(format!(
                    "max_split cuts the TACO space; {target} spaces are fixed"
                )))
            }
        };
        let (head, kernel) = (h.name.clone(), h.kernel);
        let prepared = py
            .detach(|| workflow::prepare_once(&self.model, Some(&head), &space))
            .py()?;
        let shaped = match shape {
            Some((r, c, n)) => Some(Arc::new(
                py.detach(|| {
                    self.model
                        .space_candidates(&prepared, &MatrixShape::new(r, c, n))
                })
                .py()?,
            )),
            None => None,
        };
        Ok(Space {
            model: Arc::clone(&self.model),
            prepared,
            target: target.to_string(),
            kernel: kernel.to_string(),
            shaped,
            last: Mutex::new(None),
        })
    }

    fn score_candidates<'py>(
        &self,
        py: Python<'py>,
        matrix: &Matrix,
        candidates: &Candidates,
    ) -> PyResult<ScoresAndStatus<'py>> {
        let mut scores = vec![0.0f32; candidates.set.len()];
        py.detach(|| {
            self.model
                .score_into(&matrix.embedding, &candidates.set, &mut scores)
        })
        .py()?;
        let set = &candidates.set;
        let codes: Vec<i8> = (0..set.len()).map(|i| status_code(set.status(i))).collect();
        Ok((
            PyArray1::from_vec(py, scores),
            PyArray1::from_vec(py, codes),
        ))
    }

    fn score_space<'py>(
        &self,
        py: Python<'py>,
        matrix: &Matrix,
        space: &Space,
    ) -> PyResult<ScoresAndStatus<'py>> {
        let c = self.space_for(py, matrix, space)?;
        let mut scores = vec![0.0f32; c.len()];
        py.detach(|| {
            self.model
                .score_space_into(&matrix.embedding, &c, &mut scores)
        })
        .py()?;
        let codes: Vec<i8> = (0..c.len()).map(|i| status_code(c.status(i))).collect();
        Ok((
            PyArray1::from_vec(py, scores),
            PyArray1::from_vec(py, codes),
        ))
    }

    fn top_k_candidates<'py>(
        &self,
        py: Python<'py>,
        matrix: &Matrix,
        candidates: &Candidates,
        k: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let ranked = py
            .detach(|| self.model.top_k(&matrix.embedding, &candidates.set, k))
            .py()?;
        let entries = PyList::empty(py);
        for (r, e) in ranked.iter().enumerate() {
            let d = PyDict::new(py);
            d.set_item("rank", r + 1)?;
            d.set_item("index", e.index)?;
            d.set_item("score", e.score)?;
            d.set_item("is_default", false)?;
            d.set_item("status", "valid")?;
            d.set_item("line", &candidates.lines[e.index])?;
            d.set_item("toolchain", py.None())?;
            entries.append(d)?;
        }
        Ok(entries)
    }

    fn top_k_space<'py>(
        &self,
        py: Python<'py>,
        matrix: &Matrix,
        space: &Space,
        k: usize,
        with_default: bool,
        distinct: bool,
    ) -> PyResult<(Bound<'py, PyAny>, Vec<Passed>)> {
        let c = self.space_for(py, matrix, space)?;
        let (report, passed) = py
            .detach(|| {
                let ops = ToolchainOps::new(&c, &matrix.name).with_pattern(&matrix.pattern);
                let (top, passed) = workflow::top_k_runnable_with(
                    &self.model,
                    &matrix.embedding,
                    &c,
                    k,
                    &ops,
                    distinct,
                )?;
                let passed: Vec<Passed> = passed.into_iter().map(|s| (s.index, s.reason)).collect();
                let mut report = SpaceRankReport::new(&matrix.name, &c, &top)?;
                if !with_default {
                    // Only the top k: the default stays when it is among them.
                    report.entries.truncate(top.top_len);
                }
                Ok::<_, dashrank::Error>((report, passed))
            })
            .py()?;
        let report = pythonize::pythonize(py, &report)?;
        Ok((report, passed))
    }

    #[allow(clippy::too_many_arguments)] // the keyword arguments of `Model.tune`
    fn tune<'py>(
        &self,
        py: Python<'py>,
        matrix: &Matrix,
        space: &Space,
        measure: Py<PyAny>,
        strategy: &str,
        k: usize,
        budget: Option<usize>,
        budget_seconds: Option<f64>,
        distinct: bool,
        threads: Option<u32>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let c = self.space_for(py, matrix, space)?;
        let options = crate::tune::options(strategy, k, budget, budget_seconds, distinct, threads)?;
        let report = crate::tune::run(py, &self.model, matrix, &c, &options, measure)?;
        Ok(pythonize::pythonize(py, &report)?)
    }

    #[allow(clippy::too_many_arguments)] // the keyword arguments of `Model.eval`
    fn eval<'py>(
        &self,
        py: Python<'py>,
        model_dir: String,
        measured: PathBuf,
        matrices: PathBuf,
        head: Option<&str>,
        default: Option<&str>,
        thresholds: (Option<f64>, Option<f64>, Option<f64>),
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args = crate::eval::EvalArgs {
            model_dir,
            measured,
            matrices,
            head,
            default,
            thresholds,
            threads,
        };
        crate::eval::run(py, &self.model, &args)
    }
}
