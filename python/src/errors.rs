//! dashrank errors as Python exceptions: one class of `dashrank._errors` per
//! [`ErrorKind`], raised with the error's message and the kind's fields as attributes.

use std::error::Error as _;

use dashrank::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::IntoPyObjectExt;

/// A dashrank result as a Python result.
pub(crate) trait OrPy<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> OrPy<T> for dashrank::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// An [`ErrorKind::InvalidArgument`] error: what the face raises for a bad value of an
/// argument it converts itself.
pub(crate) fn invalid(reason: impl Into<String>) -> PyErr {
    to_py(Error::new(ErrorKind::InvalidArgument {
        reason: reason.into(),
    }))
}

/// The error's message as Rust prints it, then each source the message does not already
/// contain.
fn message(e: &Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// A kind's fields as `(attribute, value)` pairs.
type Fields<'py> = Vec<(&'static str, Bound<'py, PyAny>)>;

/// The class name in `dashrank._errors` and the attributes of a kind. A kind newer than this
/// face is a plain `dashrank.Error`.
fn class_and_fields<'py>(
    py: Python<'py>,
    kind: &ErrorKind,
) -> PyResult<(&'static str, Fields<'py>)> {
    macro_rules! fields {
        ($($name:literal: $value:expr),*) => {
            vec![$(($name, $value.into_bound_py_any(py)?)),*]
        };
    }
    Ok(match kind {
        ErrorKind::Pattern { line, reason } => {
            ("PatternError", fields!("line": line, "reason": reason))
        }
        ErrorKind::Bundle { key, reason } => ("BundleError", fields!("key": key, "reason": reason)),
        ErrorKind::UnsupportedVersion { found, min, max } => (
            "UnsupportedVersionError",
            fields!("found": found, "min": min, "max": max),
        ),
        ErrorKind::Featurize { node, reason } => {
            ("FeaturizeError", fields!("node": node, "reason": reason))
        }
        ErrorKind::Schedule {
            index,
            field,
            value,
            reason,
        } => (
            "ScheduleError",
            fields!("index": index, "field": field, "value": value, "reason": reason),
        ),
        ErrorKind::Executor { graph, reason } => {
            ("ExecutorError", fields!("graph": graph, "reason": reason))
        }
        ErrorKind::BackendUnavailable { backend, reason } => (
            "BackendUnavailableError",
            fields!("backend": backend, "reason": reason),
        ),
        ErrorKind::UnknownHead { head, available } => (
            "UnknownHeadError",
            fields!("head": head, "available": available),
        ),
        ErrorKind::UnsupportedKernel {
            target,
            kernel,
            supported,
        } => (
            "UnsupportedKernelError",
            fields!("target": target, "kernel": kernel, "supported": supported),
        ),
        ErrorKind::LayoutTooLarge {
            positions,
            limit,
            reason,
        } => (
            "LayoutTooLargeError",
            fields!("positions": positions, "limit": limit, "reason": reason),
        ),
        ErrorKind::InvalidArgument { reason } => {
            ("InvalidArgumentError", fields!("reason": reason))
        }
        ErrorKind::Io { path, reason } => {
            let path = path.as_ref().map(|p| p.display().to_string());
            ("IoError", fields!("path": path, "reason": reason))
        }
        _ => ("Error", Vec::new()),
    })
}

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception of `e`: an instance of its `dashrank._errors` class.
pub(crate) fn to_py(e: Error) -> PyErr {
    in_context(&e, None)
}

/// [`to_py`], the message led by `context` (what was being done, to what).
pub(crate) fn in_context(e: &Error, context: Option<&str>) -> PyErr {
    Python::attach(|py| build(py, e, context).unwrap_or_else(|failed| failed))
}

fn build(py: Python<'_>, e: &Error, context: Option<&str>) -> PyResult<PyErr> {
    let module = ERRORS.get_or_try_init(py, || py.import("dashrank._errors").map(Bound::unbind))?;
    let (class, fields) = class_and_fields(py, e.kind())?;
    let text = match context {
        Some(c) => format!("{c}: {}", message(e)),
        None => message(e),
    };
    let exception = module.bind(py).getattr(class)?.call1((text,))?;
    for (name, value) in fields {
        exception.setattr(name, value)?;
    }
    Ok(PyErr::from_value(exception))
}
