//! `Model.eval`: the report `dashrank eval --json-out` writes ([`EvalReport`]), with each
//! matrix's `(predicted rank, measured ms)` points (what the CLI's SVG plots draw).

use std::path::PathBuf;

use dashrank::eval::{
    find_measured_files, EvalReport, EvalSetup, Evaluator, FileOutcome, ModelSummary, Thresholds,
};
use dashrank::{Error, ErrorKind, Model};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{in_context, to_py, OrPy};

/// The arguments of `Model.eval`.
pub(crate) struct EvalArgs<'a> {
    /// The model directory as the caller gave it (the report names it).
    pub model_dir: String,
    pub measured: PathBuf,
    pub matrices: PathBuf,
    pub head: Option<&'a str>,
    pub default: Option<&'a str>,
    /// `min_tau`, `min_rho`, `max_top1_ape_percent`.
    pub thresholds: (Option<f64>, Option<f64>, Option<f64>),
    pub threads: Option<usize>,
}

/// A file's failure: its error, the message led by the file's name and the stage, as the
/// CLI prints it.
fn file_error(name: &str, e: &dashrank::eval::FileError) -> PyErr {
    in_context(&e.error, Some(&format!("evaluating {name}: {e}")))
}

/// Evaluates the model on every measured file and returns `{"report": …, "points": {matrix:
/// [(rank, ms), …]}}`.
pub(crate) fn run<'py>(
    py: Python<'py>,
    model: &Model,
    args: &EvalArgs<'_>,
) -> PyResult<Bound<'py, PyDict>> {
    let (min_tau, min_rho, max_top1_ape_percent) = args.thresholds;
    let thresholds = Thresholds {
        min_tau,
        min_rho,
        max_top1_ape_percent,
    };
    thresholds.validate().py()?;
    let head = model
        .info()
        .select_head(args.head, None, None)
        .py()?
        .name
        .clone();
    let files = find_measured_files(&args.measured, &args.matrices).py()?;
    let evaluator = Evaluator::new(model, &head, args.default).py()?;
    let results = py
        .detach(|| evaluator.evaluate_all(&files, args.threads, &|_| {}))
        .py()?;
    let (mut evals, mut skipped) = (Vec::new(), Vec::new());
    for (file, result) in files.iter().zip(results) {
        match result {
            Ok(FileOutcome::Evaluated(e)) => evals.push(*e),
            Ok(FileOutcome::Skipped(s)) => skipped.push(s),
            Err(e) => return Err(file_error(&file.name, &e)),
        }
    }
    if evals.is_empty() {
        let mut why = String::new();
        for s in &skipped {
            why += &format!("\n  {}: {}", s.measured_file, s.reason);
        }
        return Err(to_py(Error::new(ErrorKind::InvalidArgument {
            reason: format!(
                "nothing to evaluate in {}: every measured file was skipped:{why}",
                args.measured.display()
            ),
        })));
    }
    let setup = EvalSetup {
        dashrank_version: env!("CARGO_PKG_VERSION").to_owned(),
        model: ModelSummary::new(model, &args.model_dir, &head),
        measured_dir: args.measured.display().to_string(),
        matrices_dir: args.matrices.display().to_string(),
        default_schedule: args.default.map(str::to_owned),
        thresholds,
    };
    let report = EvalReport::new(&setup, &evals, &skipped);
    let points = PyDict::new(py);
    for e in &evals {
        points.set_item(&e.matrix, &e.points)?;
    }
    let out = PyDict::new(py);
    out.set_item("report", pythonize::pythonize(py, &report)?)?;
    out.set_item("points", points)?;
    Ok(out)
}
