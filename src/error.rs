//! The one error type of the library: an opaque [`Error`] with an [`ErrorKind`] that names
//! the stage (pattern, bundle, featurizer, schedule, executor, …) and the culprit.
//!
//! Display text is lowercase with no final period; the source chain is kept.

use std::fmt;
use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, grouped by pipeline stage. Every variant names the culprit.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    // === matrix input ===
    /// A sparsity pattern is structurally invalid or a matrix file is malformed.
    Pattern {
        /// 1-based line number for text formats, when known.
        line: Option<usize>,
        /// What is wrong.
        reason: String,
    },

    // === model bundle ===
    /// A bundle file is unreadable, malformed, or inconsistent with the format specification.
    Bundle {
        /// The metadata key, tensor or node the problem was found at.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Importing and compiling a dense graph for the native engine would pass its load
    /// budget ([`BundleLimits::native_budget_base`](crate::model::BundleLimits::native_budget_base)
    /// and `native_budget_per_byte`): the graph is hostile, or larger than the limits allow.
    LoadBudget {
        /// The graph's files (`a.onnx + b.onnx` for a head).
        graph: String,
        /// The node (or tensor) whose work would pass the budget.
        node: String,
        /// The operations the load would have reached.
        needed: u64,
        /// The budget, in operations.
        budget: u64,
        /// The size of the graph's files, in bytes (the budget's argument).
        bytes: u64,
    },
    /// The bundle's format version is outside the window this library supports.
    UnsupportedVersion {
        /// Version found in the file.
        found: u32,
        /// Oldest supported version.
        min: u32,
        /// Newest supported version.
        max: u32,
    },

    // === featurizer ===
    /// The featurizer graph failed at a node (bad weights, shape mismatch, unsupported op).
    Featurize {
        /// Node name.
        node: String,
        /// What is wrong.
        reason: String,
    },

    // === schedules ===
    /// A schedule failed to parse or to validate against the model's schema.
    Schedule {
        /// Index of the candidate in its batch, when known.
        index: Option<usize>,
        /// Field name, when known.
        field: Option<String>,
        /// Offending value, when known.
        value: Option<String>,
        /// What is wrong.
        reason: String,
    },

    // === execution ===
    /// The dense-head executor (ort/tract/onnxruntime) failed.
    Executor {
        /// Which graph was running.
        graph: String,
        /// What the backend said.
        reason: String,
    },
    /// A backend was requested that was not compiled in or could not be initialised.
    BackendUnavailable {
        /// Backend name.
        backend: String,
        /// Why it is unavailable.
        reason: String,
    },

    // === API use ===
    /// The model has no head of this name.
    UnknownHead {
        /// The name asked for.
        head: String,
        /// The model's heads, sorted by name.
        available: Vec<String>,
    },
    /// A schedule space does not exist for this (target, kernel) pair, e.g. SPADE or
    /// SparseTIR with SpMV.
    UnsupportedKernel {
        /// The target's canonical name.
        target: String,
        /// The kernel asked for.
        kernel: String,
        /// The kernels the target's space supports.
        supported: Vec<String>,
    },
    /// A schedule's repacked layout of the sparse matrix would exceed its size limit (dense
    /// levels under compressed ones store zeros; WACO's "Pack Too Large").
    LayoutTooLarge {
        /// Entries the largest array of the layout needs.
        positions: u64,
        /// The limit.
        limit: u64,
        /// How the limit was set and what exceeded it.
        reason: String,
    },
    /// A caller-supplied argument is invalid (e.g. output buffer of the wrong length).
    InvalidArgument {
        /// What is wrong.
        reason: String,
    },
    /// An I/O error, with the path involved.
    Io {
        /// File path, when known.
        path: Option<PathBuf>,
        /// The OS error text.
        reason: String,
    },
}

