//! `dashrank._native`: the extension module of the `dashrank` Python package.
//!
//! A thin face over the core crate: it converts Python arguments (numpy and scipy index
//! arrays read in place, dense masks, paths, lines, callables) and dashrank errors (one
//! `dashrank.Error` subclass per [`dashrank::ErrorKind`], from `dashrank/_errors.py`), and
//! calls the core. Long calls run detached from the interpreter (the GIL is released);
//! embedding and tuning look for Ctrl-C while they wait. `dashrank/_model.py` gives
//! `Model` its Python signatures and documentation; `dashrank/_native.pyi` types this module.
//! A Rust panic surfaces as pyo3's `PanicException`, never as an abort.

mod candidates;
mod errors;
mod eval;
mod info;
mod matrix;
mod model;
mod tune;

use pyo3::prelude::*;

/// Panics with `message`, on purpose: the test suite calls it to show that a Rust panic
/// reaches Python as an exception naming it and that the module keeps working.
#[pyfunction]
fn _panic_check(message: &str) -> PyResult<()> {
    panic!("dashrank panic check: {message}")
}

/// Raises a sample error of the kind named `kind` (`Pattern`, `Bundle`, …, `Io`) through
/// the same conversion as every call: the test suite checks each kind's class, attributes
/// and message, including kinds no Python call can reach (`Executor`, `BackendUnavailable`,
/// `LayoutTooLarge`).
#[pyfunction]
fn _error_check(kind: &str) -> PyResult<()> {
    use dashrank::{Error, ErrorKind as K};
    let s = |v: &str| v.to_owned();
    let kind = match kind {
        "Pattern" => K::Pattern {
            line: Some(3),
            reason: s("r"),
        },
        "Bundle" => K::Bundle {
            key: s("k"),
            reason: s("r"),
        },
        "UnsupportedVersion" => K::UnsupportedVersion {
            found: 9,
            min: 1,
            max: 2,
        },
        "Featurize" => K::Featurize {
            node: s("n"),
            reason: s("r"),
        },
        "Schedule" => K::Schedule {
            index: Some(2),
            field: Some(s("f")),
            value: Some(s("v")),
            reason: s("r"),
        },
        "Executor" => K::Executor {
            graph: s("g"),
            reason: s("r"),
        },
        "BackendUnavailable" => K::BackendUnavailable {
            backend: s("b"),
            reason: s("r"),
        },
        "UnknownHead" => K::UnknownHead {
            head: s("h"),
            available: vec![s("a"), s("b")],
        },
        "UnsupportedKernel" => K::UnsupportedKernel {
            target: s("t"),
            kernel: s("k"),
            supported: vec![s("spmm")],
        },
        "LayoutTooLarge" => K::LayoutTooLarge {
            positions: 7,
            limit: 5,
            reason: s("r"),
        },
        "InvalidArgument" => K::InvalidArgument { reason: s("r") },
        "Io" => K::Io {
            path: Some("p".into()),
            reason: s("r"),
        },
        other => return Err(errors::invalid(format!("no error kind '{other}'"))),
    };
    Err(errors::to_py(Error::new(kind)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<model::NativeModel>()?;
    m.add_class::<matrix::Matrix>()?;
    m.add_class::<candidates::Candidates>()?;
    m.add_class::<candidates::Space>()?;
    m.add_function(wrap_pyfunction!(_panic_check, m)?)?;
    m.add_function(wrap_pyfunction!(_error_check, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
