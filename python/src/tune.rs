//! Tuning from Python: the core's tuning loop ([`dashrank::tune::tune`]) with a Python
//! callable as its [`Measurer`], run detached from the interpreter between measurements.

use std::time::Duration;

use dashrank::program::taco::TacoOptions;
use dashrank::rank::SpaceCandidates;
use dashrank::schedule::space::AnyConfig;
use dashrank::tune::{tune, Budget, MeasureRequest, Measured, Measurer, ToolchainOps, TuneOptions};
use dashrank::workflow::TuneReport;
use dashrank::Model;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::errors::{invalid, OrPy};
use crate::matrix::Matrix;

/// The options of `Model.tune`: `budget` None is the strategy's own (50 measurements for
/// `search`, `k` and the default for `top-k`).
pub(crate) fn options(
    strategy: &str,
    k: usize,
    budget: Option<usize>,
    budget_seconds: Option<f64>,
    distinct: bool,
    threads: Option<u32>,
) -> PyResult<TuneOptions> {
    let mut options = match strategy {
        "search" => TuneOptions::default(),
        "top-k" => TuneOptions::top_k(k),
        other => {
            return Err(invalid(format!(
                "unknown strategy '{other}' (expected 'search' or 'top-k')"
            )))
        }
    };
    if budget == Some(0) {
        return Err(invalid(
            "budget must be at least 1 (the default is always measured)",
        ));
    }
    let time = budget_seconds
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    invalid(format!("budget_seconds must be a positive number, not {s}"))
                })
        })
        .transpose()?;
    options.k = k;
    options.budget = Budget {
        measurements: budget.unwrap_or(options.budget.measurements),
        time,
    };
    options.distinct = distinct;
    options.taco = TacoOptions {
        threads,
        ..TacoOptions::default()
    };
    Ok(options)
}

/// The Python `measure(program) -> ms` callable as a [`Measurer`]. An `Exception` it raises,
/// or a return value that is not a time, is a failed measurement (recorded with its text); a
/// pending signal or any other `BaseException` (`KeyboardInterrupt`, `SystemExit`) stops
/// tuning: every later request fails at once and the error is raised when the loop returns.
struct PyMeasurer {
    measure: Py<PyAny>,
    stopped: Option<PyErr>,
}

impl PyMeasurer {
    fn call(&mut self, py: Python<'_>, program: &str) -> Result<Measured, String> {
        if let Err(e) = py.check_signals() {
            self.stopped = Some(e);
            return Err("interrupted".into());
        }
        match self.measure.call1(py, (program,)) {
            Ok(value) => {
                let ms: f64 = value.extract(py).map_err(|_| {
                    let shown = value
                        .bind(py)
                        .repr()
                        .map_or_else(|_| "?".to_owned(), |r| r.to_string());
                    format!("measure returned {shown}, not a time in milliseconds")
                })?;
                if ms.is_finite() && ms >= 0.0 {
                    Ok(Measured::ms(ms))
                } else {
                    Err(format!("measure returned {ms} ms, not a finite time >= 0"))
                }
            }
            Err(e) if e.is_instance_of::<PyException>(py) => {
                let kind = e
                    .get_type(py)
                    .name()
                    .map_or_else(|_| "Exception".to_owned(), |n| n.to_string());
                Err(format!("{kind}: {}", e.value(py)))
            }
            Err(e) => {
                self.stopped = Some(e);
                Err("stopped".into())
            }
        }
    }
}

impl Measurer for PyMeasurer {
    fn measure(&mut self, request: &MeasureRequest<'_>) -> Result<Measured, String> {
        if self.stopped.is_some() {
            return Err("tuning was stopped".into());
        }
        Python::attach(|py| self.call(py, request.program))
    }
}

/// Runs the tuning loop over `candidates` for `matrix` and returns its report; raises what
/// stopped it, if anything did.
pub(crate) fn run(
    py: Python<'_>,
    model: &Model,
    matrix: &Matrix,
    candidates: &SpaceCandidates<AnyConfig>,
    options: &TuneOptions,
    measure: Py<PyAny>,
) -> PyResult<TuneReport> {
    let mut measurer = PyMeasurer {
        measure,
        stopped: None,
    };
    let report = py.detach(|| {
        let ops = ToolchainOps::new(candidates, &matrix.name)
            .with_taco(options.taco)
            .with_pattern(&matrix.pattern);
        let tuned = tune(
            model,
            &matrix.embedding,
            candidates,
            &ops,
            options,
            &mut measurer,
        )?;
        TuneReport::new(&matrix.name, candidates, &tuned, &ops)
    });
    if let Some(e) = measurer.stopped {
        return Err(e);
    }
    report.py()
}