/// The library error: a kind plus an optional source error.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// Creates an error of the given kind.
    pub fn new(kind: ErrorKind) -> Self {
        Self { kind, source: None }
    }

    /// Attaches a source error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind of this error.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    pub(crate) fn pattern(line: Option<usize>, reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Pattern {
            line,
            reason: reason.into(),
        })
    }

    pub(crate) fn bundle(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Bundle {
            key: key.into(),
            reason: reason.into(),
        })
    }

    pub(crate) fn featurize(node: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Featurize {
            node: node.into(),
            reason: reason.into(),
        })
    }

    pub(crate) fn schedule(
        index: Option<usize>,
        field: Option<String>,
        value: Option<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(ErrorKind::Schedule {
            index,
            field,
            value,
            reason: reason.into(),
        })
    }

    pub(crate) fn executor(graph: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Executor {
            graph: graph.into(),
            reason: reason.into(),
        })
    }

    pub(crate) fn unknown_head<'a>(
        head: &str,
        available: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self::new(ErrorKind::UnknownHead {
            head: head.to_owned(),
            available: available.into_iter().map(str::to_owned).collect(),
        })
    }

    pub(crate) fn invalid_argument(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument {
            reason: reason.into(),
        })
    }

    pub(crate) fn io(path: Option<PathBuf>, err: std::io::Error) -> Self {
        Self::new(ErrorKind::Io {
            path,
            reason: err.to_string(),
        })
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Pattern {
                line: Some(line),
                reason,
            } => write!(f, "invalid sparsity pattern at line {line}: {reason}"),
            ErrorKind::Pattern { line: None, reason } => {
                write!(f, "invalid sparsity pattern: {reason}")
            }
            ErrorKind::Bundle { key, reason } => write!(f, "invalid model bundle ({key}): {reason}"),
            ErrorKind::LoadBudget {
                graph,
                node,
                needed,
                budget,
                bytes,
            } => write!(
                f,
                "loading {graph} for the native engine would pass its load budget at node \
                 '{node}': {needed} operations, the budget is {budget} (BundleLimits::\
                 native_budget_base + native_budget_per_byte × {bytes} bytes; raise them to \
                 load a larger model)"
            ),
            ErrorKind::UnsupportedVersion { found, min, max } => write!(
                f,
                "unsupported bundle format version {found} (this library reads versions {min} to {max})"
            ),
            ErrorKind::Featurize { node, reason } => {
                write!(f, "featurizer failed at node '{node}': {reason}")
            }
            ErrorKind::Schedule {
                index,
                field,
                value,
                reason,
            } => write_schedule_error(f, *index, field.as_deref(), value.as_deref(), reason),
            ErrorKind::Executor { graph, reason } => {
                write!(f, "executing graph '{graph}' failed: {reason}")
            }
            ErrorKind::BackendUnavailable { backend, reason } => {
                write!(f, "backend '{backend}' unavailable: {reason}")
            }
            ErrorKind::UnknownHead { head, available } => write!(
                f,
                "the model has no head '{head}' (heads: {})",
                available.join(", ")
            ),
            ErrorKind::UnsupportedKernel {
                target,
                kernel,
                supported,
            } => write!(
                f,
                "target '{target}' has no schedule space for kernel '{kernel}' (it supports: {})",
                supported.join(", ")
            ),
            ErrorKind::LayoutTooLarge {
                positions,
                limit,
                reason,
            } => write!(
                f,
                "layout too large: {positions} positions, the limit is {limit} ({reason})"
            ),
            ErrorKind::InvalidArgument { reason } => write!(f, "invalid argument: {reason}"),
            ErrorKind::Io {
                path: Some(path),
                reason,
            } => write!(f, "i/o error on {}: {reason}", path.display()),
            ErrorKind::Io { path: None, reason } => write!(f, "i/o error: {reason}"),
        }
    }
}

/// Writes an [`ErrorKind::Schedule`]: `invalid schedule`, then the index, field and value
/// where known, then the reason.
fn write_schedule_error(
    f: &mut fmt::Formatter<'_>,
    index: Option<usize>,
    field: Option<&str>,
    value: Option<&str>,
    reason: &str,
) -> fmt::Result {
    write!(f, "invalid schedule")?;
    if let Some(i) = index {
        write!(f, " #{i}")?;
    }
    if let Some(field) = field {
        write!(f, " field '{field}'")?;
    }
    if let Some(value) = value {
        write!(f, " value '{value}'")?;
    }
    write!(f, ": {reason}")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
