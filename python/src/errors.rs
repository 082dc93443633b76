//! dashrank errors as Python exceptions: one class of `dashrank._errors` per
//! [`ErrorKind`], raised with the error's message and the kind's fields as attributes.

use std::error::Error as _;

use dashrank::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

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

/// The class name in `dashrank._errors` and the attributes of a kind. A kind newer than this
/// face is a plain `dashrank.Error`.
fn class_and_fields<'py>(
    py: Python<'py>,
    kind: &ErrorKind,
) -> PyResult<(&'static str, Bound<'py, PyDict>)> {
    let f = PyDict::new(py);
    let class = match kind {
        ErrorKind::Pattern { line, reason } => {
            f.set_item("line", line)?;
            f.set_item("reason", reason)?;
            "PatternError"
        }
        ErrorKind::Bundle { key, reason } => {
            f.set_item("key", key)?;
            f.set_item("reason", reason)?;
            "BundleError"
        }
        ErrorKind::UnsupportedVersion { found, min, max } => {
            f.set_item("found", found)?;
            f.set_item("min", min)?;
            f.set_item("max", max)?;
            "UnsupportedVersionError"
        }
        ErrorKind::Featurize { node, reason } => {
            f.set_item("node", node)?;
            f.set_item("reason", reason)?;
            "FeaturizeError"
        }
        ErrorKind::Schedule {
            index,
            field,
            value,
            reason,
        } => {
            f.set_item("index", index)?;
            f.set_item("field", field)?;
            f.set_item("value", value)?;
            f.set_item("reason", reason)?;
            "ScheduleError"
        }
        ErrorKind::Executor { graph, reason } => {
            f.set_item("graph", graph)?;
            f.set_item("reason", reason)?;
            "ExecutorError"
        }
        ErrorKind::BackendUnavailable { backend, reason } => {
            f.set_item("backend", backend)?;
            f.set_item("reason", reason)?;
            "BackendUnavailableError"
        }
        ErrorKind::UnknownHead { head, available } => {
            f.set_item("head", head)?;
            f.set_item("available", available)?;
            "UnknownHeadError"
        }
        ErrorKind::UnsupportedKernel {
            target,
            kernel,
            supported,
        } => {
            f.set_item("target", target)?;
            f.set_item("kernel", kernel)?;
            f.set_item("supported", supported)?;
            "UnsupportedKernelError"
        }
        ErrorKind::LayoutTooLarge {
            positions,
            limit,
            reason,
        } => {
            f.set_item("positions", positions)?;
            f.set_item("limit", limit)?;
            f.set_item("reason", reason)?;
            "LayoutTooLargeError"
        }
        ErrorKind::InvalidArgument { reason } => {
            f.set_item("reason", reason)?;
            "InvalidArgumentError"
        }
        ErrorKind::Io { path, reason } => {
            f.set_item("path", path.as_ref().map(|p| p.display().to_string()))?;
            f.set_item("reason", reason)?;
            "IoError"
        }
        _ => "Error",
    };
    Ok((class, f))
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
    for (name, value) in fields.iter() {
        exception.setattr(name.cast::<pyo3::types::PyString>()?, value)?;
    }
    Ok(PyErr::from_value(exception))
}
