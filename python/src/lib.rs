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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<model::NativeModel>()?;
    m.add_class::<matrix::Matrix>()?;
    m.add_class::<candidates::Candidates>()?;
    m.add_class::<candidates::Space>()?;
    m.add_function(wrap_pyfunction!(_panic_check, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
